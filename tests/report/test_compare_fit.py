"""Issue 27 (A): `graphroof compare` shows memory fit per device (weights + KV + activations vs capacity), energy
per sample from the profile's board power, and next steps."""

from __future__ import annotations

import json

import pytest

from graphroof.api import count_graph
from graphroof.comparison import compare_devices
from graphroof.graph import OpGraph, OpNode, Role, TensorSpec
from graphroof.hardware import HardwareProfile
from graphroof.memory import add_device_fit
from graphroof.report import render


def _hw(name, capacity, power):
    return HardwareProfile(name=name, matrix_peak_flops_per_s={"fp16": 100e12}, vector_peak_flops_per_s={"fp16": 10e12},
                           mem_bw_bytes_per_s=1e12, mem_capacity_bytes=capacity, board_power_w=power)


def _graph():
    """x fp16[4, 100] @ W fp16[100, 200] -> relu: weights 100 * 200 * 2 B = 40,000 B; activations: mm's output
    4 * 200 * 2 = 1,600 B stays live until relu, which writes another 1,600 B -> peak 3,200 B; 4 samples a run."""
    g = OpGraph("mlp", meta={"model": "mlp", "inputs": "x=fp16[4,100]"})
    x, w = TensorSpec((4, 100), "fp16"), TensorSpec((100, 200), "fp16", Role.WEIGHT)
    y = TensorSpec((4, 200), "fp16")
    g.add_op(OpNode("mm", "aten.mm", (x, w), (y,), {}, "fc"), ["x", None], ["mm"])
    g.add_op(OpNode("relu", "aten.relu", (y,), (y,), {}, "act"), ["mm"], ["relu"])
    return g


def _compare():
    devices = [_hw("big", 1e6, 400.0), _hw("small", 40_000.0, None)]
    return add_device_fit(compare_devices([count_graph(_graph(), hw) for hw in devices]))


def test_memory_fit_and_energy_per_device():
    c = _compare()
    big, small = c.rows
    assert big["memory_weight_bytes"] == 40_000 and big["memory_kv_bytes"] == 0
    assert big["memory_activation_peak_bytes"] == 3_200 and big["memory_bytes"] == 43_200
    assert big["fits"] is True and small["fits"] is False  # 43,200 B > 40,000 B
    t = c.analyses[0].totals.t_realistic_s
    assert big["samples"] == 4
    assert big["joules_per_sample"] == pytest.approx(400 * t / 4)  # board power x time / samples per run
    assert big["samples_per_joule"] == pytest.approx(4 / (400 * t))
    assert small["joules_per_sample"] is None and small["samples_per_joule"] is None


def test_compare_renders_fit_energy_and_next_steps():
    c = _compare()
    text = render(c, "terminal")
    assert "memory fit and energy per device" in text and "J/sample" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("small ") and "NO" in ln)
    assert row.split()[-2:] == ["n/a", "n/a"]  # no board power: n/a, never 0
    assert "next steps:" in text and "small: 43.2 kB does not fit in 40.0 kB" in text
    md = render(c, "markdown")
    assert "## Memory fit and energy" in md and "## Next steps" in md
    d = json.loads(render(c, "json"))
    assert d["devices"][1]["fits"] is False and d["devices"][0]["samples_per_joule"] > 0
    page = render(c, "html")
    assert 'id="memory-fit"' in page and 'id="next-steps"' in page


def test_op_table_memory_is_unknown_not_zero():
    from graphroof.frontends import load

    a = count_graph(load("examples/textbook_ops.csv"), _hw("big", 1e12, 400.0))
    c = add_device_fit(compare_devices([a]))
    assert c.rows[0]["memory_bytes"] is None and c.rows[0]["fits"] is None
