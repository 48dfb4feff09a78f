"""Layer rollup: group ops by scope prefix at a depth, summing costs and times.

Depth counts module levels of the dotted scope; a numeric part (a ``ModuleList`` index) belongs to the part
before it, so ``model.layers.0.self_attn.q_proj`` is ``model`` / ``model.layers.0`` / ``model.layers.0.self_attn``
at depths 1 / 2 / 3.  A layer's bound comes from its summed compute vs memory (vs network) time
(:func:`graphroof.roofline.combine`).  This is the one rollup: ``Analysis.layers``, the LLM layer tables
(folded repeated blocks) and the measured comparison (``graphroof profile``) all build their rows here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .counters.cost import Cost
from .graph import BOUND, COST, REPEAT, OpGraph, OpNode
from .hardware import HardwareProfile
from .roofline import Bound, Totals, combine

__all__ = ["scope_parts", "scope_at", "auto_depth", "block_level", "default_depth", "op_params",
           "LayerGroup", "rollup", "layer_row", "summarize",
           "attainable_flops_per_s", "cost_fields", "COST_FIELDS", "TOP"]

#: The group of ops that carry no scope.
TOP = "(top)"
_INDEXED = re.compile(r"\.\d+$")


def scope_parts(scope: str) -> list[str]:
    """``"model.layers.0.mlp"`` -> ``["model", "layers.0", "mlp"]``."""
    parts: list[str] = []
    for p in scope.split("."):
        if not p:
            continue
        if p.isdigit() and parts:
            parts[-1] = f"{parts[-1]}.{p}"
        else:
            parts.append(p)
    return parts


def scope_at(scope: str, depth: int) -> str:
    parts = scope_parts(scope)
    return ".".join(parts[:depth]) if parts else TOP


def block_level(graph: OpGraph, max_depth: int = 6) -> int | None:
    """The depth of the repeated blocks (``model.layers.0``: 2, ``layer1.0``: 1): the shallowest depth at which two
    or more parts carry a block index; ``None`` when *graph* has no numbered blocks."""
    parts = [scope_parts(s) for s in {op.scope for op in graph.ops()}]
    for d in range(1, max_depth + 1):
        if len({".".join(p[:d]) for p in parts if len(p) >= d and _INDEXED.search(p[d - 1])}) >= 2:
            return d
    return None


def default_depth(graph: OpGraph) -> int:
    """The layer tables' default depth: one level below the repeated block (a decoder layer's attention, MLP and
    norms; a residual block's convolutions), as the LLM tables; :func:`auto_depth` without numbered blocks."""
    d = block_level(graph)
    return d + 1 if d is not None else auto_depth(graph)


def auto_depth(graph: OpGraph, target: int = 8, max_depth: int = 6) -> int:
    """The natural "layer" level of *graph*'s scopes.

    The shallowest depth at which two or more parts carry a repeated-block index (``model.layers.0``,
    ``layer1.0``), so every decoder / residual block is one row; failing that, the smallest depth giving at least
    ``min(target, distinct scopes)`` groups.
    """
    scopes = {op.scope for op in graph.ops()}
    d = block_level(graph, max_depth)
    if d is not None:
        return d
    want = min(target, len(scopes))
    for d in range(1, max_depth + 1):
        if len({scope_at(s, d) for s in scopes}) >= want:
            return d
    return max_depth


#: The cost fields every op and layer row carries (the JSON schema, see README).
COST_FIELDS = ("matrix_flops", "vector_flops", "weight_bytes", "act_read_bytes", "act_write_bytes",
               "kv_read_bytes", "kv_write_bytes", "net_bytes")


def cost_fields(cost: Cost) -> dict[str, Any]:
    """A cost as row fields: :data:`COST_FIELDS` plus ``flops``, ``bytes`` and ``estimated``."""
    d: dict[str, Any] = {k: getattr(cost, k) for k in COST_FIELDS}
    d["flops"] = cost.flops
    d["bytes"] = cost.bytes
    d["estimated"] = cost.estimated
    return d


@dataclass
class LayerGroup:
    """One row of a layer table: some ops, their summed cost and their combined roofline times."""

    name: str
    ops: list[OpNode]
    cost: Cost
    totals: Totals
    op_kinds: dict[str, int]
    #: the distinct scopes folded into this row (one unless a ``key`` merged several, e.g. repeated blocks)
    members: list[str] = field(default_factory=list)

    @property
    def bound(self) -> str:
        return self.totals.bound

    @property
    def repeat(self) -> int:
        return max(1, len(self.members))


