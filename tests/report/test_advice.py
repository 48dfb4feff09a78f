"""Next steps (graphroof/advice, graphroof/llm/advice.py, stored on the results) on hand-built cases: every figure must equal an independent estimate with the
suggested change applied (the advice re-evaluates; it never applies a fixed factor)."""

from __future__ import annotations

import dataclasses
import json
import warnings

import pytest

from graphroof.advice import analysis_advice
from graphroof.api import count_graph
from graphroof.graph import bind
from graphroof.hardware import load_hardware
from graphroof.llm import estimate
from graphroof.llm.kvcache import mark_kv_cache
from graphroof.report import render
from tests.llm.toy import RULES, toy_graph, toy_source

# big enough that weights dominate decode traffic: H 1024, MLP 4096, 1000-token vocabulary, bf16
SHAPE = dict(L=2, H=1024, heads=8, kv_heads=4, I=4096, V=1000)
P, G = 64, 8


def _est(batch=1, hw="a100", **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimate(toy_source(**SHAPE), hw=hw, prompt=P, gen=G, batch=batch, rules=RULES, ideal=True, **kw)


def test_decode_bound_llm_gets_int4_weights_with_the_re_estimated_tpot():
    r = _est(batch=1)
    c = r.configs[0]
    assert c.decode.analysis.totals.bound == "memory"
    items = {it["kind"]: it for it in r.next_steps}
    q = items["quantize"]
    again = _est(batch=1, weights="int4").configs[0]      # independent: the estimate with --weights int4
    assert q["before"] == pytest.approx(c.tpot_s) and q["after"] == pytest.approx(again.tpot_s)
    assert q["gain"] == pytest.approx(c.tpot_s / again.tpot_s) and q["gain"] > 2   # 16 -> 4-bit weights dominate
    assert q["change"] == "--weights int4" and f"×{q['gain']:.2f}" in q["text"]
    # already int4: nothing more to say about weights
    assert "quantize" not in {it["kind"] for it in _est(batch=1, weights="int4").next_steps}


def test_batch_below_the_critical_batch():
    r = _est(batch=1)
    c = r.configs[0]
    b = {it["kind"]: it for it in r.next_steps}["batch"]
    crit = {row["name"]: row["critical_batch"] for row in c.critical}
    assert b["critical_batch"] == crit[b["layer"]] and b["critical_batch"] > 1
    # the layer named is the one with the largest decode time among those with a critical batch
    dec = {row["name"]: row["time_s"] for row in c.layer_rows("decode")}
    assert b["layer"] == max((n for n in dec if crit.get(n)), key=dec.get)
    again = _est(batch=b["batch"]).configs[0]
    assert b["after"] == pytest.approx(again.output_tokens_per_s)
    assert b["gain"] == pytest.approx(again.output_tokens_per_s / c.output_tokens_per_s) and b["gain"] > 1.1
    # at the critical batch itself there is no batch item
    assert "batch" not in {it["kind"] for it in _est(batch=b["critical_batch"]).next_steps}


def _small_device(capacity_bytes: float):
    a100 = load_hardware("a100")
    return dataclasses.replace(a100, name="small", mem_capacity_bytes=capacity_bytes)


def test_model_that_does_not_fit_gets_the_tp_degree_that_fits():
    need = _est(batch=1).configs[0].memory.total_bytes
    hw = _small_device(0.75 * need)       # weights dominate: split in 2 they fit
    r = _est(batch=1, hw=hw)
    c = r.configs[0]
    assert c.memory.fits is False
    tp = {it["kind"]: it for it in r.next_steps}["tp"]
    assert tp["tp"] == c.memory.min_tp == 2
    again = _est(batch=1, hw=hw, tp=2).configs[0]
    assert tp["after"] == pytest.approx(again.memory.total_bytes) and again.memory.fits
    assert tp["tpot_s"] == pytest.approx(again.tpot_s)
    assert "--tp 2 fits" in tp["text"]


def test_analysis_weights_over_capacity(round_hw):
    g = mark_kv_cache(bind(toy_graph(**SHAPE), {"batch": 1, "seq": 8}))
    a = count_graph(g, dataclasses.replace(round_hw, mem_capacity_bytes=1e6), rules=RULES)
    w = a.totals.cost.weight_bytes
    fit = analysis_advice(a)[0]
    # bf16 weights, 2 B per param: per layer 2 x 1024 (norms) + 2 x 1024² (q, o) + 2 x 512 x 1024 (k, v)
    # + 3 x 4096 x 1024 (MLP) = 15,730,688; x 2 layers + 1024 (final norm) + 1000 x 1024 (lm_head) = 32,486,400
    # params = 64,972,800 B, + the 8 gathered embedding rows 8 x 1024 x 2 B = 16,384 B -> 64,989,184 B;
    # over 1 MB: 128 devices (the power of two with 65 MB / n <= 1 MB)
    assert w == 64_989_184
    assert fit["kind"] == "fit" and fit["before"] == w and fit["devices"] == 128 and fit["after"] == w / 128
    assert a.next_steps == analysis_advice(a) and a.next_steps[0] == fit   # stored once by count_graph


def test_next_steps_in_every_format():
    r = _est(batch=1)
    assert "next steps (re-estimated under each change):" in render(r, "terminal")
    assert "## Next steps" in render(r, "markdown")
    d = json.loads(render(r, "json"))
    assert {it["kind"] for it in d["next_steps"]} >= {"quantize", "batch"}


def test_memory_bar_text():
    from graphroof.report.llm import memory_bar_text

    c = _est(batch=1).configs[0]
    bar = memory_bar_text(c, width=50)
    cells = bar[1:bar.index("]")]
    # the toy's ~65 MB on an 80 GB A100 rounds to no full cell: all free
    assert len(cells) == 50 and set(cells) == {"·"}
    over = _est(batch=1, hw=_small_device(0.5 * c.memory.total_bytes)).configs[0]
    bar = memory_bar_text(over, width=50)
    cells = bar[1:bar.index("]")]
    # scale = the total; capacity = half of it -> the | after cell 25; weights dominate the first cells
    assert cells.index("|") == 25 and cells[0] == "█" and "| = capacity" in bar
