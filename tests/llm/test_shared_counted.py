"""Counted graphs shared across devices (graphroof.llm.shared._SharedCounted): the count, the TP split and the
fuse stage never read the hardware profile, so engines on one source that differ only in the device count and fuse
each point once; anything else that changes the counted graph (TP degree, runtime preset, dtypes, rules) is a
different entry, and a shared graph prices exactly as a freshly counted one."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from graphroof.llm import Engine, Pricing, shared
from tests.llm.toy import RULES, toy_source

_SRC = dict(L=2, H=256, heads=4, kv_heads=2, I=512, V=1000)


def _engine(src, hw, **kw) -> Engine:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Engine(src, hw=hw, pricing=Pricing(**{"rules": RULES, **kw}))


def _figures(eng: Engine):
    f = eng.price([1, 8, 32], [128, 512, 1000], [16, 64, 2])
    return np.concatenate([f.ttft_s, f.tpot_s, f.tokens_per_s])


def test_engines_on_two_devices_share_the_counted_graphs_and_price_as_alone():
    src = toy_source(**_SRC)
    a, b = _engine(src, "a100"), _engine(src, "h100")
    _figures(a)
    shared = b.pipeline.counted("decode", 8, 512)
    assert shared is a.pipeline.counted("decode", 8, 512)  # counted once for both devices
    # the H100 figures from the shared graphs equal those of an H100 engine on a source of its own
    alone = _engine(toy_source(**_SRC), "h100")
    assert alone.pipeline.counted("decode", 8, 512) is not shared
    np.testing.assert_allclose(_figures(b), _figures(alone), rtol=1e-12)
    assert _figures(b)[0] != _figures(a)[0]  # and the devices still price them differently


@pytest.mark.parametrize("change", [dict(tp=2), dict(runtime="eager"), dict(weights="int8"), dict(rules=dict(RULES))])
def test_what_changes_the_counted_graph_is_not_shared(change):
    src = toy_source(**_SRC)
    a = _engine(src, "a100")
    other = _engine(src, "h100", **change)
    assert a.pipeline.counted("prefill", 2, 300) is not other.pipeline.counted("prefill", 2, 300)


def test_a_shared_count_warns_as_a_fresh_one():
    # without a rule for toy.mul the count warns once per pipeline, naming the op; the second device's first
    # count is a hit on the first device's graph and warns the same
    rules = {k: v for k, v in RULES.items() if k != "toy.mul"}
    src = toy_source(**_SRC)
    for hw in ("a100", "h100"):
        eng = _engine(src, hw, rules=rules)
        with pytest.warns(UserWarning, match="no rule for 'toy.mul'"):
            eng.pipeline.counted("decode", 4, 100)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            eng.pipeline.counted("decode", 4, 101)  # a pipeline warns on its first count only


def test_an_entry_lives_while_a_pipeline_keeps_its_graph():
    # the store holds its graphs weakly: once no engine keeps a counted graph its entry goes, and a later engine
    # on another device counts the point afresh (nothing is kept alive for it)
    import gc

    src = toy_source(**_SRC)
    a = _engine(src, "a100")
    first = a.pipeline.counted("decode", 1, 10)
    key = shared._COUNTED._key(a.pipeline, ("decode", 1, 10))
    assert key in shared._COUNTED.entries
    del a, first
    gc.collect()
    assert key not in shared._COUNTED.entries  # (other tests' dropped graphs may go in the same collection)
    b = _engine(src, "h100")
    again = b.pipeline.counted("decode", 1, 10)
    assert shared._COUNTED.get(b.pipeline, ("decode", 1, 10))[0] is again
    c = _engine(src, "h200")
    assert c.pipeline.counted("decode", 1, 10) is again


def test_a_point_a_grid_interpolates_is_shared_only_under_that_grid():
    # a graph counted from a virtual trace (interpolated, or extrapolated, from a pipeline's grid) is not handed to
    # a pipeline that would trace the point itself; pipelines with the same grid share it
    from graphroof.llm.poly import GridPlan

    src = toy_source(**_SRC)
    plan = GridPlan((1,), (20, 60, 100), 2)
    a, b, plain = _engine(src, "a100"), _engine(src, "h100"), _engine(src, "h200")
    a.pipeline.plan_grid("prefill", plan)
    b.pipeline.plan_grid("prefill", plan)
    virtual = a.pipeline.counted("prefill", 1, 40)
    assert b.pipeline.counted("prefill", 1, 40) is virtual
    assert plain.pipeline.counted("prefill", 1, 40) is not virtual
    outside = a.pipeline.counted("prefill", 1, 5)  # extrapolated below the grid
    assert plain.pipeline.counted("prefill", 1, 5) is not outside
    assert plain.pipeline.counted("prefill", 1, 20) is a.pipeline.counted("prefill", 1, 20)  # a traced grid point
