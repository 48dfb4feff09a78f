"""Fused (flash) attention kernels: prefill ramp by head dim and length, decode K/V reads per KV head.

A flash-attention kernel tiles the queries over the SMs and streams K / V blocks past each query block, keeping
scores on chip.  Per (query, key) pair it does ``2 (d + dv)`` matrix FLOPs (``Q K^T`` and ``P V``) and one
exponential on the special-function units; per query row it pays a fixed pipeline fill / epilogue (load the Q
tile, prime the K / V pipeline, rescale and write O), worth ``attn_fill_keys`` pairs of work::

    pairs     = matrix FLOPs / (2 (d + dv))                         (from the counted cost)
    rows      = O bytes / (dv * bytes per element)                  (query rows x heads)
    t_pair    = 2 (d + dv) / (achievable * attn_matrix_efficiency) + 1 / attn_exp_per_s
    t_compute = (pairs + rows * (attn_fill_keys + diag) + tail) * t_pair     (diag, tail: causal only, below)
    t_memory  = (Q + O + K/V read * g + K/V written) / (mem_bw * gemm_mem_bw_efficiency)   (g > 1: see below)
    t         = overlap(t_compute, t_memory) + gemm_latency_s        (the GEMM's p-norm overlap; flash2: max)

* head dim: the exponential per pair is a fixed cost, so d = 64 runs at a lower fraction of the matmul rate than
  d = 128 (H100 SDPA: 457 vs 592 TFLOP/s at 16k tokens);
* length: short sequences pay the per-row fill (512 tokens run at a quarter of the long-sequence rate);
* causal mask (:func:`causal_terms`): the diagonal block of every query tile is computed in full (128 keys per row)
  and the launch ends with a tail (its tiles grow along the query axis and are dispatched shortest first): with
  them the H100 cuDNN rows give one pair rate and one fill, causal or not (the fill was 481 keys when fitted on
  causal rows alone, 90 now);
* decode (one query row per sequence): the K / V stream dominates; ``g = 1`` when the kernel reads each KV head
  once for its whole GQA group (runtime ``gqa_shared_kv = True``), ``g = Hq / Hkv`` when it reads K / V once per
  query head (older decoding kernels): the repeated reads hit the L2 (the group's blocks run side by side), so
  DRAM moves K / V once and the L2 read bandwidth ``l2_read_bw_bytes_per_s`` caps the ``g`` reads
  (:func:`kv_read_time`; without it all ``g`` reads come from DRAM); such a kernel has one query row per thread
  block in decode, too few for a tensor-core MMA (16 rows), so its dot products run on the CUDA cores at the
  vector fp32 peak (``t_pair = 2 (d + dv) / fp32 peak + 1 / attn_exp_per_s``);
* long contexts at small batch: split-K (flash decoding) keeps every SM streaming, so no occupancy cap is applied;
* a kernel that writes the scores (``--attention naive``: at least 2 elements per pair) gets no per-row fill;
* kernel family (*kernel*: the runtime preset's ``[kernels].attention_kernel``): ``auto`` / ``cudnn`` / ``flash3``
  are the device's native kernel (the constants above; on Hopper: wgmma + TMA, softmax overlapped: the H100 fit's
  rows ran PyTorch's default SDPA backend there, cuDNN); ``flash2`` is FlashAttention-2,
  written for Ampere's synchronous ``mma.sync`` + ``cp.async`` (:func:`sync_pair_terms`): its matmuls run at the
  profile's ``attn_sync_matrix_flops_per_s`` (absent: the native rate, as on Ampere where it is the native
  kernel), its per-row fill is the same *time* as the native kernel's (fewer keys of its slower work), and each
  thread block computes a full query tile of ``kBlockM`` rows (:func:`fa2_block_m`: 128, or 64 at head dims 224 /
  256 where the device's shared memory says so, the profile's ``smem_per_sm_bytes``), so a one-token decode pays
  128 (64) rows of MMA and exponentials per (sequence, KV head) block (the query heads of a GQA group fill the
  tile's rows first).  Where its thread blocks (sequences x heads x query tiles) reach 80% of the SMs it splits
  no K / V (FA2 ``flash_api.cpp`` ``num_splits_heuristic``: ``batch_nheads_mblocks >= 0.8 * num_SMs`` -> one
  split), so its blocks, all the same work without a causal mask, run in whole waves: the compute time is
  ``ceil(blocks / SMs) * SMs / blocks`` times the whole-chip one (:func:`fa2_wave_factor`; 320 blocks on 132 SMs:
  3 waves for 2.42 waves of work, x 1.24).  Fewer blocks: split-K fills the machine (below); a causal launch: its
  tail (:func:`causal_terms`).

* plugin context kernels (runtime ``attention_context_prep``, TensorRT-LLM 0.5 / 0.6): a prefill attention also
  runs the plugin's offset kernels and its bias / rotary / KV-cache-write kernel (:func:`context_prep_s`: stream
  latencies and that kernel's bytes at the elementwise rate; :func:`context_prep_launches` more launches).  The
  QKV GEMM's fused epilogue (rotary, K / V appended in the cache dtype) is left as counted: it stands for the
  GEMM's packed QKV output.

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
from ..errors import InputError
from ..fuse.classify import attention_is_causal, counted_flash
from ..fuse.preset_file import ATTENTION_KERNELS
from ..hardware.profile_cache import memo_of
from .fa2 import (
    FA2_BLOCK_M,
    fa2_block_m,
    fa2_row_padding,
    fa2_wave_factor,
    sync_pair_terms,
)

__all__ = ["AttentionDims", "attention_dims", "attention_is_causal", "attention_time", "exp_rate", "kv_read_time",
           "sync_pair_terms", "fa2_block_m", "fa2_row_padding", "fa2_wave_factor", "causal_terms", "context_prep_bytes", "context_prep_launches",
           "context_prep_s", "writes_scores", "ATTENTION_KERNELS", "FA2_BLOCK_M", "CAUSAL_BLOCK", "CAUSAL_TAIL", "CONTEXT_PREP_KERNELS"]


@dataclass(frozen=True)
class AttentionDims:
    """The shape facts of an attention kernel that do not change with batch or context."""

    head_dim: int = 128
    v_head_dim: int = 128
    gqa_group: int = 1          # query heads per KV head
    out_bytes: float = 2.0      # bytes per element of O
    causal: bool = False        # a causal mask (is_causal, a causal mask input, ONNX unidirectional / GQA)
    kv_bytes: float = 2.0       # bytes per element of K / V as the kernel reads them (the KV cache's dtype)
    flash: bool = False         # counted under the flash byte model: its writes are O alone (fuse.classify.counted_flash)


def attention_dims(node: Any) -> AttentionDims:
    """Head dims and GQA group of an attention node (inputs q, k, v as ``[..., H, L, D]``; a device's group under
    a TP split above the KV heads, :mod:`graphroof.llm.tp`); defaults when the tensors do not say."""
    ins = list(getattr(node, "inputs", ()) or ())
    try:
        q, k, v = ins[0], ins[1], ins[2]
        d, dv = int(q.shape[-1]), int(v.shape[-1])
        group = 1
        if q.rank == 4 and k.rank == 4 and int(k.shape[1]) > 0 and int(q.shape[1]) % int(k.shape[1]) == 0:
            group = int(q.shape[1]) // int(k.shape[1])
            tp = (getattr(node, "attrs", None) or {}).get("tp_shard") or {}
            if tp.get("kv_split"):  # TP above the KV heads: a device's H / N query heads share its one KV head
                group = max(1, group * int(tp["kv_split"]) // int(tp["world_size"]))
        outs = getattr(node, "outputs", ()) or ()
        ob = dtype_bits(outs[0].dtype) / 8 if outs and outs[0] is not None else dtype_bits(q.dtype) / 8
        return AttentionDims(d, dv, group, ob, attention_is_causal(node), dtype_bits(k.dtype) / 8,
                             counted_flash(node))
    except (IndexError, AttributeError, TypeError, ValueError):
        return AttentionDims()


#: rows of one tensor-core MMA (m16n8k16): fewer query rows per thread block leave the MMA mostly empty
MMA_MIN_ROWS = 16
def vector_fp32_peak(hw: Any) -> float:
    """The CUDA cores' fp32 FLOP/s (the profile's vector fp32 peak)."""
    return float(hw.vector_peak_flops_per_s.get("fp32") or hw.peak("vector", "fp32")[0])


def exp_rate(hw: Any) -> float:
    """Softmax exponentials per second: the profile's ``attn_exp_per_s``, else ``vector fp32 peak / 16``."""
    from .profile import timing_of

    t = timing_of(hw)
    if t.attn_exp_per_s:
        return t.attn_exp_per_s
    fp32 = hw.vector_peak_flops_per_s.get("fp32") or hw.peak("vector", "fp32")[0]
    return fp32 / 16


