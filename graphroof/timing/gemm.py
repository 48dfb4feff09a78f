"""GEMM time from its shape: tile and wave quantisation over the SMs, or weight streaming at small M.

Model (``C[M, N] = A[M, K] @ B[K, N]``, ``batch`` independent GEMMs; constants from the profile's ``[timing]``)::

    tile      = (tm, tn): tn = gemm_tile[1]; tm one of gemm_tile[0], gemm_tile[0]/2, ... down to gemm_tile_m_min
                (the library's tile configurations; a weight-only kernel's down to min(gemm_tile_m_min, 16):
                :data:`WEIGHT_ONLY_TILE_M_MIN`).  gemm_tile_policy "best": the one with the least compute
                time runs (a library that searches its configurations); "cover_m": the smallest height that
                covers M, else the largest (a heuristic keyed on M alone, blind to wave quantisation)
    tiles     = ceil(M / tm) * ceil(N / tn) * batch
    split_k   = s: when tiles < SMs the library splits K over s CTAs per tile to fill the machine,
                s = min(floor(SMs / tiles), floor(K / gemm_split_k_min)), at least 1
    waves     = ceil(tiles * s / SMs); with gemm_stream_k (Hopper / Blackwell cuBLAS and CUTLASS persistent kernels:
                the last wave's tiles are shared along K) max(1, tiles * s / SMs): no wave quantisation
    rate_sm   = peak * gemm_matrix_efficiency / SMs * min(1, I_tile / I_l2)
                I_tile = 2 tm tn / ((tm + tn) * bytes per element): FLOPs per byte a CTA loads from L2 per k step;
                I_l2 = peak / gemm_l2_bw_bytes_per_s: below it a (narrow) tile is starved by the L2 bandwidth
    t_compute = waves * (2 * tm * tn * ceil(K / s)) / rate_sm
                (each wave costs one CTA's work at one SM's rate: a partial last wave costs as much as a full one)
    t_memory  = (A + B + C bytes, + split-K fp32 partials written and read back unless they fit in the L2)
                / (mem_bw * gemm_mem_bw_efficiency)
    t         = overlap(t_compute, t_memory) + gemm_latency_s
                overlap = max (perfect overlap of loads and math) without gemm_overlap_exponent, else the
                p-norm (t_compute^p + t_memory^p)^(1/p): near the ridge neither hides the other completely

At small M ``t_memory`` (the weights B streamed once) dominates: the regime is bandwidth, not FLOPs.  Without
``sm_count`` (non-GPU profiles) there is no quantisation: ``t_compute = FLOPs / (peak * efficiency)``.

Four refinements (all data in the profile, see docs/kernel_timing.md):

* **ceiling**: with ``[timing.gemm_achievable_flops_per_s]`` (the best achievable dense matmul rate per dtype, the
  "MAMF" table) the sustained rate is ``achievable * gemm_matrix_efficiency`` instead of ``peak * efficiency``
  (:func:`graphroof.timing.precision.gemm_ceiling`): fp8 reaches a smaller fraction of its peak than bf16;
* **weight-only quantized GEMMs** (int4 / int8 / fp8 weights, bf16 activations, dequantised in the main loop):
  the scales / zeros stream with the weights, and the dequant ALU work ``gemm_dequant_flops_per_mac * M N K``
  at the half-precision vector peak adds to the compute time (:mod:`graphroof.timing.quantgemm`);
* **kernel families**: ``library="deepgemm"`` prices DeepGEMM's fp8 kernels (below), selected per node
  (``attrs["gemm_library"]``, :mod:`graphroof.timing.gemm_plan`);
* **grouped GEMMs** (MoE experts): the rows split over *groups* experts, each tiled on its own:
  ``tiles = ceil(groups * E[ceil(n_e / tm)]) * ceil(N / tn)``, each expert's rows ``n_e`` spread around
  ``M / groups`` (:func:`graphroof.timing.moe.group_m_tiles`).  ``library="torch_grouped"`` is PyTorch's CUTLASS
  grouped kernel (``torch._grouped_mm`` on sm90 / sm100, :mod:`graphroof.timing.moe`): the one *tile* its source
  fixes, each group's M tiles rounded up to the *cluster_m* of its thread-block cluster, whole waves of a static
  persistent schedule (no split-K, no stream-K), loads hidden under the math (``max``), and the fixed time of its
  two kernels (the GEMM's ``gemm_latency_s`` and the per-group argument kernel's ``stream_latency_s``).  Its
  operands stream at the lower of the device's GEMM bandwidth and ``torch_grouped_sm_bw_bytes_per_s`` per SM
  holding tiles: measured, this kernel's weight stream tops out near 2.7-2.9 TB/s on both the H100 (3.35 TB/s
  HBM3) and the H200 (4.8 TB/s HBM3e), the same 132 SMs at the same clock, so its limit is in the SMs (the bytes a
  TMA pipeline of 4 stages keeps in flight per SM over the memory latency), not in the HBM::

      tiles = group_m_tiles(M, groups, tm, cluster_m) * ceil(N / tn),  waves = ceil(tiles / SMs)
      t_compute = waves * 2 tm tn K / (rate_sm)
      t_memory = bytes / min(mem_bw * gemm_mem_bw_efficiency, min(SMs, tiles) * torch_grouped_sm_bw_bytes_per_s)

  ``library="triton_moe"`` is vLLM / SGLang's Triton fused-MoE kernel (:mod:`graphroof.timing.moe`): the tuned tile
  of :data:`~graphroof.timing.moe.TRITON_BLOCK_M` x :data:`~graphroof.timing.moe.TRITON_BLOCK_N` with the least
  compute time, whole waves (a plain grid: no split-K, no stream-K), the profile's overlap exponent (loads
  software-pipelined, not warp-specialised) and each tile at ``triton_mma_efficiency`` of the cuBLAS rate::

      tiles = group_m_tiles(M, groups, tm) * ceil(N / tn),  waves = ceil(tiles / SMs)
      t_compute = waves * 2 tm tn K / (rate_sm * triton_mma_efficiency)

**Schedule** (the runtime's ``gemm_schedule``, a preset ``[kernels]`` key: which cuBLAS generation the engine
ships, :func:`schedule_of`): ``auto`` keeps the profile's ``gemm_stream_k`` and overlap exponent; ``waves``: one
CTA per (tile, split), whole waves, no stream-K (heuristics of an older library); ``stream_k``: on a device whose
profile runs stream-K, persistent warp-specialised kernels (a TMA producer warp feeds the math warpgroups through
a shared-memory pipeline, so loads hide under the math) with ``t = max(t_compute, t_memory) + latency``; on other
devices ``stream_k`` is ``auto``.  DeepGEMM and weight-only kernels keep ``auto``.

**DeepGEMM** (fp8 in with 1x128 / 128x128 block scales, bf16 out, Hopper).  Tile choice and schedule are facts of
its source (deepseek-ai/DeepGEMM@a6d97a1 ``deep_gemm/jit_kernels/gemm.py`` ``get_best_configs``, ``fp8_gemm.cuh``):
BLOCK_M = 64 when M <= 64, else 128; BLOCK_N one of 16, 24, ..., 128; the fewest waves, then the fullest last wave,
then the widest BLOCK_N (at small M a narrow BLOCK_N spreads the weights over every SM); one persistent CTA per SM,
no split-K / stream-K; each tile's epilogue (its bf16 D tile out through shared memory) follows its main loop::

    tiles     = ceil(M / BLOCK_M) * ceil(N / BLOCK_N) * batch,  waves = ceil(tiles / SMs)
    t_tile    = 2 BLOCK_M BLOCK_N K / (ceiling / SMs * starve)                      (main loop)
                + min(BLOCK_M, M) min(BLOCK_N, N) out_bytes / (mem_bw * gemm_mem_bw_efficiency / SMs)  (epilogue)
    t_compute = waves * t_tile;   t = overlap(t_compute, t_memory) + stream_latency_s

No constant is fitted for it: the main loop runs at the achievable ceiling itself (the kernel's losses are the
terms above), bandwidth, L2 and p are the profile's, the fixed time the device's plain-kernel floor
``stream_latency_s`` (one kernel, no split-K reduction; the source times kernels with the profiler).  *batch*:
grouped GEMMs, one B per group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..dtypes import dtype_bits
from ..errors import InputError
from ..fuse.preset_file import GEMM_SCHEDULES
from ..hardware.params import KernelTiming
from .moe import TRITON_BLOCK_M, TRITON_BLOCK_N, group_m_tiles

if TYPE_CHECKING:
    from ..hardware import HardwareProfile

__all__ = ["GEMM_LIBRARIES", "KERNEL_FAMILIES", "WEIGHT_ONLY_TILE_M_MIN", "GemmTime", "deepgemm_blocks", "gemm_time",
           "gemm_time_with", "schedule_of"]


@dataclass(frozen=True)
class GemmTime:
    """One GEMM kernel's predicted time and its parts."""

    t_s: float                  # overlap(t_compute_s, t_memory_s) + t_latency_s
    t_compute_s: float          # quantised compute time at the sustained matrix rate
    t_memory_s: float           # bytes at the sustained bandwidth
    t_latency_s: float          # fixed kernel time
    flops: float                # 2 * M * N * K * batch (useful FLOPs, not padded)
    bytes: float                # A + B + C (+ split-K partials), decimal bytes
    tile: tuple[int, int]
    tiles: int
    split_k: int
    waves: int
    wave_utilisation: float     # useful tile work / (waves * SMs * tile work), 1.0 without an SM count
    regime: str                 # "compute" | "memory"
    peak_flops_per_s: float
    peak_used: str              # "matrix.fp16", "matrix.tf32", ...


