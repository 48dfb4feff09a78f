"""The kernel-timing and collective constants of a hardware profile: the ``[timing]`` and ``[collectives]``
sections of a profile file, validated here (every error names the file and the field).

Schema (all optional; a profile without them gets the defaults of :func:`graphroof.timing.timing_of` /
:func:`graphroof.timing.collectives_of`, derived from its other fields)::

    [timing]
    sm_count = 108                   # streaming multiprocessors (CUs on AMD): the wave width of a GEMM
    gemm_tile = [128, 128]           # CTA tile M x N the GEMM library runs on large problems
    gemm_tile_m_min = 16             # smallest M extent of a tile (the MMA instruction's M): small-M GEMMs
    gemm_split_k_min = 512           # split-K never cuts K below this many elements per CTA
    gemm_l2_bw_bytes_per_s = 5e12    # L2 -> SM bandwidth feeding the tiles: narrow tiles are starved by it
    gemm_tile_policy = "best"        # "best": fewest-wave tile height; "cover_m": smallest height covering M
    gemm_overlap_exponent = 4        # compute/memory overlap: p-norm of the two times (absent: max)
    gemm_matrix_efficiency = 0.8     # fraction of the matrix peak one full wave of tiles sustains
    gemm_mem_bw_efficiency = 0.8     # fraction of the memory bandwidth a weight-streaming GEMM sustains
    gemm_latency_s = 4e-6            # fixed time of one GEMM kernel (prologue, pipeline fill, epilogue)
    stream_latency_s = 2e-6          # fixed time of one streaming kernel
    launch_overhead_s = 4e-6         # eager: host launch cost per kernel
    graph_launch_overhead_s = 20e-6  # CUDA graphs: one replay per step, no per-kernel launch
    gemm_dequant_flops_per_mac = 8.4 # weight-only GEMMs (int4 / int8 weights, bf16 activations) with the dequant
                                     # fused in the main loop: vector FLOPs per multiply-add spent dequantising
    gemm_stream_k = true             # persistent stream-K GEMMs (Hopper cuBLAS / CUTLASS): no wave quantisation
    triton_mma_efficiency = 0.70     # share of the cuBLAS tile rate a Triton MoE kernel's tile sustains (vLLM /
                                     # SGLang fused_moe: pointer-gathered loads, no TMA or warp specialisation)
    torch_grouped_sm_bw_bytes_per_s = 21e9  # bytes per second one SM holding tiles of PyTorch's CUTLASS grouped
                                     # GEMM (torch._grouped_mm) streams: its weight stream tops out at SMs x this,
                                     # whatever the HBM (absent: no per-SM limit; graphroof.timing.gemm)
    attn_matrix_efficiency = 1.0     # flash attention's Q K^T / P V: fraction of the achievable matmul rate
    attn_exp_per_s = 3.9e12          # softmax exponentials per second (SFU: SMs x 16 / clock x clock)
    attn_fill_keys = 300             # pipeline fill / epilogue per query row, in key positions of work
    attn_sync_matrix_flops_per_s = 4.16e14  # matmul rate of FlashAttention-2 (mma.sync, serial softmax) where it
                                     # is not the native kernel (Hopper); absent: the native attention rate
    l2_read_bw_bytes_per_s = 7.2e12  # L2 -> SM read bandwidth (datasheet bytes / clock x clock): serves the
                                     # repeated K/V reads of a decode kernel that reads K/V once per query head
    smem_per_sm_bytes = 233472       # shared memory per SM (228 KB, cc 9.0): the opt-in per thread block is 1 KiB
                                     # less; FlashAttention-2 picks its query tile from both (timing.attention)
    [timing.gemm_achievable_flops_per_s]  # best achievable dense matmul FLOP/s per dtype (the "MAMF" table):
    bf16 = 794.5e12                  # the large-GEMM ceiling; gemm_matrix_efficiency is then a fraction of it
    fp8 = 1402.6e12
    [timing.stream_bw_efficiency]    # fraction of memory bandwidth a streaming kernel of this kind sustains
    elementwise = 0.9
    norm = 0.35

    [collectives]
    algorithms = ["ring", "tree"]    # what the collective library may pick from; "nvls" on NVSwitch + SHARP
    base_latency_s = 10e-6           # fixed cost of one collective call
    intra_hop_latency_s = 1e-6       # per ring / tree step inside a node (NVLink)
    intra_bus_bw_bytes_per_s = 230e9 # achieved ring bus bandwidth inside a node
    inter_hop_latency_s = 5e-6       # per step that crosses nodes (InfiniBand / Ethernet)
    inter_bw_bytes_per_s_per_nic = 20e9
    nics_per_node = 8
    inter_ramp_bytes_per_nic = 4.5e6 # buffer bytes per NIC in use: NCCL adds channels (NICs) as a buffer grows
    library = "nccl"                 # nccl | rccl (LL / LL128 / Simple protocols) | hccl | xla | oneccl (one protocol)
    nvls_bw_bytes_per_s = 400e9      # in-switch reduction bandwidth per GPU (only with "nvls")
    device_latency_s = 8e-6          # the device part of base_latency_s: what a call costs inside a CUDA graph
                                     # (base_latency_s - device_latency_s = host launch + sync of a host call)
    device_hop_latency_s = 0.5e-6    # per intra-node step inside a CUDA graph (no launch skew between the ranks)
    launch_skew_s = 3e-6             # mean launch delay of one rank of a host-launched call: rank 0 waits for the
                                     # last of n ranks, launch_skew_s * (H_n - 1) on top of base_latency_s
    custom_latency_s = 5e-6          # one-shot custom all-reduce kernel (start + end barriers, fill); absent:
                                     # no custom all-reduce (no full P2P between the devices)
    p2p_bw_bytes_per_s = 230e9       # per-device peer read bandwidth of the custom all-reduce (absent: intra bus)
    custom_max_bytes = 8388608       # largest buffer the custom all-reduce takes (vLLM's 8 MiB); NCCL beyond
    p2p_latency_s = 7.5e-6           # fixed time of one send / recv between two GPUs of a node (absent:
                                     # base_latency_s + the 2-rank launch skew + intra_hop_latency_s)
    p2p_inter_latency_s = 20e-6      # the same across nodes (absent: ... + inter_hop_latency_s)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import HardwareProfileError

__all__ = ["KernelTiming", "CollectiveParams", "parse_timing", "parse_collectives", "STREAM_KINDS",
           "COLLECTIVE_ALGORITHMS"]

#: Kinds of streaming kernels a profile may give a bandwidth fraction for (others fall back to elementwise).
STREAM_KINDS = ("elementwise", "norm", "rotary", "act_mul", "gather", "softmax", "reduction", "copy")
COLLECTIVE_ALGORITHMS = ("ring", "tree", "nvls")
COLLECTIVE_LIBRARIES = ("nccl", "rccl", "hccl", "xla", "oneccl")
GEMM_TILE_POLICIES = ("best", "cover_m")


@dataclass(frozen=True)
class KernelTiming:
    """Kernel-level timing constants of one device (see the module docstring for their meaning)."""

    sm_count: int | None = None
    gemm_tile: tuple[int, int] = (128, 128)
    gemm_tile_m_min: int = 16
    gemm_split_k_min: int = 512
    gemm_l2_bw_bytes_per_s: float | None = None
    gemm_tile_policy: str = "best"
    gemm_overlap_exponent: float | None = None
    gemm_matrix_efficiency: float = 0.75
    gemm_mem_bw_efficiency: float = 0.8
    gemm_latency_s: float = 4e-6
    stream_latency_s: float = 2e-6
    launch_overhead_s: float = 4e-6
    graph_launch_overhead_s: float = 20e-6
    stream_bw_efficiency: dict[str, float] = field(default_factory=lambda: {"elementwise": 0.85})
    derived: bool = False           # True: not in the profile file, derived from its other fields
    #: best achievable dense matmul FLOP/s by dtype (the MAMF table; graphroof.timing.gemm_ceiling reads it)
    gemm_achievable_flops_per_s: dict[str, float] = field(default_factory=dict)
    gemm_stream_k: bool = False     # persistent stream-K GEMMs: no wave quantisation (graphroof.timing.gemm)
    gemm_dequant_flops_per_mac: float = 8.42  # the H100 fit (measure_int4.csv); a kernel-ALU count
    #: the share of the cuBLAS per-tile rate (gemm_matrix_efficiency x the achievable ceiling) a tile of a Triton
    #: fused-MoE kernel sustains (graphroof.timing.moe, family triton_moe); 1.0: the same rate (Ampere / Ada, whose
    #: cuBLAS also feeds mma.sync from cp.async pipelines)
    triton_mma_efficiency: float = 1.0
    #: the rate one SM running PyTorch's CUTLASS grouped GEMM streams its operands at (graphroof.timing.gemm, family
    #: torch_grouped): the kernel's weight stream is at most (SMs holding tiles) x this; None: no per-SM limit
    torch_grouped_sm_bw_bytes_per_s: float | None = None
    attn_matrix_efficiency: float | None = None   # None: gemm_matrix_efficiency
    attn_exp_per_s: float | None = None           # None: derived from the vector fp32 peak (graphroof.timing.attention)
    attn_fill_keys: float = 0.0
    attn_sync_matrix_flops_per_s: float | None = None  # None: FA2 runs at the native rate (graphroof.timing.attention)
    l2_read_bw_bytes_per_s: float | None = None   # None: repeated K/V reads come from DRAM (graphroof.timing.attention)
    l2_partitions: int = 1          # L2 partitions each caching for its own SMs (GA100: 2; graphroof.timing.l2)
    #: maximum shared memory per SM in bytes (cudaDevAttrMaxSharedMemoryPerMultiprocessor); the opt-in maximum per
    #: thread block (cudaDevAttrMaxSharedMemoryPerBlockOptin) is 1 KiB less on cc 8.x - 10.0 (CUDA C++ Programming
    #: Guide, "Technical Specifications per Compute Capability": per SM 164 / 100 / 228 / 228 KB, per block opt-in
    #: 163 / 99 / 227 / 227 KB at cc 8.0 / 8.6-8.9 / 9.0 / 10.0); FlashAttention-2's query tile at head dims 224 / 256
    #: depends on both (graphroof.timing.attention.fa2_block_m); None: unknown (128-row tiles)
    smem_per_sm_bytes: int | None = None

    def stream_efficiency(self, kind: str) -> float:
        """Bandwidth fraction for a streaming kernel of *kind* (``elementwise`` when the kind is not listed)."""
        eff = self.stream_bw_efficiency
        return eff.get(kind) or eff.get("elementwise") or 0.85


@dataclass(frozen=True)
class CollectiveParams:
    """Alpha-beta constants of the device's collectives (see the module docstring)."""

    algorithms: tuple[str, ...] = ("ring",)
    base_latency_s: float = 10e-6
    intra_hop_latency_s: float = 1e-6
    intra_bus_bw_bytes_per_s: float | None = None
    inter_hop_latency_s: float = 5e-6
    inter_bw_bytes_per_s_per_nic: float | None = None
    nics_per_node: int = 1
    nvls_bw_bytes_per_s: float | None = None
    derived: bool = False
    #: buffer bytes per NIC in use across nodes (NCCL opens channels, each tied to a NIC, as a buffer grows): a
    #: buffer of S bytes leaves the node through min(g, nics_per_node, max(1, S / this)) NICs; None: all from the start
    inter_ramp_bytes_per_nic: float | None = None
    #: the collective library: "nccl" / "rccl" pick among NCCL's LL / LL128 / Simple protocols
    #: (:data:`graphroof.timing.collectives.PROTOCOLS`); "hccl", "xla", "oneccl": one protocol at the full bandwidth
    library: str = "nccl"
    #: device-side part of ``base_latency_s`` (a call replayed inside a CUDA graph pays only this); None: the
    #: profile does not split it (the whole base latency counts under CUDA graphs too)
    device_latency_s: float | None = None
    #: per intra-node ring / tree step of a call inside a CUDA graph (the ranks start together: no launch skew);
    #: None: ``intra_hop_latency_s``
    device_hop_latency_s: float | None = None
    #: fixed time of a one-shot custom all-reduce (vLLM / TensorRT-LLM); None: no custom all-reduce on this device
    custom_latency_s: float | None = None
    #: per-device P2P read bandwidth the custom all-reduce sustains (None: ``intra_bus_bw_bytes_per_s``)
    p2p_bw_bytes_per_s: float | None = None
    #: largest buffer the custom all-reduce takes (vLLM's ``max_size``, 8 MiB); NCCL beyond it
    custom_max_bytes: float = 8388608.0
    #: fixed time of one NCCL send / recv between two GPUs of a node (the pair of kernels, one peer link: no ring
    #: steps, no reduction); None: the collective's ``base_latency_s`` + 2-rank launch skew + ``intra_hop_latency_s``
    p2p_latency_s: float | None = None
    #: the same between GPUs of two nodes; None: ``base_latency_s`` + 2-rank skew + ``inter_hop_latency_s``
    p2p_inter_latency_s: float | None = None
    #: mean launch delay of one rank of a host-launched call (exponential): rank 0's kernel waits for the last of
    #: n ranks to launch, on average ``launch_skew_s * (H_n - 1)`` (H_n the n-th harmonic number) on top of
    #: ``base_latency_s``; 0: no skew (not under CUDA graphs: the ranks replay together)
    launch_skew_s: float = 0.0
    #: NCCL's inter-node ring graph bandwidth per GPU of the node (bwInter, one channel per GPU): NCCL's tuner picks
    #: ring or tree across nodes with g times it (graphroof.timing.nccl_tuner); None: the fastest by graphroof's model
    nccl_graph_bw_per_gpu_bytes_per_s: float | None = None

    @property
    def graph_latency_s(self) -> float:
        """The base latency of one call inside a CUDA graph (its device part)."""
        return self.base_latency_s if self.device_latency_s is None else self.device_latency_s

    @property
    def graph_hop_latency_s(self) -> float:
        """The intra-node hop latency of a call inside a CUDA graph."""
        return self.intra_hop_latency_s if self.device_hop_latency_s is None else self.device_hop_latency_s


