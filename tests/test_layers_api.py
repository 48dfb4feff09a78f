from __future__ import annotations

import pytest

import graphroof
from graphroof import Cost, OpGraph
from graphroof.layers import auto_depth, scope_at, scope_parts
from tests.conftest import T, W, node


def test_scope_depth_merges_numeric_parts():
    assert scope_parts("model.layers.0.self_attn.q_proj") == ["model", "layers.0", "self_attn", "q_proj"]
    assert scope_at("model.layers.0.self_attn.q_proj", 2) == "model.layers.0"
    assert scope_at("", 2) == "(top)"


def _mlp_graph():
    g = OpGraph("mlp")
    # two linear layers as table-free custom ops counted by a per-call rule
    for i in range(2):
        g.add_op(node("my.linear", [T("bf16", 8, 64), W("bf16", 64, 64)], [T("bf16", 8, 64)], name=f"fc{i}",
                      scope=f"blocks.{i}.fc"))
        g.add_op(node("my.relu", [T("bf16", 8, 64)], [T("bf16", 8, 64)], name=f"act{i}", scope=f"blocks.{i}.act"))
    return g


def _linear(n):
    x, w = n.inputs
    # [8,64] @ [64,64]: 2 * 8 * 64 * 64 = 65536 FLOPs
    return Cost(matrix_flops=2 * 8 * 64 * 64, weight_bytes=w.nbytes, act_read_bytes=x.nbytes,
                act_write_bytes=n.outputs[0].nbytes)


def test_rollup_sums_costs_and_bound(round_hw):
    with pytest.warns(graphroof.GraphroofWarning, match=r"'my.relu' \(2 nodes\)"):
        a = graphroof.analyze(_mlp_graph(), hw=round_hw, rules={"my.linear": _linear}, depth=1)
    assert [r["name"] for r in a.layers] == ["blocks.0", "blocks.1"]
    assert auto_depth(a.graph) == 1  # blocks.0 / blocks.1 are indexed blocks: one row each
    r = a.layers[0]
    # fc: 65536 FLOPs; bytes 1024 (x) + 8192 (w) + 1024 (y) = 10240 ; relu unknown: 1024 + 1024 = 2048 (estimated)
    assert r["matrix_flops"] == 65536 and r["bytes"] == 10240 + 2048 and r["estimated"] is True
    assert r["n_ops"] == 2 and r["op_kinds"] == {"my.linear": 1, "my.relu": 1}
    # Tc = 65536 / 1e14 = 0.655 ns; Tm = 12288 / 1e12 = 12.3 ns -> memory-bound
    assert r["bound"] == "memory" and r["time_s"] == pytest.approx(12288e-12)
    assert a.summary.unknown == {"my.relu": 2}
    assert "blocks.0" in repr(a.layers) and "memory-bound" in repr(a)
    md = graphroof.render(a, "markdown")
    assert "unknown: my.relu×2 (bytes only, estimated)" in md


def test_to_dataframe_needs_pandas_or_works(round_hw):
    a = graphroof.analyze(_mlp_graph(), hw=round_hw, rules={"my.linear": _linear, "my.relu": None})
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(graphroof.GraphroofError, match="needs pandas"):
            a.to_dataframe()
    else:
        assert len(a.to_dataframe("ops")) == 4


def test_public_api_all():
    for name in graphroof.__all__:
        assert hasattr(graphroof, name), name


def test_auto_depth_prefers_indexed_blocks():
    g = OpGraph()
    for i, sc in enumerate(["model.embed_tokens", "model.layers.0.self_attn.q_proj", "model.layers.0.mlp.up",
                            "model.layers.1.self_attn.q_proj", "model.norm", "lm_head"]):
        g.add_op(node("x", name=f"n{i}", scope=sc))
    assert auto_depth(g) == 2  # model.layers.0 / model.layers.1 are the rows
    g2 = OpGraph()
    for i, sc in enumerate(["conv1", "layer1.0.conv1", "layer1.1.conv2", "fc"]):
        g2.add_op(node("x", name=f"n{i}", scope=sc))
    assert auto_depth(g2) == 1


