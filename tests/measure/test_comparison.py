"""Predicted vs measured figures on a hand-built graph with hand-derived numbers (round_hw: 100 TFLOP/s bf16
matrix, 1 TB/s; matrix efficiency 0.5, memory 0.8, launch 1 us)."""

from __future__ import annotations

import json

import pytest

from graphroof.api import count_graph
from graphroof.graph import OpGraph
from graphroof.measure.match import Event, MatchResult
from graphroof.measure.run import Measured, MeasuredComparison, measured_bound, percentile
from graphroof.report import render
from tests.conftest import node


def _graph() -> OpGraph:
    g = OpGraph("toy")
    rows = [  # name, flops, bytes, layer
        ("A", 1e9, 1e6, "L1"),    # Tc = 1e9 / 1e14 = 10 us, Tm = 1e6 / 1e12 = 1 us: compute
        ("B", 0, 4e6, "L2"),      # Tm = 4 us: memory
        ("C", 0, 2e6, "L2"),      # Tm = 2 us: memory (left unmatched)
        ("D", 5e7, 4e6, "L3"),    # Tc = 5e7 / 1e14 = 0.5 us, Tm = 4 us: memory
    ]
    for name, flops, nbytes, layer in rows:
        g.add_op(node("table.op", name=name, scope=layer, flops=flops, bytes=nbytes, kind="matrix",
                      compute_dtype="bf16"))
    return g


@pytest.fixture
def cmp(round_hw):
    a = count_graph(_graph(), round_hw, depth=1)
    run = MatchResult(node_time_s={"A": 15e-6, "B": 20e-6, "D": 0.6e-6}, how={"A": "name", "B": "name", "D": "name"},
                      node_events={}, unmatched_nodes=["C"],
                      unmatched_events=[Event("empty", "L2", 3e-6), Event("view", "L1", 1e-6)])
    m = Measured("fake runtime", [run], wall_s=[50e-6, 40e-6, 60e-6], profiled_s=[70e-6])
    return MeasuredComparison(a, m)


def test_measured_bound_rule():
    assert measured_bound(10e-6, 1e-6, 15e-6) == "compute"    # within 2x of the roof, nearer Tc
    assert measured_bound(1e-6, 4e-6, 9e-6) == "overhead"     # 9 > 2 * 4
    assert measured_bound(0.5e-6, 4e-6, 0.6e-6) == "compute"  # beat the memory roof: |ln 1.2| < |ln 0.15|
    assert measured_bound(0.0, 4e-6, 5e-6) == "memory"


def test_percentile_interpolates():
    assert percentile([0.15, 1.5, 5.0], 50) == 1.5
    assert percentile([0.15, 1.5, 5.0], 90) == pytest.approx(4.3)   # pos 1.8: 1.5 + 0.8 * (5 - 1.5)
    assert percentile([], 90) is None


def test_op_rows(cmp):
    ops = {r["name"]: r for r in cmp.ops}
    a = ops["A"]
    assert a["predicted_s"] == pytest.approx(10e-6) and a["measured_s"] == pytest.approx(15e-6)
    assert a["ratio"] == pytest.approx(1.5)
    # realistic: max(1e9 / (1e14 * 0.5), 1e6 / (1e12 * 0.8)) + 1 us launch = 20 + 1 = 21 us
    assert a["ratio_realistic"] == pytest.approx(15 / 21)
    assert a["achieved_flops_per_s"] == pytest.approx(1e9 / 15e-6)
    assert a["roof_fraction"] == pytest.approx((1e9 / 15e-6) / 1e14)   # AI 1000 -> ceiling = peak
    assert a["bw_fraction"] == pytest.approx((1e6 / 15e-6) / 1e12)
    assert a["measured_bound"] == "compute" and a["bound_correct"] is True
    assert ops["C"]["measured_s"] is None and ops["C"]["ratio"] is None


def test_layer_rows_use_matched_ops_only(cmp):
    layers = {r["name"]: r for r in cmp.layers}
    l2 = layers["L2"]
    assert (l2["n_matched"], l2["n_work_ops"]) == (1, 2)
    assert l2["predicted_s"] == pytest.approx(4e-6)        # B only; C (unmatched) is left out
    assert l2["ratio"] == pytest.approx(5.0)                # 20 / 4
    assert l2["measured_bound"] == "overhead"
    assert layers["L3"]["bound"] == "memory" and layers["L3"]["measured_bound"] == "compute"


def test_summary(cmp):
    s = cmp.summary
    # whole model: Σ t_s = 10 + 4 + 2 + 4 = 20 us predicted; median wall 50 us -> 2.5
    assert s["predicted_s"] == pytest.approx(20e-6)
    assert s["measured_wall_s"] == pytest.approx(50e-6) and s["ratio"] == pytest.approx(2.5)
    # layer ratios 1.5 (L1), 5 (L2), 0.15 (L3): median 1.5, p90 4.3
    assert s["layer_ratio_median"] == pytest.approx(1.5)
    assert s["layer_ratio_p90"] == pytest.approx(4.3)
    # measured layer time 15 + 20 + 0.6 = 35.6 us: correct 15, overhead 20, wrong bound 0.6
    assert s["bound_correct_share"] == pytest.approx(15 / 35.6)
    assert s["bound_overhead_share"] == pytest.approx(20 / 35.6)
    assert s["bound_wrong_share"] == pytest.approx(0.6 / 35.6)
    assert (s["n_work_nodes"], s["n_matched"], s["n_unmatched"]) == (4, 3, 1)
    assert s["unmatched_predicted_s"] == pytest.approx(2e-6)   # C: 2e6 B / 1e12 B/s
    assert s["unmatched_event_time_s"] == pytest.approx(4e-6)


