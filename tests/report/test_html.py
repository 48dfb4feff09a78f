"""The HTML report: structure, numbers, self-containment and escaping of model strings."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from graphroof.report import render_text
from graphroof.report.html import render_html
from tests._report_models import EVIL_RAW, analyse, evil_graph, tiny_graph


class Tree(HTMLParser):
    """Flat list of (tag, attrs) plus the text inside every element with an id/class we care about."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def find(self, tag: str, cls: str | None = None, **attrs) -> list[dict]:
        out = []
        for t, a in self.tags:
            if t != tag:
                continue
            if cls is not None and cls not in (a.get("class") or "").split():
                continue
            if all(a.get(k.replace("_", "-")) == v for k, v in attrs.items()):
                out.append(a)
        return out


@pytest.fixture
def tiny(round_hw):
    return analyse(tiny_graph(), round_hw)


def test_html_structure_of_tiny_model(tiny):
    html = render_html(tiny)
    tree = Tree(html)
    assert html.startswith("<!DOCTYPE html>")
    # header facts, chart, breakdown, layer table and assumptions are all there
    for sec in ("summary", "roofline", "time", "layers", "assumptions"):
        assert tree.find("section", id=sec), sec
    text = " ".join(tree.text)
    assert "graphroof: tiny on round" in text
    assert "2 FLOPs per multiply-add" in text and "dense" in text
    assert "unknown: custom.Mystery×1" in text          # unknown-op summary in the header
    assert "hand-built test graph" in text               # capture method
    assert "4.5 ms (Σ max(Tc, Tm) per kernel)" in text   # 0.5 + 2 + 2 + 0.004 = 4.504 ms
    # one tbody per layer (emb, blk.mlp, blk.attn), the ops under them, the view collapsed
    tbodies = [a for t, a in tree.tags if t == "tr" and "l" in (a.get("class") or "").split()]
    assert [a["data-name"] for a in tbodies] == ["emb", "blk.mlp", "blk.attn"]
    op_rows = [a["data-name"] for a in tree.find("tr", cls="o") if "data-name" in a]
    assert op_rows == ["embed", "up", "act", "mystery"]
    assert len(tree.find("tr", cls="views")) == 1 and "+ 1 op that move" in text
    # per-op rows start hidden; sortable header has every column
    assert all("hidden" in a for a in tree.find("tr", cls="o"))
    ths = [a for t, a in tree.tags if t == "th"]
    assert len(ths) >= 10
    # chart: ceilings for the bf16 matrix and vector roofs, with ridge points 100 and 10 FLOP/B
    assert "matrix.bf16 100 TFLOP/s" in text and "vector.bf16 10.0 TFLOP/s" in text
    assert "ridge 100 FLOP/B" in text and "ridge 10 FLOP/B" in text
    assert len(tree.find("circle", cls="ridge")) == 2
    # layer points: blk.mlp (201 GFLOP / 3 GB) and blk.attn (no FLOPs -> skipped), emb (no FLOPs -> skipped)
    layer_pts = [a for a in tree.find("circle", cls="pt") if a.get("class") and "strip" not in a["class"]]
    # the no-FLOP items (emb, blk.attn layers; embed, mystery ops) sit on the strip under the chart
    assert len([a for a in tree.find("circle", cls="pt") if "strip" in (a.get("class") or "")]) == 4
    layer_titles = [t for t in tree.text if t.startswith("blk.mlp\n")]
    assert len(layer_titles) == 1
    # 201e9 / 3e9 = 67 FLOP/B; time = Σ max = 2 + 2 = 4 ms = 4 / 4.504 = 88.8 %; 201e9 / 4e-3 = 50.25 TFLOP/s
    assert "intensity 67 FLOP/B" in layer_titles[0] and "time 4 ms (88.8%)" in layer_titles[0]
    assert "achieved 50.2 TFLOP/s" in layer_titles[0] and "memory-bound" in layer_titles[0]
    # op points: up (AI 200, compute) and act (AI 0.5, memory); embed / view / mystery have no FLOPs
    up = [t for t in tree.text if t.startswith("up\n")]
    assert len(up) == 1 and "intensity 200 FLOP/B" in up[0] and "compute-bound" in up[0]
    assert "time 2 ms (44.4%)" in up[0] and "achieved 100 TFLOP/s" in up[0]  # 2 / 4.504 = 44.4 %; on the roof
    assert len(layer_pts) == 3                           # 1 layer point + 2 op points
    assert "2 layers with no FLOPs or no bytes are not on the log-log chart" in text
    # where the time goes: by bound 2 + 0.5 + 0.004 = 2.504 ms memory (55.6 %), 2 ms compute (44.4 %)
    stack = re.search(r'<div class="stack".*?</div>', html, re.S).group(0)
    assert "memory 56%" in stack and "compute 44%" in stack
    # assumptions: byte model, efficiencies, the estimated op
    assert "fusion: runtime preset" in text and "every op is its own kernel" in text  # table ops: none fused
    assert "matrix 0.5, vector 0.5, memory bandwidth 0.8" in text and "launch overhead 1 us per kernel" in text
    assert "estimated: 1 of 5 ops" in text and "custom.Mystery" in text


