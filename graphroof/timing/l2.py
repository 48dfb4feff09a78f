"""Activations read from L2 between the kernels of an engine that runs them back to back.

An engine that enqueues a whole network at once (TensorRT: ``IExecutionContext::enqueueV3``) runs its kernels back
to back on one stream, with no host work or other stream in between, and reuses a few activation buffers.  A
kernel's input activations were written by the kernels just before it; they are still in the device's L2 (a
write-back cache) when the kernel reads them, unless the traffic since has displaced them.  Stated by the L2 size
alone::

    a kernel whose whole traffic (weights + activations read + written) fits in half the L2 reads its activations
    from L2, not DRAM: its DRAM bytes are the counted bytes less its activation reads

Half: the producer's traffic and the consumer's share the L2 with the weights streaming through it, and the L2's
set hashing does not keep every line of a cache-sized working set.  A device whose L2 is split into partitions that
each cache the accesses of their own SMs (``[timing] l2_partitions``; GA100, NVIDIA A100 whitepaper: "Each L2
partition localizes and caches data for memory accesses from SMs in the GPCs directly connected to the partition")
holds an activation read by every SM once per partition: its L2 counts ``onchip_cache_bytes / l2_partitions``.  The
writes still count (the lines are dirty and reach DRAM when evicted); weights always come from DRAM (each is read
once per run, and a model's weights outgrow the L2 of the GPUs it runs on).  Used where the runtime preset says so
(``[kernels] l2_activations``), for GEMM (:func:`graphroof.timing.gemm_time_with`), convolution, attention and
streaming kernels.  No constant fitted: the share is the rule's statement, the L2 size the profile's
``[memory].onchip_cache_bytes`` (datasheet).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..counters.cost import Cost

__all__ = ["L2_SHARE", "fits_l2", "l2_read_cost", "l2_bytes_of"]

#: the share of the L2 a kernel's whole traffic may take for its activation reads to hit (see the docstring)
L2_SHARE = 0.5


def l2_bytes_of(hw: Any) -> float | None:
    """The L2 capacity an activation read by every SM has on *hw*: ``onchip_cache_bytes / l2_partitions``."""
    from .profile import timing_of

    l2 = hw.onchip_cache_bytes
    return l2 / max(1, int(timing_of(hw).l2_partitions)) if l2 else None


def fits_l2(kernel_bytes: float, l2_bytes: float | None) -> bool:
    """Whether a kernel moving *kernel_bytes* in all reads its activations from an L2 of *l2_bytes*."""
    return bool(l2_bytes) and 0.0 < kernel_bytes <= L2_SHARE * float(l2_bytes or 0.0)


def l2_read_cost(cost: Cost, l2_bytes: float | None) -> Cost:
    """*cost* with its activation reads taken off the DRAM traffic when the kernel fits (:func:`fits_l2`)."""
    if not cost.act_read_bytes or not fits_l2(cost.bytes, l2_bytes):
        return cost
    return replace(cost, act_read_bytes=0.0)
