"""Board power in hardware profiles (``board_power_w`` with ``sources.board_power_w``): validation and the shipped
datasheet figures; profiles whose vendor publishes no board power leave it out (energy shows n/a)."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphroof.errors import HardwareProfileError
from graphroof.hardware import load_hardware, profile_from_dict

BASE = {"name": "dev", "matrix_peak_flops_per_s": {"bf16": 100e12}, "memory": {"bw_bytes_per_s": 1e12}}


def test_board_power_needs_its_source():
    p = profile_from_dict({**BASE, "board_power_w": 400, "sources": {"board_power_w": "a datasheet"}},
                          Path("dev.toml"))
    assert p.board_power_w == 400.0 and p.as_dict()["board_power_w"] == 400.0
    assert profile_from_dict(BASE, Path("dev.toml")).board_power_w is None
    with pytest.raises(HardwareProfileError, match="sources.board_power_w"):
        profile_from_dict({**BASE, "board_power_w": 400}, Path("dev.toml"))
    with pytest.raises(HardwareProfileError, match="board_power_w must be > 0"):
        profile_from_dict({**BASE, "board_power_w": 0, "sources": {"board_power_w": "x"}}, Path("dev.toml"))


@pytest.mark.parametrize("name, watts", [("h100", 700), ("a100", 400), ("l4", 72), ("mi300x", 750), ("t4", 70)])
def test_shipped_profiles_carry_the_datasheet_power(name, watts):
    p = load_hardware(name)
    assert p.board_power_w == watts
    assert "datasheet" in p.sources["board_power_w"] or "specifications" in p.sources["board_power_w"]


def test_profiles_without_a_published_board_power_leave_it_out():
    assert load_hardware("tpu-v5e").board_power_w is None
