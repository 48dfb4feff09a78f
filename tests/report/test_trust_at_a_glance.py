"""Issue 27 (B): the analyze report and the Python results a user can trust at a glance.

Where the time goes is split by the kernels as priced (shares sum to 100%), assumptions follow the runtime preset and
timing model used, HTML goes to a file, tables map back to the model (module of each kernel, ONNX names, parameter
counts, the default depth), and the results render in a notebook with one name per time figure.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import graphroof
from graphroof.cli import main
from graphroof.graph import OpGraph, OpNode
from graphroof.layers import default_depth
from graphroof.report.content import Phase, assumptions, breakdown
from tests._report_models import analyse, tiny_graph

torch = pytest.importorskip("torch")
nn = torch.nn

ROOT = Path(__file__).resolve().parents[2]
TEXTBOOK = str(ROOT / "tests" / "gold" / "ops_table.csv")


def _conv_bn_relu(hw, runtime="compiled"):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return graphroof.analyze(m, [(1, 3, 8, 8)], hw=hw, runtime=runtime)


# -- 1. where the time goes, assumptions ---------------------------------------------------------------------

def test_breakdown_is_by_kernel_and_sums_to_100_percent(round_hw):
    a = _conv_bn_relu(round_hw)
    b = breakdown(a)
    # the compiled preset folds the batch-norm into the conv: no row of its own, and the shares are of the kernel
    # total (before: unfused op times over the kernel total, the batch-norm's included, summed past 100%)
    labels = [s.label for s in b["by_kind"]]
    assert "aten.batch_norm" not in labels
    assert any("aten.conv2d" in lab and "aten.batch_norm" in lab for lab in labels)
    for key in ("by_kind", "by_bound"):
        assert sum(s.share for s in b[key]) == pytest.approx(1.0)
        assert sum(s.time_s for s in b[key]) == pytest.approx(a.totals.t_lower_s)
    assert sum(s.n for s in b["by_kind"]) == len(a.timed_graph)  # n counts kernels


def test_assumptions_come_from_the_preset_and_timing_model(round_hw):
    a = _conv_bn_relu(round_hw)
    text = assumptions([Phase("model", a)])
    assert not any("none modelled" in t or "per op" in t for t in text)
    assert text[0].startswith("fusion: runtime preset compiled")
    n = a.time_parts()["n_kernels"]
    assert f"launch overhead 1 us per kernel ({n} kernels)" in text  # round_hw: launch_overhead_s = 1e-6
    assert any(t.startswith("realistic-time efficiencies (round)") for t in text)  # round_hw has no [timing]
    a100 = _conv_bn_relu("a100")
    assert any("kernel-level model" in t for t in assumptions([Phase("model", a100)]))
    tiny = analyse(tiny_graph(), round_hw)  # table ops: the preset fuses none of them
    first = assumptions([Phase("model", tiny)])[0]
    assert first.startswith(f"fusion: runtime preset {tiny.runtime}") and "every op is its own kernel" in first


# -- 2. HTML only to a file; say what was written ----------------------------------------------------------------

def test_html_without_o_goes_to_model_report_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["analyze", TEXTBOOK, "--hw", "a100", "-f", "html"]) == 0
    out, err = capsys.readouterr()
    assert out == ""  # nothing floods the terminal
    page = tmp_path / "ops_table-report.html"
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert err.strip().startswith("wrote ops_table-report.html (") and err.count("\n") == 1
    # a second run replaces graphroof's own page; a file graphroof did not write is refused in one line
    assert main(["-q", "analyze", TEXTBOOK, "--hw", "a100", "-f", "html"]) == 0
    assert capsys.readouterr().err == ""
    page.write_text("my notes")
    assert main(["analyze", TEXTBOOK, "--hw", "a100", "-f", "html"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("graphroof: error: ops_table-report.html exists and graphroof did not write it")
    assert "-o FILE" in err and err.count("\n") == 1 and page.read_text() == "my notes"


def test_o_says_what_it_wrote(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    md = tmp_path / "r.md"
    assert main(["analyze", TEXTBOOK, "--hw", "a100", "-f", "markdown", "-o", str(md)]) == 0
    err = capsys.readouterr().err.strip()
    kb = md.stat().st_size / 1e3
    assert err.startswith(f"wrote {md} ({kb:.3g} kB) and {tmp_path / 'r_roofline.png'} (")
    assert main(["-q", "analyze", TEXTBOOK, "--hw", "a100", "-f", "markdown", "-o", str(md)]) == 0
    assert capsys.readouterr().err == ""


# -- 3. tables map back to the model ---------------------------------------------------------------------------

def _blocks_graph() -> OpGraph:
    """Two identical decoder blocks of two table ops each, plus a head."""
    g = OpGraph("blocks", meta={"capture": "hand-built test graph", "model": "blocks"})
    for i in range(2):
        for part, flops in (("attn", 2e9), ("mlp", 4e9)):
            attrs = {"flops": flops, "bytes": 1e6, "kind": "matrix", "compute_dtype": "bf16"}
            g.add_op(OpNode(f"{part}_{i}", "table.op", attrs=attrs, scope=f"model.layers.{i}.{part}"))
    g.add_op(OpNode("head", "table.op", attrs={"flops": 1e9, "bytes": 1e6, "kind": "matrix", "compute_dtype": "bf16"},
                    scope="lm_head"))
    return g


def test_default_depth_is_one_below_the_repeated_block(round_hw):
    g = _blocks_graph()
    assert default_depth(g) == 3  # model.layers.0 is depth 2; one below: model.layers.0.attn
    a = analyse(g, round_hw)
    assert a.depth == 3
    assert [r["name"] for r in a.layers] == ["model.layers.0.attn", "model.layers.0.mlp", "model.layers.1.attn",
                                             "model.layers.1.mlp", "lm_head"]


def test_kernel_rows_show_their_module_and_fold_repeated_blocks(round_hw):
    a = analyse(_blocks_graph(), round_hw)
    rows = a.kernel_table()
    assert [(r["module"], r["repeat"]) for r in rows] == [("model.layers.*.attn", 2), ("model.layers.*.mlp", 2),
                                                          ("lm_head", 1)]
    assert rows[0]["label"] == "attn_0 ×2" and rows[0]["flops"] == 4e9  # 2 blocks x 2 GFLOP
    text = graphroof.render(a, "terminal", kernels=True)
    assert "model.layers.*.mlp" in text and "attn_0 ×2" in text


def test_layer_rows_carry_parameter_counts(round_hw):
    a = _conv_bn_relu(round_hw, runtime="eager")  # one kernel per op: one row per module
    by_name = {r["name"]: r for r in a.layers}
    # conv 8 x 3 x 3 x 3 = 216 weights (no bias); batch-norm weight + bias 2 x 8 = 16; ReLU none
    assert by_name["0"]["params"] == 216 and by_name["1"]["params"] == 16 and by_name["2"]["params"] == 0
    assert by_name["0"]["params"] + by_name["1"]["params"] == a.graph.meta["module_params"]
    text = graphroof.render(a, "terminal")
    assert "params" in text.splitlines()[6]


def test_onnx_unnamed_nodes_get_scope_and_label_from_tensor_names(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from graphroof.frontends.onnx.load import load_onnx

    w = helper.make_tensor("enc.fc.weight", TensorProto.FLOAT, [8, 8], [0.0] * 64)
    nodes = [helper.make_node("MatMul", ["x", "enc.fc.weight"], ["h"]),                 # weight names the module
             helper.make_node("Relu", ["h"], ["/enc/act/Relu_output_0"]),               # output path names it
             helper.make_node("Relu", ["/enc/act/Relu_output_0"], ["y"], name="n143")]  # a generic name: same
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], [w])
    path = tmp_path / "unnamed.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    g = load_onnx(path)
    assert [(op.name, op.scope) for op in g.ops()] == [("enc.fc/MatMul", "enc.fc"), ("enc/act/Relu", "enc.act"),
                                                         ("y/Relu", "enc.act")]


# -- 4. notebooks and one name per figure ------------------------------------------------------------------------

def test_totals_and_analysis_name_each_time_once(round_hw):
    a = analyse(tiny_graph(), round_hw)
    t = a.totals
    assert t.flops == 201e9 and t.bytes == pytest.approx(3.504e9)  # 200 + 1 GFLOP; 0.5 + 1 + 2 + 0.004 GB
    # floor = max(Σ Tc = 2 + 0.1 ms, Σ Tm = 0.5 + 1 + 2 + 0.004 ms) = 3.504 ms; roofline Σ max = 4.504 ms
    assert a.time_floor_s == t.time_floor_s == pytest.approx(3.504e-3)
    assert a.time_roofline_s == t.time_roofline_s == pytest.approx(4.504e-3)
    assert a.time_realistic_s == t.time_realistic_s == t.t_realistic_s
    d = a.to_dict()["totals"]
    assert (d["time_floor_s"], d["time_roofline_s"], d["time_realistic_s"]) == pytest.approx(
        (a.time_floor_s, a.time_roofline_s, a.time_realistic_s))
    term = graphroof.render(a, "terminal")
    assert "floor 3.5 ms" in term and "; roofline 4.5 ms" in term and "realistic " in term
    md = graphroof.render(a, "markdown")
    assert "| floor " in md and "| roofline " in md and "| realistic " in md and "| roofline time" not in md


def test_analysis_renders_itself_in_a_notebook(round_hw):
    a = analyse(tiny_graph(), round_hw)
    html = graphroof.notebook_html(a)
    assert html.startswith('<div class="graphroof-report"><style>.graphroof-report {')
    assert "<html" not in html and "<body" not in html and "Where the time goes" in html
    assert "\nbody {" not in html  # the page's CSS is nested under the div: it styles nothing else


def test_notebook_display_is_registered_by_class_name(round_hw, monkeypatch):
    """In IPython the results show as their report: formatters registered by (module, class) name."""
    import sys
    from types import SimpleNamespace

    seen = {}

    class Formatter:
        def for_type_by_name(self, module, name, fn):
            seen[(module, name)] = fn

    shell = SimpleNamespace(display_formatter=SimpleNamespace(formatters={"text/html": Formatter()}))
    monkeypatch.setitem(sys.modules, "IPython", SimpleNamespace(get_ipython=lambda: shell))
    graphroof._register_notebook_display()
    a = analyse(tiny_graph(), round_hw)
    assert seen[(type(a).__module__, type(a).__name__)](a) == graphroof.notebook_html(a)
    from graphroof.llm.result import LLMEstimate

    assert (LLMEstimate.__module__, "LLMEstimate") in seen


def test_llm_estimate_renders_itself_in_a_notebook():
    from graphroof.llm import estimate
    from tests.llm.toy import RULES, toy_source

    r = estimate(toy_source(), hw="a100", prompt=16, gen=4, batch=[1], rules=RULES, runtime="eager")
    html = graphroof.notebook_html(r)
    assert html.startswith('<div class="graphroof-report">') and "<html" not in html and "TTFT" in html
