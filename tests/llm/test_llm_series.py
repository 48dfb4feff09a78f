"""Exact sums of roofline times over decode steps (graphroof.llm.series)."""

from __future__ import annotations

import random

import pytest

from graphroof.counters.cost import Cost
from graphroof.llm.series import OpSeries, fit, peval, sum_max_poly, sum_poly
from graphroof.roofline import evaluate
from tests.conftest import T, W, node


def test_fit_recovers_polynomials():
    assert fit([3], [7]) == (7.0, 0.0, 0.0)
    assert fit([1, 3], [5, 11]) == pytest.approx((2.0, 3.0, 0.0))  # 2 + 3x
    c = fit([0, 2, 5], [1, 1 + 2 * 2 + 4 * 4, 1 + 2 * 5 + 4 * 25])  # 1 + 2x + 4x^2
    assert c == pytest.approx((1.0, 2.0, 4.0))


def test_sum_poly_closed_form():
    # sum_{x=3}^{6} (1 + 2x + x^2) = (16 + 25 + 36 + 49) = 126
    assert sum_poly((1, 2, 1), 3, 6) == 126
    assert sum_poly((5, 0, 0), 10, 9) == 0


def test_sum_max_poly_matches_brute_force():
    rng = random.Random(7)
    for _ in range(300):
        polys = [(rng.uniform(-50, 50), rng.uniform(-5, 5), rng.choice([0.0, rng.uniform(-0.1, 0.1)]))
                 for _ in range(rng.randint(1, 3))]
        lo = rng.randint(0, 40)
        hi = lo + rng.randint(0, 60)
        brute = sum(max(peval(p, x) for p in polys) for x in range(lo, hi + 1))
        assert sum_max_poly(polys, lo, hi) == pytest.approx(brute, rel=1e-9, abs=1e-9)


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


def test_op_series_decode_sum_is_exact(round_hw):
    """Affine costs in `past`, with the op crossing from compute- to memory-bound inside the range: the closed
    form equals evaluating every step."""
    lo, hi = 10, 200
    samples = {x: [(_attn_step(x), _attn_cost(_attn_step(x)))] for x in (lo, hi)}
    s = OpSeries(samples)
    sums = s.sums(0, round_hw, lo, hi)
    steps = [evaluate(_attn_cost(_attn_step(x)), round_hw, "bf16") for x in range(lo, hi + 1)]
    bounds = {b.bound for b in steps}
    assert bounds == {"compute", "memory"}  # the crossing happens inside the range
    n = hi - lo + 1
    assert sums.bound.t_s == pytest.approx(sum(b.t_s for b in steps) / n, rel=1e-12)
    assert sums.bound.t_realistic_s == pytest.approx(sum(b.t_realistic_s for b in steps) / n, rel=1e-12)
    # mean cost = cost at the mean context (affine): KV bytes 2 * 4 * (past+1) * 512 * 2 at past = 105
    assert sums.mean_cost.kv_read_bytes == pytest.approx(2 * 4 * 106 * 512 * 2)


def test_op_series_rejects_structure_change():
    from graphroof.errors import FrontendError

    a = [(node("x.a", [T("bf16", 2)], [T("bf16", 2)], name="a"), Cost())]
    b = [(node("x.b", [T("bf16", 2)], [T("bf16", 2)], name="b"), Cost())]
    with pytest.raises(FrontendError, match="changes structure"):
        OpSeries({1: a, 2: b})


def test_weight_only_op_is_constant(round_hw):
    op = node("my.lin", [T("bf16", 1, 64), W("bf16", 64, 64)], [T("bf16", 1, 64)])
    c = Cost(matrix_flops=2 * 64 * 64, weight_bytes=64 * 64 * 2, act_read_bytes=128, act_write_bytes=128)
    s = OpSeries({5: [(op, c)], 9: [(op, c)]})
    # 8192 + 256 bytes at 1 TB/s = 8.448 ns each step, whatever the context
    assert s.sums(0, round_hw, 5, 9).bound.t_s == pytest.approx(8448e-12)
