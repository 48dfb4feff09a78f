"""Fused (flash) attention kernels: prefill ramp by head dim and length, decode K/V reads per KV head.

A flash-attention kernel tiles the queries over the SMs and streams K / V blocks past each query block, keeping
scores on chip.  Per (query, key) pair it does ``2 (d + dv)`` matrix FLOPs (``Q K^T`` and ``P V``) and one
exponential on the special-function units; per query row it pays a fixed pipeline fill / epilogue (load the Q
tile, prime the K / V pipeline, rescale and write O), worth ``attn_fill_keys`` pairs of work::

    pairs     = matrix FLOPs / (2 (d + dv))                         (from the counted cost)
    rows      = O bytes / (dv * bytes per element)                  (query rows x heads)
    t_pair    = 2 (d + dv) / (achievable * attn_matrix_efficiency) + 1 / attn_exp_per_s
    t_compute = (pairs + rows * attn_fill_keys) * t_pair
    t_memory  = (Q + O + K/V read * g + K/V written) / (mem_bw * gemm_mem_bw_efficiency)
    t         = overlap(t_compute, t_memory) + gemm_latency_s        (the GEMM's p-norm overlap)

* head dim: the exponential per pair is a fixed cost, so d = 64 runs at a lower fraction of the matmul rate than
  d = 128 (H100 SDPA: 457 vs 592 TFLOP/s at 16k tokens);
* length: short sequences pay the per-row fill (512 tokens run at a quarter of the long-sequence rate);
* decode (one query row per sequence): the K / V stream dominates; ``g = 1`` when the kernel reads each KV head
  once for its whole GQA group (runtime ``gqa_shared_kv = True``), ``g = Hq / Hkv`` when it reads K / V once per
  query head (older decoding kernels);
* long contexts at small batch: split-K (flash decoding) keeps every SM streaming, so no occupancy cap is applied;
* a kernel that writes the scores (``--attention naive``: at least 2 elements per pair) gets no per-row fill.

``achievable`` is the device's large-GEMM ceiling in the attention's dtype (:func:`graphroof.timing.precision.
gemm_ceiling`); ``attn_exp_per_s`` defaults to the SFU rate derived from the vector fp32 peak (16 exponentials
per clock per SM against 128 fp32 lanes: ``fp32 peak / 2 / 8``).  Floats or numpy arrays alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import dtype_bits

__all__ = ["AttentionDims", "attention_dims", "attention_time", "exp_rate"]


@dataclass(frozen=True)
class AttentionDims:
    """The shape facts of an attention kernel that do not change with batch or context."""

    head_dim: int = 128
    v_head_dim: int = 128
    gqa_group: int = 1          # query heads per KV head
    out_bytes: float = 2.0      # bytes per element of O


def attention_dims(node: Any) -> AttentionDims:
    """Head dims and GQA group of an attention node (inputs q, k, v as ``[..., H, L, D]``); defaults when the
    tensors do not say."""
    ins = list(getattr(node, "inputs", ()) or ())
    try:
        q, k, v = ins[0], ins[1], ins[2]
        d, dv = int(q.shape[-1]), int(v.shape[-1])
        group = 1
        if q.rank == 4 and k.rank == 4 and int(k.shape[1]) > 0 and int(q.shape[1]) % int(k.shape[1]) == 0:
            group = int(q.shape[1]) // int(k.shape[1])
        outs = getattr(node, "outputs", ()) or ()
        ob = dtype_bits(outs[0].dtype) / 8 if outs and outs[0] is not None else dtype_bits(q.dtype) / 8
        return AttentionDims(d, dv, group, ob)
    except (IndexError, AttributeError, TypeError, ValueError):
        return AttentionDims()


def exp_rate(hw: Any) -> float:
    """Softmax exponentials per second: the profile's ``attn_exp_per_s``, else ``vector fp32 peak / 16``."""
    from .profile import timing_of

    t = timing_of(hw)
    if t.attn_exp_per_s:
        return t.attn_exp_per_s
    fp32 = hw.vector_peak_flops_per_s.get("fp32") or hw.peak("vector", "fp32")[0]
    return fp32 / 16


def attention_time(cost: Mapping[str, Any], dims: AttentionDims, hw: Any, dtype: str,
                   gqa_shared_kv: bool = True) -> Any:
    """Kernel time (no launch) of a fused attention kernel with counted *cost* fields (floats or arrays)."""
    from .precision import gemm_ceiling, matmul_peak
    from .profile import timing_of

    t = timing_of(hw)
    peak, key = matmul_peak(hw, dtype if dtype in hw.matrix_peak_flops_per_s else "fp16", "high")
    ceiling, _ = gemm_ceiling(hw, peak, key)
    eff = t.attn_matrix_efficiency if t.attn_matrix_efficiency is not None else t.gemm_matrix_efficiency
    width = 2.0 * (dims.head_dim + dims.v_head_dim)
    mf = np.asarray(cost["matrix_flops"], dtype=float)
    pairs = mf / width
    aw = np.asarray(cost["act_write_bytes"], dtype=float)
    rows = np.minimum(aw / (dims.v_head_dim * dims.out_bytes), pairs)
    # a kernel writing >= 2 elements per (query, key) pair materialises the scores (the "naive" byte model): not
    # a pipelined flash kernel, and O's rows cannot be read from its bytes: no per-row fill
    rows = np.where(aw >= 2.0 * pairs * dims.out_bytes, 0.0, rows)
    t_pair = width / (ceiling * eff) + 1.0 / exp_rate(hw)
    t_compute = (pairs + rows * t.attn_fill_keys) * t_pair
    g = 1.0 if gqa_shared_kv else float(dims.gqa_group)
    nbytes = (np.asarray(cost["act_read_bytes"], dtype=float) + cost["act_write_bytes"] + g * cost["kv_read_bytes"]
              + cost["kv_write_bytes"] + cost["weight_bytes"])
    t_memory = nbytes / (hw.mem_bw_bytes_per_s * t.gemm_mem_bw_efficiency)
    p = t.gemm_overlap_exponent
    both = np.maximum(t_compute, t_memory) if not p else (t_compute ** p + t_memory ** p) ** (1.0 / p)
    out = both + t.gemm_latency_s
    return float(out) if np.ndim(out) == 0 else out
