"""Critical batch: the batch at which a layer turns compute-bound, with exact bytes.

At a decode step every FLOP and byte of a layer is affine in the batch ``B`` (tokens per step): weights are
read once whatever ``B``, activations and KV-cache reads grow with ``B``.  So its roofline terms are
``t_compute(B) = c0 + c1 B`` and ``t_memory(B) = m0 + m1 B`` (and ``t_network``), taken from the counts at two
batches, and the layer is compute-bound from ``B* = (m0 - c0) / (c1 - m1)`` on.  For a linear layer
``[B, D] x [D, D]`` in bf16 this is ``2 B D^2 / peak = (2 B D + 2 D^2 + 2 B D) / bw``, i.e.
``B* = D * peak / (D * bw - 2 * peak)``, slightly above the textbook ``peak / bw`` that drops the activation
bytes (the B << D approximation).  A layer whose bytes grow as fast as its FLOPs (attention over a KV cache)
never turns compute-bound.  Ideal roofline (100% of peaks), as the textbook figure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ..counters.cost import Cost
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


def _terms(ops: Sequence[tuple[OpNode, Cost]], hw: HardwareProfile, key: Callable[[OpNode], str]):
    out: dict[str, list[float]] = {}
    for op, cost in ops:
        b = evaluate(cost, hw, compute_dtype(op))
        t = out.setdefault(key(op), [0.0, 0.0, 0.0])
        t[0] += b.t_compute_s
        t[1] += b.t_memory_s
        t[2] += b.t_network_s
    return out


def critical_table(ops_b1: Sequence[tuple[OpNode, Cost]], ops_b2: Sequence[tuple[OpNode, Cost]], b1: int, b2: int,
                   hw: HardwareProfile, key: Callable[[OpNode], str]) -> list[dict]:
    """One row per group (``key(op)``): the critical batch (real-valued and rounded up) and its reason."""
    t1, t2 = _terms(ops_b1, hw, key), _terms(ops_b2, hw, key)
    rows = []
    for name, a in t1.items():
        b = t2.get(name, a)
        slope = [(y - x) / (b2 - b1) for x, y in zip(a, b)]
        inter = [x - s * b1 for x, s in zip(a, slope)]
        if a[0] == 0 and b[0] == 0:
            rows.append({"name": name, "critical_batch": None, "critical_batch_exact": None,
                         "reason": "no FLOPs" if not a[2] else "collective (network-bound)"})
            continue
        bstar = critical_batch((inter[0], slope[0]), [(inter[1], slope[1]), (inter[2], slope[2])])
        if bstar is None:
            reason = "never: its bytes grow as fast as its FLOPs with the batch"
            if a[2] > a[0]:
                reason = "never: network-bound"
            rows.append({"name": name, "critical_batch": None, "critical_batch_exact": None, "reason": reason})
        else:
            rows.append({"name": name, "critical_batch": max(1, math.ceil(bstar - 1e-9)),
                         "critical_batch_exact": bstar,
                         "reason": "compute-bound at any batch" if bstar == 0 else "compute-bound from this batch on"})
    return rows
