"""Counted graphs at virtual grid points (llm/countgrid.py) against the full path they replace (the virtual
trace prepared, counted and fused): the same op and kernel nodes, op costs equal, kernel costs equal to float
rounding, the same estimate figures and terminal report."""

from __future__ import annotations

import warnings

import pytest

from graphroof.graph import COST
from graphroof.llm import estimate, phases
from graphroof.llm.series import FIELDS
from graphroof.report import render
from tests.llm.toy import RULES, toy_source


def _run(monkeypatch, src, interpolate: bool, **kw):
    init = phases.Pipeline.__init__

    def patched(self, *a, **k):
        init(self, *a, **k)
        self.interpolate_counted = interpolate

    with monkeypatch.context() as m:
        m.setattr(phases.Pipeline, "__init__", patched)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return estimate(src, **kw)


def _same_estimates(monkeypatch, make_src, **kw):
    fast = _run(monkeypatch, make_src(), True, **kw)
    full = _run(monkeypatch, make_src(), False, **kw)
    virtual = [k for k, c in fast.pipeline._cache.items() if isinstance(c, phases.VirtualCounted)]
    assert virtual                                    # the batches between the grid's were interpolated
    for key, c in fast.pipeline._cache.items():
        d = full.pipeline._cache[key]
        for ga, gb, exact in ((c.counted, d.counted, True), (c.kernels, d.kernels, False)):
            assert list(ga.nx.nodes) == list(gb.nx.nodes)
            for n in ga.nx.nodes:
                assert ga.node(n) == gb.node(n)
                ca, cb = ga.get(n, COST), gb.get(n, COST)
                assert ca.estimated == cb.estimated
                for f in FIELDS:
                    if exact:                         # ops: counted by their rules at the point
                        assert getattr(ca, f) == getattr(cb, f), (key, n, f)
                    else:                             # kernels: + an interpolated fusion correction
                        assert getattr(ca, f) == pytest.approx(getattr(cb, f), rel=1e-12, abs=1e-9), (key, n, f)
            assert ga.meta.get("dims") == gb.meta.get("dims")
    for a, b in zip(fast.configs, full.configs):
        assert a.ttft_s == pytest.approx(b.ttft_s, rel=1e-12)
        assert a.tpot_s == pytest.approx(b.tpot_s, rel=1e-12)
        assert a.memory.total_bytes == pytest.approx(b.memory.total_bytes, rel=1e-12)
        assert a.memory.min_tp == b.memory.min_tp and a.memory.max_batch == b.memory.max_batch
        assert a.critical == b.critical
    assert render(fast, "terminal") == render(full, "terminal")


@pytest.mark.parametrize("tp", [1, 2])
def test_toy_virtual_points_equal_the_full_count(monkeypatch, tp):
    _same_estimates(monkeypatch, lambda: toy_source(L=2, H=1024, heads=8, kv_heads=4, I=4096, V=1000),
                    hw="h100", prompt=64, gen=8, batch=[1, 4, 16, 64], rules=RULES, tp=tp)


@pytest.mark.slow
@pytest.mark.parametrize("hw", ["h100", "a100"])
def test_tiny_llama_and_mixtral_virtual_points_equal_the_full_count(monkeypatch, hw):
    pytest.importorskip("graphroof.frontends.torch_export", reason="needs the PyTorch frontend")
    pytest.importorskip("transformers")
    from graphroof.llm.hf import HFSource
    from tests.llm.test_llm_moe import TINY_MIXTRAL
    from tests.llm.test_sweep import TINY

    for name, cfg in (("tiny-llama", TINY), ("tiny-mixtral", TINY_MIXTRAL)):
        _same_estimates(monkeypatch, lambda cfg=cfg, name=name: HFSource(cfg, name=name), hw=hw, prompt=48, gen=20,
                        batch=[1, 3, 8, 32], tp=2)
