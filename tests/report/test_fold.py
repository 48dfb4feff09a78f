"""Folded layer tables (issue 14): identical repeated blocks as one ``×N`` row, structural rows explained;
gold files for the terminal and markdown tables."""

from __future__ import annotations

import pytest

from graphroof.api import count_graph
from graphroof.graph import OpGraph
from graphroof.layers import fold_name
from graphroof.report import render_text
from graphroof.report.text import layer_table
from tests.conftest import node
from tests.report.test_markdown import check_gold


def _decoder(n_blocks: int = 4) -> OpGraph:
    """embed, n identical blocks (attn GEMM 2 GFLOP / 20 MB, mlp GEMM 4 GFLOP / 40 MB, a residual add of 8 MB
    directly in the block), except block 0 whose mlp is twice as big; a final flatten outside every module."""
    g = OpGraph("toy-decoder")

    def op(name, scope, flops, nbytes, kind="matrix"):
        g.add_op(node("table.op", name=name, scope=scope, flops=flops, bytes=nbytes, kind=kind, compute_dtype="bf16"))

    op("embed", "model.embed", 0, 16e6, "vector")
    for i in range(n_blocks):
        op(f"q{i}", f"model.layers.{i}.attn", 2e9, 20e6)
        op(f"up{i}", f"model.layers.{i}.mlp", 8e9 if i == 0 else 4e9, 40e6)
        op(f"res{i}", f"model.layers.{i}", 2e6, 8e6, "vector")
    op("flat", "", 0, 0, "vector")
    return g


def test_fold_name():
    assert fold_name("model.layers.3.mlp") == "model.layers.*.mlp"
    assert fold_name("layer1.0") == "layer1.*" and fold_name("fc") == "fc"


def test_identical_blocks_fold_and_a_different_one_stays(round_hw):
    a = count_graph(_decoder(), round_hw, depth=2)
    rows = {r["name"]: r for r in a.layer_table()}
    # block 0 has the 8 GFLOP mlp: not identical to 1-3, which fold into one row of 3
    assert list(rows) == ["model.embed", "model.layers.0", "model.layers.*", "(top)"]
    f = rows["model.layers.*"]
    assert f["repeat"] == 3 and f["n_ops"] == 9
    # 3 blocks x (2 + 4 GFLOP + 2 MFLOP) = 18.006 GFLOP; bytes 3 x (20 + 40 + 8) MB = 204 MB
    assert f["flops"] == pytest.approx(18.006e9) and f["bytes"] == pytest.approx(204e6)
    # per block: matmul Tc = 2e9/1e14 = 20 us and 4e9/1e14 = 40 us (compute); the add: Tc = 2e6 / 1e13 = 0.2 us,
    # Tm = 8e6 / 1e12 = 8 us -> 8 us; 68 us per block, x 3
    assert f["time_s"] == pytest.approx(3 * 68e-6)
    assert f["label"] == "model.layers.* ×3"
    assert rows["(top)"]["label"] == "(top) (ops outside every module: op)"
    # totals are untouched by folding
    assert sum(r["time_s"] for r in rows.values()) == pytest.approx(a.totals.t_lower_s)
    assert [r["name"] for r in a.layer_table(fold=False)] == [r["name"] for r in a.layers]


def test_structural_row_says_what_it_holds(round_hw):
    a = count_graph(_decoder(), round_hw, depth=3)
    labels = [r["label"] for r in a.layer_table()]
    # depth 3: the residual adds are identical in all 4 blocks (x4); the mlp only in blocks 1-3 (x3)
    assert "model.layers.* ×4 (each block's own ops, outside its sub-modules: op)" in labels
    assert "model.layers.*.mlp ×3" in labels and "model.layers.0.mlp" in labels


def test_gold_folded_terminal_and_markdown(round_hw):
    a = count_graph(_decoder(), round_hw, depth=3)
    check_gold("folded_layers.txt", layer_table(a.layer_table(), False) + "\n")
    md = render_text(a, "markdown")
    start = md.index("## Layers")
    check_gold("folded_layers.md", md[start:md.index("## Assumptions")])
    unfolded = render_text(a, "terminal", fold=False)
    assert "model.layers.2.mlp" in unfolded and "×3" not in unfolded


def test_cli_no_fold(capsys, tmp_path, round_hw):
    from graphroof.cli import main

    # llama-style zoo model is slow to build; the textbook op table has no blocks, so only the flag is checked
    from tests.report.test_markdown import GOLD

    assert main(["-q", "analyze", str(GOLD / "ops_table.csv"), "--no-fold"]) == 0
    assert "layer" in capsys.readouterr().out


def test_no_attention_note_without_attention_and_no_index_dtypes(round_hw):
    from graphroof.report.content import as_phases, assumptions, header_facts

    g = _decoder()
    g.add_op(node("table.op", name="pos_ids", scope="model", flops=1e3, bytes=8e3, kind="vector",
                  compute_dtype="int64"))
    a = count_graph(g, round_hw, depth=2)
    ph = as_phases(a)
    settings = a.graph.meta.get("count_settings")
    assert settings is not None
    assert settings.describe() not in assumptions(ph)          # no attention op: no attention settings note
    facts = dict(header_facts(ph))
    assert "int64" in a.header()["dtypes"] and facts["compute dtypes"] == "bf16"


def test_ops_view_groups_the_same_op_across_blocks(round_hw):
    a = count_graph(_decoder(), round_hw, depth=2)
    rows = {r["label"]: r for r in a.op_table()}
    # q0..q3: 2 GFLOP / 20 MB each in every block -> one row of 4, 8 GFLOP, 4 x 20 us = 80 us
    q = rows["q0 ×4"]
    assert q["module"] == "model.layers.*.attn" and q["flops"] == pytest.approx(8e9)
    assert q["time_s"] == pytest.approx(80e-6)
    # up0 is twice as big: its own row; up1..up3 group
    assert "up0" in rows and rows["up1 ×3"]["flops"] == pytest.approx(12e9)
    assert rows["flat"]["module"] == "(top)"
    assert len(a.op_table(fold=False)) == len(a.ops)
    assert sum(r["time_s"] for r in a.op_table()) == pytest.approx(a.totals.t_lower_s)


def test_rows_follow_the_first_op_with_work(round_hw):
    # an exporter hoisted layer B's constant (no work) above layer A: B's row must still come after A's
    g = OpGraph("hoisted")
    g.add_op(node("table.op", name="b_const", scope="B", flops=0, bytes=0, kind="vector", compute_dtype="bf16"))
    g.add_op(node("table.op", name="a_mm", scope="A", flops=1e9, bytes=1e6, kind="matrix", compute_dtype="bf16"))
    g.add_op(node("table.op", name="b_mm", scope="B", flops=1e9, bytes=1e6, kind="matrix", compute_dtype="bf16"))
    a = count_graph(g, round_hw, depth=1)
    assert [r["name"] for r in a.layers] == ["B", "A"]              # first-seen rollup order
    assert [r["name"] for r in a.layer_table()] == ["A", "B"]     # the report: order of the work
