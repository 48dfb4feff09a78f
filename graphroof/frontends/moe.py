"""Mixture-of-experts routing facts for grouped GEMMs: how many experts a step actually visits.

A fused MoE layer runs its experts as grouped GEMMs ``a [S, K] x b [E, K, N]`` (one weight per expert, rows of
``a`` split among the experts).  Counted as written, every step reads all ``E`` experts' weights; a serving
engine's grouped kernel only loads the weights of experts that received at least one row.  Which experts those are
depends on the router's values, which a meta trace does not have, so the count uses the expectation under
**uniform routing**: each of the ``T`` tokens of the step picks ``k`` distinct experts out of ``E`` uniformly,
independently of the other tokens.  One expert is missed by one token with probability ``1 - k/E`` (``k`` of the
``E`` experts are picked), by all ``T`` tokens with ``(1 - k/E)^T``, so the expected number of distinct experts
visited is

    ``E * (1 - (1 - k/E)^T)``           (:func:`expected_experts`)

(Mixtral, E=8, k=2: 2 at T=1, 8 * (1 - 0.75^8) = 7.20 at T=8; Qwen3-30B-A3B, E=128, k=8: 8 at T=1, 51.6 at T=8).

:func:`mark_moe_routing` finds, for each grouped GEMM over a 3-D ``[E, ...]`` weight, the router's ``topk`` over
``E`` scores in the nearest enclosing module scope and records plain facts on the node (``moe_experts``,
``moe_top_k``, ``moe_tokens`` and an optional ``moe_experts_touched`` override); the grouped-GEMM counting rule
(:mod:`graphroof.counters.rules.matmul`) reads them.  A grouped GEMM with no router found keeps reading every
expert (the conservative count).
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from ..counters.rules.matmul import GROUPED_OPS, expected_experts, experts_visited
from ..errors import InputError
from ..graph import OpGraph, OpNode, TensorSpec

__all__ = ["GROUPED_OPS", "TOPK_OPS", "expected_experts", "experts_visited", "mark_moe_routing", "routing_note"]

TOPK_OPS = ("aten.topk", "onnx.TopK")


def _ancestors(scope: str) -> list[str]:
    parts = scope.split(".") if scope else []
    return [".".join(parts[:i]) for i in range(len(parts), -1, -1)]


def _within(scope: str, anc: str) -> bool:
    return not anc or scope == anc or scope.startswith(anc + ".")


def _router(op: OpNode, topks: list[OpNode], experts: int) -> OpNode | None:
    """The ``topk`` over *experts* scores in the nearest scope enclosing *op*."""
    fits = [t for t in topks if t.inputs and t.inputs[0] is not None and t.inputs[0].rank >= 1
            and t.inputs[0].shape[-1] == experts and int(t.attrs.get("k", 0) or 0) >= 1]
    for anc in _ancestors(op.scope):
        if not anc:
            break  # the whole model: too far to tell which router feeds which experts
        near = [t for t in fits if _within(t.scope, anc)]
        if near:
            return near[-1]
    return None


def mark_moe_routing(graph: OpGraph, experts_touched: float | None = None) -> OpGraph:
    """Record routing facts on every grouped GEMM over ``[E, ...]`` expert weights (see module docstring).

    *experts_touched* overrides the uniform-routing expectation: that many experts are read per step and layer
    (capped at E).  Returns a new graph; the input graph is unchanged.
    """
    if experts_touched is not None and not experts_touched > 0:
        raise InputError(f"--experts-touched must be > 0, got {experts_touched}")
    ops = list(graph.ops())
    grouped = [op for op in ops if op.op in GROUPED_OPS and len(op.inputs) >= 2 and op.inputs[1] is not None
               and op.inputs[1].rank == 3]
    if not grouped:
        return graph
    topks = [op for op in ops if op.op in TOPK_OPS]
    g = graph.map_ops(lambda op: op)
    marked = 0
    for op in grouped:
        weights = cast(TensorSpec, op.inputs[1])  # not None: see `grouped`
        experts = cast(int, weights.shape[0])    # traced: a sized expert dim
        router = _router(op, topks, experts)
        attrs = dict(op.attrs)
        attrs["moe_experts"] = int(experts)
        if router is not None:
            scores = cast(TensorSpec, router.inputs[0])  # not None: see `_router`
            attrs["moe_top_k"] = int(router.attrs["k"])
            attrs["moe_tokens"] = int(scores.numel // cast(int, scores.shape[-1]))
        if experts_touched is not None:
            attrs["moe_experts_touched"] = float(experts_touched)
        if router is None and experts_touched is None:
            continue
        g.set(op.name, "op", replace(op, attrs=attrs))
        marked += 1
    if marked:
        note = routing_note(g, experts_touched)
        g.meta["moe_routing"] = note
        g.meta["notes"] = [*g.meta.get("notes", []), note]
    return g


def routing_note(graph: OpGraph, experts_touched: float | None = None) -> str:
    """One line saying how expert weights are counted in *graph* (marked by :func:`mark_moe_routing`)."""
    facts = sorted({(op.attrs["moe_experts"], op.attrs.get("moe_top_k")) for op in graph.ops()
                    if op.op in GROUPED_OPS and "moe_experts" in op.attrs})
    what = ", ".join(f"{e} experts, top-{k}" if k else f"{e} experts" for e, k in facts)
    if experts_touched is not None:
        return (f"mixture of experts ({what}): each step reads the weights of {experts_touched:g} experts per MoE "
                "layer (--experts-touched); FLOPs are those of the tokens routed")
    return (f"mixture of experts ({what}): each step reads the weights of the experts its tokens visit, "
            "E*(1-(1-k/E)^T) expected distinct experts for T tokens under uniform routing (e.g. k at batch 1 "
            "decode, all E for long prefills); --experts-touched N overrides; FLOPs are those of the tokens routed")