def test_renderers(cmp):
    text = render(cmp, "terminal", ops=True)
    assert "unmatched nodes (no measured op found): C" in text
    assert "median 1.5, p90 4.3 (roofline)" in text
    md = render(cmp, "markdown")
    assert md.startswith("# graphroof profile: toy") and "| L2      | 1/2" in md
    d = json.loads(render(cmp, "json"))
    assert d["kind"] == "profile" and d["unmatched_nodes"] == ["C"]
    assert d["summary"]["layer_ratio_median"] == pytest.approx(1.5)


def test_html_has_measured_points_beside_predicted(cmp):
    from graphroof.report.measured_html import measured_points

    pts = {(p.level, p.name): p for p in measured_points(cmp)}
    # A: 1e9 FLOP in 15 us measured -> 6.67e13 FLOP/s at AI 1e9 / 1e6 = 1000
    assert pts[("op", "A")].perf == pytest.approx(1e9 / 15e-6)
    assert pts[("op", "A")].intensity == pytest.approx(1000)
    assert ("op", "B") not in pts            # no FLOPs: no place on log axes
    assert ("op", "C") not in pts            # unmatched: no measured point
    html = render(cmp, "html")
    assert html.count('id="measured"') == 1 and "Measured vs predicted" in html
    assert 'class="pt compute p1"' in html   # a measured point (series 1), coloured by its predicted bound
    assert 'class="pt compute p0"' in html   # its predicted twin
    assert "phase-toggle" in html and "measured</label>" in html


def test_layer_bound_is_the_common_rule_with_network_time(round_hw):
    """The measured layer rows go through the one rollup (layers.summarize -> roofline.combine): a layer whose
    matched op spends most of its time on the interconnect is network-bound, as in Analysis.layers.

    op N: 1e5 bytes -> Tm = 1e5 / 1e12 = 0.1 us; net 1e6 bytes -> Tn = 1e6 / 100e9 = 10 us; no FLOPs.
    (The old measured rule compared only Tc and Tm and called this layer memory-bound.)"""
    from graphroof.counters.cost import Cost

    g = OpGraph("net")
    g.add_op(node("test.collective", name="N", scope="L"))
    a = count_graph(g, round_hw, depth=1,
                    rules={"test.collective": lambda n: Cost(act_read_bytes=1e5, net_bytes=1e6)})
    assert a.layers[0]["bound"] == "network"
    run = MatchResult(node_time_s={"N": 12e-6}, how={"N": "name"}, node_events={}, unmatched_nodes=[],
                      unmatched_events=[])
    c = MeasuredComparison(a, Measured("fake", [run], wall_s=[12e-6]))
    (layer,) = c.layers
    assert layer["bound"] == "network"
    assert layer["predicted_s"] == pytest.approx(10e-6)   # max(0, 0.1 us, 10 us)
    assert layer["t_memory_s"] == pytest.approx(0.1e-6)


def test_bad_profile_flagged_when_a_layer_beats_its_ceiling(cmp, round_hw):
    # L3: D did 5e7 FLOP in 0.6 us = 8.33e13 FLOP/s; its ceiling at AI 5e7 / 4e6 = 12.5 FLOP/B is
    # min(1e14, 12.5 * 1e12) = 1.25e13 -> 8.33e13 / 1.25e13 = 667% of the roof (> 150%): the profile is too slow
    bad = cmp.summary["bad_profile"]
    assert bad["n_layers"] == 1 and bad["worst_layer"] == "L3"
    assert bad["worst_roof_fraction"] == pytest.approx((5e7 / 0.6e-6) / 12.5e12)
    text = render(cmp, "terminal")
    assert "WARNING: bad profile: 1 layer(s) ran above 150% of their roofline ceiling (worst L3 at 667%)" in text
    assert json.loads(render(cmp, "json"))["summary"]["bad_profile"]["worst_layer"] == "L3"
    # measured at 4 us instead, L3 is at 1.25e13 / 1.25e13 = 100%: no flag
    a = count_graph(_graph(), round_hw, depth=1)
    run = MatchResult(node_time_s={"A": 15e-6, "B": 20e-6, "D": 4e-6}, how={"A": "name", "B": "name", "D": "name"},
                      node_events={}, unmatched_nodes=["C"], unmatched_events=[])
    ok = MeasuredComparison(a, Measured("fake runtime", [run], wall_s=[50e-6]))
    assert ok.summary["bad_profile"] is None
    assert "bad profile" not in render(ok, "terminal")
