"""The timing constants of a profile, or defaults derived from its other fields when it has no section."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..hardware.params import CollectiveParams, KernelTiming

if TYPE_CHECKING:
    from ..hardware import HardwareProfile

__all__ = ["timing_of", "collectives_of"]


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
