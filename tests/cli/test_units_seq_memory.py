"""Issue 27 (C2, C3, C5): times and bandwidths need their unit, implausible values are warned about; analyze checks
--seq against the positions as llm does and says whether the model fits in memory; compare takes what analyze
takes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import graphroof
from graphroof.cli import main
from graphroof.errors import GraphroofWarning, InputError
from graphroof.graph import OpGraph
from graphroof.units import parse_bandwidth, parse_time_s
from tests.conftest import T as tensor
from tests.conftest import W, node

CSV = str(Path(__file__).resolve().parents[1] / "gold" / "ops_table.csv")


@pytest.mark.parametrize("argv, msg", [
    (["analyze", CSV, "--mem-bw", "4"], "--mem-bw 4: give a unit, e.g. 4GB/s or 4TB/s"),
    (["analyze", CSV, "--mem-bw", "4T"], "--mem-bw 4T: give a unit, e.g. 4TB/s"),
    (["analyze", CSV, "--mem-bw", "2.039e12"], "--mem-bw 2.039e12: give a unit, e.g. 2.039e12B/s"),
    (["analyze", CSV, "--mem-bw", "4TB"], "--mem-bw 4TB: a bandwidth is bytes per second, e.g. 4TB/s"),
    (["llm", "llama-2-7b", "--mem-bw", "3"], "--mem-bw 3: give a unit"),
    (["sweep", "llama-3-8b", "--max-tpot", "50"], "--max-tpot 50: give a unit, e.g. 50ms or 0.05s"),
    (["sweep", "llama-3-8b", "--max-ttft", "2"], "--max-ttft 2: give a unit, e.g. 2ms or 0.002s"),
    (["calibrate", "--budget", "4"], "--budget 4: give a unit, e.g. 4ms or 0.004s"),
    (["analyze", CSV, "--peak-flops", "4TB/s"], "--peak-flops 4TB/s: expected a FLOP rate"),
])
def test_unitless_times_and_bandwidths_are_refused(capsys, argv, msg):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"graphroof: error: {msg}") and len(err.strip().splitlines()) == 1


def test_units_parse():
    assert parse_time_s("50ms") == pytest.approx(0.05) and parse_time_s("200us") == pytest.approx(2e-4)
    assert parse_bandwidth("96GB/s") == 96e9 and parse_bandwidth("1TiB/s") == 2**40


def test_implausible_values_are_warned_and_used(capsys):
    # 4 B/s on the op table: parsed as given (it has a unit), with a warning
    assert main(["analyze", CSV, "--mem-bw", "4B/s", "--peak-flops", "5", "-f", "json"]) == 0
    cap = capsys.readouterr()
    assert "graphroof: warning: --mem-bw 4.00 B/s is outside the plausible range (1 GB/s to 1 PB/s)" in cap.err
    assert "graphroof: warning: --peak-flops 5.00 FLOP/s is outside the plausible range" in cap.err
    d = json.loads(cap.out)
    assert d["mem_bw_bytes_per_s"] == 4.0
    assert main(["-q", "analyze", CSV, "--mem-bw", "2TB/s", "--peak-flops", "300T"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_slo_time_range_warning():
    from graphroof.cli.options import parse_seconds as _seconds

    with pytest.warns(GraphroofWarning, match=r"--max-tpot 7.2e\+03 s is outside the plausible range \(1 us to 1 h\)"):
        assert _seconds("7200s", "--max-tpot") == 7200.0
    with pytest.warns(GraphroofWarning, match="--max-ttft 100 ns is outside"):
        _seconds("100ns", "--max-ttft")


def test_analyze_seq_past_the_positions_is_llms_error(capsys):
    assert main(["analyze", "llama-2-7b", "--seq", "100000"]) == 1
    assert capsys.readouterr().err == ("graphroof: error: --seq 100000 is longer than llama-2-7b's maximum of 4096 "
                                       "positions (max_position_embeddings); use --seq <= 4096\n")
    for argv in (["analyze", "llama-2-7b", "--batch", "1,4"], ["compare", "llama-2-7b", "--hw", "a100,h100"]):
        assert main([*argv, "--seq", "5000"]) == 1
        assert "--seq 5000 is longer than llama-2-7b's maximum of 4096" in capsys.readouterr().err


def _mm_graph() -> OpGraph:
    """x[1, 1000] @ w[1000, 1000] (fp32): weights 1000*1000*4 = 4,000,000 B, the one activation output 1*1000*4 =
    4,000 B, so weights + activation peak = 4,004,000 B."""
    g = OpGraph("mm")
    g.add_op(node("aten.mm", (tensor("fp32", 1, 1000), W("fp32", 1000, 1000)), (tensor("fp32", 1, 1000),),
                  name="mm"), ["x", "w"], ["y"])
    return g


def test_memory_fit_in_json_terminal_and_warning(round_hw, capsys):
    small = dataclasses.replace(round_hw, mem_capacity_bytes=4e6)   # 4,004,000 B > 4,000,000 B
    with pytest.warns(GraphroofWarning, match=r"mm does not fit on round: weights 4.00 MB \+ peak activations "
                                              r"4.00 kB = 4.00 MB > 4.00 MB of device memory"):
        a = graphroof.analyze(_mm_graph(), hw=small)
    m = a.to_dict()["memory"]
    assert m == {"weight_bytes": 4_000_000, "activation_peak_bytes": 4_000, "total_bytes": 4_004_000,
                 "capacity_bytes": 4e6, "fits": False}
    assert "memory: weights 4.00 MB + peak activations 4.00 kB = 4.00 MB of 4.00 MB on round: DOES NOT FIT" in \
        graphroof.render(a)
    big = dataclasses.replace(round_hw, mem_capacity_bytes=5e6)
    assert graphroof.analyze(_mm_graph(), hw=big).memory_fit()["fits"] is True
    assert graphroof.analyze(_mm_graph(), hw=round_hw).memory_fit()["fits"] is None  # no capacity listed


def test_compare_takes_a_module_and_inputs_like_analyze():
    torch = pytest.importorskip("torch")
    lin = torch.nn.Linear(8, 4, device="meta")
    c = graphroof.compare(lin, [(2, 8)], hw=["a100", "h100"], mem_bw_bytes_per_s=1e12)
    a = graphroof.analyze(lin, [(2, 8)], hw="a100", mem_bw_bytes_per_s=1e12)
    assert [r["profile"] for r in c.rows] == ["a100-80gb-sxm+bw", "h100-sxm+bw"]  # the what-if, named
    # linear: 2*M*K*N = 2*2*8*4 = 128 matrix FLOPs + bias 2*4 = 8 vector FLOPs, on both devices as analyze counts
    assert [x.totals.cost.flops for x in c.analyses] == [a.totals.cost.flops] * 2 == [136, 136]
    assert all(x.hw.mem_bw_bytes_per_s == 1e12 for x in c.analyses)
    key = a.ops[0]["op"]
    free = graphroof.compare(lin, [(2, 8)], hw="a100,h100", rules={key: None})  # per-call rules, as analyze
    assert [x.totals.cost.flops for x in free.analyses] == [0, 0]
    with pytest.raises(InputError):
        graphroof.compare(lin, [(2, 8)], hw=[])
