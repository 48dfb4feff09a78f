"""Which algorithm NCCL's own tuner runs for an all-reduce across nodes: ring or tree.

NCCL does not run the algorithm that is fastest on the wire: it runs the one its tuning model (src/graph/tuning.cc,
NCCL 2.19-2.21, ``ncclTopoTuneModel`` / ``ncclTopoGetAlgoTime``) says is fastest.  That model prices each
(algorithm, protocol) as ``lat + S / bw`` with its own constants, and scales the tree's bandwidth by a correction
factor that changes at every power of two of the buffer (``treeCorrectionFactor``, indexed by log2(S / 64)).  So
across nodes NCCL flips between ring and tree at power-of-two sizes (8 / 16 / 32 / 64 MiB), and the measured time
jumps there (Vidur's 2-node A100 rows: 4 GPUs on 2 nodes run ~1.7x faster in [8, 16) MiB and at 64 MiB than in
[16, 64) MiB).  This module reproduces that choice; :mod:`.collectives` then prices the chosen algorithm with its
own physical constants.

NCCL's model, for *p* ranks on *n* nodes, ``ppn = p / n``, ``X`` = the node network bandwidth NCCL's topology search
gives its inter-node ring graph (``nChannels x bwInter``, GB/s): ``g`` times the profile's
``nccl_graph_bw_per_gpu_bytes_per_s`` (one ring channel per GPU, each at the NIC speed NCCL reads)::

    ring Simple : bw = X p / (2 (p-1))                  lat = 1.4 (8.4 + (2(p-1) - 2n) max(3.4, 3 o) + 2n 14)
    ring LL     : bw = min(llMax, X / 4) p / (2 (p-1))  lat = 6.6 + (2(p-1) - 2n) max(0.6, o) + 2n 2.7
    tree Simple : bw = 0.92 k X / 2 * tcf_Simple(S)     lat = 2 ((ppn-1) 28 + log2(n) 28)
    tree LL     : bw = min(0.92 k X / 3.8, llMax) / 2 * tcf_LL(S)   lat = 6.8 + 2 ((ppn-1) 0.6 + log2(n) 5.0)

(us; ``o`` = the network post overhead, 2 us on an AMD host CPU (DGX A100: EPYC), 1 us on Intel; ``k`` = 2 on two
nodes -- the tree graph's intra-node bandwidth may be twice its network one, "increase bwIntra for trees (2 nodes)"
in src/graph/search.cc -- else 1; ``1.4`` = the ring Simple "plateau effect" on Ampere and newer; ``llMax`` 22.5 GB/s on
2 nodes, 19.0 on more (AMD; Intel 39.0 / 20.4)).  LL128 is left out: NCCL enables it across nodes only with
GPUDirect RDMA to a NIC on the GPU's PCIe switch.  The per-channel tree cap (``nChannels x perChMaxTreeBw``) is left
out: the channel count is not in the profile.

On Vidur's 2-node DGX A100 rows (AMD host, ``o`` = 2 us) a per-GPU graph bandwidth of 6 GB/s (speedArrayInter's 6.0
step: X = 48 GB/s for 8 GPUs) reproduces every measured flip: 4 GPUs (2 per node) tree in [8, 16) MiB and from 64
MiB, ring elsewhere above 128 KiB; 16 GPUs (8 per node) ring -> tree at 12.4 MiB, back to ring at 16 MiB (the
tree's correction factor falls from .8 to .7), tree again from 19.9 MiB (measured: 12.5 MiB, 16 MiB, 20 MiB); 8
GPUs (4 per node) ring -> tree at 5.8 MiB (measured: 4 MiB).
"""

from __future__ import annotations

import math

__all__ = ["TREE_CORRECTION", "nccl_algorithm", "nccl_model_time_s"]

#: src/graph/tuning.cc ``treeCorrectionFactor`` (LL, LL128, Simple), indexed by log2(S / 64): 64 B .. 256 MiB
TREE_CORRECTION: dict[str, tuple[float, ...]] = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    "simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
}

# tuning.cc constants (us): baseLat, hwLat NVLink, hwLat network per (algorithm, protocol); NCCL 2.19-2.21
_BASE = {("ring", "LL"): 6.6, ("ring", "simple"): 8.4, ("tree", "LL"): 6.8, ("tree", "simple"): 0.0}
_NVL = {("ring", "LL"): 0.6, ("ring", "simple"): 3.4, ("tree", "LL"): 0.6, ("tree", "simple"): 28.0}
_NET = {("ring", "LL"): 2.7, ("ring", "simple"): 14.0, ("tree", "LL"): 5.0, ("tree", "simple"): 28.0}
_RING_PLATEAU = 1.4        # ring Simple latency factor across nodes, compute capability >= 8.0
_TREE_EFF = 0.92           # tree bus bandwidth share


def _log2i(x: int) -> int:
    return x.bit_length() - 1 if x > 0 else 0


def nccl_model_time_s(algorithm: str, protocol: str, s: float, p: int, n: int, graph_bw: float,
                      net_overhead_s: float = 2e-6) -> float:
    """NCCL's own estimate (s) of an all-reduce of *s* bytes over *p* ranks on *n* > 1 nodes (module docstring);
    *graph_bw*: the ring graph's node network bandwidth (bytes/s)."""
    x = graph_bw / 1e9                       # GB/s = bytes per ns
    ppn = p // n
    o = net_overhead_s * 1e6
    amd = net_overhead_s >= 1.5e-6
    ll_max = (22.5 if amd else 39.0) if n <= 2 else (19.0 if amd else 20.4)
    key = (algorithm, protocol)
    if algorithm == "ring":
        steps, x_steps = 2 * (p - 1), 2 * n
        ratio = p / steps
        bw = (min(ll_max, x / 4) if protocol == "LL" else x) * ratio
        intra = max(_NVL[key], o * (3 if protocol == "simple" else 1))
        lat = _BASE[key] + (steps - x_steps) * intra + x_steps * _NET[key]
        if protocol == "simple":
            lat *= _RING_PLATEAU
    else:
        xt = _TREE_EFF * (2.0 if n <= 2 else 1.0) * x
        bw = (min(xt / 3.8, ll_max) if protocol == "LL" else xt) * 0.5
        log = _log2i(int(s) >> 6)
        if log < 23:
            bw *= TREE_CORRECTION[protocol][log]
        lat = _BASE[key] + 2 * ((ppn - 1) * _NVL[key] + _log2i(n) * _NET[key])
    return (lat + s / (1000 * bw)) * 1e-6


def nccl_algorithm(s: float, p: int, g: int, graph_bw: float, net_overhead_s: float = 2e-6) -> str:
    """``ring`` or ``tree``: the algorithm NCCL's tuner runs for an all-reduce of *s* bytes over *p* ranks, *g* per
    node (more than one node), the fastest (algorithm, protocol) of its own model."""
    n = math.ceil(p / g)
    best = min((nccl_model_time_s(a, pr, s, p, n, graph_bw, net_overhead_s), a)
               for a in ("ring", "tree") for pr in ("LL", "simple"))
    return best[1]
