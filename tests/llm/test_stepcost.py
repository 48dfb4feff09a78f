"""The step cost of a serving simulation (graphroof.llm.stepcost) against the scalar path it vectorises: a
decode-only step equals the counted decode step at that batch and cached length, a prefill-only step the counted
prefill, at random steps; mixed and chunked steps follow the documented arithmetic."""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest

from graphroof.errors import InputError
from graphroof.llm import Engine, Pricing
from tests.llm.toy import RULES, toy_source


def _engine(hw, **kw) -> Engine:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Engine(toy_source(L=2, H=256, heads=4, kv_heads=2, I=512, V=1000), hw=hw,
                      pricing=Pricing(rules=RULES, **kw))


@pytest.mark.parametrize("hw", ["a100", "h100"])   # efficiency factors / the kernel-level [timing] model
def test_decode_and_prefill_steps_equal_the_counted_steps(hw):
    eng = _engine(hw)
    sc = eng.step_cost(max_batch=64, max_context=512, max_chunk=256)
    rng = random.Random(hw)
    for _ in range(6):
        m, x = rng.randrange(1, 65), rng.randrange(1, 512)
        # m sequences with x cached tokens each: the decode step graph at (m, x), a CUDA graph under `serving`
        want = eng.step("decode", m, x).totals
        assert float(sc(decode_seqs=m, decode_context=m * x)) == pytest.approx(want.t_realistic_s, rel=1e-9)
        assert float(sc(decode_seqs=m, decode_context=m * x, ideal=True)) == pytest.approx(want.t_lower_s, rel=1e-9)
    for _ in range(4):
        n = rng.randrange(1, 257)
        want = eng.step("prefill", 1, n).totals
        assert float(sc(prefill_tokens=n)) == pytest.approx(want.t_realistic_s, rel=1e-9)


def test_vectorised_steps_equal_single_steps():
    eng = _engine("h100")
    sc = eng.step_cost(max_batch=32, max_context=256, max_chunk=128)
    rng = np.random.default_rng(0)
    n = np.where(rng.random(200) < 0.3, rng.integers(1, 129, 200), 0)
    o = rng.integers(0, 100, 200)
    m = rng.integers(0, 33, 200)
    s = m * rng.integers(1, 256, 200)
    together = sc(n, o, m, s)
    for i in range(0, 200, 17):
        assert float(sc(n[i], o[i], m[i], s[i])) == pytest.approx(together[i], rel=1e-12)
    assert float(sc(0, 0, 0, 0)) == 0.0                    # an empty step


def test_chunk_after_cached_tokens_costs_its_attention_growth():
    """Ideal roofline on `eager` (no launches): a chunk of n tokens after o cached ones does the prefill's work
    from o to o + n tokens, weights read once: P(o + n) - P(o) + P(0), with P the prefill's cost in the prompt.
    Compared with a whole prompt of n tokens, the chunk differs only in its attention over the o older keys."""
    eng = _engine("a100", runtime="eager")
    sc = eng.step_cost(max_batch=16, max_context=512, max_chunk=256)
    whole = float(sc(prefill_tokens=64, ideal=True))
    later = float(sc(prefill_tokens=64, prefill_offset=128, ideal=True))
    assert later > whole                                   # attention over 192 keys instead of 64
    full = eng.step("prefill", 1, 192).totals.t_lower_s
    assert later < full                                    # but far less than the whole 192-token prompt


def test_mixed_step_reads_the_weights_once():
    eng = _engine("a100", runtime="eager")
    sc = eng.step_cost(max_batch=16, max_context=512, max_chunk=256)
    dec, pre = float(sc(decode_seqs=8, decode_context=8 * 100)), float(sc(prefill_tokens=32))
    mixed = float(sc(prefill_tokens=32, decode_seqs=8, decode_context=8 * 100))
    # one pass over 40 tokens: more than either part alone, less than two passes (the weights are read once)
    assert max(dec, pre) < mixed < dec + pre


