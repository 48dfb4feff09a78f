"""Kernel-level realistic time: GEMMs (tiles, waves, weight streaming), streaming kernels (bandwidth saturation),
launch costs (eager vs CUDA graphs), collectives (alpha-beta per algorithm) and the fp32 precision policy.

Pure functions of plain numbers and a :class:`~graphroof.hardware.HardwareProfile`; every constant is data in the
profile's ``[timing]`` / ``[collectives]`` sections (see :mod:`graphroof.hardware.params`), or derived from its
other fields when absent.
"""

from ..hardware.params import STREAM_KINDS, CollectiveParams, KernelTiming
from .attention import attention_time
from .collectives import (
                          COLLECTIVES,
                          CollectiveTime,
                          allgather_time,
                          allreduce_time,
                          collective_time,
                          collective_time_with,
                          reduce_scatter_time,
)
from .gemm import GemmTime, gemm_time, gemm_time_with
from .precision import MATMUL_PRECISIONS, gemm_ceiling, matmul_peak, matmul_peak_key
from .profile import collectives_of, timing_of
from .stream import StreamTime, launch_time, stream_time, stream_time_with

__all__ = [
    "COLLECTIVES", "CollectiveTime", "allgather_time", "allreduce_time", "collective_time", "collective_time_with",
    "reduce_scatter_time", "GemmTime", "gemm_time", "gemm_time_with", "STREAM_KINDS", "CollectiveParams",
    "KernelTiming", "MATMUL_PRECISIONS", "matmul_peak", "matmul_peak_key", "collectives_of", "timing_of",
    "StreamTime", "launch_time", "stream_time", "stream_time_with", "attention_time", "gemm_ceiling",
]