def kv_read_time(rest_bytes: Any, kv_bytes: Any, g: float, dram_bytes_per_s: float,
                 l2_bytes_per_s: float | None) -> Any:
    """Memory time of an attention kernel that reads K / V *g* times (once per query head of a GQA group).

    The ``g`` query heads of one KV head are neighbouring thread blocks (the grid's fastest index), resident at the
    same time, so after the first reads a line from DRAM the other ``g - 1`` find it in the L2: DRAM moves K / V
    once, the L2 delivers it ``g`` times, and the slower of the two sets the time::

        t = max((rest + kv) / dram, (rest + g kv) / l2)

    Without an L2 read bandwidth (*l2_bytes_per_s* None) every read comes from DRAM: ``(rest + g kv) / dram``."""
    if not l2_bytes_per_s or g <= 1.0:
        return (rest_bytes + g * kv_bytes) / dram_bytes_per_s
    return np.maximum((rest_bytes + kv_bytes) / dram_bytes_per_s, (rest_bytes + g * kv_bytes) / l2_bytes_per_s)


def _constants(hw: Any, dtype: str) -> tuple[Any, float, float, float]:
    """(timing constants, large-GEMM ceiling, matrix efficiency, exponentials per second) of an attention kernel
    in *dtype* on *hw*: pure functions of the immutable profile, derived once per (profile, dtype)."""
    memo = memo_of(hw)
    key = ("attention", dtype)
    hit = memo.get(key)
    if hit is None:
        from .precision import gemm_ceiling, matmul_peak
        from .profile import timing_of

        t = timing_of(hw)
        peak, pk = matmul_peak(hw, dtype if dtype in hw.matrix_peak_flops_per_s else "fp16", "high")
        ceiling, _ = gemm_ceiling(hw, peak, pk)
        eff = t.attn_matrix_efficiency if t.attn_matrix_efficiency is not None else t.gemm_matrix_efficiency
        hit = memo[key] = (t, ceiling, eff, exp_rate(hw))
    return hit


