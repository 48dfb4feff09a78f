"""Costs as polynomials of (batch, context): interpolation helpers by hand, virtual traces equal to direct traces
(tiny Llama MHA, GQA, Mixtral MoE), the sweep's interpolated evaluation equal to one direct trace per point at
random points (also int4 weights and TP 2), estimate() over several batches equal to single-batch runs with fewer
traces, and the fallbacks (structure change, sliding windows)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from graphroof.graph import OpGraph, OpNode, TensorSpec
from graphroof.llm.poly import GraphGrid, GridPlan, NotPolynomial, grid_points, interp, lagrange
from graphroof.sweeps import sweep
from tests.llm.toy import RULES, toy_source

# -- helpers by hand ---------------------------------------------------------------------------------------------


def test_lagrange_weights_and_grid_points():
    # nodes 1, 3: at 2 the line is the mean (1/2, 1/2); at 5: (5-3)/(1-3) = -1, (5-1)/(3-1) = 2
    assert lagrange([1, 3], 2) == [0.5, 0.5]
    assert lagrange([1, 3], 5) == [-1.0, 2.0]
    # exactly 1 and 0 at the nodes (so a grid point is its own trace, bit for bit)
    assert lagrange([8, 16, 40], 16) == [0.0, 1.0, 0.0]
    # x^2 through 8, 16, 40 at 27: sum w_i x_i^2 = 729
    assert sum(w * x * x for w, x in zip(lagrange([8, 16, 40], 27), [8, 16, 40])) == pytest.approx(729)
    assert grid_points([5], 1) == (5,)
    assert grid_points([1, 2, 4, 8], 1) == (1, 8)
    assert grid_points(range(64, 641, 64), 2) == (64, 320, 640)  # 320 and 384 are equally near 352: the first


def test_interp_numbers_labels_and_refusals():
    w = GridPlan((1, 3), (8, 40), 1).weights(2, 24)  # b = 2, x = 24: the middle of both ranges
    # a dim b * x on the grid (1*8, 1*40, 3*8, 3*40) -> 2 * 24 = 48 (bilinear: exact)
    assert interp([8, 40, 24, 120], w) == 48
    # x + 1 -> 25; a constant stays; a float interpolates
    assert interp([9, 41, 9, 41], w) == 25
    assert interp([7, 7, 7, 7], w) == 7
    assert interp([0.5, 0.5, 1.5, 1.5], w) == pytest.approx(1.0)
    # labels: the numbers interpolated, the text kept
    assert interp(["int64[1,8]", "int64[1,40]", "int64[3,8]", "int64[3,40]"], w) == "int64[2,24]"
    t = [TensorSpec((b, x, 16), "bf16") for b in (1, 3) for x in (8, 40)]
    assert interp(t, w) == TensorSpec((2, 24, 16), "bf16")
    # not a whole number in between (x // 16 sampled at 8 and 40 is 0, 2 -> 1 at 24 happens to be whole; x % 3
    # gives 2, 1 -> 1.5) and text that differs are refused
    with pytest.raises(NotPolynomial):
        interp([2, 1, 2, 1], w)
    with pytest.raises(NotPolynomial):
        interp(["a", "b", "a", "b"], w)


def _chain(n_ops: int, x: int) -> OpGraph:
    g = OpGraph("chain")
    prev = None
    for i in range(n_ops):
        node = OpNode(f"op{i}", "aten.relu", (TensorSpec((x,), "fp32"),), (TensorSpec((x,), "fp32"),))
        g.add_op(node, [prev], [f"op{i}"])
        prev = f"op{i}"
    return g


def test_structure_change_is_refused():
    plan = GridPlan((1,), (8, 16), 1)
    with pytest.raises(NotPolynomial, match="structure"):
        GraphGrid(plan, {(1, 8): _chain(2, 8), (1, 16): _chain(3, 16)})
    grid = GraphGrid(plan, {(1, 8): _chain(2, 8), (1, 16): _chain(2, 16)})
    assert grid.at(1, 100).node("op1").outputs[0].shape == (100,)
    with pytest.raises(NotPolynomial):
        grid.at(2, 100)  # one batch sampled: other batches are not determined


# -- virtual traces equal real traces ---------------------------------------------------------------------------

H, HEADS, I, V = 64, 4, 128, 100


def _llama(kv_heads: int) -> dict:
    return dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=H, intermediate_size=I,
                num_hidden_layers=2, num_attention_heads=HEADS, num_key_value_heads=kv_heads, vocab_size=V,
                max_position_embeddings=512, torch_dtype="bfloat16")


MIXTRAL = dict(model_type="mixtral", architectures=["MixtralForCausalLM"], hidden_size=H, intermediate_size=I,
               num_hidden_layers=2, num_attention_heads=HEADS, num_key_value_heads=2, num_local_experts=8,
               num_experts_per_tok=2, vocab_size=V, max_position_embeddings=512, torch_dtype="bfloat16")
MODELS = {"llama": _llama(HEADS), "gqa": _llama(2), "moe": MIXTRAL}


@pytest.fixture(scope="module", params=list(MODELS))
def hf(request):
    pytest.importorskip("graphroof.frontends.torch.export", reason="needs the PyTorch frontend")
    pytest.importorskip("transformers")
    from graphroof.frontends.hf.source import HFSource

    return request.param, HFSource({**MODELS[request.param], "num_hidden_layers": 1}, name=f"tiny-{request.param}")


def test_virtual_trace_equals_the_direct_trace(hf):
    name, src = hf
    for fn, plan, point in ((src.prefill_graph, GridPlan((1, 4), (8, 16, 40), 2), (3, 27)),
                            (src.decode_graph, GridPlan((1, 4), (8, 40), 1), (6, 23))):
        grid = GraphGrid(plan, {p: fn(*p) for p in plan.points})
        virtual, real = grid.at(*point), fn(*point)
        assert list(virtual.nx.nodes) == list(real.nx.nodes)
        assert [n for n in real.nx.nodes if virtual.node(n) != real.node(n)] == []
        assert set(virtual.nx.edges) == set(real.nx.edges)
        if name == "moe":  # the router's token count is an interpolated attribute: 6 sequences x 1 token
            toks = {op.attrs["moe_tokens"] for op in virtual.ops() if "moe_tokens" in op.attrs}
            assert toks == ({3 * 27} if fn == src.prefill_graph else {6})


# -- the sweep's interpolated evaluation equals one direct trace per point ------------------------------------


def _close(fast, direct):
    assert len(fast.points) == len(direct.points)
    for a, b in zip(fast.points, direct.points):
        assert (a.batch, a.prompt, a.gen, a.hw, a.dtype) == (b.batch, b.prompt, b.gen, b.hw, b.dtype)
        assert a.ttft_s == pytest.approx(b.ttft_s, rel=1e-9)
        assert (a.tpot_s is None) == (b.tpot_s is None)
        if a.tpot_s is not None:
            assert a.tpot_s == pytest.approx(b.tpot_s, rel=1e-9)
        assert a.memory_bytes == pytest.approx(b.memory_bytes, rel=1e-9)
        assert (a.prefill_bound, a.decode_bound) == (b.prefill_bound, b.decode_bound)


def _random_axes(seed: int):
    rng = random.Random(seed)
    return (sorted(rng.sample(range(1, 17), 3)), sorted(rng.sample(range(9, 120), 3)),
            sorted(rng.sample(range(2, 40), 2)) + [1])


def test_sweep_interpolated_equals_direct_on_the_toy():
    b, p, g = _random_axes(0)
    kw = dict(hw="a100", batch=b, prompt=p, gen=g, weights=[None, "int4"], rules=RULES)
    fast = sweep(toy_source(), **kw)
    # prefill 2 batches x 3 prompts, decode 2 batches x 2 contexts, + the prefill that lists the parameters
    assert fast.traces == 2 * 3 + 2 * 2 + 1
    _close(fast, sweep(toy_source(), interpolate=False, **kw))


def test_sweep_interpolated_equals_direct_without_cache():
    kw = dict(hw="a100", batch=[1, 5], prompt=[10, 31], gen=[1, 7, 20], rules=RULES)
    fast = sweep(toy_source(kv=False), **kw)
    _close(fast, sweep(toy_source(kv=False), interpolate=False, **kw))


@pytest.mark.parametrize("name", list(MODELS))
def test_interpolated_figures_equal_direct_traces_at_random_points(name):
    pytest.importorskip("graphroof.frontends.torch.export", reason="needs the PyTorch frontend")
    pytest.importorskip("transformers")
    from graphroof.frontends.hf.source import HFSource
    from graphroof.hardware import load_hardware
    from graphroof.llm.phases import Pipeline
    from graphroof.llm.price import PricedModel
    from graphroof.llm.quant import Quant

    src = HFSource({**MODELS[name], "num_hidden_layers": 1}, name=f"tiny-{name}")
    rng = random.Random(name)
    batches, prompts = sorted(rng.sample(range(2, 30), 3)), sorted(rng.sample(range(9, 120), 4))
    gen = rng.randrange(3, 40)
    opts = {"llama": {"tp": 2}, "gqa": {"quant": Quant.parse("int4")}, "moe": {}}[name]
    hw = load_hardware("a100")
    fast = PricedModel(Pipeline(src, hw, **opts), batches, prompts, [1, gen])
    assert fast.interpolated
    # the middle batch and the prompt off the 3-point grid are interpolated; one more random point
    off = next(p for p in prompts if p not in fast._grids["prefill"].plan.xs)
    points = [(batches[1], off, gen), (batches[1], off, 1), (rng.choice(batches), rng.choice(prompts), gen)]
    direct = PricedModel(Pipeline(src, hw, **opts), batches, prompts, [1, gen], interpolate=False)
    B, P, G = (np.array(v) for v in zip(*points))
    f, d = fast.price(hw, B, P, G), direct.price(hw, B, P, G)
    assert list(f.prefill.bound) == list(d.prefill.bound) and list(f.decode.bound) == list(d.decode.bound)
    for x, y in ((f.ttft_s, d.ttft_s), (f.tpot_s, d.tpot_s), (f.memory["activation_peak_bytes"],
                 d.memory["activation_peak_bytes"]), (f.memory["kv_cache_bytes"], d.memory["kv_cache_bytes"])):
        np.testing.assert_allclose(x, y, rtol=1e-9)


def test_moe_expert_bytes_are_counted_not_interpolated():
    pytest.importorskip("graphroof.frontends.torch.export", reason="needs the PyTorch frontend")
    pytest.importorskip("transformers")
    from graphroof.frontends.hf.source import HFSource
    from graphroof.hardware import load_hardware
    from graphroof.llm.grids import KernelGrid, lattice, recounter
    from graphroof.llm.phases import Pipeline

    src = HFSource(MIXTRAL, name="tiny-mixtral")  # 2 decoder blocks
    pipe = Pipeline(src, load_hardware("a100"))
    plan = GridPlan((1, 9), (16, 48), 1)
    counted = [pipe.counted("decode", b, x) for b, x in plan.points]
    grid = KernelGrid(plan, counted, recounter(pipe, counted[0].counted.meta), lattice([1, 2, 5, 9], [16, 48]))
    ops = {grid.op_nodes[k][0].op for k in grid._used}
    # decode batch b: the router sends b tokens, 8 * (1 - 0.75^b) experts of 8 visited (2 at b=1, 7.40 at b=9);
    # the line through those would give 5.4 at b=5 instead of 8 * (1 - 0.75^5) = 6.10 -- the grouped GEMMs are
    # counted at each point; the embedding reads min(b, 100) rows: polynomial at these batches
    assert "aten._grouped_mm" in ops
    direct = sum(c.weight_bytes for _, c in pipe.counted("decode", 5, 30).kernel_ops)
    interp_wb = sum(m * c.weight_bytes for m, (_, c) in zip(grid.mult, grid.at(5, 30)))
    assert interp_wb == pytest.approx(direct, rel=1e-12)
    assert len(grid) < len(counted[0].kernels) / 1.5  # the two decoder blocks' kernels share groups


# -- estimate() over several batches --------------------------------------------------------------------------


def test_estimate_batches_interpolated_equal_single_batch_runs(hf):
    from graphroof.llm import estimate

    name, src = hf
    if name == "llama":
        pytest.skip("GQA and MoE cover it")
    traced: list[str] = []
    many = estimate(src, hw="a100", prompt=24, gen=9, batch=[1, 3, 8], progress=traced.append)
    # prefill at batches 1 and 8, decode at (1, 8) x (24, 31): batch 3 is interpolated
    assert sum("tracing" in m for m in traced) == 6
    for b in (3,):
        solo: list[str] = []
        one = estimate(src, hw="a100", prompt=24, gen=9, batch=b, progress=solo.append)
        # one batch: as many traces as before the grids (prefill; decode at both ends; the critical batch's line
        # at batch 4): the grid's points are those
        assert sum("tracing" in m for m in solo) == 4
        c, d = many[b], one[b]
        assert c.ttft_s == pytest.approx(d.ttft_s, rel=1e-9)
        assert c.tpot_s == pytest.approx(d.tpot_s, rel=1e-9)
        assert c.memory.total_bytes == pytest.approx(d.memory.total_bytes, rel=1e-9)
        assert c.memory.activation_peak_bytes == pytest.approx(d.memory.activation_peak_bytes, rel=1e-12)
        assert [r["critical_batch"] for r in c.critical] == [r["critical_batch"] for r in d.critical]
        assert c.prefill.analysis.ops == d.prefill.analysis.ops  # op rows (shapes included) as traced


def test_sliding_windows_are_traced_directly():
    from graphroof.llm.poly import poly_ok

    src = toy_source()
    assert poly_ok(src)
    from dataclasses import replace

    src.spec = replace(src.spec, windows=(None, 8))
    assert not poly_ok(src)



def test_estimate_traces_every_point_when_the_structure_changes():
    from graphroof.frontends.source import GraphSource
    from graphroof.graph import bind
    from graphroof.llm import estimate
    from tests.llm.toy import toy_graph

    base = toy_source()

    def prefill(batch, seq):  # one decoder block more from batch 3 on: the graphs cannot be interpolated
        g = toy_graph(L=3 if batch >= 3 else 2)
        return bind(g, {"batch": batch, "seq": seq})

    src = GraphSource(prefill, base.decode, base.spec)
    traced: list[str] = []
    r = estimate(src, hw="a100", prompt=16, gen=4, batch=[1, 2, 3], rules=RULES, progress=traced.append)
    assert any("prefill: every point traced" in n for n in r.notes)
    assert sum("prefill graph" in m for m in traced) == 3  # batches 1 and 3 (the grid), then 2 directly
    direct = estimate(src, hw="a100", prompt=16, gen=4, batch=2, rules=RULES)
    assert r[2].ttft_s == pytest.approx(direct[2].ttft_s, rel=1e-12)