def test_limits_are_one_line_errors():
    eng = _engine("a100")
    sc = eng.step_cost(max_batch=8, max_context=64, max_chunk=32)
    with pytest.raises(InputError, match="max_batch"):
        sc(decode_seqs=9, decode_context=9)
    with pytest.raises(InputError, match=">= 0"):
        sc(decode_seqs=-1)
    with pytest.raises(InputError, match="max_chunk must be an integer >= 2"):
        eng.step_cost(max_chunk=1)
    nocache = Engine(toy_source(kv=False), hw="a100", pricing=Pricing(rules=RULES))
    with pytest.raises(InputError, match="KV cache"):
        nocache.step_cost()


def test_several_chunks_in_one_step():
    """Chunks of several sequences add their causal attention work, sum of 2 o_i n_i + n_i^2; their tokens go
    through the GEMMs together.  One chunk of 96 tokens at offset 0 does 96^2 = 9,216 key-query pairs; a chunk of
    64 after 100,000 cached tokens plus one of 32 new tokens does 2*100000*64 + 64^2 + 32^2 = 12,805,120: the
    attention turns compute-bound and the step slower, with the same GEMMs."""
    eng = _engine("a100", runtime="eager")
    sc = eng.step_cost(max_batch=16, max_context=512, max_chunk=256)
    one = float(sc(prefill_tokens=96, ideal=True))
    same = float(sc(prefill_tokens=96, prefill_attention=96 ** 2, ideal=True))
    two = float(sc(prefill_tokens=96, prefill_attention=2 * 100_000 * 64 + 64 ** 2 + 32 ** 2, ideal=True))
    assert same == pytest.approx(one, rel=1e-12) and two > 1.5 * one


@pytest.mark.parametrize("hw", ["h100", "efficiency"])  # the kernel-level model / efficiency factors only
def test_scalar_path_and_its_memo_equal_the_vectorised_steps(hw):
    """A single step (scalar arguments) is priced on floats with its per-step groups memoised on (m, s) and
    (n, attention work, m == 0); every value equals the vectorised path's bit for bit, first call (a miss), second
    call (a hit) and without the memo (memo=False); repeated keys are served from the memo."""
    from graphroof.hardware import adhoc_profile

    eng = _engine(adhoc_profile(100e12, 1e12) if hw == "efficiency" else hw)
    assert (eng.hw.timing is None) == (hw == "efficiency")
    sc = eng.step_cost(max_batch=32, max_context=256, max_chunk=128)
    plain = eng.step_cost(max_batch=32, max_context=256, max_chunk=128, memo=False)
    rng = np.random.default_rng(1)
    n = np.where(rng.random(120) < 0.5, rng.integers(1, 129, 120), 0)
    o = np.where(rng.random(120) < 0.3, rng.integers(0, 100, 120), 0)
    m = rng.integers(0, 33, 120)
    s = m * rng.integers(1, 256, 120)
    n[:10], o[:10] = 64, 0                                  # repeated chunks: the memo serves them
    for ideal in (False, True):
        together = sc(n, o, m, s, ideal=ideal)
        for i in range(120):
            args = (int(n[i]), int(o[i]), int(m[i]), int(s[i]))
            first, again = sc(*args, ideal=ideal), sc(*args, ideal=ideal)
            assert float(first) == float(again) == float(plain(*args, ideal=ideal)) == together[i]
    assert sc._memo_pre and sc._memo_dec and not plain._memo_pre and not plain._memo_dec
    # several chunks (their attention work given) and decode-only arrays take their own paths, same values
    assert float(sc(96, 0, 3, 300, prefill_attention=5000.0)) == sc(np.array([96]), 0, 3, 300,
                                                                   prefill_attention=np.array([5000.0]))[0]
    assert np.array_equal(sc(0, 0, m, s), sc(np.zeros(120, dtype=np.int64), o * 0, m, s))
    # a mixed step at a state of the last decode-only call takes its decode part from that call's CUDA-graph rows
    # plus the eager launches: the same doubles as pricing it eagerly
    derived = []
    sc._eager_from = lambda parts, j, f=sc._eager_from: derived.append(j) or f(parts, j)
    sc._memo_dec.clear()
    sc(0, 0, m, s)
    for j in np.flatnonzero(m)[:12]:
        mixed = float(sc(32, 0, int(m[j]), int(s[j])))
        assert mixed == sc(np.array([32]), 0, m[j:j + 1], s[j:j + 1])[0] == float(plain(32, 0, int(m[j]), int(s[j])))
    assert len(derived) >= 10  # (m, s) pairs repeat in the draw: those are memo hits