def summarize(graph: OpGraph, ops: Iterable[OpNode | str], hw: HardwareProfile) -> tuple[Cost, Totals]:
    """Summed cost and combined roofline (:func:`graphroof.roofline.combine`, the one bound rule) of *ops*."""
    names = [o if isinstance(o, str) else o.name for o in ops]
    cost = sum((graph.get(n, COST) for n in names), Cost())
    bounds: list[Bound] = [graph.get(n, BOUND) for n in names]
    return cost, combine(bounds, cost, hw)


def attainable_flops_per_s(cost: Cost, t: Totals, hw: HardwareProfile) -> float:
    """min(achieved compute peak, intensity x bandwidth) of a group: the roof at the group's intensity."""
    flops, nbytes = cost.flops, cost.bytes
    if not flops:
        return 0.0
    intensity = flops / nbytes if nbytes else float("inf")
    peak = flops / t.t_compute_s if t.t_compute_s else 0.0
    return min(peak, intensity * hw.mem_bw_bytes_per_s)


def rollup(graph: OpGraph, hw: HardwareProfile, depth: int | None = None,
           key: Callable[[str], str] | None = None) -> list[LayerGroup]:
    """Groups in first-seen (topological) order.

    Ops are grouped by their scope at *depth*; *key* maps that scope to a row name (e.g. folding
    ``model.layers.3.mlp`` into ``model.layers.*.mlp``), and :attr:`LayerGroup.members` records the scopes merged.
    """
    if depth is None:
        depth = auto_depth(graph)
    groups: dict[str, list[OpNode]] = {}
    members: dict[str, dict[str, None]] = {}
    for op in graph.ops():
        full = scope_at(op.scope, depth)
        name = key(full) if key else full
        groups.setdefault(name, []).append(op)
        members.setdefault(name, {}).setdefault(full)
    out = []
    for name, ops in groups.items():
        cost, t = summarize(graph, ops, hw)
        kinds: dict[str, int] = {}
        for o in ops:  # a kernel node counts the ops it runs
            for k, v in (o.attrs.get("op_key_counts") or {o.op: 1}).items():
                kinds[k] = kinds.get(k, 0) + v
        out.append(LayerGroup(name, ops, cost, t, kinds, list(members[name])))
    return out


def layer_row(g: LayerGroup, hw: HardwareProfile, total_t_s: float) -> dict[str, Any]:
    """The layer-table row of one group (``Analysis.layers`` schema); *total_t_s* is the model's roofline time."""
    t = g.totals
    flops, nbytes = g.cost.flops, g.cost.bytes
    return {
        "name": g.name, "n_ops": sum(int(o.attrs.get("n_ops", 1)) for o in g.ops),
        "n_kernels": sum(runs(o) for o in g.ops),
        **cost_fields(g.cost),
        "intensity": flops / nbytes if nbytes else (float("inf") if flops else 0.0),
        "attainable_flops_per_s": attainable_flops_per_s(g.cost, t, hw),
        "t_compute_s": t.t_compute_s, "t_memory_s": t.t_memory_s, "t_network_s": t.t_network_s,
        "time_s": t.t_lower_s, "time_upper_s": t.t_upper_s, "time_realistic_s": t.t_realistic_s,
        "bound": t.bound, "share": t.t_lower_s / (total_t_s or 1.0),
        "op_kinds": dict(sorted(g.op_kinds.items(), key=lambda kv: -kv[1])),
        "ops": [n for o in g.ops for n in (o.attrs.get("ops") or (o.name,))],
    }


def op_params(graph: OpGraph) -> dict[str, int]:
    """Op name -> the parameters it reads (elements of its weight inputs; ops with none are left out).  A layer's
    parameter count, as FLOP counters show it per module, is the sum over its ops (a weight two modules read, such
    as a tied embedding, counts in both)."""
    from .errors import UnboundDimError
    from .graph import Role

    out: dict[str, int] = {}
    for op in graph.ops():
        n = 0
        for t in op.inputs:
            if t is not None and t.role == Role.WEIGHT:
                try:
                    n += t.numel
                except UnboundDimError:
                    pass
        if n:
            out[op.name] = n
    return out


def runs(op: OpNode) -> int:
    """How many times an op or kernel node runs (each run one launch): its ``graphroof.repeat`` when a whole number
    (an op-table count, an ONNX loop with a known trip count), else 1."""
    r = op.attrs.get(REPEAT, 1)
    return r if isinstance(r, int) and not isinstance(r, bool) and r >= 0 else 1