#: query rows (and keys) per tile of a causal flash kernel's diagonal block: FA2's kBlockM (above); the Hopper
#: kernels' 128 x 128 tile at head dim 128 (Dao-AILab/flash-attention hopper/tile_size.h, tile_size_fwd_sm90:
#: causal hdim 128 -> kBlockM 128, kBlockN 128)
CAUSAL_BLOCK = 128
#: the tail of a causal launch, in query tiles of the causal spread (a 128-row tile over q_len keys, one SM):
#: the tiles of one (sequence, head) grow by one key block per tile and are dispatched shortest first (the grid's
#: fastest index), so the last wave holds the longest tiles and ends unevenly.  0.65: greedy dispatch of such tiles
#: (each SM takes the next tile when it frees) on 132 SMs, 32 heads, 16-128 tiles per head, ends 0.59-0.70 of the
#: longest tile after the perfectly balanced time (a list-scheduling simulation, not a fit)
CAUSAL_TAIL = 0.65


def causal_terms(pairs: Any, rows: Any, kv_bytes: Any, dims: AttentionDims, sms: float) -> tuple[Any, Any]:
    """(extra keys per query row, tail in pairs of whole-chip work) of a causal flash kernel (0, 0 otherwise).

    The query length comes from the counted cost (bottom-right causal, q_len queries over kv_len keys, so the mean
    row sees ``kv_len - (q_len - 1) / 2`` keys; ``r = kv_len / q_len`` from the K / V bytes per query row)::

        keys  = pairs / rows
        r     = max(1, g kv_bytes / ((d + dv) * K/V element bytes * rows))
        q_len = max(1, (keys - 1/2) / (r - 1/2))

    * diagonal: each query tile's diagonal block is computed in full and masked elementwise: one block of
      ``CAUSAL_BLOCK`` keys per query row (``min(1, q_len / CAUSAL_BLOCK)`` of one for a query extent shorter
      than a tile);
    * tail: ``CAUSAL_TAIL`` of one SM's time for a tile of ``min(q_len, CAUSAL_BLOCK)`` rows over ``q_len`` keys
      (the spread of the tiles' key counts), in whole-chip pairs:
      ``CAUSAL_TAIL * min(q_len, CAUSAL_BLOCK) * q_len * sms`` (a one-token decode: ``0.65 sms``, nothing)."""
    if not dims.causal:
        return 0.0, 0.0
    pairs, rows, kv = (np.asarray(x, dtype=float) for x in (pairs, rows, kv_bytes))
    ok = (pairs > 0) & (rows > 0) & (kv > 0)
    keys = np.where(ok, pairs, 1.0) / np.where(ok, rows, 1.0)
    elems = (dims.head_dim + dims.v_head_dim) * dims.kv_bytes * np.where(ok, rows, 1.0)
    r = np.maximum(dims.gqa_group * np.where(ok, kv, 1.0) / elems, 1.0)
    q_len = np.maximum((keys - 0.5) / (r - 0.5), 1.0)
    diag = np.where(ok, CAUSAL_BLOCK * np.minimum(1.0, q_len / CAUSAL_BLOCK), 0.0)
    tail = np.where(ok, CAUSAL_TAIL * np.minimum(q_len, CAUSAL_BLOCK) * q_len * sms, 0.0)
    return diag, tail


