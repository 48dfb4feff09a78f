"""The advice's light what-ifs (llm/whatif.py) against the full re-run of ``estimate`` they replace: the same
TTFT, TPOT, throughput and memory figures (to float rounding) for a change of weights dtype, TP degree and
batch, on the hand-built toy and on tiny traced Llama / Mixtral configs."""

from __future__ import annotations

import warnings

import pytest

from graphroof.llm import Engine, Pricing
from graphroof.llm.advice import full_rerun
from graphroof.llm.whatif import what_if
from tests.llm.toy import RULES, toy_source

REL = 1e-12


def _figures(c):
    m = c.memory
    return [c.ttft_s, c.tpot_s, c.output_tokens_per_s, m.total_bytes, m.kv_cache_bytes, m.kv_reserved_bytes,
            m.activation_peak_bytes, m.weight_bytes, m.max_batch, m.fits]


#: the pipeline of each estimate (an estimate does not carry its engine: the test keeps it)
PIPES: dict[int, object] = {}


def _same(est, cfg, **change):
    pipe = PIPES[id(est)]
    w = what_if(est, change.get("batch", cfg.batch), weights=change.get("weights"), tp=change.get("tp"),
                pipeline=pipe)
    assert w is not None
    full = full_rerun(est, pipe, cfg, **change)
    for a, b in zip(_figures(w), _figures(full)):
        if isinstance(b, float):
            assert a == pytest.approx(b, rel=REL), change
        else:                                       # max_batch, fits; tpot_s None without decode steps
            assert a == b, change
    return w


def _est(src, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pricing, rest = Pricing.split(kw)
        run = {k: rest.pop(k) for k in ("prompt", "gen", "batch") if k in rest}
        eng = Engine(src, pricing=Pricing(**pricing), **rest)
        est = eng.estimate(**run)
        PIPES[id(est)] = eng.pipeline
        return est


@pytest.mark.parametrize("hw", ["a100", "h100"])   # efficiency factors / the kernel-level [timing] model
@pytest.mark.parametrize("ideal", [False, True])
def test_toy_what_ifs_equal_the_full_re_run(hw, ideal):
    src = toy_source(L=2, H=1024, heads=8, kv_heads=4, I=4096, V=1000)
    est = _est(src, hw=hw, prompt=64, gen=8, batch=[1, 4, 16], rules=RULES, ideal=ideal)
    pipe = PIPES[id(est)]
    counted = set(pipe._cache)
    for c in est.configs:
        _same(est, c, weights="int4")
        w = _same(est, c, batch=3 * c.batch + 2)     # between and beyond the estimate's grid batches 1 and 16
        assert w.pipe is pipe                       # a batch change reuses the estimate's pipeline ...
    assert set(pipe._cache) == counted              # ... and its counted grid points: nothing counted again
    one = _est(src, hw=hw, prompt=64, gen=8, batch=1, rules=RULES, ideal=ideal)
    _same(one, one.configs[0], tp=2)
    _same(one, one.configs[0], batch=37)


def test_single_decode_step_and_uncovered_sources():
    src = toy_source()
    est = _est(src, hw="h100", prompt=32, gen=2, batch=3, rules=RULES)
    _same(est, est.configs[0], batch=11)
    _same(est, est.configs[0], weights="int4")
    one = _est(src, hw="h100", prompt=32, gen=1, batch=3, rules=RULES)
    assert what_if(one, 5, pipeline=PIPES[id(one)]).tpot_s is None
    _same(one, one.configs[0], batch=5)
    nocache = _est(toy_source(kv=False), hw="a100", prompt=16, gen=4, batch=1, rules=RULES)
    assert what_if(nocache, 4, pipeline=PIPES[id(nocache)]) is None             # decode = full forward passes: the advice re-runs the estimate


def test_what_ifs_keep_the_estimates_runtime_and_serving_memory():
    """A what-if prices under the estimate's runtime preset and serving-memory settings, as a re-run with the same
    options does (not the defaults): eager launches, 0.8 of the memory, 32-token KV blocks, chunked prefill."""
    src = toy_source(L=2, H=1024, heads=8, kv_heads=4, I=4096, V=1000)
    kw = dict(hw="h100", prompt=64, gen=8, rules=RULES, runtime="eager", gpu_mem_util=0.8, kv_block=32,
              max_batched_tokens=128)
    est = _est(src, batch=[1, 16], **kw)
    for change in ({"weights": "int4"}, {"batch": 9}):
        w = _same(est, est.configs[0], **change)
        assert w.pipe.runtime.name == "eager" and w.serving == est.configs[0].memory.serving
        direct = _est(src, batch=change.get("batch", 1), weights=change.get("weights"), **kw).configs[0]
        assert w.tpot_s == pytest.approx(direct.tpot_s, rel=REL)
        assert w.memory.total_bytes == pytest.approx(direct.memory.total_bytes, rel=REL)
    serving = _est(src, batch=1, **{**kw, "runtime": "serving"}).configs[0]
    assert serving.tpot_s != pytest.approx(est.configs[0].tpot_s, rel=1e-3)   # the preset matters here


@pytest.mark.slow
def test_tiny_llama_and_mixtral_what_ifs_equal_the_full_re_run():
    pytest.importorskip("graphroof.frontends.torch.export", reason="needs the PyTorch frontend")
    pytest.importorskip("transformers")
    from graphroof.frontends.hf.source import HFSource
    from tests.llm.test_llm_moe import TINY_MIXTRAL
    from tests.llm.test_sweep import TINY

    for name, cfg in (("tiny-llama", TINY), ("tiny-mixtral", TINY_MIXTRAL)):
        est = _est(HFSource(cfg, name=name), hw="h100", prompt=48, gen=20, batch=[1, 8, 32], tp=2)
        for c in est.configs:
            _same(est, c, weights="int4")
            _same(est, c, batch=c.batch + 5)      # MoE: experts visited are not polynomial in the tokens
            _same(est, c, tp=1)
