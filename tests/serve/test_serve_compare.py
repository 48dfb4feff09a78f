"""One traffic on several configurations (graphroof.serving.compare): every combination of devices, TP degrees and
dtypes simulated on the same requests, each equal to its own single run; the summary rows and every format."""

from __future__ import annotations

import json
import warnings

import pytest

from graphroof.errors import InputError
from graphroof.llm import Pricing
from graphroof.report import render
from graphroof.serving import serve
from tests.llm.toy import RULES, toy_source

KW = dict(rate=(50.0, 400.0), requests=60, prompt_len="fixed:64", gen_len="fixed:16", slo_ttft_s=0.05,
          slo_tpot_s=0.01, target_rate=100.0)


def _serve(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return serve(toy_source(L=2, H=256, heads=4, kv_heads=2, I=512, V=1000), pricing=Pricing(rules=RULES),
                     **kw)


def test_every_combination_on_the_same_requests_equals_its_own_run():
    c = _serve(hw=["a100", "h100"], weights=[None, "int8"], **KW)
    rows = c.rows()
    assert [(r["hw"], r["weights"]) for r in rows] == [("a100-80gb-sxm", None), ("a100-80gb-sxm", "int8"),
                                                      ("h100-sxm", None), ("h100-sxm", "int8")]
    solo = _serve(hw="h100", weights="int8", **KW)
    got = c.results[3]
    assert [p.ttft_s["p99"] for p in got.points] == pytest.approx([p.ttft_s["p99"] for p in solo.points], rel=1e-12)
    assert got.max_rate["rate_rps"] == pytest.approx(solo.max_rate["rate_rps"], rel=1e-12)
    assert rows[3]["max_rate_rps"] == pytest.approx(solo.max_rate["rate_rps"], rel=1e-12)
    # int8 weights read half the bytes of bf16: a memory-bound toy decodes faster, so it sustains a higher rate
    assert rows[1]["max_rate_rps"] >= rows[0]["max_rate_rps"]


def test_one_configuration_is_a_plain_result_and_bad_lists_fail_early():
    r = _serve(hw=["h100"], tp=[1], **KW)
    assert type(r).__name__ == "ServeResult"
    with pytest.raises(InputError, match="tp values must be integers"):
        _serve(hw=["a100", "h100"], tp=[0], **KW)


def test_comparison_renders_in_every_format():
    c = _serve(hw=["a100", "h100"], **KW)
    text = render(c, "terminal")
    assert "serve comparison" in text and "a100-80gb-sxm tp1 native" in text and "h100-sxm tp1 native" in text
    assert json.loads(render(c, "json")) == json.loads(c.to_json())
    csv = render(c, "csv").splitlines()
    assert csv[0].startswith("hw,tp,weights,kv,rate_rps,request") and len(csv) == 1 + 2 * 2 * 60
    page = render(c, "html")
    assert page.count('class="graphroof-report"') == 2 and "serve-comparison" in page
    assert "| configuration" in render(c, "markdown")
