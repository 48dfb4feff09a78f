"""Collectives with an alpha-beta model per algorithm; the library picks the fastest available per size.

*S* is the buffer size in bytes (all-reduce: the tensor; all-gather: the gathered output; reduce-scatter: the
input), *p* GPUs, *g* of them per node, *n = ceil(p / g)* nodes.  Constants from the profile's ``[collectives]``:
``base`` = base_latency_s, ``a_in`` / ``a_x`` = intra / inter-node hop latency, ``B_in`` = intra-node bus bandwidth,
``B_x = inter_bw_bytes_per_s_per_nic * min(g, nics_per_node)`` the node's network bandwidth, ``B_nvls``.

all-reduce::

    ring (n = 1): base + 2 (p-1) a_in + 2 (p-1)/p * S / B_in
    ring (n > 1): base + 2 (p-1) a_x  + 2 (p-1)/p * S / min(B_in, B_x)   (every ring step waits on the network hop)
    tree (n > 1): base + 2 (ceil(log2 n) a_x + (g-1) a_in) + 2 S / min(B_in, B_x)
                  (NCCL's double binary tree between nodes, a chain inside each: logarithmic latency)
    nvls (n = 1): base + 2 a_in + S / B_nvls   (NVSwitch reduces in the switch: each GPU sends S, receives S)

all-gather / reduce-scatter (ring; half an all-reduce's steps)::

    base + (p-1) a + (p-1)/p * S / B

p = 1 costs nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InputError
from ..hardware.params import CollectiveParams

if TYPE_CHECKING:
    from ..hardware import HardwareProfile

__all__ = ["CollectiveTime", "collective_time", "collective_time_with", "allreduce_time", "allgather_time",
           "reduce_scatter_time", "COLLECTIVES"]

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")


@dataclass(frozen=True)
class CollectiveTime:
    """One collective's predicted time, split into latency (alpha) and bandwidth (beta) parts."""

    t_s: float
    t_latency_s: float          # base + hops * hop latency
    t_bandwidth_s: float        # bytes on the bottleneck link / its bandwidth
    algorithm: str              # "ring" | "tree" | "nvls" | "none"
    collective: str
    n_gpus: int
    gpus_per_node: int
    size_bytes: float


def _candidates(op: str, s: float, p: int, g: int, c: CollectiveParams) -> list[tuple[str, float, float]]:
    n = math.ceil(p / g)
    b_in = c.intra_bus_bw_bytes_per_s
    if not b_in:
        raise InputError("collective: the hardware profile has no intra-node bandwidth "
                         "(interconnect.bw_bytes_per_s_per_direction or collectives.intra_bus_bw_bytes_per_s)")
    if n > 1:
        if not c.inter_bw_bytes_per_s_per_nic:
            raise InputError(f"collective over {n} nodes: the hardware profile has no "
                             "collectives.inter_bw_bytes_per_s_per_nic (the network between nodes)")
        bw = min(b_in, c.inter_bw_bytes_per_s_per_nic * min(g, c.nics_per_node))
        hop = c.inter_hop_latency_s
    else:
        bw, hop = b_in, c.intra_hop_latency_s
    out = []
    if op == "all_reduce":
        if "ring" in c.algorithms or len(c.algorithms) == 0:
            out.append(("ring", 2 * (p - 1) * hop, 2 * (p - 1) / p * s / bw))
        if "tree" in c.algorithms and n > 1:
            lat = 2 * (math.ceil(math.log2(n)) * c.inter_hop_latency_s + (g - 1) * c.intra_hop_latency_s)
            out.append(("tree", lat, 2 * s / bw))
        if "nvls" in c.algorithms and n == 1 and c.nvls_bw_bytes_per_s:
            out.append(("nvls", 2 * c.intra_hop_latency_s, s / c.nvls_bw_bytes_per_s))
        if not out:  # a profile listing only tree / nvls still has the ring fallback NCCL always has
            out.append(("ring", 2 * (p - 1) * hop, 2 * (p - 1) / p * s / bw))
    else:
        out.append(("ring", (p - 1) * hop, (p - 1) / p * s / bw))
    return out


def collective_time_with(op: str, size_bytes: float, n_gpus: int, params: CollectiveParams, *,
                         gpus_per_node: int | None = None, algorithm: str | None = None) -> CollectiveTime:
    """The collective model with explicit constants; *algorithm* forces one (else the fastest)."""
    if op not in COLLECTIVES:
        raise InputError(f"collective {op!r}: use one of {', '.join(COLLECTIVES)}")
    if not isinstance(n_gpus, int) or n_gpus < 1:
        raise InputError(f"collective: n_gpus must be a whole number >= 1, got {n_gpus!r}")
    g = n_gpus if gpus_per_node is None else min(gpus_per_node, n_gpus)
    if g < 1:
        raise InputError(f"collective: gpus_per_node must be >= 1, got {gpus_per_node!r}")
    if size_bytes < 0:
        raise InputError(f"collective: size must be >= 0 bytes, got {size_bytes!r}")
    if n_gpus == 1 or size_bytes == 0:
        return CollectiveTime(0.0, 0.0, 0.0, "none", op, n_gpus, g, float(size_bytes))
    cands = _candidates(op, float(size_bytes), n_gpus, g, params)
    if algorithm is not None:
        cands = [x for x in cands if x[0] == algorithm]
        if not cands:
            raise InputError(f"collective algorithm {algorithm!r} is not available for {op} on {n_gpus} GPUs "
                             f"({g} per node) with this profile (algorithms: {', '.join(params.algorithms)})")
    name, lat, bw = min(cands, key=lambda x: x[1] + x[2])
    lat += params.base_latency_s
    return CollectiveTime(lat + bw, lat, bw, name, op, n_gpus, g, float(size_bytes))


def collective_time(op: str, size_bytes: float, n_gpus: int, hw: HardwareProfile, *,
                    gpus_per_node: int | None = None, algorithm: str | None = None) -> CollectiveTime:
    """Predicted time of collective *op* (``all_reduce`` / ``all_gather`` / ``reduce_scatter``) on *hw*."""
    from .profile import collectives_of

    return collective_time_with(op, size_bytes, n_gpus, collectives_of(hw), gpus_per_node=gpus_per_node,
                                algorithm=algorithm)


def allreduce_time(size_bytes: float, n_gpus: int, hw: HardwareProfile, *, gpus_per_node: int | None = None,
                   algorithm: str | None = None) -> CollectiveTime:
    """All-reduce of a *size_bytes* buffer over *n_gpus* (``gpus_per_node`` default: all in one node)."""
    return collective_time("all_reduce", size_bytes, n_gpus, hw, gpus_per_node=gpus_per_node, algorithm=algorithm)


def allgather_time(size_bytes: float, n_gpus: int, hw: HardwareProfile, *,
                   gpus_per_node: int | None = None) -> CollectiveTime:
    """All-gather producing a *size_bytes* output on each of *n_gpus*."""
    return collective_time("all_gather", size_bytes, n_gpus, hw, gpus_per_node=gpus_per_node)


def reduce_scatter_time(size_bytes: float, n_gpus: int, hw: HardwareProfile, *,
                        gpus_per_node: int | None = None) -> CollectiveTime:
    """Reduce-scatter of a *size_bytes* input over *n_gpus*."""
    return collective_time("reduce_scatter", size_bytes, n_gpus, hw, gpus_per_node=gpus_per_node)
