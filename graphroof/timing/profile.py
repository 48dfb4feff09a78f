"""The timing constants of a profile, or defaults derived from its other fields when it has no section."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..hardware.params import CollectiveParams, KernelTiming

if TYPE_CHECKING:
    from ..hardware import HardwareProfile

__all__ = ["timing_of", "collectives_of", "sustained_rates", "sustained_note"]


def timing_of(hw: HardwareProfile) -> KernelTiming:
    """``hw.timing``, or derived: no SM count (no wave quantisation), the profile's ``[efficiency]`` factors for
    GEMM compute / bandwidth and streaming kernels, its ``launch_overhead_s`` per kernel."""
    if hw.timing is not None:
        return hw.timing
    return replace(KernelTiming(), sm_count=None, gemm_matrix_efficiency=hw.matrix_efficiency,
                   gemm_mem_bw_efficiency=hw.mem_bw_efficiency, launch_overhead_s=hw.launch_overhead_s,
                   stream_bw_efficiency={"elementwise": hw.mem_bw_efficiency}, derived=True)


def collectives_of(hw: HardwareProfile) -> CollectiveParams:
    """``hw.collectives``, or derived: a ring over the profile's interconnect at its efficiency factor; no
    inter-node link (multi-node collectives need a ``[collectives]`` section)."""
    if hw.collectives is not None:
        return hw.collectives
    bw = hw.interconnect_bw_bytes_per_s
    return CollectiveParams(algorithms=("ring",),
                            intra_bus_bw_bytes_per_s=bw * hw.interconnect_efficiency if bw else None,
                            derived=True)


def sustained_rates(hw: HardwareProfile, dtype: str = "bf16") -> dict[str, float]:
    """The realistic model's large-kernel ceilings of *hw*, what realistic rankings follow (not the peaks):
    ``matmul_flops_per_s`` = the large-GEMM ceiling (achievable-matmul row, else the peak) x gemm_matrix_efficiency
    (one full wave of tiles), ``weights_bw_bytes_per_s`` = memory bandwidth x gemm_mem_bw_efficiency (weight
    streaming), with the peaks they derate (``matmul_peak_flops_per_s``, ``mem_bw_bytes_per_s``)."""
    from .precision import gemm_ceiling, matmul_peak

    t = timing_of(hw)
    peak, key = matmul_peak(hw, dtype, "high")
    ceiling, _ = gemm_ceiling(hw, peak, key)
    return {"matmul_flops_per_s": ceiling * t.gemm_matrix_efficiency, "matmul_peak_flops_per_s": peak,
            "weights_bw_bytes_per_s": hw.mem_bw_bytes_per_s * t.gemm_mem_bw_efficiency,
            "mem_bw_bytes_per_s": hw.mem_bw_bytes_per_s}


def sustained_note(profiles: list[HardwareProfile], dtype: str = "bf16") -> str:
    """One line naming each device's sustained matmul rate and weight-streaming bandwidth against its peaks, and
    where its constants come from: the physical reason a realistic ranking can differ from the roofline's."""
    from ..units import fmt_rate

    parts = []
    for hw in profiles:
        r = sustained_rates(hw, dtype)
        parts.append(f"{hw.name} ({hw.origin}): matmul {fmt_rate(r['matmul_flops_per_s'])} of "
                      f"{fmt_rate(r['matmul_peak_flops_per_s'])}, weight streaming "
                      f"{fmt_rate(r['weights_bw_bytes_per_s'], 'B/s')} of {fmt_rate(r['mem_bw_bytes_per_s'], 'B/s')}")
    return (f"sustained rates of the realistic model ({dtype} GEMMs; realistic rankings follow these, not the peaks): "
            + "; ".join(parts))