#: kernel families graphroof prices: ``cublas`` (timing.gemm: tile heights, split-K, stream-K) | ``deepgemm``
GEMM_LIBRARIES = ("cublas", "deepgemm")
#: the families :func:`gemm_time_with` prices: the selectable ones, ``torch_grouped`` (PyTorch's CUTLASS grouped
#: kernel, chosen by the plan from the runtime's ``moe_grouped_gemm = "torch"`` and the device: timing.gemm_plan) and
#: ``triton_moe`` (vLLM / SGLang's Triton fused-MoE kernel, ``moe_grouped_gemm = "triton"``)
KERNEL_FAMILIES = GEMM_LIBRARIES + ("torch_grouped", "triton_moe")
#: the smallest tile height of a weight-only GEMM with the dequant fused (not cuBLAS, whose smallest tile is the
#: profile's gemm_tile_m_min): PyTorch's tinygemm int4 kernel tiles M in one 16-row mma.m16n8k16
#: (pytorch/pytorch aten/src/ATen/native/cuda/int4mm.cu: ALayout_RM kMTileSize = 16)
WEIGHT_ONLY_TILE_M_MIN = 16
BLOCK_NS = tuple(range(16, 129, 8))


def _starve(tm: int, tn: int, in_bytes: float, i_l2: float) -> float:
    """The share of a CTA's rate a tm x tn tile keeps under the L2 bandwidth: min(1, I_tile / I_l2), I_tile =
    2 tm tn / ((tm + tn) * bytes per element) FLOPs per byte loaded per k step (module doc); 1 without I_l2."""
    return min(1.0, 2.0 * tm * tn / ((tm + tn) * in_bytes) / i_l2) if i_l2 else 1.0


