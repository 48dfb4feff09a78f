"""``graphroof.render(result, fmt)``: one entry point for every kind of result, formats checked per kind."""

from __future__ import annotations

import json

import pytest

import graphroof
from graphroof.comparison import compare_devices
from graphroof.errors import ReportError
from graphroof.llm import estimate
from graphroof.report import render, render_text
from graphroof.report.compare import render_compare
from tests._report_models import analyse, tiny_graph
from tests.llm.toy import RULES, toy_source


def test_render_analysis_is_the_analysis_report(round_hw):
    a = analyse(tiny_graph(), round_hw)
    for fmt in ("terminal", "markdown", "json", "csv"):
        assert render(a, fmt) == render_text(a, fmt)
    assert render(a, "terminal", ops=True) == render_text(a, "terminal", ops=True)
    assert graphroof.render is render


def test_render_device_comparison(round_hw):
    fast = round_hw.with_overrides(mem_bw_bytes_per_s=2e12)
    c = compare_devices([analyse(tiny_graph(), round_hw), analyse(tiny_graph(), fast)])
    assert render(c) == render_compare(c, "terminal")
    assert json.loads(render(c, "json"))["devices"][1]["profile"] == c.rows[1]["profile"]
    assert render(c, "csv").splitlines()[0].startswith("model,flops,bytes,hardware")


def test_render_llm_estimate(round_hw):
    r = estimate(toy_source(), hw=round_hw, prompt=16, gen=4, batch=[1], rules=RULES)
    text = render(r)
    assert text.startswith("model: ") and "TTFT" in text
    assert render(r, "markdown").startswith("# graphroof llm: ")
    assert json.loads(render(r, "json"))["configs"][0]["batch"] == 1
    with pytest.raises(ReportError, match="use one of: terminal, markdown, json"):
        render(r, "csv")


def test_render_unknown_format_names_the_valid_ones(round_hw):
    with pytest.raises(ReportError, match="unknown format 'pdf'; use one of: terminal, markdown, json, csv, html"):
        render(analyse(tiny_graph(), round_hw), "pdf")
