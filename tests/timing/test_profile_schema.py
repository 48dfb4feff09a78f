"""The [timing] / [collectives] profile sections: shipped values load; malformed ones name the file and field."""

from __future__ import annotations

import pytest

from graphroof.errors import HardwareProfileError
from graphroof.hardware import list_profiles, load_hardware

BASE = """
name = "x"
[matrix_peak_flops_per_s]
bf16 = 100e12
[memory]
bw_bytes_per_s = 1e12
"""


def _load(tmp_path, extra: str, name: str = "dev.toml"):
    p = tmp_path / name
    p.write_text(BASE + extra if extra.lstrip().startswith("[") else extra + "\n" + BASE)  # top-level keys first
    return load_hardware(p)


def test_shipped_a100_h100_have_fitted_sections_with_sources():
    for name, sms in (("a100", 108), ("h100", 132)):
        hw = load_hardware(name)
        assert hw.timing.sm_count == sms and not hw.timing.derived
        assert 0.5 < hw.timing.gemm_matrix_efficiency <= 1
        assert hw.collectives.intra_bus_bw_bytes_per_s > 0
        assert "fitted" in hw.sources["timing"] and "fitted" in hw.sources["collectives"]
        assert hw.as_dict()["timing"]["sm_count"] == sms


def test_every_shipped_profile_loads():
    assert len(list_profiles()) > 10


def test_valid_sections(tmp_path):
    hw = _load(tmp_path, """
[timing]
sm_count = 10
gemm_tile = [64, 64]
[timing.stream_bw_efficiency]
norm = 0.5
[collectives]
algorithms = ["ring"]
intra_bus_bw_bytes_per_s = 1e11
""")
    assert hw.timing.sm_count == 10 and hw.timing.gemm_tile == (64, 64)
    assert hw.timing.stream_efficiency("norm") == 0.5
    assert hw.collectives.algorithms == ("ring",)


@pytest.mark.parametrize("extra, field", [
    ('[timing]\nsm_count = "many"', "timing.sm_count must be a number"),
    ("[timing]\nsm_count = 10.5", "timing.sm_count must be a whole number"),
    ("[timing]\ngemm_matrix_efficiency = 1.5", "timing.gemm_matrix_efficiency must be in (0, 1]"),
    ("[timing]\ngemm_tile = [128]", "timing.gemm_tile must be [M, N]"),
    ("[timing]\nwarp_size = 32", "unknown field timing.warp_size"),
    ("[timing]\ngemm_latency_s = -1", "timing.gemm_latency_s must be"),
    ("[timing.stream_bw_efficiency]\nnorm = 0", "timing.stream_bw_efficiency.norm must be in (0, 1]"),
    ("[timing.stream_bw_efficiency]\nwarp = 0.5", "unknown field timing.stream_bw_efficiency.warp"),
    ('[collectives]\nalgorithms = ["ring", "butterfly"]', "collectives.algorithms must be"),
    ('[collectives]\nalgorithms = ["nvls"]', "nvls_bw_bytes_per_s is missing"),
    ("[collectives]\nintra_bus_bw_bytes_per_s = 0", "collectives.intra_bus_bw_bytes_per_s must be > 0"),
    ("[collectives]\nnics_per_node = 1.5", "collectives.nics_per_node must be a whole number"),
    ("timing = 3", "[timing] must be a table"),
])
def test_malformed_fields_name_file_and_field(tmp_path, extra, field):
    with pytest.raises(HardwareProfileError) as e:
        _load(tmp_path, extra, name="broken-dev.toml")
    msg = str(e.value)
    assert msg.startswith("broken-dev.toml: ") and field in msg