#: kernels a TensorRT-LLM 0.5 / 0.6 gpt_attention plugin launches in its context phase besides the fused MHA kernel
#: (GPTAttentionPluginCommon::enqueueContext with --enable_context_fmha): invokeBuildDecoderInfo's
#: computeSeqOffsets and computePaddingOffsets (the attention mask kernel only for a non-null mask: its workspace
#: has size 0 under context FMHA, and nextWorkspacePtr gives nullptr for size 0), then
#: invokeApplyBiasRopeUpdateKVCache (QKV bias, rotary, K / V into the KV cache)
CONTEXT_PREP_KERNELS = 3


def _pairs_rows(cost: Mapping[str, Any], dims: AttentionDims) -> tuple[Any, Any]:
    """(query-key pairs, query rows x heads of O) of an attention kernel from its counted cost."""
    pairs = np.asarray(cost["matrix_flops"], dtype=float) / (2.0 * (dims.head_dim + dims.v_head_dim))
    aw = np.asarray(cost["act_write_bytes"], dtype=float)
    return pairs, np.minimum(aw / (dims.v_head_dim * dims.out_bytes), pairs)


def writes_scores(cost: Mapping[str, Any], dims: AttentionDims) -> Any:
    """Whether an attention kernel's counted writes hold its score matrix (the ``naive`` byte model: >= 2
    elements per (query, key) pair), not only O; never for a flash-counted kernel (``dims.flash``), whose O alone
    can outweigh a short score matrix (``dv >= 2 L``).  Floats or arrays, as *cost*."""
    pairs = _pairs_rows(cost, dims)[0]
    aw = np.asarray(cost["act_write_bytes"], dtype=float)
    return (pairs > 0) & (aw >= 2.0 * pairs * dims.out_bytes) & (not dims.flash)


def _rows_per_kv_byte(pairs: Any, kv: Any, g: float, dims: AttentionDims) -> Any:
    """Query rows per K / V byte loaded, each KV head read *g* times: ``pairs (d + dv) / (g kv)``
    (1 / element bytes in a one-token decode, ~ L / 2 in an L-token prefill)."""
    return pairs * (dims.head_dim + dims.v_head_dim) / np.maximum(g * kv, 1.0)


