"""MoE expert GEMMs: how many experts a grouped GEMM's rows are split over, and what a launch per expert costs.

The counting rule of a grouped GEMM ``a [S, K] x b [E, K, N]`` (:mod:`graphroof.counters.rules.matmul`) already
reads the weights of the experts a step visits, ``E (1 - (1 - k/E)^T)`` under uniform top-k routing of T tokens
(:mod:`graphroof.frontends.moe`): the bytes are right.  The time model adds the shape: the ``S = T k`` rows are
split over the ``V`` visited experts, ``S / V`` rows each, and each expert's rows are tiled on their own::

    V     = weight bytes counted / one expert's weight bytes          (read back from the count: no double count)
    tiles = V * ceil(S / V / tm) * ceil(N / tn)                       (:func:`graphroof.timing.gemm_time_with`)

so a decode step's experts run at a handful of rows each (weight streaming of every visited expert), and a long
prefill's at ``S / E`` rows each (compute, with each expert's last tile partly empty).  Without a grouped GEMM
(runtime ``moe_grouped_gemm = False``: one GEMM launch per expert, as a loop over experts) each visited expert
also pays one GEMM's fixed time (:func:`per_expert_latency_s`).

Floats or numpy arrays alike.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import dtype_bits
from ..hardware.params import KernelTiming

__all__ = ["expert_weight_shape", "experts_in_step", "per_expert_latency_s"]


def expert_weight_shape(node: Any) -> tuple[int, int, int, float] | None:
    """(E, K, N, bytes of one expert's weight) of a grouped GEMM node's 3-D weight, or None (not a grouped GEMM)."""
    from ..graph import Role

    for t in getattr(node, "inputs", ()) or ():
        if t is not None and t.role is Role.WEIGHT and t.rank == 3:
            try:
                e, k, n = (int(d) for d in t.shape)
            except (TypeError, ValueError):
                return None
            return e, k, n, k * n * dtype_bits(t.dtype) / 8
    return None


def experts_in_step(weight_bytes: Any, expert_bytes: float, experts: int) -> Any:
    """Visited experts of one step, read back from the counted weight bytes (at least 1, at most E)."""
    v = np.clip(np.asarray(weight_bytes, dtype=float) / max(expert_bytes, 1.0), 1.0, float(experts))
    return float(v) if np.ndim(v) == 0 else v


def per_expert_latency_s(visited: Any, timing: KernelTiming, grouped: bool) -> Any:
    """Extra fixed time when each visited expert is its own GEMM launch (no grouped GEMM): ``(V - 1)`` GEMM
    latencies (the first is the kernel's own)."""
    if grouped:
        return 0.0 * np.asarray(visited) if np.ndim(visited) else 0.0
    return (np.asarray(visited, dtype=float) - 1.0) * timing.gemm_latency_s if np.ndim(visited) else \
        (float(visited) - 1.0) * timing.gemm_latency_s