def deepgemm_blocks(m: int, n: int, sms: int, groups: int = 1) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N) DeepGEMM picks for an M x N output (times *groups*) on *sms* SMs."""
    bm = 64 if m <= 64 else 128
    best: tuple[tuple[int, int, int], int] | None = None
    for bn in BLOCK_NS:
        tiles = math.ceil(m / bm) * math.ceil(n / bn) * groups
        last = tiles % sms or sms
        key = (math.ceil(tiles / sms), -last, -bn)
        if best is None or key < best[0]:
            best = (key, bn)
    assert best is not None
    return bm, best[1]


def deepgemm_parts(m: int, n: int, k: int, groups: int, t: KernelTiming, ceiling_flops_per_s: float,
                   i_l2: float, mem_bw_bytes_per_s: float, in_bytes: float,
                   out_bytes: float) -> tuple[float, tuple[int, int], int, int, float]:
    """(t_compute_s, (BLOCK_M, BLOCK_N), tiles, waves, cta_flops) of DeepGEMM on the profile's SMs."""
    sms = t.sm_count or 1
    bm, bn = deepgemm_blocks(m, n, sms, groups)
    tiles = math.ceil(m / bm) * math.ceil(n / bn) * groups
    waves = math.ceil(tiles / sms)
    starve = _starve(bm, bn, in_bytes, i_l2)
    cta_flops = 2.0 * bm * bn * k
    t_loop = cta_flops / (ceiling_flops_per_s / sms * starve)
    # the tile's D as stored (the TMA store clips a tile that overhangs M or N)
    t_epilogue = min(bm, m) * min(bn, n) * out_bytes / (mem_bw_bytes_per_s * t.gemm_mem_bw_efficiency / sms)
    return waves * (t_loop + t_epilogue), (bm, bn), tiles, waves, cta_flops


