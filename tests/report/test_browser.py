"""The HTML report in headless Chromium: no console errors, no network, the controls work, a screenshot.

Skipped only when no Chromium is installed (CI installs it: ``apt-get install -y chromium``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from graphroof.report import write_report
from tests._report_models import analyse, evil_graph, tiny_graph
from tools.headless import Browser, find_chromium

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="Chromium is not installed")


@pytest.fixture(scope="module")
def browser():
    with Browser() as b:
        yield b


def test_report_loads_without_errors_and_controls_work(browser, round_hw, tmp_path):
    out = tmp_path / "tiny.html"
    write_report([("prefill", analyse(tiny_graph(), round_hw)), ("decode", analyse(tiny_graph(), round_hw))],
                 "html", out)
    page = browser.open(out)
    assert page.errors == []
    assert page.requests == [out.resolve().as_uri()]  # offline: the page asks for nothing but itself
    assert page.eval("document.documentElement.getAttribute('data-ready')") == "1"
    visible = ("Array.from(document.querySelectorAll('#chart .pt:not(.strip)'))"
               ".filter(e => e.getBoundingClientRect().width > 0).length")
    strip = "Array.from(document.querySelectorAll('#chart .pt.strip')).filter(e => e.getBoundingClientRect().width > 0).length"
    # layer points of both phases: blk.mlp in each; emb and blk.attn have no FLOPs: on the strip, in each phase
    assert page.eval(visible) == 2
    assert page.eval(strip) == 4
    page.eval("document.querySelector('input[name=level][value=op]').click()")
    assert page.eval(visible) == 4  # up and act, twice
    page.eval("document.querySelector('input.phase-toggle[value=\"1\"]').click()")
    assert page.eval(visible) == 2
    # expand a layer: its op rows appear
    shown = "document.querySelectorAll('#layers-0 tr.o:not([hidden])').length"
    assert page.eval(shown) == 0
    page.eval("document.querySelector('#layers-0 tr.l[data-name=\"blk.mlp\"] button.exp').click()")
    assert page.eval(shown) == 3  # up, act and the "moves no data" row
    # sort by time (column 7: layer, ops, params, FLOPs, bytes, AI, attainable, time): descending first, then ascending
    order = "Array.from(document.querySelectorAll('#layers-0 tr.l')).map(r => r.dataset.name).join(',')"
    page.eval("document.querySelectorAll('#layers-0 th')[7].click()")
    assert page.eval(order) == "blk.mlp,emb,blk.attn"      # 4 ms, 0.5 ms, 4 us
    page.eval("document.querySelectorAll('#layers-0 th')[7].click()")
    assert page.eval(order) == "blk.attn,emb,blk.mlp"
    # hovering a point shows its tooltip
    page.eval("document.querySelector('#chart g[data-level=op] .pt.p0')"
              ".dispatchEvent(new MouseEvent('mouseover', {bubbles: true}))")
    assert page.eval("document.getElementById('tip').hidden") is False
    assert page.eval("document.getElementById('tip').textContent").split("\n")[0] in ("up", "act")
    png = page.screenshot(width=1200)
    (tmp_path / "tiny.png").write_bytes(png)
    if os.environ.get("GRAPHROOF_ARTIFACTS"):  # CI keeps the screenshot as a build artifact
        Path(os.environ["GRAPHROOF_ARTIFACTS"]).mkdir(parents=True, exist_ok=True)
        (Path(os.environ["GRAPHROOF_ARTIFACTS"]) / "report-tiny.png").write_bytes(png)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    assert page.errors == []


def test_malicious_names_do_not_run(browser, round_hw, tmp_path):
    out = tmp_path / "evil.html"
    write_report(analyse(evil_graph(), round_hw), "html", out)
    page = browser.open(out)
    assert page.errors == []
    assert page.eval("document.querySelectorAll('img').length") == 0
    assert page.eval("document.querySelectorAll('script').length") == 1
    names = page.eval("Array.from(document.querySelectorAll('tr.o[data-name]')).map(r => r.dataset.name)")
    assert '<script>alert("pwn")</script>' in names   # shown as text, intact


def test_compare_page_loads_and_sorts(browser, round_hw, tmp_path):
    from graphroof.comparison import compare_devices
    from graphroof.report import write_output
    from graphroof.report.compare import render_compare

    fast = round_hw.with_overrides(peak_flops_per_s=200e12, mem_bw_bytes_per_s=2e12)
    out = tmp_path / "cmp.html"
    write_output(render_compare(compare_devices([analyse(tiny_graph(), round_hw), analyse(tiny_graph(), fast)]), "html"), out)
    page = browser.open(out)
    assert page.errors == [] and page.requests == [out.resolve().as_uri()]
    order = "Array.from(document.querySelectorAll('table.compare tbody tr')).map(r => r.dataset.name).join(',')"
    assert page.eval(order) == "round,round+peak+bw"
    page.eval("document.querySelectorAll('table.compare th')[1].click()")  # time, descending
    assert page.eval(order) == "round,round+peak+bw"
    page.eval("document.querySelectorAll('table.compare th')[1].click()")  # ascending: the faster one first
    assert page.eval(order) == "round+peak+bw,round"
    # a wide table scrolls inside its box: the page itself never overflows a 1400 px window
    page.screenshot(width=1400)
    assert page.eval("document.documentElement.scrollWidth <= 1400")


LABEL_BOXES = """Array.from(document.querySelectorAll('#chart g.pts[data-level=layer] .pt-lab'))
  .map(e => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom, e.textContent]; })"""
ROOF_BOXES = """Array.from(document.querySelectorAll('#chart .roof text, #chart .legend'))
  .map(e => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom, e.textContent]; })"""


def _overlap(a, b) -> bool:
    return a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5


@pytest.mark.parametrize("model, expect", [("resnet-50", "layer3.*.conv2 ×5"), ("llama-2-7b", "model.layers.*.mlp ×32")])
def test_zoo_reports_label_points_without_overlap(browser, tmp_path, model, expect):
    """Issue 14: every point that matters has a label, labels collide with nothing, legends clear the roof labels;
    the screenshots are kept under docs/ (docs/screenshots/analyze-MODEL.png)."""
    import warnings

    from graphroof.api import analyze_on_profiles
    from graphroof.comparison import compare_devices
    from graphroof.hardware import load_hardware
    from graphroof.report import render, write_output

    names = ["a100", "h100-sxm", "mi300x-192gb-oam", "jetson-agx-orin-64gb", "t4-16gb-pcie"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        analyses = analyze_on_profiles(model, [load_hardware(n) for n in names])
    a = analyses[0]
    # the compare page of the same model on 5 devices: no errors, never wider than a 1400 px window
    cmp_out = tmp_path / f"{model}-compare.html"
    write_output(render(compare_devices(analyses), "html"), cmp_out)
    cpage = browser.open(cmp_out)
    assert cpage.errors == []
    cpng = cpage.screenshot(width=1400)
    assert cpage.eval("document.documentElement.scrollWidth <= 1400")
    assert cpage.eval("document.querySelectorAll('table.compare tbody tr').length") == 5
    out = tmp_path / f"{model}.html"
    write_report(a, "html", out)
    page = browser.open(out)
    assert page.errors == []
    labels = page.eval(LABEL_BOXES)
    texts = [b[4] for b in labels]
    assert expect in texts and len(labels) >= 2
    for i, a_ in enumerate(labels):
        for b_ in labels[i + 1:]:
            assert not _overlap(a_, b_), (a_, b_)
    fixed = page.eval(ROOF_BOXES)
    for i, a_ in enumerate(fixed):
        for b_ in fixed[i + 1:]:
            assert not _overlap(a_, b_), (a_, b_)
        for lab in labels:
            assert not _overlap(a_, lab), (a_, lab)
    png = page.screenshot(width=1280)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("GRAPHROOF_UPDATE_SCREENSHOTS"):
        docs = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
        docs.mkdir(parents=True, exist_ok=True)
        (docs / f"analyze-{model}.png").write_bytes(png)
        (docs / f"compare-{model}.png").write_bytes(cpng)
    assert page.errors == []


def test_llm_html_page(browser, tmp_path):
    """``llm -f html``: sweep table + chart, a memory bar per batch, prefill / decode tables, next steps."""
    import warnings

    from graphroof.llm import estimate
    from graphroof.report import render, write_output
    from tests.llm.toy import RULES, toy_source

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = estimate(toy_source(L=2, H=1024, heads=8, kv_heads=4, I=4096, V=1000), hw="a100", prompt=64, gen=8,
                     batch=[1, 4, 16], rules=RULES, ideal=True)
    out = tmp_path / "llm.html"
    write_output(render(r, "html"), out)
    page = browser.open(out)
    assert page.errors == [] and page.requests == [out.resolve().as_uri()]
    assert page.eval("document.querySelectorAll('#sweep circle').length") == 6       # tok/s and TPOT per batch
    assert page.eval("document.querySelectorAll('.bar').length") == 3
    assert page.eval("document.querySelectorAll('section.layers table').length") == 3
    assert page.eval("document.querySelectorAll('#next-steps li').length") >= 1
    # the page never scrolls sideways at 1400 px (wide tables scroll inside their box)
    page.screenshot(width=1400)
    assert page.eval("document.documentElement.scrollWidth <= 1400")
