"""GEMM time from its shape: tile and wave quantisation over the SMs, or weight streaming at small M.

Model (``C[M, N] = A[M, K] @ B[K, N]``, ``batch`` independent GEMMs; constants from the profile's ``[timing]``)::

    tile      = (tm, tn): tn = gemm_tile[1]; tm one of gemm_tile[0], gemm_tile[0]/2, ... down to gemm_tile_m_min
                (the library's tile configurations).  gemm_tile_policy "best": the one with the least compute
                time runs (a library that searches its configurations); "cover_m": the smallest height that
                covers M, else the largest (a heuristic keyed on M alone, blind to wave quantisation)
    tiles     = ceil(M / tm) * ceil(N / tn) * batch
    split_k   = s: when tiles < SMs the library splits K over s CTAs per tile to fill the machine,
                s = min(floor(SMs / tiles), floor(K / gemm_split_k_min)), at least 1
    waves     = ceil(tiles * s / SMs)
    rate_sm   = peak * gemm_matrix_efficiency / SMs * min(1, I_tile / I_l2)
                I_tile = 2 tm tn / ((tm + tn) * bytes per element): FLOPs per byte a CTA loads from L2 per k step;
                I_l2 = peak / gemm_l2_bw_bytes_per_s: below it a (narrow) tile is starved by the L2 bandwidth
    t_compute = waves * (2 * tm * tn * ceil(K / s)) / rate_sm
                (each wave costs one CTA's work at one SM's rate: a partial last wave costs as much as a full one)
    t_memory  = (A + B + C bytes, + split-K fp32 partials written and read back) / (mem_bw * gemm_mem_bw_efficiency)
    t         = overlap(t_compute, t_memory) + gemm_latency_s
                overlap = max (perfect overlap of loads and math) without gemm_overlap_exponent, else the
                p-norm (t_compute^p + t_memory^p)^(1/p): near the ridge neither hides the other completely

At small M ``t_memory`` (the weights B streamed once) dominates: the regime is bandwidth, not FLOPs.  Without
``sm_count`` (non-GPU profiles) there is no quantisation: ``t_compute = FLOPs / (peak * efficiency)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..dtypes import dtype_bits
from ..errors import InputError
from ..hardware.params import KernelTiming

if TYPE_CHECKING:
    from ..hardware import HardwareProfile

__all__ = ["GemmTime", "gemm_time", "gemm_time_with"]


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


def _tile_heights(t: KernelTiming) -> list[int]:
    tm, out = t.gemm_tile[0], []
    while tm >= t.gemm_tile_m_min:
        out.append(tm)
        if tm % 2:
            break
        tm //= 2
    return out or [t.gemm_tile[0]]


def _compute(m: int, n: int, k: int, batch: int, tm: int, tn: int, t: KernelTiming, rate: float, in_bytes: float,
             i_l2: float, sms: int) -> tuple[float, int, int, int, float]:
    """(t_compute_s, tiles, split_k, waves, cta_flops) of one tile configuration on *sms* SMs."""
    tiles = math.ceil(m / tm) * math.ceil(n / tn) * batch
    split = 1
    if tiles < sms:
        split = max(1, min(sms // tiles, k // max(1, t.gemm_split_k_min)))
    waves = math.ceil(tiles * split / sms)
    cta_flops = 2.0 * tm * tn * math.ceil(k / split)
    starve = min(1.0, 2.0 * tm * tn / ((tm + tn) * in_bytes) / i_l2) if i_l2 else 1.0
    return waves * cta_flops / (rate / sms * starve), tiles, split, waves, cta_flops


def gemm_time_with(m: int, n: int, k: int, *, timing: KernelTiming, peak_flops_per_s: float,
                   mem_bw_bytes_per_s: float, in_bytes: float = 2.0, out_bytes: float | None = None,
                   batch: int = 1, weight_bytes: float | None = None, peak_used: str = "") -> GemmTime:
    """The GEMM model with explicit constants (what :func:`gemm_time` calls after reading the profile).

    *in_bytes* / *out_bytes*: bytes per element of A, B and of C; *weight_bytes* overrides B's total (e.g.
    int4 weights with fp16 activations).
    """
    for name, v in (("M", m), ("N", n), ("K", k), ("batch", batch)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise InputError(f"gemm_time: {name} must be a whole number >= 0, got {v!r}")
    out_bytes = in_bytes if out_bytes is None else out_bytes
    flops = 2.0 * m * n * k * batch
    b_bytes = weight_bytes if weight_bytes is not None else k * n * in_bytes * batch
    nbytes = (m * k * in_bytes + m * n * out_bytes) * batch + b_bytes
    if flops == 0:
        return GemmTime(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, (0, 0), 0, 1, 0, 1.0, "memory", peak_flops_per_s, peak_used)
    rate = peak_flops_per_s * timing.gemm_matrix_efficiency
    sms = timing.sm_count
    if sms:
        i_l2 = peak_flops_per_s / timing.gemm_l2_bw_bytes_per_s if timing.gemm_l2_bw_bytes_per_s else 0.0
        tn = timing.gemm_tile[1]
        heights = _tile_heights(timing)
        if timing.gemm_tile_policy == "cover_m":
            heights = [min((h for h in heights if h >= m), default=heights[0])]
        best = min((_compute(m, n, k, batch, tm, tn, timing, rate, in_bytes, i_l2, sms), tm) for tm in heights)
        (t_compute, tiles, split, waves, cta_flops), tm = best
        util = flops / (waves * sms * cta_flops)
        if split > 1:  # fp32 partial sums: each split writes its M x N slice, the reduction reads them back
            nbytes += 2.0 * split * m * n * 4 * batch
    else:
        tm, tn = timing.gemm_tile
        tiles, split, waves, util = 0, 1, 1, 1.0
        t_compute = flops / rate
    t_memory = nbytes / (mem_bw_bytes_per_s * timing.gemm_mem_bw_efficiency)
    lat = timing.gemm_latency_s
    p = timing.gemm_overlap_exponent
    both = max(t_compute, t_memory) if not p else (t_compute ** p + t_memory ** p) ** (1.0 / p)
    return GemmTime(
        t_s=both + lat, t_compute_s=t_compute, t_memory_s=t_memory, t_latency_s=lat,
        flops=flops, bytes=nbytes, tile=(tm, tn), tiles=tiles, split_k=split, waves=waves,
        wave_utilisation=util, regime="compute" if t_compute >= t_memory else "memory",
        peak_flops_per_s=peak_flops_per_s, peak_used=peak_used,
    )


def gemm_time(m: int, n: int, k: int, hw: HardwareProfile, dtype: str = "fp16", *, batch: int = 1,
              out_dtype: str | None = None, weight_bytes: float | None = None,
              matmul_precision: str = "high") -> GemmTime:
    """Predicted time of one GEMM kernel ``[M, K] x [K, N]`` (times *batch*) computing in *dtype* on *hw*.

    The peak is :func:`graphroof.timing.matmul_peak` (fp32 runs on TF32 tensor cores under
    ``matmul_precision="high"`` where the device has them).
    """
    from .precision import matmul_peak
    from .profile import timing_of

    peak, key = matmul_peak(hw, dtype, matmul_precision)
    in_b = dtype_bits(dtype) / 8
    out_b = dtype_bits(out_dtype) / 8 if out_dtype else in_b
    return gemm_time_with(m, n, k, timing=timing_of(hw), peak_flops_per_s=peak,
                          mem_bw_bytes_per_s=hw.mem_bw_bytes_per_s, in_bytes=in_b, out_bytes=out_b,
                          batch=batch, weight_bytes=weight_bytes, peak_used=key)
