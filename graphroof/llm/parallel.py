"""The parallel layout of one LLM replica set: tensor (``tp``), pipeline (``pp``), attention-data (``dp``) and expert
(``ep``) parallelism, placed on a system's nodes, and the pipeline that prices one rank of it.

Ranks (``world = tp x pp x dp``) are numbered TP innermost, then DP, then the pipeline stage (vLLM / Megatron):
rank ``(stage x dp + d) x tp + t``; a system (:mod:`graphroof.hardware.system`) fills its nodes (scale-up domains of
``gpus_per_node`` devices) with consecutive ranks.  So a TP group crosses nodes only when ``tp`` does not fit in
one, a stage boundary does when ``tp x dp`` ranks fill a node, and the EP group of a stage (``ep = tp x dp``,
:mod:`graphroof.llm.ep`) spans ``ceil(tp x dp / gpus_per_node)`` nodes.  Without a system every rank shares one
scale-up domain (the device profile's interconnect), as a single-node estimate always did.

Pipeline stages (:func:`stage_of_ops`): the repeated decoder blocks split into ``pp`` contiguous stages as evenly as
possible, the remainder to the stages before the last (vLLM's ``get_pp_indices``: the last stage also runs the
LM head), the ops before the first block (embedding) on the first stage and those after the last (final norm, LM
head) on the last.  :class:`ParallelPipeline` is the :class:`~graphroof.llm.phases.Pipeline` of one stage's rank:
its graphs are the stage's ops (after the TP split and the EP pass), its parameters the stage's.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, replace
from typing import Any

import networkx as nx

from ..errors import InputError
from ..graph import OP, OpGraph, edge_copies, fill_digraph
from ..hardware.system import SystemProfile
from .ep import EXPERTS, insert_ep, scale_ep_costs
from .phases import Pipeline
from .tp import DEFAULT_PLAN, TPPlan, scale_costs

__all__ = ["Layout", "ParallelPipeline", "check_layout", "cut", "ep_plan", "stage_of_ops", "stage_sizes"]

_LAYER = re.compile(r"^\d+$")


@dataclass(frozen=True)
class Layout:
    """``tp x pp x dp`` ranks (``ep`` of them per stage share the experts) on *system*'s nodes (None: one domain)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    system: SystemProfile | None = None
    nodes: int | None = None
    microbatches: int | None = None
    ep_imbalance: float | None = None

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def plain(self) -> bool:
        """One replica, TP inside one domain: priced by the plain path."""
        return self.pp == 1 and self.dp == 1 and self.ep == 1 and self.system is None

    @property
    def gpus_per_node(self) -> int | None:
        return self.system.gpus_per_node if self.system is not None else None

    @property
    def node_count(self) -> int:
        if self.system is None:
            return 1
        return self.nodes or self.system.nodes_for(self.world)

    def _node(self, rank: int) -> int:
        g = self.gpus_per_node
        return 0 if g is None else rank // g

    def boundary_inter_node(self, stage: int) -> bool:
        """Whether the send from *stage* to *stage* + 1 crosses nodes (any of the ``tp x dp`` rank pairs)."""
        s = self.tp * self.dp
        return any(self._node(stage * s + j) != self._node((stage + 1) * s + j) for j in range(s))

    def tp_nodes(self) -> int:
        g = self.gpus_per_node
        return 1 if g is None else math.ceil(self.tp / g)

    def ep_nodes(self) -> int:
        g = self.gpus_per_node
        return 1 if g is None or self.ep == 1 else math.ceil(self.ep / g)

    def describe(self) -> str:
        parts = [f"TP {self.tp}", f"PP {self.pp}", f"DP {self.dp}", f"EP {self.ep}"]
        out = " x ".join(parts[:3]) + f", {parts[3]}: {self.world} GPUs"
        if self.system is not None:
            out += (f" on {self.node_count} x {self.system.name} node{'s' if self.node_count > 1 else ''} "
                    f"({self.system.gpus_per_node} per NVLink domain)")
            cross = []
            if self.tp_nodes() > 1:
                cross.append("TP")
            if self.pp > 1 and any(self.boundary_inter_node(k) for k in range(self.pp - 1)):
                cross.append("PP send/recv")
            if self.ep_nodes() > 1:
                cross.append("EP all-to-all")
            if cross:
                out += f"; across nodes: {', '.join(cross)}"
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "ep": self.ep, "world": self.world,
                "system": self.system.name if self.system is not None else None,
                "gpus_per_node": self.gpus_per_node, "nodes": self.node_count,
                "microbatches": self.microbatches, "ep_imbalance": self.ep_imbalance,
                "pp_boundaries_inter_node": [self.boundary_inter_node(k) for k in range(self.pp - 1)],
                "tp_nodes": self.tp_nodes(), "ep_nodes": self.ep_nodes(), "describe": self.describe()}


