"""The kernel-time model over many shapes at once (numpy), for one kernel whose cost varies along a range.

A decode phase's realistic time samples the ``[timing]`` model at up to 64 steps per kernel
(:meth:`graphroof.llm.series.OpSeries.sums`); a sweep over prompts and gens asks for thousands of such steps.
:func:`kernel_times` gives :func:`graphroof.timing.kernel.kernel_time` (and the roofline terms that
:func:`graphroof.roofline.evaluate` hands it) for arrays of costs and GEMM shapes, elementwise, with the same
operations in the same order, so each element equals the scalar model to float rounding.  Kernel kinds:
``gemm`` (tile / wave quantisation, split-K, weight streaming), ``attention``, streaming kinds and the derated
roofline; collectives return None (the caller uses the scalar model).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..dtypes import dtype_bits
from ..hardware.params import KernelTiming
from .gemm import _tile_heights
from .kernel import stream_kind
from .precision import matmul_peak
from .profile import timing_of

__all__ = ["kernel_times", "gemm_times"]


def gemm_times(m: np.ndarray, n: np.ndarray, k: np.ndarray, hw, dtype: str,
               weight_bytes: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(``t_s``, ``bytes``) of :func:`graphroof.timing.gemm_time` for arrays of shapes (batch 1).

    *weight_bytes*: per element, 0 for "B's own bytes" (the scalar call's ``weight_bytes=None``)."""
    t: KernelTiming = timing_of(hw)
    peak, _ = matmul_peak(hw, dtype, "high")
    in_b = dtype_bits(dtype) / 8
    out_b = in_b
    mf, nf, kf = m.astype(float), n.astype(float), k.astype(float)
    flops = 2.0 * mf * nf * kf * 1
    b_bytes = k * n * in_b * 1
    if weight_bytes is not None:
        b_bytes = np.where(weight_bytes != 0, weight_bytes, b_bytes)
    nbytes = (m * k * in_b + m * n * out_b) * 1 + b_bytes
    rate = peak * t.gemm_matrix_efficiency
    sms = t.sm_count
    if sms:
        i_l2 = peak / t.gemm_l2_bw_bytes_per_s if t.gemm_l2_bw_bytes_per_s else 0.0
        tn = t.gemm_tile[1]
        heights = _tile_heights(t)
        if t.gemm_tile_policy != "cover_m":  # "best": the configuration with the least compute time
            best = _compute(m, n, k, heights[0], tn, t, rate, in_b, i_l2)
            for tm in heights[1:]:
                best = _lexmin(best, _compute(m, n, k, tm, tn, t, rate, in_b, i_l2))
        else:  # the smallest height covering M, else the largest
            pick = np.full(m.shape, heights[0])
            for h in sorted(heights, reverse=True):
                pick = np.where(h >= m, h, pick)
            best = _compute_per(m, n, k, pick, tn, t, rate, in_b, i_l2)
        t_compute, _tiles, split, _waves, _cta, _tm = best
        nbytes = np.where(split > 1, nbytes + 2.0 * split * m * n * 4 * 1, nbytes)
    else:
        t_compute = flops / rate
    t_memory = nbytes / (hw.mem_bw_bytes_per_s * t.gemm_mem_bw_efficiency)
    p = t.gemm_overlap_exponent
    both = np.maximum(t_compute, t_memory) if not p else (t_compute ** p + t_memory ** p) ** (1.0 / p)
    zero = flops == 0
    return np.where(zero, 0.0, both + t.gemm_latency_s), np.where(zero, 0.0, nbytes)


def _compute_per(m, n, k, tm, tn, t: KernelTiming, rate, in_bytes, i_l2):
    sms = t.sm_count
    tiles = np.ceil(m / tm).astype(np.int64) * np.ceil(n / tn).astype(np.int64) * 1
    split = np.where(tiles < sms, np.maximum(1, np.minimum(sms // np.maximum(tiles, 1),
                                                          k // max(1, t.gemm_split_k_min))), 1)
    waves = np.ceil(tiles * split / sms)
    cta = 2.0 * tm * tn * np.ceil(k / split)
    starve = np.minimum(1.0, 2.0 * tm * tn / ((tm + tn) * in_bytes) / i_l2) if i_l2 else 1.0
    return waves * cta / (rate / sms * starve), tiles, split, waves, cta, np.broadcast_to(tm, m.shape)


def _compute(m, n, k, tm, tn, t, rate, in_bytes, i_l2):
    return _compute_per(m, n, k, np.full(m.shape, tm), tn, t, rate, in_bytes, i_l2)


def _lexmin(a, b):
    """Elementwise lexicographic minimum of two tuples of arrays (as Python's ``min`` over tuples)."""
    take_b = np.zeros(a[0].shape, dtype=bool)
    decided = np.zeros(a[0].shape, dtype=bool)
    for x, y in zip(a, b):
        lt, gt = y < x, y > x
        take_b |= ~decided & lt
        decided |= lt | gt
    return tuple(np.where(take_b, y, x) for x, y in zip(a, b))


def kernel_times(kind: str, op_keys, dtype: str, cost: Mapping[str, np.ndarray],
                 mnk: tuple[np.ndarray, np.ndarray, np.ndarray] | None, hw) -> np.ndarray | None:
    """Kernel time without the launch (``t_realistic_s - t_launch_s`` of :func:`graphroof.roofline.evaluate`
    on a node of class *kind*) for arrays of cost fields (``matrix_flops`` ... ``net_bytes``); None for kinds
    computed only by the scalar model (collectives, GEMMs without a shape)."""
    if hw.timing is None or kind == "comm" or (kind == "gemm" and mnk is None):
        return None
    timing = timing_of(hw)
    pm, _ = hw.peak("matrix", dtype)
    pv, _ = hw.peak("vector", dtype)
    mf, vf = cost["matrix_flops"], cost["vector_flops"]
    nbytes = cost["weight_bytes"] + (cost["act_read_bytes"] + cost["act_write_bytes"]) + (
        cost["kv_read_bytes"] + cost["kv_write_bytes"])
    tc = mf / pm + vf / pv
    tm = nbytes / hw.mem_bw_bytes_per_s
    works = ((mf + vf) != 0) | (nbytes != 0) | (cost["net_bytes"] != 0)
    veff = pv * hw.vector_efficiency
    tv = np.where(vf != 0, vf / veff, 0.0)
    if kind == "gemm":
        assert mnk is not None
        gd = dtype if dtype in hw.matrix_peak_flops_per_s or dtype == "fp32" else "fp16"
        g_t, g_bytes = gemm_times(*mnk, hw, gd, cost["weight_bytes"])
        extra = np.maximum(0.0, nbytes - g_bytes)
        out = np.maximum(g_t + extra / (hw.mem_bw_bytes_per_s * timing.gemm_mem_bw_efficiency), tv)
    elif kind in ("vector", "pointwise", "reduction"):
        sk = stream_kind(tuple(op_keys) if op_keys else ())
        eff = timing.stream_efficiency(sk)
        s = np.where(nbytes != 0, nbytes / (hw.mem_bw_bytes_per_s * eff) + timing.stream_latency_s, 0.0)
        out = np.maximum(s, tv + timing.stream_latency_s)
    else:
        derated = np.maximum(np.where(mf != 0, tc / hw.matrix_efficiency, tc / hw.vector_efficiency),
                             tm / hw.mem_bw_efficiency)
        out = derated + timing.gemm_latency_s if kind == "attention" else derated
    return np.where(works, out, 0.0)
