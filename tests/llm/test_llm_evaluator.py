"""The one pricing engine (graphroof.llm.evaluator): a phase's mean step over a range of contexts equals every
step evaluated by the roofline, the token accounting is written once, and the kernel groups price as their
kernels do."""

from __future__ import annotations

import numpy as np
import pytest

from graphroof.counters.cost import Cost
from graphroof.graph import COST, OpGraph
from graphroof.llm.evaluator import PhasePricer
from graphroof.llm.grids import KernelGrid
from graphroof.llm.phases import Counted
from graphroof.llm.poly import GridPlan, NotPolynomial
from graphroof.llm.tokens import decode_range, e2e_s, tokens_per_s
from graphroof.roofline import evaluate
from tests.conftest import T, W, node


def _attn_step(past: int, batch: int = 4):
    """One decode attention op over past+1 cached tokens: a (tiny) q read, K/V read from the cache."""
    kv = T("bf16", batch, past + 1, 512, role="kv_cache")
    return node("my.attn", [T("bf16", batch, 1, 512), kv, kv], [T("bf16", batch, 1, 512)], name="attn")


def _attn_cost(n, flops_per_key=100_000):
    q, k, _ = n.inputs
    # compute-bound for short contexts, memory-bound past ~114 keys (Tc = (8.2e7 + 1e5 k) / 1e14,
    # Tm = 8192 k / 1e12)
    return Cost(matrix_flops=flops_per_key * k.shape[1] + 8.2e7, kv_read_bytes=2 * k.nbytes,
                act_read_bytes=q.nbytes, act_write_bytes=n.outputs[0].nbytes)


def _counted(ops_costs) -> Counted:
    g = OpGraph("step")
    for op, c in ops_costs:
        g.add_op(op)
        g.set(op.name, COST, c)
    return Counted(g, g, None, None)  # type: ignore[arg-type]


def _grid(xs, make) -> KernelGrid:
    plan = GridPlan((4,), tuple(xs), len(xs) - 1)
    return KernelGrid(plan, [_counted(make(x)) for x in xs], lambda nodes: [])


def test_decode_mean_is_every_step_evaluated(round_hw):
    """Affine costs in `past`, with the op crossing from compute- to memory-bound inside the range: the mean
    step equals evaluating every step (ideal and realistic), and the first / last steps are those steps."""
    lo, hi = 10, 200
    grid = _grid((lo, hi), lambda x: [(_attn_step(x), _attn_cost(_attn_step(x)))])
    t = PhasePricer(grid, round_hw).totals([4], [lo], [hi])
    steps = [evaluate(_attn_cost(_attn_step(x)), round_hw, "bf16") for x in range(lo, hi + 1)]
    assert {b.bound for b in steps} == {"compute", "memory"}  # the crossing happens inside the range
    n = hi - lo + 1
    assert t.t_ideal_s[0] == pytest.approx(sum(b.t_s for b in steps) / n, rel=1e-12)
    assert t.t_realistic_s[0] == pytest.approx(sum(b.t_realistic_s for b in steps) / n, rel=1e-12)
    assert t.first_ideal_s[0] == pytest.approx(steps[0].t_s, rel=1e-12)
    assert t.last_realistic_s[0] == pytest.approx(steps[-1].t_realistic_s, rel=1e-12)
    # the terms are those of the mean cost: KV bytes 2 * 4 * (past+1) * 512 * 2 at the mean past 105
    assert t.t_memory_s[0] == pytest.approx((2 * 4 * 106 * 512 * 2 + 2 * 4 * 512 * 2) / 1e12, rel=1e-12)
    # and its bound: at 106 keys Tc = (8.2e7 + 1.06e7) / 1e14 = 926 ns > Tm = 876,544 B / 1e12 = 877 ns
    assert t.bound[0] == "compute"
    means, rows = PhasePricer(grid, round_hw).group_means(4, lo, hi)
    assert rows[0, 0] == pytest.approx(t.t_ideal_s[0], rel=1e-12)
    assert means[0, 5] == pytest.approx(2 * 4 * 106 * 512 * 2)  # kv_read_bytes of the mean step


def test_many_points_at_once_equal_one_at_a_time(round_hw):
    grid = _grid((10, 200), lambda x: [(_attn_step(x), _attn_cost(_attn_step(x)))])
    lo, hi = np.array([10, 10, 30, 55, 120]), np.array([10, 200, 90, 55, 199])
    together = PhasePricer(grid, round_hw).totals(np.full(5, 4), lo, hi)
    for i in range(5):
        one = PhasePricer(grid, round_hw).totals([4], [lo[i]], [hi[i]])
        assert one.t_realistic_s[0] == pytest.approx(together.t_realistic_s[i], rel=1e-12)


