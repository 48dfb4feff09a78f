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
from ..fuse.runtimes import Runtime
from ..hardware.params import KernelTiming
from ..hardware.profile_cache import memo_of
from .aten import aten_floor_s
from .attention import AttentionDims, attention_dims, attention_time
from .conv import is_conv_key
from .gemm import _tile_heights, schedule_of
from .gemm_plan import GemmPlan, gemm_plan, gemv_rows_of, gemv_time_s, quantize_input_s, quantized_input_saved_bytes
from .kernel import attention_kernel, stream_kind
from .moe import experts_in_step, group_m_tiles, per_expert_latency_s
from .precision import gemm_ceiling, matmul_peak
from .profile import timing_of
from .quantgemm import dequant_then_gemm_bytes, dequant_time, scale_bytes
from .stream import priced_kind

__all__ = ["kernel_times", "gemm_times"]


def gemm_times(m: np.ndarray, n: np.ndarray, k: np.ndarray, hw, dtype: str,
               weight_bytes: np.ndarray | None, plan: GemmPlan | None = None,
               cost_bytes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(``t_s``, ``bytes``) of a GEMM kernel for arrays of shapes (batch 1), as the per-op model prices it
    (:func:`graphroof.timing.gemm_plan.gemm_kernel_time` without its epilogue terms): *plan* says weight-only
    quantization and MoE experts (None: a plain GEMM in *dtype*); ``bytes`` are the GEMM's bytes as counted
    (packed weights, no scales), to subtract from the kernel's counted bytes for its epilogue operands.

    *weight_bytes*: per element, 0 for "B's own bytes" (the scalar call's ``weight_bytes=None``)."""
    plan = plan or GemmPlan(dtype)
    t: KernelTiming = timing_of(hw)
    peak, key = matmul_peak(hw, plan.dtype, hw.matmul_precision)
    ceiling, _ = gemm_ceiling(hw, peak, key)
    in_b = dtype_bits(plan.dtype) / 8
    wb = np.zeros(m.shape) if weight_bytes is None else np.asarray(weight_bytes, dtype=float)
    groups = np.ones(m.shape)
    extra_lat: np.ndarray | float = 0.0
    if plan.experts:
        groups = np.asarray(experts_in_step(wb, plan.expert_bytes, plan.experts), dtype=float) * np.ones(m.shape)
        extra_lat = per_expert_latency_s(groups, t, plan.grouped)
    nw = groups if plan.experts else np.ones(m.shape)
    pre: np.ndarray | float = 0.0
    dq: np.ndarray | float = 0.0
    gm = gemv_rows_of(plan, m, hw, groups)  # the runtime's mat-vec kernel: packed weights, no dequant kernel
    if plan.bits and plan.variant == "dequant_then_gemm":
        pb = dequant_then_gemm_bytes(n, k, plan.bits, plan.group, in_b) * nw
        pre = np.where((pb != 0) & ~gm, pb / (hw.mem_bw_bytes_per_s * t.stream_efficiency("elementwise"))
                       + t.stream_latency_s, 0.0)
        scales = scale_bytes(n, k, plan.bits, plan.group) * nw
        packed = np.where(wb != 0, wb, k * n * plan.bits / 8 * nw) + scales
        b_bytes = np.where(gm, packed, k * n * in_b * nw)
        counted_adj = np.where(gm, -scales, -b_bytes + wb)
    elif plan.bits:
        scales = scale_bytes(n, k, plan.bits, plan.group) * nw
        b_bytes = np.where(wb != 0, wb, k * n * plan.bits / 8 * nw) + scales
        dq = dequant_time(m, n, k, t, hw, plan.variant)
        counted_adj = -scales
    else:
        b_bytes = np.where(wb != 0, wb, k * n * in_b)
        counted_adj = 0.0
    mf, nf, kf = m.astype(float), n.astype(float), k.astype(float)
    flops = 2.0 * mf * nf * kf * 1
    out_b = dtype_bits(plan.out_dtype) / 8 if plan.out_dtype and not plan.bits else in_b  # as gemm_kernel_time
    nbytes = (m * k * in_b + m * n * out_b) * 1 + b_bytes
    rate = ceiling * t.gemm_matrix_efficiency
    sms = t.sm_count
    stream_k, p = schedule_of(t, plan.schedule if not plan.bits else "auto")
    if sms:
        i_l2 = peak / t.gemm_l2_bw_bytes_per_s if t.gemm_l2_bw_bytes_per_s else 0.0
        tn = t.gemm_tile[1]
        heights = _tile_heights(t, bool(plan.bits) and plan.variant != "dequant_then_gemm")  # as gemm_time
        if t.gemm_tile_policy != "cover_m":  # "best": the configuration with the least compute time
            best = _compute(m, n, k, heights[0], tn, t, rate, in_b, i_l2, groups, stream_k, plan.balanced)
            for tm in heights[1:]:
                best = _lexmin(best, _compute(m, n, k, tm, tn, t, rate, in_b, i_l2, groups, stream_k,
                                              plan.balanced))
        else:  # the smallest height covering M, else the largest
            pick = np.full(m.shape, heights[0])
            for h in sorted(heights, reverse=True):
                pick = np.where(h >= m / groups, h, pick)
            best = _compute_per(m, n, k, pick, tn, t, rate, in_b, i_l2, groups, stream_k, plan.balanced)
        t_compute, _tiles, split, _waves, _cta, _tm = best
        l2 = hw.onchip_cache_bytes
        spill = (split > 1) & ~((split * m * n * 4 * 1 <= l2) if l2 else np.zeros(m.shape, dtype=bool))
        nbytes = np.where(spill, nbytes + 2.0 * split * m * n * 4 * 1, nbytes)
    else:
        t_compute = flops / rate
    t_compute = t_compute + dq
    t_memory = nbytes / (hw.mem_bw_bytes_per_s * t.gemm_mem_bw_efficiency)
    both = np.maximum(t_compute, t_memory) if not p else (t_compute ** p + t_memory ** p) ** (1.0 / p)
    zero = flops == 0
    g_t = np.where(zero, 0.0, both + t.gemm_latency_s)
    if plan.gemv_rows:  # the runtime's mat-vec kernel (only a preset with one: no work on the others' tables)
        gv = gemv_time_s(plan, m, nbytes, hw, groups)
        g_t = np.where(zero | np.isnan(gv), g_t, gv)
    g_bytes = np.where(zero, 0.0, nbytes)
    return pre + g_t + extra_lat, g_bytes + counted_adj


def _compute_per(m, n, k, tm, tn, t: KernelTiming, rate, in_bytes, i_l2, groups, stream_k=None, balanced=False):
    sms = t.sm_count
    tiles = np.asarray(group_m_tiles(m, groups, tm, 1, not balanced)).astype(np.int64) * np.ceil(n / tn).astype(np.int64) * 1
    split = np.where(tiles < sms, np.maximum(1, np.minimum(sms // np.maximum(tiles, 1),
                                                          k // max(1, t.gemm_split_k_min))), 1)
    waves = np.ceil(tiles * split / sms)
    w = np.maximum(1.0, tiles * split / sms) if (t.gemm_stream_k if stream_k is None else stream_k) else waves
    cta = 2.0 * tm * tn * np.ceil(k / split)
    starve = np.minimum(1.0, 2.0 * tm * tn / ((tm + tn) * in_bytes) / i_l2) if i_l2 else 1.0
    return w * cta / (rate / sms * starve), tiles, split, waves, cta, np.broadcast_to(tm, m.shape)


def _compute(m, n, k, tm, tn, t, rate, in_bytes, i_l2, groups, stream_k=None, balanced=False):
    return _compute_per(m, n, k, np.full(m.shape, tm), tn, t, rate, in_bytes, i_l2, groups, stream_k, balanced)


def _lexmin(a, b):
    """Elementwise lexicographic minimum of two tuples of arrays (as Python's ``min`` over tuples)."""
    take_b = np.zeros(a[0].shape, dtype=bool)
    decided = np.zeros(a[0].shape, dtype=bool)
    for x, y in zip(a, b):
        lt, gt = y < x, y > x
        take_b |= ~decided & lt
        decided |= lt | gt
    return tuple(np.where(take_b, y, x) for x, y in zip(a, b))


def _dims(node) -> AttentionDims:
    """:func:`attention_dims` of *node*, once per node object (nodes are immutable: their tensors are tuples of
    frozen specs)."""
    memo = memo_of(node)
    hit = memo.get("attention_dims")
    if hit is None:
        hit = memo["attention_dims"] = attention_dims(node)
    return hit


def kernel_times(kind: str, op_keys, dtype: str, cost: Mapping[str, np.ndarray],
                 mnk: tuple[np.ndarray, np.ndarray, np.ndarray] | None, hw,
                 runtime: Runtime | None = None, node=None) -> np.ndarray | None:
    """Kernel time without the launch (``t_realistic_s - t_launch_s`` of :func:`graphroof.roofline.evaluate`
    on a node of class *kind*) for arrays of cost fields (``matrix_flops`` ... ``net_bytes``); None for kinds
    computed only by the scalar model (collectives, GEMMs without a shape).  *runtime*: the engine preset, as
    :func:`graphroof.timing.kernel.kernel_time`'s; *node*: the kernel's node at any point of the range (its
    invariant facts: weight dtype, MoE experts, attention head dims)."""
    if hw.timing is None or kind == "comm" or (kind == "gemm" and mnk is None):
        return None
    if kind == "gemm" and any(is_conv_key(str(k)) for k in (op_keys or ())):
        return None  # convolutions: the scalar model (timing.conv)
    timing = timing_of(hw)
    pm, _ = hw.peak("matrix", dtype)
    pv, _ = hw.peak("vector", dtype)
    mf, vf = cost["matrix_flops"], cost["vector_flops"]
    nbytes = cost["weight_bytes"] + (cost["act_read_bytes"] + cost["act_write_bytes"]) + (
        cost["kv_read_bytes"] + cost["kv_write_bytes"])
    works = ((mf + vf) != 0) | (nbytes != 0) | (cost["net_bytes"] != 0)
    # each term is computed only by the kinds that read it (the same operations, in the same order)
    if kind in ("gemm", "vector", "pointwise", "reduction"):
        veff = pv * hw.vector_efficiency
        tv = np.where(vf != 0, vf / veff, 0.0)
    if kind == "gemm":
        assert mnk is not None
        plan = gemm_plan(node, dtype, hw, runtime)
        if plan.library != "cublas":
            return None  # another kernel family (DeepGEMM, timing.gemm): the scalar model
        g_t, g_bytes = gemm_times(*mnk, hw, plan.dtype, cost["weight_bytes"], plan)
        extra = np.maximum(0.0, nbytes - g_bytes - quantized_input_saved_bytes(plan, mnk[0], mnk[2]))
        out = np.maximum(g_t + extra / (hw.mem_bw_bytes_per_s * timing.gemm_mem_bw_efficiency), tv)
        if plan.quantize_input:  # its fp8 input quantize, a kernel of its own
            out = out + quantize_input_s(plan, mnk[0], mnk[2], hw)
    elif kind == "attention":
        shared = bool(getattr(runtime, "gqa_shared_kv", True)) if runtime is not None else True
        prep = bool(getattr(runtime, "attention_context_prep", False))
        out = attention_time(cost, _dims(node), hw, dtype, shared, attention_kernel(runtime), prep) * np.ones(mf.shape)
    elif kind in ("vector", "pointwise", "reduction"):
        sk = stream_kind(tuple(op_keys) if op_keys else ())
        eff = timing.stream_efficiency(priced_kind(sk, runtime))
        s = np.where(nbytes != 0, nbytes / (hw.mem_bw_bytes_per_s * eff) + timing.stream_latency_s, 0.0)
        out = np.maximum(np.maximum(s, tv + timing.stream_latency_s),
                         aten_floor_s(node, cost["act_write_bytes"], hw, runtime, timing.stream_latency_s))
    else:
        tc = mf / pm + vf / pv
        tm = nbytes / hw.mem_bw_bytes_per_s
        derated = np.maximum(np.where(mf != 0, tc / hw.matrix_efficiency, tc / hw.vector_efficiency),
                             tm / hw.mem_bw_efficiency)
        out = derated
    return np.where(works, out, 0.0)
