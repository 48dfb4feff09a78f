"""Collectives with an alpha-beta model per algorithm; the library picks the fastest available per size.

*S* is the buffer size in bytes (all-reduce: the tensor; all-gather: the gathered output; reduce-scatter: the
input), *p* GPUs, *g* of them per node, *n = ceil(p / g)* nodes.  Constants from the profile's ``[collectives]``:
``base`` = base(p) (base_latency_s and the ranks' launch skew, below), ``a_in`` / ``a_x`` = intra / inter-node hop
latency, ``B_in`` = intra-node bus bandwidth, ``B_x(S)`` the node's network bandwidth (below), ``B_nvls``.

all-reduce, for each NCCL protocol *pr* (below: its bandwidth share ``f``, its extra latency per NVLink hop ``e_in``
and per network hop ``e_x``), with ``h_in = a_in + e_in``, ``h_x = a_x + e_x``::

    ring (n = 1): base + 2 (p-1) h_in + 2 (p-1)/p * S / (f B_in)
    ring (n > 1): base + (2 (p-1) - 2 (n-1)) h_in + 2 (n-1) h_x + 2 (p-1)/p * S / (f min(B_in, B_x(S)))
                  (a chunk crosses the network 2 (n-1) times on its way round the ring, NVLink the other steps)
    tree (n > 1): base + 2 (ceil(log2 n) h_x + (g-1) h_in) + c_n S / (f min(B_in, B_x2(S)))
                  (NCCL's double binary tree between nodes, a chain inside each: logarithmic latency; c_n = 1 on
                  two nodes -- each node is the root of one tree and a leaf of the other: it sends S/2 up one tree
                  and S/2 down the other, S per direction -- else 2, an inner node sending up and to 2 children)
    nvls (n = 1): base + 2 a_in + S / B_nvls   (NVSwitch reduces in the switch: each GPU sends S, receives S)

The time is the fastest (algorithm, protocol), as NCCL's tuner picks.  Across nodes, where the profile has
``nccl_graph_bw_per_gpu_bytes_per_s``, the algorithm (ring or tree) is the one NCCL's own tuning model picks
(:mod:`.nccl_tuner`: it flips at power-of-two sizes), and the protocol the fastest of that algorithm.
Protocols (device-independent constants, :data:`PROTOCOLS`): ``LL`` stores 8 data bytes with an 8-byte flag (f = 1/2) and needs no extra synchronisation;
``LL128`` stores 120 data bytes per 128-byte line (f = 120/128); ``simple`` moves whole buffers at the full
bandwidth (f = 1) behind memory fences.  ``e_in`` / ``e_x`` are the differences between NCCL's own per-hop
latencies of LL128 / Simple and LL (NCCL src/graph/tuning.cc, ``hwLat``, ring: NVLink 0.47 / 1.9 / 3.4 us, network
2.7 / 4.0 / 14 us): small buffers take LL (latency-bound), large ones Simple or LL128 (bandwidth-bound), and the
switch between them gives the slow bandwidth ramp of mid-size buffers.  A profile whose ``library`` is not NCCL's
(or RCCL's, its port) -- HCCL, XLA, oneCCL -- has one protocol: ``f = 1``, no extra latency.

``B_x(S) = B_nic * min(g, nics_per_node, max(1, S / R))``: NCCL spreads a buffer over more channels (each tied to a
NIC) as it grows, so a small buffer leaves the node through one NIC; ``R`` = inter_ramp_bytes_per_nic (absent: every
NIC from the first byte).  A tree's ``B_x2`` counts ``min(g, 2 nics_per_node)`` NICs: NCCL's balanced tree sends up
and down through two different GPUs of the node, each with its NIC (src/graph/search.cc, "Balanced Tree: count half
of the bandwidth on each of the first two GPUs"), where a ring enters and leaves a node through one NIC pair.

all-gather / reduce-scatter (ring, the same protocols; half an all-reduce's steps)::

    base + (p-1 - (n-1)) h_in + (n-1) h_x + (p-1)/p * S / (f B)

p = 1 costs nothing.

Small messages: the latency part.  ``base`` is what one NCCL call costs when the host launches it (as the Vidur
table times it: host enqueue, launch, the proxy's and the peers' handshakes, the device kernel); inside a CUDA graph
(``cuda_graphs=True``) the host part is gone and ``base`` becomes ``device_latency_s`` (``d``)::

    nccl, host-launched:  base + hops(a_in) + bytes      (t_host_s = base - d)
    nccl, CUDA graph:     d    + hops(a_d)  + bytes

``a_d`` = device_hop_latency_s: an intra-node step between ranks that start together (a graph replays on every rank
at once).  A host-launched call's kernel also waits for the peers' launches (Vidur times rank 0's NCCL kernel over
back-to-back host-launched calls, kineto): with each rank's launch delayed by an exponential time of mean
``sk`` = launch_skew_s, rank 0 waits on average for the last of *p* launches less its own::

    base(p) = base_latency_s + sk * (H_p - 1)       H_p = 1 + 1/2 + ... + 1/p  (2 ranks: sk/2, 8: 1.72 sk)

so a 2-rank call waits far less than an 8-rank one.  What is left scatters (two neighbouring sizes can differ 5x:
rank 0 launched last waits for nobody); ``a_in`` is NCCL's LL NVLink hop (0.47 us, not fitted).

Custom all-reduce (``implementation="custom"``: vLLM's / TensorRT-LLM's kernels over NVLink P2P, one node, at most 8
devices, buffers up to ``custom_max_bytes``; larger or multi-node buffers fall back to NCCL).  ``L_c`` =
custom_latency_s (kernel fill + the start and end barriers: flags written to every peer), ``B_p`` =
p2p_bw_bytes_per_s (one device's peer-read bandwidth)::

    one-shot: L_c + (p-1) S / B_p               every device reads the whole buffer of each of the p-1 peers
    two-shot: L_c + a_d + 2 (p-1)/p S / B_p     reduce-scatter then all-gather of 1/p shards (one more barrier)

one-shot for p = 2, or S < 512 KiB at p <= 4, or S < 256 KiB at p <= 8 (vLLM's rule); two-shot otherwise.  A custom
kernel is one plain kernel launch: no host part beyond the launch every kernel pays.  ``implementation="nvls"``:
NCCL restricted to its NVLS algorithm where the profile has it (else NCCL's fastest).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InputError
from ..hardware.params import CollectiveParams
from .nccl_tuner import nccl_algorithm

if TYPE_CHECKING:
    from ..hardware import HardwareProfile

__all__ = ["CollectiveTime", "collective_time", "collective_time_with", "allreduce_time", "allgather_time",
           "reduce_scatter_time", "network_bw", "protocols_of", "COLLECTIVES",
           "IMPLEMENTATIONS", "PROTOCOLS", "NCCL_RING_CHANNEL_BW", "ring_channel_bw",
           "NCCL_RING_LL_BASE_LATENCY_S", "NCCL_NVLINK_LL_HOP_S", "launch_skew_factor", "host_base_latency_s"]

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
IMPLEMENTATIONS = ("nccl", "custom", "nvls")
_KIB = 1024


@dataclass(frozen=True)
class CollectiveTime:
    """One collective's predicted time, split into latency (alpha) and bandwidth (beta) parts."""

    t_s: float
    t_latency_s: float          # base + hops * hop latency
    t_bandwidth_s: float        # bytes on the bottleneck link / its bandwidth
    algorithm: str              # "ring" | "tree" | "nvls" | "one_shot" | "two_shot" | "none"
    collective: str
    n_gpus: int
    gpus_per_node: int
    size_bytes: float
    t_host_s: float = 0.0       # the host launch + sync part of t_latency_s (0 inside a CUDA graph)
    implementation: str = "nccl"  # "nccl" | "custom" (vLLM / TensorRT-LLM P2P kernels) | "none"
    protocol: str = ""          # NCCL's protocol: "LL" | "LL128" | "simple" ("" for custom / none)


