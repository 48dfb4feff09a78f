"""Point-to-point traffic: a pipeline stage's send / receive and the all-to-all of expert parallelism, alpha-beta
on the same ``[collectives]`` constants as :mod:`graphroof.timing.collectives` (``base`` = base_latency_s plus the
launch skew of the ranks taking part, 2 for send / recv, *p* for all-to-all: ``host_base_latency_s``;
``a_in`` / ``a_x`` = intra / inter-node hop latency, ``B_in`` = intra-node bus bandwidth, ``B_nic`` =
``inter_bw_bytes_per_s_per_nic``; ``g`` GPUs per node, ``nics_per_node`` NICs).

send / recv of *S* bytes from one GPU to one peer::

    same node:       L_p2p + S / B_p2p           (B_p2p: collectives.p2p_bw_bytes_per_s, else B_in)
    across nodes:    L_x   + S / (B_nic * min(g, nics) / g)            (the GPU's share of its node's NICs)

``L_p2p`` / ``L_x``: the profile's ``p2p_latency_s`` / ``p2p_inter_latency_s`` (one send / recv pair: two kernels
and one peer link, none of a collective's ring steps; fitted on Vidur's DGX send_recv tables where given: NCCL's
send / recv takes 7.5 us inside an H100 node against the 19.4 us of an all-reduce call's base + skew + hop), else
``base + a_in`` / ``base + a_x`` as for a collective.

all-to-all over *p* GPUs (each sends *S* bytes in all, ``S / (p - 1)`` to each peer, as dispatch / combine of
expert parallelism; the switch lets every pair talk at once, so the time is set by the busiest link of a GPU)::

    p <= g (one node): base + a_in + S / B_in
    p > g (n nodes):   base + a_x  + max(S_in / B_in, S_x / (B_nic * min(g, nics) / g))
                       S_in = S (g - 1) / (p - 1) to the node's peers, S_x = S (p - g) / (p - 1) to the others

p = 1 (or S = 0) costs nothing.  The bytes are the caller's: :func:`all_to_all_bytes` is what leaves one GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InputError
from ..hardware.params import CollectiveParams
from .collectives import host_base_latency_s

if TYPE_CHECKING:
    from ..hardware import HardwareProfile

__all__ = ["P2PTime", "all_to_all_bytes", "all_to_all_time", "send_recv_time"]


@dataclass(frozen=True)
class P2PTime:
    """One transfer's predicted time: latency (alpha) and bandwidth (beta) parts."""

    t_s: float
    t_latency_s: float
    t_bandwidth_s: float
    inter_node: bool
    size_bytes: float


def all_to_all_bytes(tokens: float, top_k: int, hidden: int, dtype_bytes: float, p: int) -> float:
    """Bytes leaving one GPU in one all-to-all of expert parallelism (dispatch, or the same again at combine):
    each of its *tokens* goes to *top_k* experts, a share ``(p - 1) / p`` of them on another GPU under uniform
    routing: ``tokens * top_k * hidden * dtype_bytes * (p - 1) / p``."""
    if p <= 1:
        return 0.0
    return tokens * top_k * hidden * dtype_bytes * (p - 1) / p


def _params(hw: HardwareProfile | CollectiveParams) -> CollectiveParams:
    if isinstance(hw, CollectiveParams):
        return hw
    from .profile import collectives_of

    return collectives_of(hw)


def _nic_bw(c: CollectiveParams, g: int, what: str) -> float:
    if not c.inter_bw_bytes_per_s_per_nic:
        raise InputError(f"{what} across nodes: the hardware profile has no collectives.inter_bw_bytes_per_s_per_nic "
                         "(the network between nodes); pick a --system or a profile with one")
    return c.inter_bw_bytes_per_s_per_nic * min(g, c.nics_per_node) / g


def _intra_bw(c: CollectiveParams, what: str) -> float:
    if not c.intra_bus_bw_bytes_per_s:
        raise InputError(f"{what}: the hardware profile has no intra-node bandwidth "
                         "(interconnect.bw_bytes_per_s_per_direction or collectives.intra_bus_bw_bytes_per_s)")
    return c.intra_bus_bw_bytes_per_s


def send_recv_time(size_bytes: float, hw: HardwareProfile | CollectiveParams, *, inter_node: bool = False,
                   gpus_per_node: int = 8) -> P2PTime:
    """One GPU sends *size_bytes* to one peer (a pipeline stage boundary)."""
    if size_bytes <= 0:
        return P2PTime(0.0, 0.0, 0.0, inter_node, 0.0)
    c = _params(hw)
    if inter_node:
        fixed = getattr(c, "p2p_inter_latency_s", None)
        lat = fixed if fixed is not None else host_base_latency_s(c, 2) + c.inter_hop_latency_s
        bw = _nic_bw(c, max(1, gpus_per_node), "send/recv")
    else:
        fixed = getattr(c, "p2p_latency_s", None)
        lat = fixed if fixed is not None else host_base_latency_s(c, 2) + c.intra_hop_latency_s
        bw = getattr(c, "p2p_bw_bytes_per_s", None) or _intra_bw(c, "send/recv")
    return P2PTime(lat + size_bytes / bw, lat, size_bytes / bw, inter_node, size_bytes)


def all_to_all_time(size_bytes: float, p: int, hw: HardwareProfile | CollectiveParams, *,
                    gpus_per_node: int | None = None) -> P2PTime:
    """All-to-all over *p* GPUs, *size_bytes* leaving each (``gpus_per_node`` default: all in one node)."""
    if p < 1:
        raise InputError(f"all-to-all: need >= 1 GPU, got {p}")
    if p == 1 or size_bytes <= 0:
        return P2PTime(0.0, 0.0, 0.0, False, 0.0)
    c = _params(hw)
    g = p if gpus_per_node is None else max(1, min(gpus_per_node, p))
    b_in = _intra_bw(c, "all-to-all")
    if math.ceil(p / g) == 1:
        lat = host_base_latency_s(c, p) + c.intra_hop_latency_s
        return P2PTime(lat + size_bytes / b_in, lat, size_bytes / b_in, False, size_bytes)
    s_in = size_bytes * (g - 1) / (p - 1)
    s_x = size_bytes * (p - g) / (p - 1)
    beta = max(s_in / b_in, s_x / _nic_bw(c, g, "all-to-all"))
    lat = host_base_latency_s(c, p) + c.inter_hop_latency_s
    return P2PTime(lat + beta, lat, beta, True, size_bytes)
