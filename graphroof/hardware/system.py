"""System profiles: nodes of devices joined by a scale-up domain (NVLink / NVSwitch, Infinity Fabric) and a
scale-out network (InfiniBand, RoCE), as data in ``hw_profiles/systems/*.toml``.

A system says which device it holds, how many devices share one scale-up domain (``gpus_per_node``: the
NVSwitch domain of an HGX board, 72 for a GB200 NVL72 rack) and what joins the domains::

    name = "dgx-h100"
    display_name = "NVIDIA DGX H100 (8x H100 SXM, NVLink 4 NVSwitch, 8x 400G NDR InfiniBand)"
    device = "h100-sxm"               # a hardware profile name
    gpus_per_node = 8                 # devices in one scale-up (NVLink) domain
    aliases = ["hgx-h100"]
    [scale_up]
    name = "NVLink 4 + NVSwitch"
    bw_bytes_per_s_per_direction = 450e9   # per device
    [scale_out]
    name = "8x ConnectX-7 NDR 400 Gb/s InfiniBand"
    nics_per_node = 8
    bw_bytes_per_s_per_nic = 50e9          # 400 Gb/s = 50e9 B/s per direction
    efficiency = 0.8                       # share of the nominal NIC rate collectives reach
    hop_latency_s = 1e-5
    [sources]
    ...

:meth:`SystemProfile.apply` returns the device profile with its ``[collectives]`` inter-node constants taken from
the system (``inter_bw_bytes_per_s_per_nic = bw_bytes_per_s_per_nic * efficiency``, ``nics_per_node``,
``inter_hop_latency_s``, and NCCL's ring graph bandwidth per GPU, ``nics_per_node`` x that / ``gpus_per_node``); the
intra-node constants stay the device's (fitted on NCCL runs inside one node) and, where the device has none, are
derived from the scale-up link (``bw * efficiency``).  Placement (which ranks share
a node) is the caller's: :meth:`SystemProfile.node_of`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import tomllib

from ..errors import HardwareProfileError, InputError
from .load import load_hardware, profile_dir
from .params import CollectiveParams
from .profile import HardwareProfile

__all__ = ["SystemProfile", "list_systems", "load_system", "system_dir"]

_TOP = {"name", "display_name", "device", "gpus_per_node", "aliases", "notes", "scale_up", "scale_out", "sources"}
_UP = {"name", "bw_bytes_per_s_per_direction", "peer_bw_bytes_per_s_per_direction", "efficiency", "hop_latency_s"}
_OUT = {"name", "nics_per_node", "bw_bytes_per_s_per_nic", "efficiency", "hop_latency_s"}


@dataclass(frozen=True)
class SystemProfile:
    """Nodes of one device type: the scale-up domain size and links, the scale-out network (see module doc)."""

    name: str
    device: str
    gpus_per_node: int
    display_name: str = ""
    aliases: tuple[str, ...] = ()
    scale_up_name: str = ""
    scale_up_bw_bytes_per_s: float | None = None     # per device, per direction
    scale_up_efficiency: float = 0.8
    scale_up_hop_latency_s: float | None = None
    peer_bw_bytes_per_s: float | None = None         # one peer's link (a mesh), per direction; None: the switch
    scale_out_name: str = ""
    nics_per_node: int = 1
    nic_bw_bytes_per_s: float | None = None          # per NIC, per direction
    scale_out_efficiency: float = 0.8
    scale_out_hop_latency_s: float = 1e-5
    sources: dict[str, str] = field(default_factory=dict)
    notes: str = ""
    path: str = ""

    def nodes_for(self, world: int) -> int:
        """Nodes *world* devices occupy (contiguous ranks, whole nodes)."""
        return max(1, math.ceil(world / self.gpus_per_node))

    def node_of(self, rank: int) -> int:
        """The node (scale-up domain) rank *rank* sits in: ranks fill the nodes in order."""
        return rank // self.gpus_per_node

    def collectives(self, hw: HardwareProfile) -> CollectiveParams:
        """The device's collective constants with the system's network between nodes."""
        base = hw.collectives
        if base is None:
            bw = self.scale_up_bw_bytes_per_s or hw.interconnect_bw_bytes_per_s
            base = CollectiveParams(algorithms=("ring",), intra_bus_bw_bytes_per_s=bw * self.scale_up_efficiency
                                    if bw else None, derived=True)
        if self.scale_up_hop_latency_s is not None and hw.collectives is None:
            base = replace(base, intra_hop_latency_s=self.scale_up_hop_latency_s)
        if self.peer_bw_bytes_per_s and hasattr(base, "p2p_bw_bytes_per_s"):  # a mesh: one peer, one link
            base = replace(base, p2p_bw_bytes_per_s=self.peer_bw_bytes_per_s * self.scale_up_efficiency)
        if self.nic_bw_bytes_per_s:
            nic = self.nic_bw_bytes_per_s * self.scale_out_efficiency
            # NCCL's inter-node ring graph runs a channel per NIC: per GPU of the node, its share of the NICs
            base = replace(base, inter_bw_bytes_per_s_per_nic=nic, nics_per_node=self.nics_per_node,
                           inter_hop_latency_s=self.scale_out_hop_latency_s,
                           nccl_graph_bw_per_gpu_bytes_per_s=nic * self.nics_per_node / self.gpus_per_node)
        return base

    def apply(self, hw: HardwareProfile | None = None) -> HardwareProfile:
        """The system's device profile (or *hw*) with the system's network in its ``[collectives]``."""
        dev = hw if hw is not None else load_hardware(self.device)
        return replace(dev, collectives=self.collectives(dev))

    def describe(self) -> str:
        out = f"{self.display_name or self.name}: {self.gpus_per_node} x {self.device} per {self.scale_up_name or 'node'}"
        if self.nic_bw_bytes_per_s:
            out += f", between nodes {self.scale_out_name or f'{self.nics_per_node} NICs'}"
        return out


def system_dir() -> Path:
    """The shipped system profiles: ``hw_profiles/systems``."""
    return profile_dir() / "systems"


def _num(path: Path, name: str, v: Any, *, integer: bool = False, at_most: float = math.inf) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0 or v > at_most:
        raise HardwareProfileError(f"{path.name}: {name} must be a number > 0{'' if at_most == math.inf else f' and <= {at_most:g}'}, got {v!r}")
    if integer and int(v) != v:
        raise HardwareProfileError(f"{path.name}: {name} must be a whole number, got {v!r}")
    return int(v) if integer else float(v)


def _table(path: Path, data: dict, key: str, known: set[str]) -> dict:
    t = data.get(key, {})
    if not isinstance(t, dict):
        raise HardwareProfileError(f"{path.name}: [{key}] must be a table")
    extra = sorted(set(t) - known)
    if extra:
        raise HardwareProfileError(f"{path.name}: unknown field {key}.{extra[0]}; known: {', '.join(sorted(known))}")
    return t


def system_from_dict(data: dict[str, Any], path: Path) -> SystemProfile:
    extra = sorted(set(data) - _TOP)
    if extra:
        raise HardwareProfileError(f"{path.name}: unknown field {extra[0]}; known: {', '.join(sorted(_TOP))}")
    for k in ("name", "device", "gpus_per_node"):
        if k not in data:
            raise HardwareProfileError(f"{path.name}: missing field {k}")
    up, out = _table(path, data, "scale_up", _UP), _table(path, data, "scale_out", _OUT)
    opt = {}
    if "bw_bytes_per_s_per_direction" in up:
        opt["scale_up_bw_bytes_per_s"] = _num(path, "scale_up.bw_bytes_per_s_per_direction",
                                              up["bw_bytes_per_s_per_direction"])
    if "peer_bw_bytes_per_s_per_direction" in up:
        opt["peer_bw_bytes_per_s"] = _num(path, "scale_up.peer_bw_bytes_per_s_per_direction",
                                          up["peer_bw_bytes_per_s_per_direction"])
    if "hop_latency_s" in up:
        opt["scale_up_hop_latency_s"] = _num(path, "scale_up.hop_latency_s", up["hop_latency_s"])
    if "bw_bytes_per_s_per_nic" in out:
        opt["nic_bw_bytes_per_s"] = _num(path, "scale_out.bw_bytes_per_s_per_nic", out["bw_bytes_per_s_per_nic"])
    return SystemProfile(
        name=str(data["name"]), device=str(data["device"]),
        gpus_per_node=int(_num(path, "gpus_per_node", data["gpus_per_node"], integer=True)),
        display_name=str(data.get("display_name", "")), aliases=tuple(str(a) for a in data.get("aliases", ())),
        scale_up_name=str(up.get("name", "")),
        scale_up_efficiency=_num(path, "scale_up.efficiency", up.get("efficiency", 0.8), at_most=1.0),
        scale_out_name=str(out.get("name", "")),
        nics_per_node=int(_num(path, "scale_out.nics_per_node", out.get("nics_per_node", 1), integer=True)),
        scale_out_efficiency=_num(path, "scale_out.efficiency", out.get("efficiency", 0.8), at_most=1.0),
        scale_out_hop_latency_s=_num(path, "scale_out.hop_latency_s", out.get("hop_latency_s", 1e-5)),
        sources={str(k): str(v) for k, v in data.get("sources", {}).items()}, notes=str(data.get("notes", "")),
        path=str(path), **opt)


def _read(path: Path) -> SystemProfile:
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise HardwareProfileError(f"{path.name}: cannot read the system profile ({e})") from None
    return system_from_dict(data, path)


def list_systems() -> list[SystemProfile]:
    d = system_dir()
    return [_read(p) for p in sorted(d.glob("*.toml"))] if d.is_dir() else []


def load_system(name: str | Path | SystemProfile) -> SystemProfile:
    """A shipped system by name or alias, or a ``.toml`` file of the same schema."""
    if isinstance(name, SystemProfile):
        return name
    p = Path(str(name))
    if p.suffix == ".toml" and p.is_file():
        return _read(p)
    key = str(name).strip().lower()
    systems = list_systems()
    for s in systems:
        if key == s.name.lower() or key in (a.lower() for a in s.aliases):
            return s
    known = ", ".join(s.name for s in systems)
    raise InputError(f"--system {name}: unknown system; use one of: {known} (or a .toml file)")