def _positive(flag: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise InputError(f"{flag} must be an integer >= 1, got {v!r}")
    return v


def check_layout(tp: int, pp: int, dp: int, ep: int, *, system: Any = None, nodes: int | None = None,
                 microbatches: int | None = None, ep_imbalance: float | None = None) -> Layout:
    """The :class:`Layout` of the flags, or a one-line :class:`InputError` naming the flag and its valid values."""
    from ..hardware.system import load_system

    for flag, v in (("--pp", pp), ("--dp", dp), ("--ep", ep)):
        _positive(flag, v)
    if ep not in (1, tp * dp):
        raise InputError(f"--ep {ep}: experts are split over every rank of a pipeline stage (ep = tp x dp, vLLM's "
                         f"--enable-expert-parallel); use --ep 1 or --ep {tp * dp}")
    if microbatches is not None:
        _positive("--microbatches", microbatches)
    if ep_imbalance is not None and (isinstance(ep_imbalance, bool) or not isinstance(ep_imbalance, (int, float))
                                     or not ep_imbalance >= 1.0 or not math.isfinite(ep_imbalance)):
        raise InputError(f"--ep-imbalance must be a number >= 1 (the busiest rank's tokens over the mean), "
                         f"got {ep_imbalance!r}")
    sys = load_system(system) if system is not None else None
    if nodes is not None:
        _positive("--nodes", nodes)
        if sys is None:
            raise InputError("--nodes needs --system (the node: its GPUs and network); e.g. --system dgx-h100")
    world = tp * pp * dp
    if sys is not None and nodes is not None and world > nodes * sys.gpus_per_node:
        raise InputError(f"--tp {tp} x --pp {pp} x --dp {dp} = {world} GPUs do not fit on --nodes {nodes} x "
                         f"{sys.gpus_per_node} GPUs of {sys.name}; use --nodes {math.ceil(world / sys.gpus_per_node)}"
                         " or a smaller layout")
    return Layout(tp, pp, dp, ep, sys, nodes, microbatches,
                  None if ep_imbalance is None else float(ep_imbalance))


def ep_plan(plan: TPPlan, ep: int) -> TPPlan:
    """Under EP the experts are not tensor-split: the TP plan without the ``experts`` module."""
    if ep == 1 or EXPERTS not in plan.row:
        return plan
    return replace(plan, row=plan.row - {EXPERTS})


# -- stages ---------------------------------------------------------------------------------------------------

def stage_sizes(layers: int, pp: int) -> list[int]:
    """Decoder blocks per stage: ``layers // pp`` each, the remainder one each to the stages just before the last
    (vLLM ``get_pp_indices``): ``stage_sizes(80, 3) == [27, 27, 26]``, ``stage_sizes(61, 4) == [15, 15, 16, 15]``."""
    if pp > layers:
        raise InputError(f"--pp {pp} exceeds the model's {layers} decoder layers; use --pp 1 .. {layers}")
    sizes = [layers // pp] * pp
    for i in range(2, layers % pp + 2):
        sizes[-i] += 1
    return sizes


def _container(scopes: Any) -> tuple[str, list[int]] | None:
    """(scope prefix of the repeated decoder blocks, their indices): the prefix with the most numbered children."""
    found: dict[str, set[int]] = {}
    for scope in scopes:
        parts = scope.split(".")
        for i in range(1, len(parts)):
            if _LAYER.match(parts[i]):
                found.setdefault(".".join(parts[:i]), set()).add(int(parts[i]))
                break
    if not found:
        return None
    prefix = max(found, key=lambda k: len(found[k]))
    return prefix, sorted(found[prefix])


def _layer(scope: str, prefix: str) -> int | None:
    if not scope.startswith(prefix + "."):
        return None
    head = scope[len(prefix) + 1:].split(".", 1)[0]
    head = head.split("_", 1)[0]  # an inserted collective's scope: "3.self_attn_all_reduce" -> "3"
    return int(head) if _LAYER.match(head) else None


def stage_of_ops(graph: OpGraph, pp: int) -> dict[str, int]:
    """Op name -> pipeline stage (see the module doc)."""
    names = list(graph.nx.nodes)
    if pp == 1:
        return dict.fromkeys(names, 0)
    c = _container(op.scope for op in graph.ops())
    if c is None:
        raise InputError(f"--pp {pp}: no repeated decoder blocks (numbered module scopes such as model.layers.0) "
                         "in the graph to split into stages; pipeline parallelism needs a model with module scopes")
    prefix, idx = c
    sizes = stage_sizes(len(idx), pp)
    stage_of_layer: dict[int, int] = {}
    pos = 0
    for s, n in enumerate(sizes):
        for layer in idx[pos: pos + n]:
            stage_of_layer[layer] = s
        pos += n
    out: dict[str, int] = {}
    seen_layer = False
    for name in names:
        at = _layer(graph.node(name).scope, prefix)
        if at is not None and at in stage_of_layer:
            seen_layer = True
            out[name] = stage_of_layer[at]
        else:
            out[name] = 0 if not seen_layer else pp - 1
    return out


def stage_of_param(scope: str, prefix: str, stage_of_layer: dict[int, int], plan: TPPlan, pp: int) -> int:
    """A parameter's stage: its block's, the embedding on the first stage, anything else (norm, head) the last."""
    layer = _layer(scope, prefix)
    if layer is not None and layer in stage_of_layer:
        return stage_of_layer[layer]
    kind, _ = plan.kind(scope)
    return 0 if kind == "embed" else pp - 1


def cut(graph: OpGraph, keep: set[str]) -> OpGraph:
    """The subgraph of the ops in *keep* (edges between them, producers of their tensors)."""
    out = OpGraph(graph.name, dict(graph.meta))
    out.nx = nx.DiGraph()
    out.nx.graph.update(graph.nx.graph)
    nodes = [(n, dict(d)) for n, d in graph.nx.nodes(data=True) if n in keep]  # in op order (not a subgraph view's)
    edges = [(u, v, d) for u, v, d in edge_copies(graph.nx) if u in keep and v in keep]
    fill_digraph(out.nx, nodes, edges)
    out.set_producers({t: p for t, p in graph.producers.items() if p in keep})
    return out


class ParallelPipeline(Pipeline):
    """The :class:`~graphroof.llm.phases.Pipeline` of one rank of stage *stage* under *layout*: the TP split (and
    the EP pass) on the whole graph, then the stage's ops; collectives carry the system's ``gpus_per_node``."""

    def __init__(self, *args: Any, layout: Layout, stage: int = 0, **kw: Any):
        kw["plan"] = ep_plan(kw.get("plan", DEFAULT_PLAN), layout.ep)
        super().__init__(*args, **kw)
        self.layout, self.stage = layout, stage
        self.experts_only = False  # ep_view: the stage's expert ops alone

    def prepare(self, graph: OpGraph, tp: int | None = None) -> OpGraph:
        lay = self.layout
        g = super().prepare(graph, tp)
        g = insert_ep(g, lay.ep, lay.tp, lay.dp, lay.ep_imbalance, lay.gpus_per_node, self.source.spec.hidden)
        if lay.gpus_per_node is not None:
            for op in list(g.ops()):
                if op.op.startswith("comm.") and "gpus_per_node" not in op.attrs:
                    g.set(op.name, OP, replace(op, attrs={**op.attrs, "gpus_per_node": lay.gpus_per_node}))
        if lay.pp > 1:
            stages = stage_of_ops(g, lay.pp)
            g = cut(g, {n for n, s in stages.items() if s == self.stage})
        if self.experts_only:
            g = cut(g, {op.name for op in g.ops() if op.attrs.get("ep")})
        return g

    def count_key(self) -> tuple:
        return (*super().count_key(), self.layout, self.stage, self.experts_only)

    def scale(self, graph: OpGraph) -> None:
        scale_costs(graph)
        if self.layout.ep > 1:
            scale_ep_costs(graph)

    def rank_params(self, params: list) -> list:
        lay = self.layout
        out = []
        c = _container(scope for scope, _ in params) if lay.pp > 1 else None
        stage_of_layer: dict[int, int] = {}
        if c is not None:
            pos = 0
            for s, n in enumerate(stage_sizes(len(c[1]), lay.pp)):
                for layer in c[1][pos: pos + n]:
                    stage_of_layer[layer] = s
                pos += n
        for scope, t in params:
            if c is not None and stage_of_param(scope, c[0], stage_of_layer, self.plan, lay.pp) != self.stage:
                continue
            if lay.ep > 1 and EXPERTS in scope.split(".") and t.rank == 3 and isinstance(t.shape[0], int):
                t = replace(t, shape=(t.shape[0] // lay.ep, *t.shape[1:]))
            out.append((scope, t))
        return out

    def stage_view(self, stage: int) -> ParallelPipeline:
        """The pipeline of another stage, sharing this one's traces (and their interpolation grids)."""
        if stage == self.stage:
            return self
        return self._view(stage=stage)

    def ep_view(self) -> ParallelPipeline:
        """This stage's expert ops alone (the ops :func:`~graphroof.llm.ep.insert_ep` marks, whose per-rank cost
        follows the whole EP group's tokens, not this rank's), sharing the traces: the part of a step the
        attention-DP step cost re-prices at the group's mean tokens (:class:`~graphroof.llm.pp.ParallelStepCost`)."""
        return self._view(experts_only=True)

    def _view(self, **changes: Any) -> ParallelPipeline:
        """A copy with *changes* set, sharing the traces and their grids, with its own prepared / counted graphs."""
        other = copy.copy(self)
        for k, v in changes.items():
            setattr(other, k, v)
        other._cache, other._prepared, other._breakdowns = {}, {}, {}
        return other