#: NCCL's protocols: (name, share of the link bandwidth carrying data, extra latency per NVLink hop, extra latency
#: per network hop) over LL.  Shares: LL = 8 data bytes per 16-byte store (8 of flag), LL128 = 120 data bytes per
#: 128-byte line, Simple = all.  Hop latencies: NCCL's tuning model (src/graph/tuning.cc ``hwLat``, ring, us): NVLink
#: LL 0.47, LL128 1.9, Simple 3.4; network LL 2.7, LL128 4.0, Simple 14 -- the differences to LL.  Not fitted: the
#: same on every device (the LL hop itself is the profile's a_in / a_x).
PROTOCOLS: tuple[tuple[str, float, float, float], ...] = (
    ("LL", 0.5, 0.0, 0.0),
    ("LL128", 120 / 128, 1.43e-6, 1.3e-6),
    ("simple", 1.0, 2.93e-6, 11.3e-6),
)


#: NCCL's tuning model for a ring LL all-reduce (src/graph/tuning.cc, unchanged from 2.18 to 2.30): ``baseLat`` ring
#: LL 6.6 us (a call's fixed device-side cost: kernel start, the first flag exchange) and ``hwLat`` NVLink ring LL
#: 0.6 us per step: what a call replayed inside a CUDA graph costs (no host launch, the ranks start together:
#: NCCL's model of the device part); the NVIDIA profiles carry them as ``device_latency_s`` / ``device_hop_latency_s``
NCCL_RING_LL_BASE_LATENCY_S = 6.6e-6
NCCL_NVLINK_LL_HOP_S = 0.6e-6