def test_note_when_profile_has_no_vector_peak():
    from graphroof.hardware import HardwareProfile

    hw = HardwareProfile(name="mxu-only", matrix_peak_flops_per_s={"bf16": 1e14}, vector_peak_flops_per_s={},
                         mem_bw_bytes_per_s=1e12)
    a = graphroof.analyze(_mlp_graph(), hw=hw, rules={"my.linear": _linear, "my.relu": lambda n: Cost(vector_flops=8)})
    assert any("mxu-only lists no vector-unit peak" in n for n in a.notes())


def test_count_graph_leaves_the_callers_graph_alone(round_hw):
    # analysing one OpGraph on two devices must give two independent results (rows are computed lazily)
    from graphroof.api import count_graph
    from graphroof.graph import BOUND, COST
    from graphroof.hardware import adhoc_profile

    g = _mlp_graph()
    rules = {"my.linear": _linear, "my.relu": None}
    a = count_graph(g, round_hw, rules=rules)
    b = count_graph(g, adhoc_profile(1e12, 1e9), rules=rules)
    assert g.get("fc0", COST) is None and g.get("fc0", BOUND) is None
    # fc0 on round_hw: 10240 B / 1e12 B/s = 10.24 ns; on the ad-hoc device: 10240 / 1e9 = 10.24 us
    assert a.ops[0]["time_s"] == pytest.approx(10.24e-9) and b.ops[0]["time_s"] == pytest.approx(10.24e-6)


def test_rollup_key_folds_blocks_into_one_row(round_hw):
    """The one rollup with a key (what the LLM tables do): blocks.0.fc + blocks.1.fc -> blocks.*.fc, repeat 2."""
    from graphroof.layers import layer_row, rollup
    from graphroof.llm.tables import fold_name

    with pytest.warns(graphroof.GraphroofWarning):
        a = graphroof.analyze(_mlp_graph(), hw=round_hw, rules={"my.linear": _linear}, depth=2)
    groups = rollup(a.graph, a.hw, 2, key=fold_name)
    assert [g.name for g in groups] == ["blocks.*.fc", "blocks.*.act"]
    fc = groups[0]
    assert fc.members == ["blocks.0.fc", "blocks.1.fc"] and fc.repeat == 2
    # two linears: 2 * 65536 = 131072 FLOPs; 2 * 10240 = 20480 bytes (see test_rollup_sums_costs_and_bound)
    assert fc.cost.flops == 131072 and fc.cost.bytes == 20480
    row = layer_row(fc, a.hw, a.totals.t_lower_s)
    unfolded = [r for r in a.layers if r["name"].endswith(".fc")]
    assert row["time_s"] == pytest.approx(sum(r["time_s"] for r in unfolded))
    assert row["ops"] == ["fc0", "fc1"] and row["n_ops"] == 2
    # without a key every block is its own row, and rows match Analysis.layers exactly
    plain = [layer_row(g, a.hw, a.totals.t_lower_s) for g in rollup(a.graph, a.hw, 2)]
    assert plain == [{k: v for k, v in r.items() if k != "params"} for r in a.layers]  # + parameter counts


TEXTBOOK = "tests/gold/ops_table.csv"


def test_compare_api_matches_separate_analyses():
    c = graphroof.compare(TEXTBOOK, hw=["a100", "h100"])
    names = ["a100-80gb-sxm", "h100-sxm"]   # the profiles the aliases name
    assert [r["profile"] for r in c.rows] == names
    a100, h100 = (graphroof.analyze(TEXTBOOK, hw=h) for h in ("a100", "h100"))
    assert c.rows[0]["speedup"] == 1.0
    assert c.rows[1]["time_s"] == pytest.approx(h100.totals.t_lower_s)
    assert c.rows[1]["speedup"] == pytest.approx(a100.totals.t_lower_s / h100.totals.t_lower_s)
    assert c.flops == a100.totals.cost.flops
    d = c.to_dict()
    assert d["model"] == c.model and [r["profile"] for r in d["devices"]] == names
    assert [r["profile"] for r in graphroof.compare(TEXTBOOK, hw="a100, h100").rows] == names


def test_compare_api_needs_a_device():
    with pytest.raises(graphroof.InputError, match="at least one hardware profile"):
        graphroof.compare(TEXTBOOK, hw=[])