def test_node_at_is_one_object_per_point(monkeypatch):
    """The evaluator keys its kernel-time memo by the node's identity: a grid gives the same interpolated node for
    the same point, the right tensors at every point, also once its cache has been emptied."""
    from graphroof.llm import grids

    grid = _grid((10, 200), lambda x: [(_attn_step(x), _attn_cost(_attn_step(x)))])
    a = grid.node_at(0, 4, 50)
    assert grid.node_at(0, 4, 50) is a
    assert a.inputs[1].shape == (4, 51, 512)          # past 50: 51 cached tokens
    monkeypatch.setattr(grids, "NODE_CACHE", 2)
    for past in (60, 70, 80, 50):                     # the cache is emptied when full
        assert grid.node_at(0, 4, past).inputs[1].shape == (4, past + 1, 512)


def test_weight_only_op_is_constant(round_hw):
    op = node("my.lin", [T("bf16", 1, 64), W("bf16", 64, 64)], [T("bf16", 1, 64)])
    c = Cost(matrix_flops=2 * 64 * 64, weight_bytes=64 * 64 * 2, act_read_bytes=128, act_write_bytes=128)
    t = PhasePricer(_grid((5, 9), lambda x: [(op, c)]), round_hw).totals([4], [5], [9])
    # 8192 + 256 bytes at 1 TB/s = 8.448 ns each step, whatever the context
    assert t.t_ideal_s[0] == pytest.approx(8448e-12)
    # realistic: memory at 80% of the bandwidth + the 1 us launch of a working kernel
    assert t.t_realistic_s[0] == pytest.approx(8448e-12 / 0.8 + 1e-6)


def test_structure_change_is_not_interpolated():
    a = [(node("x.a", [T("bf16", 2)], [T("bf16", 2)], name="a"), Cost())]
    b = [(node("x.b", [T("bf16", 2)], [T("bf16", 2)], name="b"), Cost())]
    with pytest.raises(NotPolynomial):
        KernelGrid(GridPlan((1,), (1, 2), 1), [_counted(a), _counted(b)], lambda nodes: [])


def test_token_accounting():
    # gen 5 with a KV cache: the first token from the prefill, 4 decode steps at past = prompt .. prompt + 3
    assert decode_range(100, 5) == (100, 103)
    assert decode_range(100, 1) == (100, 100)            # no decode step (TPOT is not used)
    # without a cache each step recomputes prompt + j tokens, j = 1 .. gen - 1
    assert decode_range(100, 5, False) == (101, 104)
    lo, hi = decode_range(np.array([100, 7]), np.array([5, 1]))
    assert list(lo) == [100, 7] and list(hi) == [103, 7]
    # e2e = 0.2 + 4 * 0.01 = 0.24 s; 8 sequences x 5 tokens / 0.24 s = 166.67 tok/s
    assert e2e_s(0.2, 0.01, 5) == pytest.approx(0.24)
    assert tokens_per_s(8, 5, 0.24) == pytest.approx(8 * 5 / 0.24)
    assert e2e_s(0.2, None, 1) == 0.2
    arr = e2e_s(np.array([0.2, 0.3]), np.array([0.01, np.nan]), np.array([5, 1]))
    assert list(arr) == pytest.approx([0.24, 0.3])


def test_an_eager_naive_attention_prices_its_other_kernels_as_the_per_op_model_does():
    """The evaluator adds an eager naive attention's layout copies, scaling and register softmax
    (graphroof.timing.aten.eager_attention_device_s) from the step's own costs: one step equals the per-op
    model (roofline.evaluate) of the same kernel, less its launch (replayed from a CUDA graph)."""
    from graphroof.counters import count
    from graphroof.counters.settings import CountSettings
    from graphroof.fuse import fuse
    from graphroof.fuse.runtimes import get_runtime
    from graphroof.hardware import load_hardware
    from graphroof.timing.aten import eager_attention_device_s
    from graphroof.validate.torchgpu import attention_graph

    hw = load_hardware("h200-sxm")
    rt = get_runtime("pytorch-cuda-graph")
    g = attention_graph(2, 32, 32, 4096, 4096, 64, False, "fp16")  # 4,096 keys: the register softmax
    count(g, settings=CountSettings(attention="naive", causal="full"))
    kg = fuse(g, rt).as_opgraph(g)
    (k,) = list(kg.ops())
    cost = kg.get(k.name, COST)
    assert eager_attention_device_s(k, cost, hw, rt) > 1e-3  # the softmax and copies: milliseconds
    grid = KernelGrid(GridPlan((2,), (4096,), 0), [Counted(g, kg, None, None)], lambda nodes: [])
    t = PhasePricer(grid, hw, cuda_graphs=True, runtime=rt).totals([2], [4096], [4096])
    want = evaluate(cost, hw, "fp16", node=k, runtime=rt)
    assert t.t_realistic_s[0] == pytest.approx(want.t_realistic_s - want.t_launch_s, rel=1e-9)
