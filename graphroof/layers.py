"""Layer rollup: group ops by scope prefix at a depth, summing costs and times.

Depth counts module levels of the dotted scope; a numeric part (a ``ModuleList`` index) belongs to the part
before it, so ``model.layers.0.self_attn.q_proj`` is ``model`` / ``model.layers.0`` / ``model.layers.0.self_attn``
at depths 1 / 2 / 3.  A layer's bound comes from its summed compute vs memory (vs network) time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .counters.cost import Cost
from .graph import BOUND, COST, OpGraph, OpNode
from .hardware import HardwareProfile
from .roofline import Bound, Totals, combine

__all__ = ["scope_parts", "scope_at", "auto_depth", "LayerGroup", "rollup", "TOP"]

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


def auto_depth(graph: OpGraph, target: int = 8, max_depth: int = 6) -> int:
    """The natural "layer" level of *graph*'s scopes.

    The shallowest depth at which two or more parts carry a repeated-block index (``model.layers.0``,
    ``layer1.0``), so every decoder / residual block is one row; failing that, the smallest depth giving at least
    ``min(target, distinct scopes)`` groups.
    """
    scopes = {op.scope for op in graph.ops()}
    parts = [scope_parts(s) for s in scopes]
    for d in range(1, max_depth + 1):
        if len({".".join(p[:d]) for p in parts if len(p) >= d and _INDEXED.search(p[d - 1])}) >= 2:
            return d
    want = min(target, len(scopes))
    for d in range(1, max_depth + 1):
        if len({scope_at(s, d) for s in scopes}) >= want:
            return d
    return max_depth


@dataclass
class LayerGroup:
    """One row of the layer table."""

    name: str
    ops: list[OpNode]
    cost: Cost
    totals: Totals
    op_kinds: dict[str, int]

    @property
    def bound(self) -> str:
        return self.totals.bound


def rollup(graph: OpGraph, hw: HardwareProfile, depth: int | None = None) -> list[LayerGroup]:
    """Groups in first-seen (topological) order."""
    if depth is None:
        depth = auto_depth(graph)
    groups: dict[str, list[OpNode]] = {}
    for op in graph.ops():
        groups.setdefault(scope_at(op.scope, depth), []).append(op)
    out = []
    for name, ops in groups.items():
        cost = sum((graph.get(o.name, COST) for o in ops), Cost())
        bounds: list[Bound] = [graph.get(o.name, BOUND) for o in ops]
        kinds: dict[str, int] = {}
        for o in ops:
            kinds[o.op] = kinds.get(o.op, 0) + 1
        out.append(LayerGroup(name, ops, cost, combine(bounds, cost, hw), kinds))
    return out
