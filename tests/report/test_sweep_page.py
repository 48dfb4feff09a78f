"""Issue 27 (A): the sweep page is a real sortable table under a chart with round ticks and the SLO pick ringed;
checked as markup here and in headless Chromium (skipped without Chromium)."""

from __future__ import annotations

import re

import pytest

from graphroof.report import render
from graphroof.report.sweep_html import nice_ticks, tick_label
from graphroof.sweeps import sweep
from tests.llm.toy import RULES, toy_source
from tools.headless import Browser, find_chromium


def test_round_ticks():
    # 1480..2100: (2100 - 1480) / 5 = 124 per step -> the next of 1, 2, 2.5, 5 x 100 is 200 -> 1600, 1800, 2000
    assert nice_ticks(1480, 2100) == [1600, 1800, 2000]
    assert [tick_label(v) for v in nice_ticks(1480, 2100)] == ["1.6k", "1.8k", "2k"]  # was 1.48e+03, ...
    # 1000..3500: 2500 / 5 = 500 per step -> 1k, 1.5k, ..., 3.5k
    assert [tick_label(v) for v in nice_ticks(1000, 3500)] == ["1k", "1.5k", "2k", "2.5k", "3k", "3.5k"]
    assert nice_ticks(0, 10) == [0, 2, 4, 6, 8, 10]
    assert [tick_label(v) for v in (0, 0.25, 999, 2.5e6, 3e9)] == ["0", "0.25", "999", "2.5M", "3G"]


@pytest.fixture(scope="module")
def result():
    return sweep(toy_source(), hw=["a100", "h100"], batch=[1, 4, 16], prompt=[16], gen=[12], rules=RULES,
                 max_tpot_s=1.0)


def test_sweep_page_markup(result):
    page = render(result, "html")
    assert "<pre>" not in page and '<table class="sweep">' in page
    assert page.count('<tr class="pick">') == 2  # one SLO pick per device
    assert page.count('<g class="pick">') == 2   # ... ringed on the chart
    assert 'class="frontier"' in page
    ticks = re.findall(r'class="[xy]tick"[^>]*>([^<]*)<', page)
    assert ticks and not any("e+" in t for t in ticks)
    assert "<script>" in page and "http" not in page.split("<script>")[1]  # inline, nothing fetched


@pytest.mark.skipif(find_chromium() is None, reason="Chromium is not installed")
def test_sweep_page_in_chromium(result, tmp_path):
    out = tmp_path / "sweep.html"
    out.write_text(render(result, "html"))
    with Browser() as b:
        page = b.open(out)
        assert page.errors == []
        assert page.requests == [out.resolve().as_uri()]
        assert page.eval("document.documentElement.scrollWidth") <= 1280  # was a 4,954 px wide <pre>
        col = "Array.from(document.querySelectorAll('table.sweep th')).findIndex(h => h.textContent === 'tok/s/GPU')"
        idx = page.eval(col)
        values = (f"Array.from(document.querySelectorAll('table.sweep tbody tr'))"
                  f".map(r => parseFloat(r.cells[{idx}].dataset.v))")
        page.eval(f"document.querySelectorAll('table.sweep th')[{idx}].click()")
        down = page.eval(values)
        assert down == sorted(down, reverse=True)
        page.eval(f"document.querySelectorAll('table.sweep th')[{idx}].click()")
        up = page.eval(values)
        assert up == sorted(up)
        assert page.eval("document.querySelectorAll('table.sweep tr.pick').length") == 2
        assert page.eval("getComputedStyle(document.querySelector('tr.pick td')).fontWeight") == "600"
        assert page.eval("document.querySelectorAll('#chart g.pick').length") == 2
        png = page.screenshot(width=1200)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "sweep.png").write_bytes(png)