def schedule_of(t: KernelTiming, schedule: str = "auto") -> tuple[bool, float | None]:
    """(stream-K, overlap exponent or None for max) of a cuBLAS GEMM under the runtime's *schedule* (module doc)."""
    if schedule not in GEMM_SCHEDULES:
        raise InputError(f"gemm schedule must be one of {', '.join(GEMM_SCHEDULES)}, got {schedule!r}")
    if schedule == "waves":
        return False, t.gemm_overlap_exponent
    if schedule == "stream_k" and t.gemm_stream_k:
        return True, None
    return t.gemm_stream_k, t.gemm_overlap_exponent


def _tile_heights(t: KernelTiming, weight_only: bool = False) -> list[int]:
    """Tile heights gemm_tile[0], /2, ... down to the profile's smallest (a *weight_only* kernel's: at most
    :data:`WEIGHT_ONLY_TILE_M_MIN`)."""
    floor = min(t.gemm_tile_m_min, WEIGHT_ONLY_TILE_M_MIN) if weight_only else t.gemm_tile_m_min
    tm, out = t.gemm_tile[0], []
    while tm >= floor:
        out.append(tm)
        if tm % 2:
            break
        tm //= 2
    return out or [t.gemm_tile[0]]


def _compute(m: int, n: int, k: int, batch: int, tm: int, tn: int, t: KernelTiming, rate: float, in_bytes: float,
             i_l2: float, sms: int, groups: float = 1.0,
             stream_k: bool | None = None, balanced: bool = False) -> tuple[float, int, int, int, float]:
    """(t_compute_s, tiles, split_k, waves, cta_flops) of one tile configuration on *sms* SMs (*stream_k*: None,
    the profile's; *balanced*: grouped rows split evenly)."""
    tiles = group_m_tiles(m, groups, tm, 1, not balanced) * math.ceil(n / tn) * batch
    split = 1
    if tiles < sms:
        split = max(1, min(sms // tiles, k // max(1, t.gemm_split_k_min)))
    waves = math.ceil(tiles * split / sms)
    # stream-K (persistent CTAs share the last wave's tiles along K): fractional waves, at least one
    w = max(1.0, tiles * split / sms) if (t.gemm_stream_k if stream_k is None else stream_k) else waves
    cta_flops = 2.0 * tm * tn * math.ceil(k / split)
    return w * cta_flops / (rate / sms * _starve(tm, tn, in_bytes, i_l2)), tiles, split, waves, cta_flops


def gemm_time_with(m: int, n: int, k: int, *, timing: KernelTiming, peak_flops_per_s: float,
                   mem_bw_bytes_per_s: float, in_bytes: float = 2.0, out_bytes: float | None = None,
                   batch: int = 1, weight_bytes: float | None = None, peak_used: str = "",
                   achievable_flops_per_s: float | None = None, dequant_s: float = 0.0,
                   groups: float = 1.0, l2_bytes: float | None = None, library: str = "cublas",
                   act_in_l2: bool = False, schedule: str = "auto", weight_only: bool = False,
                   tile: tuple[int, int] | None = None, cluster_m: int = 1, balanced: bool = False) -> GemmTime:
    """The GEMM model with explicit constants (what :func:`gemm_time` calls after reading the profile).

    *in_bytes* / *out_bytes*: bytes per element of A, B and of C; *weight_bytes* overrides B's total (e.g.
    int4 weights with fp16 activations, scales included).  *achievable_flops_per_s*: the large-GEMM ceiling the
    efficiency applies to (None: the peak).  *dequant_s*: ALU time of a fused weight dequantisation, added to
    the compute time.  *groups*: the M rows split over this many independently tiled groups (MoE experts).
    *l2_bytes*: the on-chip L2 size: split-K partial sums that fit in it never reach DRAM.  *library*: the kernel
    family (``cublas``; ``deepgemm``: DeepGEMM, see the module docstring; *batch* its groups).  *act_in_l2*: A (the
    activation the kernel before wrote) is read from L2, not DRAM: the caller found the kernel fits
    (:func:`graphroof.timing.l2.fits_l2`, engines that run kernels back to back).  *schedule*: the runtime's
    ``gemm_schedule`` (:func:`schedule_of`; cuBLAS only).  *weight_only*: a weight-only kernel with the dequant
    fused (its tile heights: :func:`_tile_heights`).  *tile*, *cluster_m*: library ``torch_grouped``'s one tile and
    its cluster's M extent (module doc).  *balanced*: the grouped rows are split evenly over the groups
    (:func:`graphroof.timing.moe.group_m_tiles` without the routing spread).
    """
    for name, v in (("M", m), ("N", n), ("K", k), ("batch", batch)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise InputError(f"gemm_time: {name} must be a whole number >= 0, got {v!r}")
    if library not in KERNEL_FAMILIES:
        raise InputError(f"gemm_time: library must be one of {', '.join(KERNEL_FAMILIES)}, got {library!r}")
    out_bytes = in_bytes if out_bytes is None else out_bytes
    flops = 2.0 * m * n * k * batch
    b_bytes = weight_bytes if weight_bytes is not None else k * n * in_bytes * batch
    nbytes = (m * k * in_bytes + m * n * out_bytes) * batch + b_bytes
    if act_in_l2:
        nbytes -= m * k * in_bytes * batch
    if flops == 0:
        return GemmTime(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, (0, 0), 0, 1, 0, 1.0, "memory", peak_flops_per_s, peak_used)
    rate = (achievable_flops_per_s or peak_flops_per_s) * timing.gemm_matrix_efficiency
    groups = max(1.0, float(groups))
    sms = timing.sm_count
    stream_k, p = schedule_of(timing, schedule if library == "cublas" else "auto")
    if library == "torch_grouped":
        p = None  # warp-specialised TMA kernel: loads hidden under the math
    elif library == "triton_moe":
        p = timing.gemm_overlap_exponent  # software-pipelined, not warp-specialised: as a whole-wave kernel
    if sms:
        i_l2 = peak_flops_per_s / timing.gemm_l2_bw_bytes_per_s if timing.gemm_l2_bw_bytes_per_s else 0.0
        tn = timing.gemm_tile[1]
        heights = _tile_heights(timing, weight_only)
    if sms and library == "deepgemm":
        ceiling = achievable_flops_per_s or peak_flops_per_s
        t_compute, (tm, tn), tiles, waves, cta_flops = deepgemm_parts(
            m, n, k, batch, timing, ceiling, i_l2, mem_bw_bytes_per_s, in_bytes, out_bytes)
        split, util = 1, flops / (waves * sms * cta_flops)
    elif sms and library == "torch_grouped":
        tm, tn = tile or timing.gemm_tile
        tiles = int(group_m_tiles(m, groups, tm, cluster_m, not balanced)) * math.ceil(n / tn) * batch
        waves, split, cta_flops = math.ceil(tiles / sms), 1, 2.0 * tm * tn * k
        t_compute = waves * cta_flops / (rate / sms * _starve(tm, tn, in_bytes, i_l2))
        util = flops / (waves * sms * cta_flops)
    elif sms and library == "triton_moe":
        r_t = rate * timing.triton_mma_efficiency
        best_t: tuple[float, int, int, int, int] | None = None
        for tm_ in TRITON_BLOCK_M:  # the tuned config: the least compute time (module doc)
            for tn_ in TRITON_BLOCK_N:
                n_t = int(group_m_tiles(m, groups, tm_, 1, not balanced)) * math.ceil(n / tn_) * batch
                w_t = math.ceil(n_t / sms)
                c_t = w_t * 2.0 * tm_ * tn_ * k / (r_t / sms * _starve(tm_, tn_, in_bytes, i_l2))
                if best_t is None or c_t < best_t[0]:
                    best_t = (c_t, tm_, tn_, n_t, w_t)
        assert best_t is not None
        t_compute, tm, tn, tiles, waves = best_t
        split, cta_flops = 1, 2.0 * tm * tn * k
        util = flops / (waves * sms * cta_flops)
    elif sms:
        if timing.gemm_tile_policy == "cover_m":
            heights = [min((h for h in heights if h >= m / groups), default=heights[0])]
        best = min((_compute(m, n, k, batch, tm, tn, timing, rate, in_bytes, i_l2, sms, groups, stream_k, balanced),
                    tm) for tm in heights)
        (t_compute, tiles, split, waves, cta_flops), tm = best
        util = flops / (waves * sms * cta_flops)
        # fp32 partial sums: each split writes its M x N slice, the reduction reads them back; from DRAM only when
        # they do not fit in L2 (small-M GEMMs' partials stay on chip)
        if split > 1 and not (l2_bytes and split * m * n * 4 * batch <= l2_bytes):
            nbytes += 2.0 * split * m * n * 4 * batch
    else:
        tm, tn = timing.gemm_tile
        tiles, split, waves, util = 0, 1, 1, 1.0
        t_compute = flops / rate
    t_compute += dequant_s
    t_memory = nbytes / (mem_bw_bytes_per_s * timing.gemm_mem_bw_efficiency)
    if library == "torch_grouped" and sms and timing.torch_grouped_sm_bw_bytes_per_s:
        # the SMs holding tiles stream at most their per-SM rate (module doc)
        t_memory = max(t_memory, nbytes / (min(sms, tiles) * timing.torch_grouped_sm_bw_bytes_per_s))
    lat = timing.stream_latency_s if sms and library == "deepgemm" else timing.gemm_latency_s
    if library == "torch_grouped":
        lat += timing.stream_latency_s  # prepare_grouped_gemm_data, the kernel before the GEMM
    both = max(t_compute, t_memory) if not p else (t_compute ** p + t_memory ** p) ** (1.0 / p)
    return GemmTime(
        t_s=both + lat, t_compute_s=t_compute, t_memory_s=t_memory, t_latency_s=lat,
        flops=flops, bytes=nbytes, tile=(tm, tn), tiles=tiles, split_k=split, waves=waves,
        wave_utilisation=util, regime="compute" if t_compute >= t_memory else "memory",
        peak_flops_per_s=peak_flops_per_s, peak_used=peak_used,
    )


def gemm_time(m: int, n: int, k: int, hw: HardwareProfile, dtype: str = "fp16", *, batch: int = 1,
              out_dtype: str | None = None, weight_bytes: float | None = None,
              matmul_precision: str | None = None, weight_dtype: str | None = None, quant_group: int | None = None,
              groups: float = 1.0, dequant_variant: str = "fused_dequant", library: str = "cublas",
              act_in_l2: bool = False, schedule: str = "auto", tile: tuple[int, int] | None = None,
              cluster_m: int = 1, balanced: bool = False) -> GemmTime:
    """Predicted time of one GEMM kernel ``[M, K] x [K, N]`` (times *batch*) computing in *dtype* on *hw*.

    The peak is :func:`graphroof.timing.matmul_peak` (fp32 runs on TF32 tensor cores under
    ``matmul_precision="high"`` where the device has them; default: the profile's ``matmul_precision``, which
    ``--matmul-precision`` sets), the ceiling :func:`~graphroof.timing.precision.
    gemm_ceiling`.  *weight_dtype* narrower than *dtype* (``int4`` weights, ``bf16`` activations): a weight-only
    GEMM with the dequantisation fused (:mod:`graphroof.timing.quantgemm`; *quant_group*: weights per scale,
    default there; *dequant_variant*: the runtime's ``weight_only_gemm``, how often a weight is dequantised);
    *weight_bytes* is then the packed weights' bytes (default ``K N bits / 8``), scales added.
    *groups*: MoE experts the rows are split over.  *library*: the kernel family (``cublas`` | ``deepgemm``).
    *act_in_l2*: A read from L2, not DRAM, and *schedule* the runtime's ``gemm_schedule``; *tile*, *cluster_m*:
    library ``torch_grouped``'s; *balanced*: grouped rows split evenly (:func:`gemm_time_with`).
    """
    from .precision import gemm_ceiling, matmul_peak
    from .profile import timing_of
    from .quantgemm import dequant_time, scale_bytes, weight_only_bits

    peak, key = matmul_peak(hw, dtype, matmul_precision or hw.matmul_precision)
    ceiling, _ = gemm_ceiling(hw, peak, key)
    in_b = dtype_bits(dtype) / 8
    out_b = dtype_bits(out_dtype) / 8 if out_dtype else in_b
    timing = timing_of(hw)
    dq = 0.0
    bits = weight_only_bits(weight_dtype, dtype)
    if bits:
        g = max(1.0, float(groups))  # MoE: the visited experts' weights (N, K are one expert's)
        packed = weight_bytes if weight_bytes is not None else k * n * bits / 8 * batch * g
        weight_bytes = packed + scale_bytes(n, k, bits, quant_group) * batch * g
        dq = float(dequant_time(m * batch, n, k, timing, hw, dequant_variant))
    return gemm_time_with(m, n, k, timing=timing, peak_flops_per_s=peak,
                          mem_bw_bytes_per_s=hw.mem_bw_bytes_per_s, in_bytes=in_b, out_bytes=out_b,
                          batch=batch, weight_bytes=weight_bytes, peak_used=key, achievable_flops_per_s=ceiling,
                          dequant_s=dq, groups=groups, l2_bytes=hw.onchip_cache_bytes, library=library,
                          act_in_l2=act_in_l2, schedule=schedule if not bits else "auto", weight_only=bool(bits),
                          tile=tile, cluster_m=cluster_m, balanced=balanced)
