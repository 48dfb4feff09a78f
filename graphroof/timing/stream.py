"""Streaming (memory-bound) kernels and kernel launch costs.

A streaming kernel (norm, rotary, activation-and-multiply, residual add, gather, copy ...) moves *bytes* once::

    t = stream_latency_s + bytes / (mem_bw * stream_bw_efficiency[kind])

The fixed term makes the achieved bandwidth a saturation curve in the bytes moved:
``bw(bytes) = bytes / t`` rises from ~0 for tiny kernels to ``mem_bw * efficiency`` for large ones, reaching half of
it at ``bytes = stream_latency_s * mem_bw * efficiency``.  The efficiency is per kernel kind because the kernels
differ in how well they use the memory system (vectorised accesses, one pass or two over a row).

Launch: eager execution pays ``launch_overhead_s`` per kernel; under CUDA graphs the whole step is one replay
costing ``graph_launch_overhead_s``, whatever the number of kernels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InputError
from ..hardware.params import STREAM_KINDS, KernelTiming

if TYPE_CHECKING:
    from ..hardware import HardwareProfile

__all__ = ["StreamTime", "stream_time", "stream_time_with", "launch_time"]


@dataclass(frozen=True)
class StreamTime:
    """One streaming kernel's predicted time and its parts."""

    t_s: float                  # t_memory_s + t_latency_s
    t_memory_s: float           # bytes at the kind's sustained bandwidth
    t_latency_s: float
    bytes: float
    kind: str
    mem_bw_efficiency: float    # the kind's sustained fraction of peak bandwidth (large kernels)
    achieved_bw_bytes_per_s: float  # bytes / t_s


def stream_time_with(nbytes: float, *, timing: KernelTiming, mem_bw_bytes_per_s: float,
                     kind: str = "elementwise") -> StreamTime:
    """The streaming model with explicit constants."""
    if kind not in STREAM_KINDS:
        raise InputError(f"stream kernel kind {kind!r}: use one of {', '.join(STREAM_KINDS)}")
    if nbytes < 0:
        raise InputError(f"stream kernel bytes must be >= 0, got {nbytes!r}")
    if nbytes == 0:
        return StreamTime(0.0, 0.0, 0.0, 0.0, kind, timing.stream_efficiency(kind), 0.0)
    eff = timing.stream_efficiency(kind)
    tm = nbytes / (mem_bw_bytes_per_s * eff)
    t = tm + timing.stream_latency_s
    return StreamTime(t, tm, timing.stream_latency_s, float(nbytes), kind, eff, nbytes / t)


def stream_time(nbytes: float, hw: HardwareProfile, kind: str = "elementwise") -> StreamTime:
    """Predicted time of one streaming kernel of *kind* moving *nbytes* (reads + writes) on *hw*."""
    from .profile import timing_of

    return stream_time_with(nbytes, timing=timing_of(hw), mem_bw_bytes_per_s=hw.mem_bw_bytes_per_s, kind=kind)


def launch_time(n_kernels: int, hw: HardwareProfile, *, cuda_graphs: bool = False) -> float:
    """Launch cost of one step of *n_kernels* kernels: per kernel when eager, one replay under CUDA graphs."""
    from .profile import timing_of

    t = timing_of(hw)
    if n_kernels <= 0:
        return 0.0
    return t.graph_launch_overhead_s if cuda_graphs else n_kernels * t.launch_overhead_s