#: NCCL's bandwidth of one ring channel per GPU architecture (bytes/s; src/graph/tuning.cc ``perChMaxRingLL128Bws``,
#: one node: Volta 20, Ampere 20, Hopper 36.7, Blackwell 40 GB/s -- what one channel's thread block moves), keyed by
#: the NVLink generation each architecture carries (NVLink 2 Volta, 3 Ampere, 4 Hopper, 5 Blackwell)
NCCL_RING_CHANNEL_BW: dict[str, float] = {"NVLink 2": 20.0e9, "NVLink 3": 20.0e9, "NVLink 4": 36.7e9,
                                          "NVLink 5": 40.0e9}


def ring_channel_bw(hw: HardwareProfile) -> float | None:
    """NCCL's per-channel ring bandwidth of *hw*'s architecture (:data:`NCCL_RING_CHANNEL_BW`), None off NVLink."""
    return NCCL_RING_CHANNEL_BW.get(hw.interconnect_name.strip())


#: libraries without NCCL's protocols (HCCL, XLA, oneCCL): one protocol at the full bandwidth, no extra latency
_ONE_PROTOCOL: tuple[tuple[str, float, float, float], ...] = (("simple", 1.0, 0.0, 0.0),)


def protocols_of(c: CollectiveParams) -> tuple[tuple[str, float, float, float], ...]:
    """The protocols the profile's collective library picks from: NCCL's (and RCCL's, its port) or one."""
    return PROTOCOLS if c.library in ("nccl", "rccl") else _ONE_PROTOCOL


def launch_skew_factor(n_ranks: int) -> float:
    """``H_n - 1``: rank 0's mean wait for the last of *n_ranks* launches, in units of one rank's mean launch delay
    (iid exponential delays: E[max of n] = H_n, less rank 0's own, 1); 0 for one rank."""
    return sum(1.0 / k for k in range(2, n_ranks + 1))


def host_base_latency_s(c: CollectiveParams, n_ranks: int) -> float:
    """``base + skew (H_n - 1)``: the fixed cost of one host-launched call over *n_ranks* ranks."""
    return c.base_latency_s + c.launch_skew_s * launch_skew_factor(n_ranks)


#: NICs a tree uses per NIC of a ring (``B_x2``: NCCL's balanced tree goes up and down through two GPUs' NICs)
TREE_NIC_MULT = 2


def network_bw(s: float, g: int, c: CollectiveParams, mult: int = 1) -> float:
    """``B_x(S)``: the node's network bandwidth for an *s*-byte buffer, *g* GPUs of the node taking part (one NIC
    per ``inter_ramp_bytes_per_nic`` bytes of buffer, at most ``min(g, mult * nics_per_node)``; *mult* 2: a tree)."""
    assert c.inter_bw_bytes_per_s_per_nic
    nics = float(min(g, mult * c.nics_per_node))
    if c.inter_ramp_bytes_per_nic:
        nics = min(nics, max(1.0, s / c.inter_ramp_bytes_per_nic))
    return c.inter_bw_bytes_per_s_per_nic * nics