# -- validation ------------------------------------------------------------------------------------------

def _number(path: Path, name: str, v: Any, *, lo: float = 0.0, hi: float = math.inf, strict_lo: bool = True,
            integer: bool = False) -> float:
    from ..safe_read import number

    number(v, f"{path.name}: {name}", HardwareProfileError)  # NaN, inf, 400-digit integers: one-line errors
    if integer and int(v) != v:
        raise HardwareProfileError(f"{path.name}: {name} must be a whole number, got {v!r}")
    if (v <= lo if strict_lo else v < lo) or v > hi:
        rng = f"{'(' if strict_lo else '['}{lo:g}, {hi:g}]" if hi != math.inf else f"{'>' if strict_lo else '>='} {lo:g}"
        raise HardwareProfileError(f"{path.name}: {name} must be {'in ' if hi != math.inf else ''}{rng}, got {v!r}")
    return int(v) if integer else float(v)


def _table(path: Path, name: str, v: Any) -> dict:
    if not isinstance(v, dict):
        from ..safe_read import shown

        raise HardwareProfileError(f"{path.name}: [{name}] must be a table of fields, got {shown(v)}")
    return v


def _unknown(path: Path, section: str, got: dict, known: set[str]) -> None:
    extra = sorted(set(got) - known)
    if extra:
        raise HardwareProfileError(f"{path.name}: unknown field {section}.{extra[0]}; known: {', '.join(sorted(known))}")


