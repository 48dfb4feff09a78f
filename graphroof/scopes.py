"""The scope hierarchy of an OpGraph's ops: the parts of a dotted scope, the depth of the repeated blocks and the
natural "layer" depth of a graph.

Depth counts module levels of the dotted scope; a numeric part (a ``ModuleList`` index) belongs to the part
before it, so ``model.layers.0.self_attn.q_proj`` is ``model`` / ``model.layers.0`` / ``model.layers.0.self_attn``
at depths 1 / 2 / 3.  Plain data about the graph, one level above it: the fusion pass keeps kernels inside one
block with these, and the layer rollup (:mod:`graphroof.layers`) groups its rows with them.
"""

from __future__ import annotations

import re

from .graph import OpGraph

__all__ = ["TOP", "scope_parts", "scope_at", "block_level", "default_depth", "auto_depth"]

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
    """The first *depth* parts of *scope* (``scope_at("model.layers.0.mlp", 2) == "model.layers.0"``); :data:`TOP`
    for an op without a scope."""
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
