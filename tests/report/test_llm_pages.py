"""Issue 27 (A): the `graphroof llm` report says only what applies (collectives, causal counting, the encoder
input of an encoder-decoder), shows energy per token, and its HTML page carries prefill and decode rooflines."""

from __future__ import annotations

import json
from types import SimpleNamespace as NS

import pytest

from graphroof.counters.settings import CountSettings
from graphroof.llm import estimate
from graphroof.llm.result import LLMEstimate
from graphroof.report import render
from graphroof.report.llm import settings_note
from graphroof.sweeps import SweepPoint
from tests.conftest import node
from tests.llm.toy import RULES, toy_source


def _est(hw="a100", **kw):
    return estimate(toy_source(), hw=hw, prompt=16, gen=12, batch=[1, 4], rules=RULES, runtime="eager", **kw)


def test_single_device_time_parts_say_nothing_about_collectives():
    text = render(_est(), "terminal")
    parts = [ln for ln in text.splitlines() if ln.startswith("batch 1 T")]
    assert len(parts) == 2  # TTFT and TPOT
    assert not any("collectives" in ln for ln in parts)  # was "collectives 0 s of it (0.0%)"
    assert all("floor max(sum Tc, sum Tm)" in ln for ln in parts)


def _fake(*ops):
    g = NS(analysis=NS(graph=list(ops)))
    return NS(configs=[NS(prefill=g, decode=NS(analysis=NS(graph=[])))], settings=CountSettings())


def test_causal_note_only_when_a_causal_attention_was_counted():
    sdpa = "aten.scaled_dot_product_attention"
    assert "causal" in settings_note(_fake(node(sdpa, is_causal=True)))
    assert "causal" in settings_note(_fake(node(sdpa, mask_causal=True)))
    bidirectional = settings_note(_fake(node(sdpa)))  # an encoder: the square is counted whole either way
    assert bidirectional.startswith("attention byte model: flash") and "causal" not in bidirectional
    assert settings_note(_fake(node("aten.mm"))) is None  # no attention at all: no attention settings


def test_encoder_decoder_header_names_the_encoder_input():
    from graphroof.llm.estimate import input_text

    whisper = NS(encoder_decoder=True, decoder_prompt=1, features=(128, 3000), encoder_len=1500)
    assert input_text(whisper, 1024) == "audio: 3000 log-mel frames of 128 bins (1500 encoder positions), " \
                                        "decoder prompt 1 token"  # was "prompt 1024 tokens"
    t5 = NS(encoder_decoder=True, decoder_prompt=4, features=None, encoder_len=512)
    assert input_text(t5, 512) == "encoder input 512 tokens, decoder prompt 4 tokens"
    assert input_text(NS(), 64) == "prompt 64 tokens"
    # the estimate stores the text (it does not keep its source) and its header shows it
    assert LLMEstimate.input_text(NS(input=input_text(t5, 512), prompt=512)) == \
        "encoder input 512 tokens, decoder prompt 4 tokens"


def test_energy_per_token_is_board_power_times_time_over_tokens():
    r = _est()
    for c in r.configs:
        # A100 80GB SXM: 400 W (datasheet TDP) x TP 1 x e2e / (batch x gen output tokens)
        assert c.joules_per_token() == pytest.approx(400 * c.e2e_s / (c.batch * 12))
        assert c.tokens_per_joule() == pytest.approx(c.batch * 12 / (400 * c.e2e_s))
    d = json.loads(render(r, "json"))["configs"][0]
    assert d["board_power_w"] == 400 and d["joules_per_token"] > 0 and d["tokens_per_joule"] > 0
    text = render(r, "terminal")
    assert "J/tok" in text and "tok/J" in text and "upper bound" in text
    # no board power in the profile: n/a, never 0
    r = _est(hw="tpu-v5e")
    assert r.configs[0].joules_per_token() is None
    d = json.loads(render(r, "json"))["configs"][0]
    assert d["joules_per_token"] is None and d["tokens_per_joule"] is None
    text = render(r, "terminal")
    assert "energy: n/a" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("1 "))
    assert row.split()[-2:] == ["n/a", "n/a"]


def test_sweep_point_energy_by_hand():
    # gen 11: e2e = 0.1 + 10 * 0.01 = 0.2 s; 8 sequences on 2 GPUs: 8 * 11 / 0.2 = 440 tok/s;
    # 400 W x 2 GPUs / 440 tok/s = 1.81818 J per token; 0.55 tokens per joule
    p = SweepPoint(hw="a", batch=8, prompt=100, gen=11, tp=2, ttft_s=0.1, tpot_s=0.01, prefill_bound="compute",
                   decode_bound="memory", memory_bytes=1.0, capacity_bytes=10.0, board_power_w=400.0)
    assert p.joules_per_token == pytest.approx(800 / 440)
    assert p.tokens_per_joule == pytest.approx(0.55)
    assert p.to_dict()["tokens_per_joule"] == pytest.approx(0.55)
    q = SweepPoint(hw="a", batch=8, prompt=100, gen=11, tp=2, ttft_s=0.1, tpot_s=0.01, prefill_bound="compute",
                   decode_bound="memory", memory_bytes=1.0, capacity_bytes=10.0)
    assert q.joules_per_token is None and q.to_dict()["tokens_per_joule"] is None


def test_llm_html_has_a_prefill_and_a_decode_roofline():
    pytest.importorskip("matplotlib")
    page = render(_est(), "html")
    assert page.count('<figure class="roofline"') == 2
    assert 'id="roofline-prefill"' in page and 'id="roofline-decode"' in page
    assert "<?xml" not in page  # inline SVG, no prolog