def parse_timing(path: Path, raw: Any) -> KernelTiming | None:
    """The validated ``[timing]`` section, or None when the profile has none."""
    if raw is None:
        return None
    t = _table(path, "timing", raw)
    known = {"sm_count", "gemm_tile", "gemm_tile_m_min", "gemm_split_k_min", "gemm_l2_bw_bytes_per_s",
             "gemm_tile_policy", "gemm_overlap_exponent", "gemm_matrix_efficiency", "gemm_mem_bw_efficiency", "gemm_latency_s", "stream_latency_s", "launch_overhead_s",
             "graph_launch_overhead_s", "stream_bw_efficiency", "gemm_achievable_flops_per_s",
             "gemm_dequant_flops_per_mac", "attn_matrix_efficiency", "attn_exp_per_s", "attn_fill_keys",
             "gemm_stream_k", "l2_read_bw_bytes_per_s", "attn_sync_matrix_flops_per_s", "l2_partitions",
             "smem_per_sm_bytes", "triton_mma_efficiency", "torch_grouped_sm_bw_bytes_per_s"}
    _unknown(path, "timing", t, known)
    d = KernelTiming()
    kw: dict[str, Any] = {}
    if "sm_count" in t:
        kw["sm_count"] = _number(path, "timing.sm_count", t["sm_count"], integer=True)
    if "gemm_tile" in t:
        tile = t["gemm_tile"]
        if not (isinstance(tile, list) and len(tile) == 2):
            raise HardwareProfileError(f"{path.name}: timing.gemm_tile must be [M, N], got {tile!r}")
        kw["gemm_tile"] = tuple(_number(path, f"timing.gemm_tile[{i}]", x, integer=True) for i, x in enumerate(tile))
    for k in ("gemm_tile_m_min", "gemm_split_k_min", "l2_partitions"):
        if k in t:
            kw[k] = _number(path, f"timing.{k}", t[k], integer=True)
    if "smem_per_sm_bytes" in t:  # more than the 1 KiB the opt-in per-block maximum leaves out
        kw["smem_per_sm_bytes"] = _number(path, "timing.smem_per_sm_bytes", t["smem_per_sm_bytes"], lo=1024.0,
                                          integer=True)
    if "gemm_tile_policy" in t:
        if t["gemm_tile_policy"] not in GEMM_TILE_POLICIES:
            raise HardwareProfileError(f"{path.name}: timing.gemm_tile_policy must be one of "
                                       f"{', '.join(GEMM_TILE_POLICIES)}, got {t['gemm_tile_policy']!r}")
        kw["gemm_tile_policy"] = t["gemm_tile_policy"]
    if "gemm_overlap_exponent" in t:
        kw["gemm_overlap_exponent"] = _number(path, "timing.gemm_overlap_exponent", t["gemm_overlap_exponent"], lo=1.0,
                                              strict_lo=False)
    if "gemm_l2_bw_bytes_per_s" in t:
        kw["gemm_l2_bw_bytes_per_s"] = _number(path, "timing.gemm_l2_bw_bytes_per_s", t["gemm_l2_bw_bytes_per_s"])
    for k in ("gemm_matrix_efficiency", "gemm_mem_bw_efficiency", "triton_mma_efficiency"):
        if k in t:
            kw[k] = _number(path, f"timing.{k}", t[k], hi=1.0)
    for k in ("gemm_latency_s", "stream_latency_s", "launch_overhead_s", "graph_launch_overhead_s"):
        if k in t:
            kw[k] = _number(path, f"timing.{k}", t[k], strict_lo=False, hi=1.0)
    if "gemm_achievable_flops_per_s" in t:
        ach = _table(path, "timing.gemm_achievable_flops_per_s", t["gemm_achievable_flops_per_s"])
        kw["gemm_achievable_flops_per_s"] = {k: _number(path, f"timing.gemm_achievable_flops_per_s.{k}", v)
                                             for k, v in ach.items()}
    if "gemm_stream_k" in t:
        if not isinstance(t["gemm_stream_k"], bool):
            raise HardwareProfileError(f"{path.name}: timing.gemm_stream_k must be true or false, "
                                       f"got {t['gemm_stream_k']!r}")
        kw["gemm_stream_k"] = t["gemm_stream_k"]
    for k in ("gemm_dequant_flops_per_mac", "attn_exp_per_s", "l2_read_bw_bytes_per_s", "attn_sync_matrix_flops_per_s",
              "torch_grouped_sm_bw_bytes_per_s"):
        if k in t:
            kw[k] = _number(path, f"timing.{k}", t[k])
    if "attn_matrix_efficiency" in t:
        kw["attn_matrix_efficiency"] = _number(path, "timing.attn_matrix_efficiency", t["attn_matrix_efficiency"],
                                               hi=1.5)
    if "attn_fill_keys" in t:
        kw["attn_fill_keys"] = _number(path, "timing.attn_fill_keys", t["attn_fill_keys"], strict_lo=False)
    if "stream_bw_efficiency" in t:
        eff = _table(path, "timing.stream_bw_efficiency", t["stream_bw_efficiency"])
        _unknown(path, "timing.stream_bw_efficiency", eff, set(STREAM_KINDS))
        kw["stream_bw_efficiency"] = {k: _number(path, f"timing.stream_bw_efficiency.{k}", v, hi=1.0)
                                      for k, v in eff.items()}
    return KernelTiming(**{**d.__dict__, **kw})


