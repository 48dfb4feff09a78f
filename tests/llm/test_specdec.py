"""Speculative decoding / multi-token prediction as pricing settings (graphroof.llm.specdec) on the toy decoder:
the expected tokens per step, the verify step against the per-op breakdown, the draft's steps, k = 0 as plain
decoding, one-line errors, and the serving simulation's decode steps."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from graphroof.errors import InputError
from graphroof.llm import Engine, Pricing
from graphroof.llm.specdec import expected_tokens, steps_to_emit, tokens_after
from graphroof.serving.sim import EngineModel, simulate
from graphroof.serving.workload import Workload
from tests.llm.toy import RULES, toy_source

P = 64  # prompt; gen = 2: one decode step, at cached length 64


def _engine(**kw) -> Engine:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Engine(toy_source(), hw="h100", pricing=Pricing(rules=RULES, ideal=True, runtime="eager", **kw))


def _tpot(eng: Engine, m: int) -> float:
    return eng.estimate(prompt=P, gen=2, batch=m).configs[0].tpot_s


def _verify_by_ops(eng: Engine, m: int, k: int) -> float:
    """The verify step from the per-op breakdowns (another path than the evaluator's kernel groups): every op of
    the decode step at batch m (k + 1) tokens but the attention over the cache, which reads the m sequences'
    caches once (at batch m).  On the toy every op is memory-bound, so each is its bytes / bandwidth."""
    wide, narrow = eng.step("decode", m * (k + 1), P).ops, eng.step("decode", m, P).ops
    return sum((n if w["op"] == "toy.attn" else w)["time_s"] for w, n in zip(wide, narrow))


def test_expected_tokens():
    # profile (0.9, 0.8, 0.5): E = 1 + 0.9 + 0.9*0.8 + 0.9*0.8*0.5 = 1 + 0.9 + 0.72 + 0.36 = 2.98
    assert expected_tokens(3, (0.9, 0.8, 0.5)) == pytest.approx(2.98, rel=1e-12)
    # constant 0.5, k = 3: (1 - 0.5^4) / (1 - 0.5) = 0.9375 / 0.5 = 1.875 = 1 + 0.5 + 0.25 + 0.125
    assert expected_tokens(3, 0.5) == pytest.approx(1.875, rel=1e-12)
    assert expected_tokens(4, 1.0) == 5.0 and expected_tokens(4, 0.0) == 1.0 and expected_tokens(0, 0.7) == 1.0
    # E = 2.5 from a fraction 0: steps emit floor(2.5 j) = 2, 5, 7, 10 tokens; 7 tokens need 3 steps, 8 need 4
    assert tokens_after(np.zeros(4), np.arange(1, 5), 2.5).tolist() == [2, 5, 7, 10]
    assert steps_to_emit(np.zeros(3), np.array([7, 8, 1]), 2.5).tolist() == [3, 4, 1]


def test_k0_is_plain_decoding():
    plain, off = _engine(), _engine(spec_tokens=0, spec_acceptance=0.7)
    assert off.spec is None
    a = plain.estimate(prompt=P, gen=20, batch=[1, 4]).to_dict()
    b = off.estimate(prompt=P, gen=20, batch=[1, 4]).to_dict()
    assert a == b


def test_acceptance_one_gives_k_plus_one_tokens_per_step():
    m, k = 2, 3
    eng = _engine(spec_tokens=k, spec_acceptance=1.0)
    verify = _verify_by_ops(eng, m, k)
    # E = k + 1 = 4 tokens per step, no draft cost (MTP heads at cost 0): TPOT = verify / 4
    assert _tpot(eng, m) == pytest.approx(verify / 4, rel=1e-9)
    # the same step priced by the serving step cost (decode-only step of m sequences at 64 cached tokens each)
    sc = eng.step_cost(max_batch=8, max_context=128, max_chunk=16)
    assert float(sc(decode_seqs=m, decode_context=m * P, ideal=True)) == pytest.approx(verify, rel=1e-9)
    assert _tpot(eng, m) < _tpot(_engine(), m)        # 4 tokens for less than 4 plain steps


def test_acceptance_zero_costs_more_than_plain():
    m, k = 2, 3
    plain, spec = _tpot(_engine(), m), _tpot(_engine(spec_tokens=k, spec_acceptance=0.0), m)
    # one token per step (E = 1) from a verify step that feeds 4 tokens per sequence: dearer than a plain step
    assert spec == pytest.approx(_verify_by_ops(_engine(), m, k), rel=1e-9)
    assert spec > plain
    # a draft cost adds 0.25 x k = 0.75 plain steps per step: TPOT = verify + 0.75 plain
    dc = _tpot(_engine(spec_tokens=k, spec_acceptance=0.0, spec_draft_cost=0.25), m)
    assert dc == pytest.approx(spec + 0.75 * plain, rel=1e-9)


def test_draft_model_adds_its_k_steps():
    m, k = 2, 2
    draft = toy_source(L=1, H=32, heads=2, kv_heads=1, I=64, V=100)
    eng = _engine(spec_tokens=k, spec_acceptance=(0.8, 0.5), spec_draft=draft)
    assert eng.spec is not None and eng.spec.draft is not None
    d_step = eng.spec.draft.step("decode", m, P).totals.t_lower_s
    e = 1 + 0.8 + 0.8 * 0.5                            # 2.2 tokens per step
    want = (_verify_by_ops(eng, m, k) + k * d_step) / e
    assert _tpot(eng, m) == pytest.approx(want, rel=1e-9)
    r = eng.estimate(prompt=P, gen=2, batch=m)
    assert any("speculative decoding: k = 2" in n and "draft model" in n for n in r.notes)
    # e2e and tokens/s follow the TPOT: e2e = TTFT + (gen - 1) TPOT
    c = eng.estimate(prompt=P, gen=9, batch=m).configs[0]
    assert c.e2e_s == pytest.approx(c.ttft_s + 8 * c.tpot_s, rel=1e-12)
    f = eng.price(m, P, 2)
    assert float(f.tpot_s[0]) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("kw, match", [
    (dict(spec_tokens=-1), "--spec-tokens must be an integer >= 0"),
    (dict(spec_tokens=1.5), "--spec-tokens must be an integer >= 0"),
    (dict(spec_tokens=2, spec_acceptance=1.2), r"in \[0, 1\]"),
    (dict(spec_tokens=3, spec_acceptance=(0.9, 0.8)), "a profile of 2 values for --spec-tokens 3"),
    (dict(spec_tokens=2, spec_draft_cost=-0.1), "--spec-draft-cost must be a number >= 0"),
])
def test_bad_settings_are_one_line_errors(kw, match):
    with pytest.raises(InputError, match=match) as e:
        Pricing(**kw)
    assert "\n" not in str(e.value)


def test_serve_with_acceptance_one_takes_a_quarter_of_the_decode_steps():
    """Four requests of 64 + 33 tokens at t = 0: 32 decode steps each plainly; with k = 3 at acceptance 1, each
    step emits 4 tokens: ceil(32 / 4) = 8 decode steps."""
    def decode_steps(eng: Engine) -> tuple[int, float]:
        sc = eng.step_cost(max_batch=8, max_context=128, max_chunk=256)
        em = EngineModel(sc, 10**6, 16, 256, 8, ideal=True, tokens=eng.spec.tokens if eng.spec else 1.0)
        n = 4
        wl = Workload(np.zeros(n), np.full(n, P), np.full(n, 33), np.zeros(n, dtype=np.int64))
        out = simulate(em, wl)
        st = out.steps
        return int(np.sum(st["decode_tokens"] > 0)), float(out.finish.max())

    plain, spec = decode_steps(_engine()), decode_steps(_engine(spec_tokens=3, spec_acceptance=1.0))
    assert plain[0] == 32 and spec[0] == 8
    assert spec[1] < plain[1]


def test_no_next_steps_compare_plain_what_ifs_with_a_speculative_tpot():
    """The advice's what-ifs price plain decoding: under speculative decoding they are not offered (a note says so)
    rather than set against a TPOT they do not share."""
    from graphroof.llm import estimate
    from tests.llm.toy import RULES, toy_source

    r = estimate(toy_source(), hw="a100", prompt=16, gen=8, batch=1, rules=RULES, spec_tokens=2,
                 spec_acceptance=0.5, spec_draft_cost=0.1)
    assert r.next_steps == [] and any("not computed under speculative decoding" in n for n in r.notes)


def test_sweep_prices_speculation_as_the_estimate_does():
    """A sweep point under speculative decoding equals the estimate of the same configuration (one evaluator)."""
    from graphroof.llm import estimate
    from graphroof.sweeps import sweep
    from tests.llm.toy import RULES, toy_source

    kw = dict(spec_tokens=3, spec_acceptance=0.7, spec_draft_cost=0.1)
    s = sweep(toy_source(), hw=["a100"], batch=[1, 4], prompt=[16], gen=[8], rules=RULES, **kw)
    for p in s.points:
        e = estimate(toy_source(), hw="a100", prompt=16, gen=8, batch=p.batch, rules=RULES, **kw).configs[0]
        assert p.tpot_s == pytest.approx(e.tpot_s, rel=1e-9)
        assert p.ttft_s == pytest.approx(e.ttft_s, rel=1e-9)
    assert any("speculative decoding: k = 3" in n for n in s.notes)