def _context_rows(cost: Mapping[str, Any], dims: AttentionDims) -> tuple[Any, Any]:
    """(query rows x heads of O, whether the kernel is a context-phase one) from the counted cost: context means
    many query rows per K / V byte, the complement of attention_time's masked-MHA decode test
    (``pairs (d + dv) / (g kv) >= MMA_MIN_ROWS / 2``, ~ L / 2 in an L-token prefill, <= 1 in decode)."""
    pairs, rows = _pairs_rows(cost, dims)
    kv = np.asarray(cost["kv_read_bytes"], dtype=float)
    context = (kv > 0) & (rows > 0) & (_rows_per_kv_byte(pairs, kv, float(max(dims.gqa_group, 1)), dims)
                                       >= MMA_MIN_ROWS / 2)
    return rows, context


def context_prep_bytes(cost: Mapping[str, Any], dims: AttentionDims) -> Any:
    """Bytes of the bias / rotary / KV-write kernel of a context-phase attention (0 for a decode one)::

        q = rows * d                    Q elements (query rows x heads, from O's bytes)
        k = q / g                       K elements (and V's): the KV heads of the new tokens
        bytes = 2 * act * (q + 2 k)     the packed QKV read, and written back in place (bias, rotary applied)
              + kv * 2 k                K and V written into the KV cache in its dtype (fp8: quantized there)

    (``act``: O's element bytes, the model dtype; ``kv``: K / V's, :attr:`AttentionDims.kv_bytes`)."""
    rows, context = _context_rows(cost, dims)
    q = rows * dims.head_dim
    k = q / float(max(dims.gqa_group, 1))
    nbytes = 2.0 * dims.out_bytes * (q + 2.0 * k) + dims.kv_bytes * 2.0 * k
    return np.where(context, nbytes, 0.0)


def context_prep_launches(cost: Mapping[str, Any], dims: AttentionDims) -> int:
    """Kernels launched beside a context-phase attention kernel (:data:`CONTEXT_PREP_KERNELS`; 0 in decode,
    where the masked-MHA kernel applies the rotary and writes K / V itself); *cost*: one point (scalars)."""
    _, context = _context_rows(cost, dims)
    return CONTEXT_PREP_KERNELS if bool(np.any(context)) else 0


def context_prep_s(cost: Mapping[str, Any], dims: AttentionDims, hw: Any) -> Any:
    """Device time of the kernels a context-phase attention plugin runs beside its fused kernel (runtime
    ``attention_context_prep``): each a streaming kernel's fixed time, and the bias / rotary / KV-write kernel's
    bytes (:func:`context_prep_bytes`) at the profile's elementwise stream rate (the offset kernels move a few
    ints per sequence: none counted)::

        t = CONTEXT_PREP_KERNELS * stream_latency_s + bytes / (mem_bw * stream_efficiency("elementwise"))

    0 for a decode attention."""
    from .profile import timing_of

    t = timing_of(hw)
    _, context = _context_rows(cost, dims)
    nbytes = context_prep_bytes(cost, dims)
    out = np.where(context, CONTEXT_PREP_KERNELS * t.stream_latency_s
                   + nbytes / (hw.mem_bw_bytes_per_s * t.stream_efficiency("elementwise")), 0.0)
    return float(out) if np.ndim(out) == 0 else out


def _fp32_peak(hw: Any) -> float:
    """:func:`vector_fp32_peak`, once per profile."""
    memo = memo_of(hw)
    hit = memo.get("vector_fp32_peak")
    if hit is None:
        hit = memo["vector_fp32_peak"] = vector_fp32_peak(hw)
    return hit


