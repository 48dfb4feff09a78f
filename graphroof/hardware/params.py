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
    nvls_bw_bytes_per_s = 400e9      # in-switch reduction bandwidth per GPU (only with "nvls")
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
             "graph_launch_overhead_s", "stream_bw_efficiency"}
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
    for k in ("gemm_tile_m_min", "gemm_split_k_min"):
        if k in t:
            kw[k] = _number(path, f"timing.{k}", t[k], integer=True)
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
    for k in ("gemm_matrix_efficiency", "gemm_mem_bw_efficiency"):
        if k in t:
            kw[k] = _number(path, f"timing.{k}", t[k], hi=1.0)
    for k in ("gemm_latency_s", "stream_latency_s", "launch_overhead_s", "graph_launch_overhead_s"):
        if k in t:
            kw[k] = _number(path, f"timing.{k}", t[k], strict_lo=False, hi=1.0)
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
             "inter_hop_latency_s", "inter_bw_bytes_per_s_per_nic", "nics_per_node", "nvls_bw_bytes_per_s"}
    _unknown(path, "collectives", c, known)
    kw: dict[str, Any] = {}
    if "algorithms" in c:
        algs = c["algorithms"]
        if not isinstance(algs, list) or not algs or any(a not in COLLECTIVE_ALGORITHMS for a in algs):
            raise HardwareProfileError(f"{path.name}: collectives.algorithms must be a non-empty list of "
                                       f"{', '.join(COLLECTIVE_ALGORITHMS)}, got {algs!r}")
        kw["algorithms"] = tuple(algs)
    for k in ("base_latency_s", "intra_hop_latency_s", "inter_hop_latency_s"):
        if k in c:
            kw[k] = _number(path, f"collectives.{k}", c[k], strict_lo=False, hi=1.0)
    for k in ("intra_bus_bw_bytes_per_s", "inter_bw_bytes_per_s_per_nic", "nvls_bw_bytes_per_s"):
        if k in c:
            kw[k] = _number(path, f"collectives.{k}", c[k])
    if "nics_per_node" in c:
        kw["nics_per_node"] = _number(path, "collectives.nics_per_node", c["nics_per_node"], integer=True)
    out = CollectiveParams(**{**CollectiveParams().__dict__, **kw})
    if "nvls" in out.algorithms and not out.nvls_bw_bytes_per_s:
        raise HardwareProfileError(f"{path.name}: collectives.algorithms has \"nvls\" but collectives.nvls_bw_bytes_per_s is missing")
    return out
