"""FlashAttention-2's kernel facts on any device (the ``flash2`` family of :mod:`graphroof.timing.attention`, which
imports and re-exports them): its query tile (kBlockM) by head dim and shared memory, its synchronous pair time,
the padded query rows of a short query extent, and its whole waves where it splits no K / V.  *dims* is an
:class:`graphroof.timing.attention.AttentionDims` (``head_dim``, ``v_head_dim``, ``kv_bytes``, ``causal``).
Floats or numpy arrays alike."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["FA2_BLOCK_M", "FA2_BLOCK_M_SMALL", "FA2_NO_SPLIT_FILL", "SMEM_RESERVED_PER_BLOCK", "fa2_block_m",
           "fa2_row_padding", "fa2_wave_factor", "sync_pair_terms"]

#: query rows per thread block of FlashAttention-2's forward kernel (kBlockM) up to head dim 192, and at 224 / 256
#: where the device's shared memory allows (:func:`fa2_block_m`; the default where the profile does not give its
#: shared memory): Dao-AILab/flash-attention csrc/flash_attn/src/flash_fwd_launch_template.h run_mha_fwd_hdim64 /
#: hdim128 (the copy PyTorch's SDPA flash backend builds): Flash_fwd_kernel_traits<d, 128, ...> on sm80 / sm90
FA2_BLOCK_M = 128
#: FlashAttention-2's smaller query tile (64 x 64 thread blocks) at head dims 224 / 256 (:func:`fa2_block_m`)
FA2_BLOCK_M_SMALL = 64
#: the opt-in shared memory per thread block is this much less than the shared memory per SM on cc 8.0 - 10.0
#: (CUDA C++ Programming Guide, "Technical Specifications per Compute Capability": 164 / 163 KB cc 8.0 and 8.7,
#: 100 / 99 KB cc 8.6 and 8.9, 228 / 227 KB cc 9.0 and 10.0)
SMEM_RESERVED_PER_BLOCK = 1024


def fa2_block_m(head_dim: Any, smem_per_sm_bytes: int | None) -> Any:
    """Query rows per thread block (kBlockM) of FlashAttention-2's forward kernel at *head_dim* on a device with
    *smem_per_sm_bytes* of shared memory per SM (the profile's ``timing.smem_per_sm_bytes``; the opt-in maximum
    per block is :data:`SMEM_RESERVED_PER_BLOCK` less).  pytorch/pytorch aten/src/ATen/native/transformers/cuda/
    flash_attn/flash_fwd_launch_template.h (FA2's kernels rounded up to head dims 32, 64, ..., 192, 224, 256)::

        d <= 192:  128                                        (run_mha_fwd_hdim32 ... hdim192, no dropout)
        d <= 224:  128 if per_block >= 2 * 224 * (128 + 2 * 64) = 114,688 B, else 64       (run_mha_fwd_hdim224)
        d <= 256:  128 if per_block >= 2 * 256 * (128 + 2 * 64) = 131,072 B
                          and per_sm < 4 * 256 * (64 + 2 * 64) = 196,608 B, else 64         (run_mha_fwd_hdim256:
                   "For H100 we want to run with 64 x 64 (96KB smem) since then we can get 2 CTAs per SM")

    So at head dim 256: 64 on H100 / H200 / B200 (228 KB per SM) and on sm86 / sm89 (100 KB), 128 on A100 (164 KB);
    at 224: 128 on A100 / Hopper / B200, 64 on sm86 / sm89.  *smem_per_sm_bytes* None (unknown): :data:`FA2_BLOCK_M`
    everywhere.  Left out: the sm86 / sm89 kernels' 64-row tiles for causal masks at head dims 96 / 128 / 160 and
    head dim 192 with dropout.  *head_dim* a number or a numpy array."""
    d = np.asarray(head_dim, dtype=float)
    if smem_per_sm_bytes is None:
        out = np.full(d.shape, float(FA2_BLOCK_M))
    else:
        per_sm = float(smem_per_sm_bytes)
        per_block = per_sm - SMEM_RESERVED_PER_BLOCK
        big_224 = per_block >= 2 * 224 * (128 + 2 * 64)
        big_256 = per_block >= 2 * 256 * (128 + 2 * 64) and per_sm < 4 * 256 * (64 + 2 * 64)
        small, big = float(FA2_BLOCK_M_SMALL), float(FA2_BLOCK_M)
        out = np.where(d <= 192, big, np.where(d <= 224, big if big_224 else small, big if big_256 else small))
    return float(out) if out.ndim == 0 else out


def sync_pair_terms(sync_rate: float | None, width: float, native_rate: float, exp_per_s: float,
                    fill_keys: float) -> tuple[float, float]:
    """(seconds per (query, key) pair, fill keys per query row) of FlashAttention-2, the synchronous kernel
    (``mma.sync`` + ``cp.async``, no warp specialisation: the exponential does not overlap the matmuls).

    Its matmuls run at *sync_rate* (the profile's ``attn_sync_matrix_flops_per_s``; None: *native_rate*, the
    native kernel's matmul rate ``achievable x attn_matrix_efficiency``, as on Ampere where FA2 is the native
    kernel); its per-row fill (load the Q tile, prime the pipeline, write O) takes the same *time* as the native
    kernel's ``fill_keys`` pairs of work::

        t_pair = width / sync_rate + 1 / exp_per_s
        fill   = fill_keys * (width / native_rate + 1 / exp_per_s) / t_pair
    """
    native = width / native_rate + 1.0 / exp_per_s
    t_pair = width / (sync_rate or native_rate) + 1.0 / exp_per_s
    return t_pair, fill_keys * native / t_pair


def fa2_row_padding(pairs: Any, rows: Any, kv_bytes: Any, dims: Any, reads: float = 1.0,
                    block_m: Any = FA2_BLOCK_M) -> Any:
    """Computed / useful query rows of FlashAttention-2, whose thread blocks each compute a full *block_m*-row
    query tile (MMAs and exponentials on every row, masked at the store; kBlockM, :func:`fa2_block_m`: 128, or 64
    at head dims 224 / 256 on some devices; default :data:`FA2_BLOCK_M`).

    The query rows per (sequence, KV head) come from the counted cost (for a one-token decode FA2 packs the query
    heads of a GQA group into the tile's rows: ``seqlenq_ngroups_swapped`` in its ``mha_fwd``; *reads* = the GQA
    group when each query head is its own block, ``gqa_shared_kv`` off)::

        keys     = pairs / rows                                     (keys per query row)
        blocks   = reads * kv_bytes / ((d + dv) * K/V element bytes * keys)   (sequences x KV heads x reads)
        q_rows   = rows / blocks                                    (query length x GQA group / reads)
        padding  = max(1, block_m / q_rows)

    Only a query extent shorter than one tile is padded (decode, short chunks): a longer one's last partial tile
    (at most one tile in q_rows / block_m) is left out, as a causal prefill's count (about half the keys per
    row, diagonal included) cannot say where its tiles end.  No K / V bytes or rows (a kernel writing its
    scores): 1."""
    ok, _blocks, q_rows = _fa2_blocks(pairs, rows, kv_bytes, dims, reads)
    return np.where(ok, np.maximum(1.0, np.asarray(block_m, dtype=float) / q_rows), 1.0)


def _fa2_blocks(pairs: Any, rows: Any, kv_bytes: Any, dims: Any, reads: float) -> tuple[Any, Any, Any]:
    """(counted?, (sequence, KV head) blocks x *reads*, query rows per block) of :func:`fa2_row_padding`."""
    pairs, rows, kv = (np.asarray(x, dtype=float) for x in (pairs, rows, kv_bytes))
    ok = (pairs > 0) & (rows > 0) & (kv > 0)
    keys = np.where(ok, pairs, 1.0) / np.where(ok, rows, 1.0)
    blocks = reads * np.where(ok, kv, 1.0) / ((dims.head_dim + dims.v_head_dim) * dims.kv_bytes * keys)
    q_rows = np.maximum(np.where(ok, rows, 1.0) / np.maximum(blocks, 1e-30), 1.0)
    return ok, blocks, q_rows


#: FlashAttention-2 splits K / V only when its thread blocks fill less than this share of the SMs
#: (flash_api.cpp ``num_splits_heuristic``: "If we have enough to almost fill the SMs, then just use 1 split")
FA2_NO_SPLIT_FILL = 0.8


def fa2_wave_factor(pairs: Any, rows: Any, kv_bytes: Any, dims: Any, sms: float, reads: float = 1.0,
                    block_m: Any = FA2_BLOCK_M) -> Any:
    """Whole-wave time over whole-chip time of a FlashAttention-2 launch without a causal mask (module doc)::

        ctas   = blocks * ceil(q_rows / block_m)              (:func:`fa2_row_padding`'s blocks and rows)
        factor = ceil(ctas / SMs) * SMs / ctas   if ctas >= 0.8 SMs (one split), else 1 (split-K fills the SMs)

    (batch 8 x 40 heads, one query row each: 320 blocks on 132 SMs: 3 * 132 / 320 = 1.2375.)  1 for a causal
    mask (its tail is :func:`causal_terms`), without an SM count, or where nothing is counted."""
    ok, blocks, q_rows = _fa2_blocks(pairs, rows, kv_bytes, dims, reads)
    if dims.causal or not sms:
        return np.ones(np.shape(ok)) if np.ndim(ok) else 1.0
    ctas = np.maximum(np.round(blocks), 1.0) * np.ceil(q_rows / np.asarray(block_m, dtype=float) - 1e-9)
    waved = np.ceil(ctas / sms - 1e-9) * sms / ctas
    out = np.where(ok & (ctas >= FA2_NO_SPLIT_FILL * sms), waved, 1.0)
    return float(out) if np.ndim(out) == 0 else out
