"""The caches that speed up ``graphroof plan`` change no figure: every result with them equals, bit for bit, the
result without them.

* per-profile memos (:mod:`graphroof.hardware.profile_cache`): ``HardwareProfile.peak``, ``matmul_peak``,
  ``gemm_ceiling``, the attention constants and head dims;
* traced graphs and their re-typed forms shared by every pipeline on one source, counted graphs by the pipelines
  that differ only in the device (:mod:`graphroof.llm.shared`);
* the evaluator's scalar loop and the vectorised kernel model computing only the terms a kind reads.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pytest

import graphroof.hardware.profile as hw_profile
import graphroof.llm.phases as phases
import graphroof.llm.shared as shared_graphs
import graphroof.timing.attention as attention
import graphroof.timing.precision as precision
import graphroof.timing.vectorized as vectorized
from graphroof.hardware import load_hardware
from graphroof.hardware.profile_cache import MAX_OBJECTS, clear_memos, memo_of
from graphroof.llm import Engine, Pricing
from graphroof.llm.kvcache import mark_kv_cache
from graphroof.llm.quant import requantize
from tests.llm.toy import RULES, toy_source

DEVICES = ["a100", "h100", "h200", "mi300x"]


def _steps(sc) -> np.ndarray:
    """A spread of engine steps (decode-only, prefill-only, mixed, chunked), realistic and ideal."""
    rng = np.random.default_rng(7)
    n = np.where(rng.random(300) < 0.4, rng.integers(1, 129, 300), 0)
    o = rng.integers(0, 64, 300)
    m = rng.integers(0, 33, 300)
    s = m * rng.integers(1, 200, 300)
    singles = [float(sc(int(n[i]), int(o[i]), int(m[i]), int(s[i]))) for i in range(0, 300, 7)]
    return np.concatenate([sc(n, o, m, s), sc(n, o, m, s, ideal=True), sc(decode_seqs=m, decode_context=s),
                           np.asarray(singles)])


def _figures(hw: str, source=None, **pricing) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src = source or toy_source(L=2, H=256, heads=4, kv_heads=2, I=512, V=1000)
        eng = Engine(src, hw=hw, pricing=Pricing(rules=RULES, **pricing))
        sc = eng.step_cost(max_batch=32, max_context=256, max_chunk=128)
        fig = eng.price([1, 8, 8, 3], [100, 200, 37, 90], [20, 64, 2, 300])
        step = eng.step("decode", 4, 50).totals
    out = [_steps(sc), np.asarray([step.t_realistic_s, step.t_lower_s])]
    for phase in (fig.prefill, fig.decode):
        out += [np.asarray(getattr(phase, k), dtype=float) for k in phase.__dataclass_fields__]
    return np.concatenate(out)


class _NoShare(shared_graphs._SharedGraphs):  # noqa: SLF001 - the uncached twin of the shared graphs
    def traced(self, source, phase, batch, x):
        return source.decode_graph(batch, x) if phase == "decode" else source.prefill_graph(batch, x)

    def quantized(self, graph, quant):
        return requantize(mark_kv_cache(graph), quant), False


class _NoCounted(shared_graphs._SharedCounted):  # noqa: SLF001 - nothing shared: every pipeline counts its own
    def get(self, pipe, point):
        return None

    def put(self, pipe, point, counted, warned):
        return None


@pytest.fixture
def uncached(monkeypatch):
    """Every cache of this change switched off: a fresh memo per call, no shared graphs."""
    def off():
        for mod in (hw_profile, precision, attention, vectorized):
            monkeypatch.setattr(mod, "memo_of", lambda obj: {})
        monkeypatch.setattr(phases, "_SHARED", _NoShare())
        monkeypatch.setattr(phases, "_COUNTED", _NoCounted())
    return off


@pytest.mark.parametrize("hw", DEVICES)
def test_step_costs_cached_equal_uncached(hw, uncached, monkeypatch):
    clear_memos()
    monkeypatch.setattr(phases, "_SHARED", shared_graphs._SharedGraphs())  # noqa: SLF001
    cached = _figures(hw, tp=2, weights="fp8")
    again = _figures(hw, tp=2, weights="fp8")            # warm memos
    uncached()
    plain = _figures(hw, tp=2, weights="fp8")
    assert np.array_equal(cached, plain) and np.array_equal(again, plain)


def test_shared_graphs_across_pipelines_equal_fresh_ones(uncached, monkeypatch):
    """Pipelines on one source share its traces and re-typed graphs (as the planner's TP / dtype groups do): the
    second pipeline's figures equal those of a pipeline that traced and re-typed everything itself."""
    shared = shared_graphs._SharedGraphs()  # noqa: SLF001
    monkeypatch.setattr(phases, "_SHARED", shared)
    src = toy_source(L=2, H=256, heads=4, kv_heads=2, I=512, V=1000)
    first = _figures("h100", source=src, tp=1, weights="fp8")
    assert shared.raw and shared.quant                    # the first pipeline filled the shared graphs
    second = _figures("h100", source=src, tp=2, weights="fp8")
    third = _figures("h100", source=src, tp=2)
    uncached()
    assert np.array_equal(first, _figures("h100", tp=1, weights="fp8"))
    assert np.array_equal(second, _figures("h100", tp=2, weights="fp8"))
    assert np.array_equal(third, _figures("h100", tp=2))


def test_shared_graph_is_never_handed_out_for_editing(monkeypatch):
    """At TP 1 the split returns its input: the pipeline then gets a copy, so a subclass editing the prepared graph
    in place (ParallelPipeline) cannot change the shared one."""
    shared = shared_graphs._SharedGraphs()  # noqa: SLF001
    monkeypatch.setattr(phases, "_SHARED", shared)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eng = Engine(toy_source(L=2, H=256, heads=4, kv_heads=2, I=512, V=1000), hw="h100",
                     pricing=Pricing(rules=RULES))
        pipe = eng.pipeline
        raw = pipe.raw("decode", 2, 16)
        g = pipe.prepare(raw)
    kept = shared.quant[(id(raw), pipe.quant)][1]
    assert g is not kept and g.nx is not kept.nx


@pytest.mark.parametrize("hw", DEVICES)
def test_profile_memos_equal_the_functions(hw):
    p = load_hardware(hw)
    dtypes = ["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp64"]
    for d in dtypes:
        for unit in ("matrix", "vector"):
            assert p.peak(unit, d) == p._peak(unit, d)    # noqa: SLF001
        for prec in ("highest", "high", "medium"):
            peak = precision.matmul_peak(p, d, prec)
            assert peak == precision._matmul_peak(p, d, prec)                       # noqa: SLF001
            assert precision.gemm_ceiling(p, *peak) == precision._gemm_ceiling(p, *peak)  # noqa: SLF001


def test_attention_time_cached_equals_uncached(monkeypatch):
    hw = load_hardware("h100")
    rng = np.random.default_rng(3)
    cost = {f: rng.random(50) * 1e9 for f in ("matrix_flops", "act_read_bytes", "act_write_bytes", "kv_read_bytes",
                                               "kv_write_bytes", "weight_bytes")}
    dims = attention.AttentionDims(128, 128, 8, 2.0)
    warm = [attention.attention_time(cost, dims, hw, d, s) for d in ("bf16", "fp8", "fp32") for s in (True, False)]
    monkeypatch.setattr(attention, "memo_of", lambda obj: {})
    monkeypatch.setattr(precision, "memo_of", lambda obj: {})
    cold = [attention.attention_time(cost, dims, hw, d, s) for d in ("bf16", "fp8", "fp32") for s in (True, False)]
    assert all(np.array_equal(a, b) for a, b in zip(warm, cold))


def test_memo_is_tied_to_the_object():
    a = replace(load_hardware("h100"))
    b = replace(a)                                          # equal, but another object: its own memo
    memo_of(a)["x"] = 1
    assert memo_of(a)["x"] == 1 and "x" not in memo_of(b)
    for _ in range(MAX_OBJECTS + 1):
        memo_of(object())  # throwaway objects: the memo is bounded, then emptied
    assert "x" not in memo_of(a)
