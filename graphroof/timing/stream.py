"""Streaming (memory-bound) kernels and kernel launch costs.

A streaming kernel (norm, rotary, activation-and-multiply, residual add, gather, copy ...) moves *bytes* once::

    t = stream_latency_s + bytes / (mem_bw * stream_bw_efficiency[kind])

The fixed term makes the achieved bandwidth a saturation curve in the bytes moved:
``bw(bytes) = bytes / t`` rises from ~0 for tiny kernels to ``mem_bw * efficiency`` for large ones, reaching half of
it at ``bytes = stream_latency_s * mem_bw * efficiency``.  The efficiency is per kernel kind because the kernels
differ in how well they use the memory system (vectorised accesses, one pass or two over a row).

A runtime preset may price its norm kernels as one-pass kernels (``[kernels].norm_stream = "elementwise"``,
:func:`priced_kind`): each row is read once, reduced on chip, scaled and written, so the kernel moves its bytes at
the profile's ``elementwise`` rate instead of the fitted ``norm`` rate (a kernel that reads the row again after
the reduction).  The default keeps ``norm``.

Launch: eager execution pays ``launch_overhead_s`` per kernel; under CUDA graphs the whole step is one replay
costing ``graph_launch_overhead_s``, whatever the number of kernels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..hardware.params import STREAM_KINDS, KernelTiming

if TYPE_CHECKING:
    from ..hardware import HardwareProfile

__all__ = ["StreamTime", "stream_time", "stream_time_with", "launch_time", "host_pipeline", "priced_kind"]


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


def priced_kind(kind: str, runtime: Any = None) -> str:
    """The stream kind a kernel of *kind* is priced as under *runtime*: ``norm`` becomes the preset's
    ``norm_stream`` (``elementwise``: a one-pass norm kernel); every other kind, and no runtime, is itself."""
    if kind == "norm" and runtime is not None:
        return str(getattr(runtime, "norm_stream", "norm") or "norm")
    return kind


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


def host_pipeline(device_s: list[float], host_s: list[float], repeats: list[int] | None = None) -> list[float]:
    """Wall time each kernel adds to a step when the host dispatches kernels asynchronously ahead of the device.

    A two-stage pipeline, kernels in launch order: the host spends ``host_s[i]`` issuing kernel *i*, then the
    next; the device starts kernel *i* when it has been issued and kernel *i - 1* has finished::

        issued_i = issued_{i-1} + host_i
        end_i    = max(issued_i, end_{i-1}) + device_i

    The step takes ``end_n`` (between max(Σ host, Σ device) and their sum): host-bound when kernels are shorter
    than their dispatch, device-bound when the host runs ahead.  Returns ``end_i - end_{i-1}`` per kernel (their
    sum is the step), each >= ``device_s[i]``.  ``repeats[i] = r`` (> 1): kernel *i* is launched *r* times in a
    row, its *device_s* / *host_s* being the totals of the *r* launches (closed form: linear in *r* once the
    faster stage waits on the slower).
    """
    out = []
    issued = end = 0.0
    for i, (d, h) in enumerate(zip(device_s, host_s)):
        r = repeats[i] if repeats is not None else 1
        if r > 1:
            d1, h1 = d / r, h / r
            new_end = max(end + d, issued + h1 + d, issued + h + d1)
        else:
            new_end = max(issued + h, end) + d
        issued += h
        out.append(new_end - end)
        end = new_end
    return out
