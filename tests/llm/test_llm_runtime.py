"""LLM phases priced per kernel under a runtime preset: CUDA-graph decode, parts that add up."""

from __future__ import annotations

import pytest

from graphroof.graph import BOUND
from graphroof.llm import estimate
from graphroof.timing.profile import timing_of
from tests.llm.toy import RULES, toy_source


def _est(runtime, **kw):
    return estimate(toy_source(), hw="a100", prompt=16, gen=8, batch=[1], rules=RULES, runtime=runtime, **kw)


def test_serving_decode_pays_one_graph_launch_per_step():
    c = _est("serving").configs[0]
    dec = c.decode.analysis
    k = dec.timed_graph
    assert all(k.get(n, BOUND).t_launch_s == 0 for n in k.nx.nodes)   # no per-kernel launches
    assert dec.step_launch_s == timing_of(dec.hw).graph_launch_overhead_s  # one replay per step
    p = dec.time_parts()
    assert p["time_launch_s"] == dec.step_launch_s
    assert p["time_roofline_s"] + p["time_derating_s"] + p["time_launch_s"] == pytest.approx(c.tpot_s)
    # prefill is launched kernel by kernel
    pre = c.prefill.analysis
    assert pre.step_launch_s == 0 and pre.time_parts()["time_launch_s"] == pytest.approx(
        len(pre.timed_graph) * timing_of(pre.hw).launch_overhead_s)


def test_serving_fuses_fewer_kernels_than_eager_and_keeps_flops():
    s, e = _est("serving").configs[0], _est("eager").configs[0]
    assert len(s.prefill.analysis.timed_graph) < len(e.prefill.analysis.timed_graph)
    assert s.prefill.analysis.totals.cost.flops == pytest.approx(e.prefill.analysis.totals.cost.flops)
    assert s.prefill.analysis.totals.cost.bytes < e.prefill.analysis.totals.cost.bytes
    assert s.tpot_s < e.tpot_s  # fewer bytes and a single launch per step


def test_tensor_parallel_collectives_are_priced_with_latency():
    c = estimate(toy_source(), hw="h100", prompt=16, gen=8, batch=[1], rules=RULES, tp=2).configs[0]
    p = c.decode.analysis.time_parts()
    # 2 all-reduces per layer x 2 layers of a [1, 64] bf16 tensor: bandwidth is nothing, the alpha terms are all
    assert p["time_collectives_s"] > 4 * 5e-6
    models = {c.decode.analysis.timed_graph.get(n, BOUND).time_model for n in c.decode.analysis.timed_graph.nx.nodes}
    assert any(m.startswith("collective:") for m in models)
