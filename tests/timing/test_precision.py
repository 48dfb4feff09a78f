"""fp32 matmul precision policy: TF32 where the device has it under "high" (default), fp32 under "highest"."""

from __future__ import annotations

import pytest

from graphroof.errors import InputError
from graphroof.hardware import load_hardware
from graphroof.timing import matmul_peak, matmul_peak_key


@pytest.mark.parametrize("name, tf32", [("a100", 156e12), ("h100", 494.7e12)])
def test_fp32_high_uses_tf32(name, tf32):
    hw = load_hardware(name)
    assert matmul_peak(hw, "fp32") == (tf32, "matrix.tf32")
    assert matmul_peak(hw, "float32", "high") == (tf32, "matrix.tf32")
    assert matmul_peak(hw, "tf32") == (tf32, "matrix.tf32")


def test_fp32_highest_keeps_fp32_cuda_cores():
    a100 = load_hardware("a100")
    assert matmul_peak(a100, "fp32", "highest") == (19.5e12, "vector.fp32")
    assert matmul_peak_key("fp32", "medium", a100) == "matrix.bf16"


def test_no_tf32_units_means_fp32_math():
    t4 = load_hardware("t4")  # Turing: no TF32
    assert "tf32" not in t4.matrix_peak_flops_per_s
    assert matmul_peak_key("fp32", "high", t4) == "vector.fp32"
    assert matmul_peak_key("tf32", "high", t4) == "vector.fp32"


def test_other_dtypes_unaffected_and_bad_policy():
    a100 = load_hardware("a100")
    for pol in ("highest", "high", "medium"):
        assert matmul_peak(a100, "bf16", pol) == (312e12, "matrix.bf16")
    with pytest.raises(InputError, match="matmul precision 'fast'"):
        matmul_peak_key("fp32", "fast", a100)