def attention_time(cost: Mapping[str, Any], dims: AttentionDims, hw: Any, dtype: str,
                   gqa_shared_kv: bool = True, kernel: str = "auto", context_prep: bool = False) -> Any:
    """Kernel time (no launch) of a fused attention kernel with counted *cost* fields (floats or arrays);
    *kernel*: its family (one of :data:`ATTENTION_KERNELS`, see the module docstring); *context_prep*: the
    runtime's plugin also runs its context-phase kernels (:func:`context_prep_s`, added here; their launches
    are :func:`context_prep_launches`)."""
    if kernel not in ATTENTION_KERNELS:
        raise InputError(f"attention kernel {kernel!r}: use one of {', '.join(ATTENTION_KERNELS)}")
    t, ceiling, eff, exp_per_s = _constants(hw, dtype)
    width = 2.0 * (dims.head_dim + dims.v_head_dim)
    pairs, rows = _pairs_rows(cost, dims)
    # a kernel that materialises the scores (the "naive" byte model) is not a pipelined flash kernel, and O's rows
    # cannot be read from its bytes: no per-row fill
    rows = np.where(writes_scores(cost, dims), 0.0, rows)
    t_pair: Any = width / (ceiling * eff) + 1.0 / exp_per_s
    fill: Any = t.attn_fill_keys
    g = 1.0 if gqa_shared_kv else float(dims.gqa_group)
    kv = np.asarray(cost["kv_read_bytes"], dtype=float)
    # K / V bytes: the cache reads, else (K / V as plain activations, a one-op SDPA) the reads less Q's
    q_bytes = rows * dims.head_dim * dims.out_bytes
    kv_in = np.where(kv > 0, kv, np.maximum(np.asarray(cost["act_read_bytes"], dtype=float) - q_bytes, 0.0))
    diag, tail = causal_terms(pairs, rows, kv_in, dims, float(t.sm_count or 1))
    work, waves = pairs, 1.0
    if kernel == "flash2":  # synchronous mma.sync kernel: its own matmul rate, fill in its keys, padded query tiles
        t_pair, fill = sync_pair_terms(t.attn_sync_matrix_flops_per_s, width, ceiling * eff, exp_per_s, fill)
        block_m = fa2_block_m(max(dims.head_dim, dims.v_head_dim), t.smem_per_sm_bytes)
        work = pairs * fa2_row_padding(pairs, rows, kv_in, dims, g, block_m)
        waves = fa2_wave_factor(pairs, rows, kv_in, dims, float(t.sm_count or 0), g, block_m)
    elif not gqa_shared_kv:
        # one query head per thread block: a decode step has one query row per block, too few for an MMA (16
        # rows); such kernels (masked MHA) do the dot products on the CUDA cores, fp32 (query rows per K/V byte
        # loaded: pairs (d + dv) / (g kv bytes) = 1 / element bytes in decode, ~ L / 2 in an L-token prefill)
        mmha = (kv > 0) & (_rows_per_kv_byte(pairs, kv, g, dims) < MMA_MIN_ROWS / 2)
        t_pair = np.where(mmha, width / _fp32_peak(hw) + 1.0 / exp_per_s, t_pair)
    t_compute = (work + rows * (fill + diag) + tail) * t_pair * waves
    rest = (np.asarray(cost["act_read_bytes"], dtype=float) + cost["act_write_bytes"] + cost["kv_write_bytes"]
            + cost["weight_bytes"])
    t_memory = kv_read_time(rest, kv, g, hw.mem_bw_bytes_per_s * t.gemm_mem_bw_efficiency, t.l2_read_bw_bytes_per_s)
    p = t.gemm_overlap_exponent
    if kernel == "flash2" or not p:
        # FA2 streams K / V block j + 1 (cp.async into its second shared-memory stage) while the MMAs and
        # exponentials run on block j; where both matter (a decode's padded 128- or 64-row tiles beside the K / V
        # stream) they overlap whole: the slower sets the time (the H100 / H200 flash decode rows of attention.csv: the
        # GEMMs' p-norm put them +4..+22% slow, max -13..+9%)
        both = np.maximum(t_compute, t_memory)
    else:
        both = (t_compute ** p + t_memory ** p) ** (1.0 / p)
    if kernel != "flash2" and not gqa_shared_kv:
        # masked MHA also converts each K / V element it loads (once per query head) to fp32 for the CUDA-core
        # math, on a pipe of 16 per SM per clock (CUDA C++ Programming Guide, arithmetic instruction throughput,
        # cc 7.x-9.0: "all other type conversions", the exponentials' rate, exp_rate): a bound of its own beside
        # the FMAs and the loads, pairs (d + dv) / rate
        both = np.where(mmha, np.maximum(both, pairs * (dims.head_dim + dims.v_head_dim) / exp_per_s), both)
    out = both + t.gemm_latency_s
    if context_prep:
        out = out + context_prep_s(cost, dims, hw)
    return float(out) if np.ndim(out) == 0 else out