def parse_collectives(path: Path, raw: Any) -> CollectiveParams | None:
    """The validated ``[collectives]`` section, or None when the profile has none."""
    if raw is None:
        return None
    c = _table(path, "collectives", raw)
    known = {"algorithms", "base_latency_s", "intra_hop_latency_s", "intra_bus_bw_bytes_per_s",
             "inter_hop_latency_s", "inter_bw_bytes_per_s_per_nic", "nics_per_node", "nvls_bw_bytes_per_s",
             "device_latency_s", "device_hop_latency_s", "custom_latency_s", "p2p_bw_bytes_per_s",
             "custom_max_bytes", "inter_ramp_bytes_per_nic", "library", "launch_skew_s",
             "nccl_graph_bw_per_gpu_bytes_per_s", "p2p_latency_s", "p2p_inter_latency_s"}
    _unknown(path, "collectives", c, known)
    kw: dict[str, Any] = {}
    if "algorithms" in c:
        algs = c["algorithms"]
        if not isinstance(algs, list) or not algs or any(a not in COLLECTIVE_ALGORITHMS for a in algs):
            raise HardwareProfileError(f"{path.name}: collectives.algorithms must be a non-empty list of "
                                       f"{', '.join(COLLECTIVE_ALGORITHMS)}, got {algs!r}")
        kw["algorithms"] = tuple(algs)
    for k in ("base_latency_s", "intra_hop_latency_s", "inter_hop_latency_s", "device_latency_s",
              "device_hop_latency_s", "custom_latency_s", "launch_skew_s", "p2p_latency_s", "p2p_inter_latency_s"):
        if k in c:
            kw[k] = _number(path, f"collectives.{k}", c[k], strict_lo=False, hi=1.0)
    for k in ("intra_bus_bw_bytes_per_s", "inter_bw_bytes_per_s_per_nic", "nvls_bw_bytes_per_s",
              "p2p_bw_bytes_per_s", "custom_max_bytes", "inter_ramp_bytes_per_nic", "nccl_graph_bw_per_gpu_bytes_per_s"):
        if k in c:
            kw[k] = _number(path, f"collectives.{k}", c[k])
    if "library" in c:
        if c["library"] not in COLLECTIVE_LIBRARIES:
            raise HardwareProfileError(f"{path.name}: collectives.library must be one of "
                                       f"{', '.join(COLLECTIVE_LIBRARIES)}, got {c['library']!r}")
        kw["library"] = c["library"]
    if "nics_per_node" in c:
        kw["nics_per_node"] = _number(path, "collectives.nics_per_node", c["nics_per_node"], integer=True)
    out = CollectiveParams(**{**CollectiveParams().__dict__, **kw})
    if "nvls" in out.algorithms and not out.nvls_bw_bytes_per_s:
        raise HardwareProfileError(f"{path.name}: collectives.algorithms has \"nvls\" but collectives.nvls_bw_bytes_per_s is missing")
    if out.device_latency_s is not None and out.device_latency_s > out.base_latency_s:
        raise HardwareProfileError(f"{path.name}: collectives.device_latency_s ({out.device_latency_s:g}) must be <= "
                                   f"collectives.base_latency_s ({out.base_latency_s:g}): it is the device part of it")
    return out
