"""Profile loading and validation: errors name the file and the field."""

from __future__ import annotations

import pytest

from graphroof import HardwareProfileError, load_hardware
from graphroof.hardware import adhoc_profile

GOOD = """
name = "mydev"
[matrix_peak_flops_per_s]
bf16 = 200e12
[vector_peak_flops_per_s]
fp32 = 20e12
[memory]
bw_bytes_per_s = "2TB/s"
capacity_bytes = 48e9
[efficiency]
matrix = 0.6
[sources]
matrix_peak_flops_per_s = "made up"
"""


def _write(tmp_path, text, name="mydev.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_custom_file_loads(tmp_path):
    p = load_hardware(_write(tmp_path, GOOD))
    assert p.name == "mydev" and p.mem_bw_bytes_per_s == 2e12 and p.matrix_efficiency == 0.6
    assert p.ridge_point("bf16") == 100  # 200e12 / 2e12
    assert p.peak("vector", "bf16") == (20e12, "vector.fp32")  # no bf16 vector peak: the fp32 units


def test_yaml_profile(tmp_path):
    p = _write(tmp_path, "name: y\nmatrix_peak_flops_per_s: {fp32: 1.0e12}\nmemory: {bw_bytes_per_s: 1.0e11}\n",
               "y.yaml")
    assert load_hardware(p).ridge_point("fp32") == 10


@pytest.mark.parametrize("edit,msg", [
    (("bf16 = 200e12", "bf16 = -1"), "mydev.toml: matrix_peak_flops_per_s.bf16 must be > 0"),
    (("bf16 = 200e12", 'bf16 = "fast"'), "matrix_peak_flops_per_s.bf16 must be a number"),
    (("bf16 = 200e12", "bf17 = 200e12"), "matrix_peak_flops_per_s.bf17 is not a peak dtype"),
    (('bw_bytes_per_s = "2TB/s"', ""), "memory.bw_bytes_per_s is missing"),
    (("matrix = 0.6", "matrix = 1.5"), "efficiency.matrix must be in (0, 1]"),
    (('name = "mydev"', 'name = "mydev"\ncolour = "red"'), "unknown field 'colour'"),
    (("[memory]", "[memory"), "not valid TOML"),
])
def test_malformed_profile_names_file_and_field(tmp_path, edit, msg):
    with pytest.raises(HardwareProfileError) as e:
        load_hardware(_write(tmp_path, GOOD.replace(*edit)))
    assert msg in str(e.value)
    assert "\n" not in str(e.value)


def test_unknown_name_suggests():
    with pytest.raises(HardwareProfileError, match=r"unknown hardware 'a10O'.*did you mean"):
        load_hardware("a10O")


def test_alias_and_overrides():
    a = load_hardware("a100")
    assert a.name == "a100-80gb-sxm"
    w = a.with_overrides(mem_bw_bytes_per_s=4e12, ideal=True)
    assert w.mem_bw_bytes_per_s == 4e12 and w.launch_overhead_s == 0 and w.matrix_efficiency == 1
    assert a.mem_bw_bytes_per_s == 2.039e12  # the original is untouched
    adhoc = adhoc_profile(4.6e12, 96e9)
    assert adhoc.ridge_point("fp16") == pytest.approx(4.6e12 / 96e9)


def test_fp32_matmul_without_fp32_matrix_units_uses_cuda_cores():
    # A100 lists TF32 (156 TFLOP/s) but no fp32 for its tensor cores.  The default precision policy ("high", as
    # PyTorch's cuDNN convolutions) runs fp32 matmuls on TF32; "highest" keeps fp32 math on the CUDA cores
    assert load_hardware("a100").peak("matrix", "fp32") == (156e12, "matrix.tf32")
    highest = load_hardware("a100").with_overrides(matmul_precision="highest")
    assert highest.peak("matrix", "fp32") == (19.5e12, "vector.fp32")
    assert load_hardware("a100").peak("matrix", "tf32") == (156e12, "matrix.tf32")