def test_html_is_self_contained(tiny):
    html = render_html(tiny)
    # no external scripts, styles, fonts or images: every URL in the file is the SVG namespace
    urls = set(re.findall(r"(?:https?:)?//[\w.-]+[^\s\"'<>)]*", html))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls
    assert not re.search(r"<(script|link|img|iframe)[^>]*\s(src|href)=", html)
    assert "@import" not in html and "url(" not in html


def test_html_escapes_model_strings(round_hw):
    html = render_html(analyse(evil_graph(), round_hw))
    for raw in EVIL_RAW:
        assert raw not in html, raw
    assert "&lt;script&gt;alert(&#34;pwn&#34;)&lt;/script&gt;" in html
    assert "it&#39;s" in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    # exactly one <script> element: ours
    assert html.count("<script") == 1


def test_html_escapes_onnx_node_names(tmp_path, round_hw):
    pytest.importorskip("graphroof.frontends.onnx.load")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    import graphroof

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3], [0.5] * 12)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name='<script>alert("pwn")</script>'),
             helper.make_node("Relu", ["h"], ["y"], name="it's \"quoted\" <img src=x>")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [w]))
    path = tmp_path / "evil.onnx"
    onnx.save(model, str(path))
    html = render_text(graphroof.analyze(str(path), hw=round_hw), "html")
    for raw in ('<script>alert("pwn")', "it's", "<img src=x"):
        assert raw not in html, raw
    assert "&lt;script&gt;alert(&#34;pwn&#34;)&lt;/script&gt;" in html


def test_html_two_phases_are_distinguishable(round_hw):
    pre = analyse(tiny_graph("m"), round_hw)
    dec = analyse(tiny_graph("m"), round_hw)
    html = render_html([("prefill", pre), ("decode", dec)])
    tree = Tree(html)
    boxes = tree.find("input", cls="phase-toggle")
    assert [b["value"] for b in boxes] == ["0", "1"]
    # phase 0 draws circles, phase 1 squares (paths); both in the layer and the op layers
    assert {a["data-phase"] for a in tree.find("circle", cls="pt")} == {"0"}
    assert {a["data-phase"] for a in tree.find("path", cls="pt")} == {"1"}
    assert len(tree.find("table", cls="layers")) == 2
    text = " ".join(tree.text)
    assert "prefill" in text and "decode" in text


def test_html_without_plottable_points(round_hw):
    from graphroof.graph import OpGraph, OpNode

    g = OpGraph("flat")
    g.add_op(OpNode("copy", "table.op", attrs={"flops": 0, "bytes": 1e6, "kind": "vector"}, scope="a"))
    html = render_html(analyse(g, round_hw))
    # no point on the log axes; the copy (bytes, no FLOPs) is on the strip under the chart
    assert "<svg" in html and html.count('class="pt ') == html.count('class="pt strip') == 2  # layer + op level
    assert "1 layer with no FLOPs or no bytes is not on the log-log chart (100.0% of the time)" in html
