"""The analyze page's what-if panel: batch / sequence / dtypes / TP / device re-priced in the browser.

The browser test loads a page written by ``graphroof analyze ... -f html``, changes the batch and checks the
displayed roofline time against ``graphroof.analyze`` at that batch (1e-6 relative)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from graphroof.cli import main
from graphroof.report import render
from graphroof.report.chart import chart_data
from graphroof.report.content import as_phases
from graphroof.report.whatif_html import whatif_json
from tests._report_models import analyse, evil_graph
from tools.headless import Browser, find_chromium

TINY = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=1000,
            max_position_embeddings=512, torch_dtype="bfloat16")


def test_page_has_no_panel_without_whatif_data(round_hw):
    html = render(analyse(evil_graph(), round_hw), "html")
    assert 'id="whatif"' not in html and "whatif-data" not in html


def test_whatif_data_cannot_end_its_script(round_hw):
    a = analyse(evil_graph(), round_hw)
    name = a.kernel_rows[0]["name"]
    a.whatif = {"version": 1, "axes": [], "fit": "fixed", "fit_note": "</script><script>alert(1)</script>",
                "basis": [], "fields": [], "dtype_bits": {"fp32": 32}, "dtype_choices": ["fp32"],
                "traced": {"batch": 1, "seq": None, "dtype": "fp32", "device": "round", "runtime": "eager",
                           "time_roofline_s": 1.0, "time_realistic_s": 1.0, "time_launch_s": 0.0},
                "kernels": [{"name": name, "kind": "vector", "dtype": "fp32", "first_op": "</script>", "c": []}],
                "devices": [{"name": "round", "label": "round", "mem_bw_bytes_per_s": 1.0,
                             "interconnect_bw_bytes_per_s": 0.0, "peaks_flops_per_s": {}, "t_launch_s": [0.0]}]}
    html = render(a, "html")
    body = html.split('id="whatif-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in body and json.loads(body)["kernels"][0]["first_op"] == "</script>"
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in html                   # the note, as text
    assert whatif_json(as_phases(a), chart_data(as_phases(a)))["kernel_layer"] == [-1]


def test_cli_no_whatif_leaves_the_panel_out(tmp_path):
    on, off = tmp_path / "on.html", tmp_path / "off.html"
    assert main(["analyze", "examples/textbook_ops.csv", "--hw", "a100", "-f", "html", "-o", str(on)]) == 0
    assert main(["analyze", "examples/textbook_ops.csv", "--hw", "a100", "-f", "html", "-o", str(off),
                 "--no-whatif"]) == 0
    assert 'id="whatif"' in on.read_text() and 'id="whatif"' not in off.read_text()
    assert "takes no batch / sequence options" in on.read_text()


def test_other_formats_do_not_count_the_whatif_shapes(tmp_path, monkeypatch):
    import graphroof.sweeps.whatif_costs as wc

    def boom(*a, **k):
        raise AssertionError("what-if counted for a non-html format")

    monkeypatch.setattr(wc, "whatif_costs", boom)
    for fmt in ("json", "markdown", "csv", "terminal"):
        assert main(["analyze", "examples/textbook_ops.csv", "--hw", "a100", "-f", fmt, "-o",
                     str(tmp_path / f"r.{fmt}")]) == 0
    with pytest.raises(AssertionError, match="non-html"):
        main(["analyze", "examples/textbook_ops.csv", "--hw", "a100", "-f", "html", "-o", str(tmp_path / "r.html")])


@pytest.mark.skipif(find_chromium() is None, reason="Chromium is not installed")
def test_browser_reprices_batch_and_seq_like_python(tmp_path):
    pytest.importorskip("transformers")
    import graphroof

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(TINY))
    out = tmp_path / "tiny.html"
    assert main(["analyze", str(cfg), "--hw", "a100", "--batch", "1", "--seq", "16", "-f", "html", "-o", str(out)]) == 0
    with Browser() as b:
        page = b.open(out, width=1280)
        assert page.errors == []
        assert page.requests == [out.resolve().as_uri()]  # offline
        shown = "parseFloat(document.getElementById('wi-t').getAttribute('data-v'))"
        traced = graphroof.analyze(str(cfg), hw="a100", batch=1, seq=16).time_roofline_s
        assert page.eval(shown) == pytest.approx(traced, rel=1e-6)
        cx = "Array.from(document.querySelectorAll('#chart g[data-level=layer] circle.pt:not(.strip)'))" \
             ".map(e => e.getAttribute('cx') + ',' + e.getAttribute('cy')).join(' ')"
        before = page.eval(cx)
        set_field = ("(function (id, v) { var e = document.getElementById(id); e.value = v; "
                     "e.dispatchEvent(new Event('change')); })")
        page.eval(f"{set_field}('wi-batch', '3')")
        want = graphroof.analyze(str(cfg), hw="a100", batch=3, seq=16).time_roofline_s
        assert want > traced
        assert page.eval(shown) == pytest.approx(want, rel=1e-6)
        assert page.eval(cx) != before                                         # the points moved
        assert page.eval("document.getElementById('chart').classList.contains('wi-moved')") is True
        page.eval(f"{set_field}('wi-seq', '40')")
        want = graphroof.analyze(str(cfg), hw="a100", batch=3, seq=40).time_roofline_s
        assert page.eval(shown) == pytest.approx(want, rel=1e-6)
        # another device, then TP 2 (adds an all-reduce) and fp8 weights: figures change, no errors
        page.eval(f"{set_field}('wi-device', '1')")
        want = graphroof.analyze(str(cfg), hw="h100", batch=3, seq=40).time_roofline_s
        assert page.eval(shown) == pytest.approx(want, rel=1e-6)
        page.eval(f"{set_field}('wi-tp', '2')")
        assert "all-reduce" in page.eval("document.getElementById('wi-parts').textContent")
        page.eval(f"{set_field}('wi-wdtype', 'int4')")
        page.eval("document.getElementById('wi-reset').click()")
        assert page.eval(shown) == pytest.approx(traced, rel=1e-6)
        assert page.eval(cx) == before
        page.eval(f"{set_field}('wi-batch', '8')")
        png = page.screenshot(width=1200, max_height=1400)
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        if os.environ.get("GRAPHROOF_ARTIFACTS"):  # CI keeps the screenshot (docs/: make_screenshots.py --whatif)
            Path(os.environ["GRAPHROOF_ARTIFACTS"]).mkdir(parents=True, exist_ok=True)
            (Path(os.environ["GRAPHROOF_ARTIFACTS"]) / "report-whatif.png").write_bytes(png)
        assert page.errors == []
