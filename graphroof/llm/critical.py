"""Critical batch: the batch at which a layer turns compute-bound, with exact bytes.

At a decode step every FLOP and byte of a layer is affine in the batch ``B`` (tokens per step): weights are
read once whatever ``B``, activations and KV-cache reads grow with ``B``.  So its roofline terms are
``t_compute(B) = c0 + c1 B`` and ``t_memory(B) = m0 + m1 B`` (and ``t_network``), taken from the counts at two
batches, and the layer is compute-bound from ``B* = (m0 - c0) / (c1 - m1)`` on.  For a linear layer
``[B, D] x [D, D]`` in bf16 this is ``2 B D^2 / peak = (2 B D + 2 D^2 + 2 B D) / bw``, i.e.
``B* = D * peak / (D * bw - 2 * peak)``, slightly above the textbook ``peak / bw`` that drops the activation
bytes (the B << D approximation).  A layer whose bytes grow as fast as its FLOPs (attention over a KV cache)
never turns compute-bound.  Ideal roofline (100% of peaks), as the textbook figure.

**Mixture of experts.**  A grouped expert GEMM reads the weights of the experts its tokens visit,
``E * (1 - (1 - k/E)^T)`` of them for ``T = t1 * B`` tokens under uniform routing
(:mod:`graphroof.frontends.moe`), so its weight bytes are not affine in ``B``: they grow like ``k * B`` experts
while ``B`` is small and stop at ``E``.  The memory term of such a layer is ``m0 + m1 B + W/bw * v(B) / E``
(``W`` all experts' weight bytes), concave in ``B``; ``t_compute - t_memory`` is then convex, negative at ``B = 0``
when the layer has weights, so it crosses zero once and the crossing is found by bisection.  The critical batch
is effectively per expert: an expert turns compute-bound when the ``B * k / E`` tokens it receives reach the
dense critical point, so an MoE layer needs about ``E / k`` times the batch of a dense layer of the expert's shape;
the row says how many tokens each expert receives at that batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ..counters.cost import Cost
from ..counters.rules.matmul import expected_experts
from ..graph import OpNode
from ..hardware import HardwareProfile
from ..roofline import compute_dtype, evaluate

__all__ = ["critical_batch", "critical_table"]


def critical_batch(c: tuple[float, float], others: Sequence[tuple[float, float]]) -> float | None:
    """Smallest ``B >= 0`` with ``c0 + c1 B >= o0 + o1 B`` for every other term; None when never.

    Returns 0.0 when the layer is compute-bound at any batch.
    """
    lo = 0.0
    for o0, o1 in others:
        dc0, dc1 = c[0] - o0, c[1] - o1
        if dc0 >= 0 and dc1 >= 0:
            continue
        if dc1 <= 0:
            return None
        lo = max(lo, -dc0 / dc1)
    return lo


_MoE = tuple[float, int, int, float]  # (all experts' weight time at full read, E, k, tokens per unit batch)


def _moe(op: OpNode, cost: Cost, hw: HardwareProfile, batch: int) -> tuple[float, _MoE] | None:
    """For a routed grouped GEMM (uniform routing, no override): (its weight time at *batch*, its MoE term)."""
    a = op.attrs
    e, k, t = a.get("moe_experts"), a.get("moe_top_k"), a.get("moe_tokens")
    if not e or not k or t is None or a.get("moe_experts_touched") is not None or not cost.weight_bytes:
        return None
    v = expected_experts(int(e), int(k), int(t))
    if v <= 0:
        return None
    tw = cost.weight_bytes / hw.mem_bw_bytes_per_s
    return tw, (tw * int(e) / v, int(e), int(k), float(t) / batch)


def _terms(ops: Sequence[tuple[OpNode, Cost]], hw: HardwareProfile, key: Callable[[OpNode], str], batch: int):
    """Per group: [t_compute, t_memory without routed expert weights, t_network] and the routed MoE terms."""
    out: dict[str, list[float]] = {}
    moe: dict[str, list[_MoE]] = {}
    for op, cost in ops:
        b = evaluate(cost, hw, compute_dtype(op))
        name = key(op)
        t = out.setdefault(name, [0.0, 0.0, 0.0])
        t[0] += b.t_compute_s
        t[1] += b.t_memory_s
        t[2] += b.t_network_s
        m = _moe(op, cost, hw, batch)
        if m is not None:
            t[1] -= m[0]
            moe.setdefault(name, []).append(m[1])
    return out, moe


def _moe_time(terms: Sequence[_MoE], batch: float) -> float:
    """Weight time of the routed experts at *batch*: ``W/bw * (1 - (1 - k/E)^(t * B))`` summed (= v(T)/E)."""
    return sum(w * (1.0 - (1.0 - min(k, e) / e) ** (t * max(batch, 0.0))) for w, e, k, t in terms)


def _critical_moe(c: tuple[float, float], others: Sequence[tuple[float, float]], terms: Sequence[_MoE],
                  ) -> float | None:
    """Smallest ``B >= 0`` where compute >= memory (with routed expert weights) and >= the other terms."""
    def gap(x: float) -> float:
        mem = others[0][0] + others[0][1] * x + _moe_time(terms, x)
        return c[0] + c[1] * x - max(mem, *(o0 + o1 * x for o0, o1 in others[1:]))

    if gap(0.0) >= 0:
        return 0.0
    hi = 1.0
    while gap(hi) < 0:  # convex gap, negative at 0: once positive it stays so
        hi *= 2
        if hi > 1e12:
            return None
    lo = 0.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if gap(mid) >= 0:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-9 * max(1.0, hi):
            break
    return hi


def critical_table(ops_b1: Sequence[tuple[OpNode, Cost]], ops_b2: Sequence[tuple[OpNode, Cost]], b1: int, b2: int,
                   hw: HardwareProfile, key: Callable[[OpNode], str]) -> list[dict]:
    """One row per group (``key(op)``): the critical batch (real-valued and rounded up) and its reason."""
    (t1, moe), (t2, _) = _terms(ops_b1, hw, key, b1), _terms(ops_b2, hw, key, b2)
    rows = []
    for name, a in t1.items():
        b = t2.get(name, a)
        slope = [(y - x) / (b2 - b1) for x, y in zip(a, b)]
        inter = [x - s * b1 for x, s in zip(a, slope)]
        if a[0] == 0 and b[0] == 0:
            rows.append({"name": name, "critical_batch": None, "critical_batch_exact": None,
                         "reason": "no FLOPs" if not a[2] else "collective (network-bound)"})
            continue
        others = [(inter[1], slope[1]), (inter[2], slope[2])]
        routed = moe.get(name)
        if routed:
            bstar = _critical_moe((inter[0], slope[0]), others, routed)
        else:
            bstar = critical_batch((inter[0], slope[0]), others)
        if bstar is None:
            reason = "never: its bytes grow as fast as its FLOPs with the batch"
            if a[2] > a[0]:
                reason = "never: network-bound"
            rows.append({"name": name, "critical_batch": None, "critical_batch_exact": None, "reason": reason})
        else:
            reason = "compute-bound at any batch" if bstar == 0 else "compute-bound from this batch on"
            row = {"name": name, "critical_batch": max(1, math.ceil(bstar - 1e-9)), "critical_batch_exact": bstar,
                   "reason": reason}
            if routed:
                _, e, k, t = routed[0]
                row["tokens_per_expert"] = bstar * t * min(k, e) / e
                row["reason"] = (f"{reason} (uniform routing: each of {e} experts then receives "
                                 f"{row['tokens_per_expert']:.3g} tokens per step)")
            rows.append(row)
    return rows