def _candidates(op: str, s: float, p: int, g: int, c: CollectiveParams,
                hop_in: float) -> list[tuple[str, str, float, float]]:
    """(algorithm, protocol, latency without the base, bandwidth time) of each algorithm and protocol; *hop_in*:
    the intra-node LL hop."""
    n = math.ceil(p / g)
    b_in = c.intra_bus_bw_bytes_per_s
    if not b_in:
        raise InputError("collective: the hardware profile has no intra-node bandwidth "
                         "(interconnect.bw_bytes_per_s_per_direction or collectives.intra_bus_bw_bytes_per_s)")
    if n > 1:
        if not c.inter_bw_bytes_per_s_per_nic:
            raise InputError(f"collective over {n} nodes: the hardware profile has no "
                             "collectives.inter_bw_bytes_per_s_per_nic (the network between nodes)")
        bw = min(b_in, network_bw(s, g, c))
        bw_tree = min(b_in, network_bw(s, g, c, TREE_NIC_MULT))
    else:
        bw = bw_tree = b_in
    steps = 2 * (p - 1) if op == "all_reduce" else p - 1
    x_steps = (2 if op == "all_reduce" else 1) * (n - 1)   # ring steps a chunk spends on the network
    ring_bytes = steps / p * s
    ring = "ring" in c.algorithms or op != "all_reduce"
    out = []
    for proto, share, e_in, e_x in protocols_of(c):
        h_in, h_x = hop_in + e_in, c.inter_hop_latency_s + e_x
        if ring:
            out.append(("ring", proto, (steps - x_steps) * h_in + x_steps * h_x, ring_bytes / (share * bw)))
        if op == "all_reduce" and "tree" in c.algorithms and n > 1:
            lat = 2 * (math.ceil(math.log2(n)) * h_x + (g - 1) * h_in)
            out.append(("tree", proto, lat, (1 if n == 2 else 2) * s / (share * bw_tree)))
    if op == "all_reduce" and "nvls" in c.algorithms and n == 1 and c.nvls_bw_bytes_per_s:
        out.append(("nvls", "simple", 2 * hop_in, s / c.nvls_bw_bytes_per_s))
    if not out:  # a profile listing only nvls still has the ring fallback NCCL always has
        for proto, share, e_in, _ in protocols_of(c):
            out.append(("ring", proto, steps * (hop_in + e_in), ring_bytes / (share * bw)))
    return out


def _custom(s: float, p: int, c: CollectiveParams) -> tuple[str, float, float]:
    """(algorithm, latency, bandwidth time) of the custom all-reduce (see the module docstring)."""
    assert c.custom_latency_s is not None
    b_p = c.p2p_bw_bytes_per_s or c.intra_bus_bw_bytes_per_s
    if not b_p:
        raise InputError("custom all-reduce: the hardware profile has no collectives.p2p_bw_bytes_per_s or "
                         "intra-node bandwidth")
    one_shot_max = 512 * _KIB if p <= 4 else 256 * _KIB
    if p == 2 or s < one_shot_max:
        return "one_shot", c.custom_latency_s, (p - 1) * s / b_p
    return "two_shot", c.custom_latency_s + c.graph_hop_latency_s, 2 * (p - 1) / p * s / b_p


def _custom_applies(op: str, s: float, p: int, g: int, c: CollectiveParams) -> bool:
    """The custom all-reduce runs: an all-reduce inside one node of at most 8 P2P devices, buffer within its max."""
    return (op == "all_reduce" and c.custom_latency_s is not None and g == p and p <= 8
            and s <= c.custom_max_bytes)


def collective_time_with(op: str, size_bytes: float, n_gpus: int, params: CollectiveParams, *,
                         gpus_per_node: int | None = None, algorithm: str | None = None,
                         implementation: str = "nccl", cuda_graphs: bool = False) -> CollectiveTime:
    """The collective model with explicit constants; *algorithm* forces one (else the fastest).

    *implementation*: ``nccl`` (default), ``custom`` (one-shot / two-shot P2P all-reduce where it applies, NCCL
    otherwise) or ``nvls`` (NCCL's NVLS algorithm where the profile has it); *cuda_graphs*: the call is replayed
    inside a CUDA graph (its base latency is the device part only)."""
    if implementation not in IMPLEMENTATIONS:
        raise InputError(f"all-reduce implementation {implementation!r}: use one of {', '.join(IMPLEMENTATIONS)}")
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
        return CollectiveTime(0.0, 0.0, 0.0, "none", op, n_gpus, g, float(size_bytes), 0.0, "none")
    s = float(size_bytes)
    if implementation == "custom" and algorithm in (None, "one_shot", "two_shot") \
            and _custom_applies(op, s, n_gpus, g, params):
        name, lat, bw = _custom(s, n_gpus, params)
        if algorithm is None or algorithm == name:
            return CollectiveTime(lat + bw, lat, bw, name, op, n_gpus, g, s, 0.0, "custom")
    cands = _candidates(op, s, n_gpus, g, params, params.graph_hop_latency_s if cuda_graphs
                        else params.intra_hop_latency_s)
    if implementation == "nvls" and algorithm is None and any(x[0] == "nvls" for x in cands):
        algorithm = "nvls"
    if (algorithm is None and op == "all_reduce" and params.nccl_graph_bw_per_gpu_bytes_per_s and g < n_gpus
            and {"ring", "tree"} <= set(params.algorithms)):
        algorithm = nccl_algorithm(s, n_gpus, g, g * params.nccl_graph_bw_per_gpu_bytes_per_s)
    if algorithm is not None:
        cands = [x for x in cands if x[0] == algorithm]
        if not cands:
            raise InputError(f"collective algorithm {algorithm!r} is not available for {op} on {n_gpus} GPUs "
                             f"({g} per node) with this profile (algorithms: {', '.join(params.algorithms)})")
    name, proto, lat, bw = min(cands, key=lambda x: x[2] + x[3])
    base = params.graph_latency_s if cuda_graphs else host_base_latency_s(params, n_gpus)
    lat += base
    return CollectiveTime(lat + bw, lat, bw, name, op, n_gpus, g, s, base - params.graph_latency_s, "nccl", proto)


def collective_time(op: str, size_bytes: float, n_gpus: int, hw: HardwareProfile, *,
                    gpus_per_node: int | None = None, algorithm: str | None = None,
                    implementation: str = "nccl", cuda_graphs: bool = False) -> CollectiveTime:
    """Predicted time of collective *op* (``all_reduce`` / ``all_gather`` / ``reduce_scatter``) on *hw*
    (*implementation*, *cuda_graphs*: see :func:`collective_time_with`)."""
    from .profile import collectives_of

    return collective_time_with(op, size_bytes, n_gpus, collectives_of(hw), gpus_per_node=gpus_per_node,
                                algorithm=algorithm, implementation=implementation, cuda_graphs=cuda_graphs)


def allreduce_time(size_bytes: float, n_gpus: int, hw: HardwareProfile, *, gpus_per_node: int | None = None,
                   algorithm: str | None = None, implementation: str = "nccl",
                   cuda_graphs: bool = False) -> CollectiveTime:
    """All-reduce of a *size_bytes* buffer over *n_gpus* (``gpus_per_node`` default: all in one node)."""
    return collective_time("all_reduce", size_bytes, n_gpus, hw, gpus_per_node=gpus_per_node, algorithm=algorithm,
                           implementation=implementation, cuda_graphs=cuda_graphs)


def allgather_time(size_bytes: float, n_gpus: int, hw: HardwareProfile, *,
                   gpus_per_node: int | None = None, cuda_graphs: bool = False) -> CollectiveTime:
    """All-gather producing a *size_bytes* output on each of *n_gpus*."""
    return collective_time("all_gather", size_bytes, n_gpus, hw, gpus_per_node=gpus_per_node,
                           cuda_graphs=cuda_graphs)


def reduce_scatter_time(size_bytes: float, n_gpus: int, hw: HardwareProfile, *,
                        gpus_per_node: int | None = None, cuda_graphs: bool = False) -> CollectiveTime:
    """Reduce-scatter of a *size_bytes* input over *n_gpus*."""
    return collective_time("reduce_scatter", size_bytes, n_gpus, hw, gpus_per_node=gpus_per_node,
                           cuda_graphs=cuda_graphs)
