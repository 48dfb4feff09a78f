"""Counted graphs at virtual points: the counted op graph and kernel graph at a ``(batch, context)`` that a
:class:`~graphroof.llm.poly.GridPlan` covers, from the counted graphs at its points, without building the
step graph there and preparing, counting and fusing it again.

* Op nodes: every node that differs between the grid points is interpolated (:func:`~graphroof.llm.poly.interp`,
  exactly what :class:`~graphroof.llm.poly.GraphGrid` does to the traces; quantization and the TP split keep
  dims polynomial).
* Op costs: counted by the rules on the interpolated nodes, each distinct node once (the decoder blocks share
  theirs) and the TP split applied (*recount*), so every op's cost is the one a full count gives, including
  the ops whose rules are not polynomial (``min(tokens, vocab)`` rows of a gather, the MoE experts visited).
* Kernel costs: the sum of the member ops' costs at the point + the fusion correction (kernel cost minus the
  sum of its ops' costs: the intermediate tensors it keeps on chip, the folded ops' reads), interpolated
  (tensor bytes: polynomial); a one-op kernel is its op.  Kernel nodes are interpolated like op nodes.

The grid points must agree on structure (op and kernel names and keys, count summary); otherwise
:class:`~graphroof.llm.poly.NotPolynomial` is raised and the caller counts the point in full.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..counters.cost import Cost
from ..graph import COST, OpGraph, OpNode
from .poly import GridPlan, NotPolynomial, interp
from .series import FIELDS

__all__ = ["CountedGrid"]


def _row(c: Cost) -> list[float]:
    return [getattr(c, f) for f in FIELDS]


def _key(o: OpNode) -> tuple:
    return (o.op, o.inputs, o.outputs, repr(sorted(o.attrs.items())))


def _varying(graphs: Sequence[OpGraph], names: list[str]) -> dict[str, list[OpNode]]:
    out = {}
    for n in names:
        nodes = [g.node(n) for g in graphs]
        if any(v != nodes[0] for v in nodes[1:]):
            out[n] = nodes
    return out


def _meta(metas: Sequence[dict], w: Sequence[float], memo: dict) -> dict:
    out = {}
    for k, v in metas[0].items():
        try:
            out[k] = interp([m.get(k) for m in metas], w, memo)
        except NotPolynomial:
            out[k] = v
    return out


class CountedGrid:
    """One phase's counted graphs (:class:`~graphroof.llm.phases.Counted`) on a grid, and the counted op and
    kernel graphs at any covered point (:meth:`at`).

    *recount*: ``(nodes, dims) -> costs``, the pipeline's count of op nodes (rules, settings, TP split).
    """

    def __init__(self, plan: GridPlan, counted: Sequence, recount: Callable[[list[OpNode], dict], list[Cost]]):
        self.plan, self.recount = plan, recount
        c0 = counted[0]
        if any(c.kernels is None for c in counted):
            raise NotPolynomial("no kernel graph")
        self.ops = [c.counted for c in counted]
        self.kgs = [c.kernels for c in counted]
        names, knames = list(self.ops[0].nx.nodes), list(self.kgs[0].nx.nodes)
        s0 = c0.summary
        for c in counted[1:]:
            if (list(c.counted.nx.nodes) != names or list(c.kernels.nx.nodes) != knames
                    or any(c.counted.node(n).op != self.ops[0].node(n).op for n in names)
                    or any(c.kernels.node(n).attrs.get("ops") != self.kgs[0].node(n).attrs.get("ops")
                           or c.kernels.node(n).attrs.get("folded") != self.kgs[0].node(n).attrs.get("folded")
                           for n in knames)
                    or c.summary.as_dict() != s0.as_dict() or c.summary.shape_unknown != s0.shape_unknown):
                raise NotPolynomial("the counted graphs differ in structure between the grid points")
        self.summary = s0
        self.names, self.knames = names, knames
        self.op_var = _varying(self.ops, names)
        self.k_var = _varying(self.kgs, knames)
        pos = {n: i for i, n in enumerate(names)}
        self.members: list[list[int]] = []
        self.single: list[int | None] = []
        corr = np.empty((len(knames), len(FIELDS), len(counted)))
        op_y = np.array([[_row(g.get(n, COST)) for n in names] for g in self.ops])   # [points, ops, fields]
        for i, k in enumerate(knames):
            node = self.kgs[0].node(k)
            mem = [pos[m] for m in node.attrs.get("ops") or ()]
            self.members.append(mem)
            self.single.append(mem[0] if len(mem) == 1 and not node.attrs.get("folded") else None)
            for j, kg in enumerate(self.kgs):
                corr[i, :, j] = np.asarray(_row(kg.get(k, COST))) - op_y[j, mem].sum(axis=0)
        self.corr = corr
        self.corr_scale = np.abs(corr).max(axis=2)                                      # [kernels, fields]

    def at(self, b: int, x: int) -> tuple[OpGraph, OpGraph]:
        """(counted op graph, kernel graph) at ``(b, x)``, costs set."""
        if (b, x) in self.plan.points or not self.plan.covers(b, x):
            raise NotPolynomial(f"batch {b}, context {x}: not a virtual point of the grid {self.plan}")
        w = self.plan.weights(b, x)
        memo: dict = {}
        new = {n: interp(v, w, memo) for n, v in self.op_var.items()}
        g = self.ops[0].map_ops(lambda op: new.get(op.name, op))
        g.meta = _meta([o.meta for o in self.ops], w, memo)
        g.meta["virtual_trace"] = f"interpolated from the counted graphs at (batch, context) {self.plan.points}"
        # op costs: the rules on the interpolated nodes, each distinct node once
        distinct: dict[tuple, int] = {}
        first: list[OpNode] = []
        which = []
        for n in self.names:
            nd = g.node(n)
            k = _key(nd)
            if k not in distinct:
                distinct[k] = len(first)
                first.append(nd)
            which.append(distinct[k])
        costs = self.recount(first, g.meta.get("dims", {}))
        op_costs = [costs[i] for i in which]
        for n, c in zip(self.names, op_costs):
            g.set(n, COST, c)
        newk = {n: interp(v, w, memo) for n, v in self.k_var.items()}
        kg = self.kgs[0].map_ops(lambda op: newk.get(op.name, op))
        kg.meta = _meta([k.meta for k in self.kgs], w, memo)
        kg.meta["virtual_trace"] = g.meta["virtual_trace"]
        corr = self.corr @ np.asarray(w)                                                # [kernels, fields]
        for i, k in enumerate(self.knames):
            s = self.single[i]
            if s is not None:
                kg.set(k, COST, op_costs[s])
                continue
            mem = [op_costs[m] for m in self.members[i]]
            rows = np.array([_row(c) for c in mem])
            vals = rows.sum(axis=0) + corr[i]
            # what is left of a field the kernel keeps on chip is 0, not the rounding of a difference
            tol = 1e-9 * (1.0 + np.abs(rows).sum(axis=0) + self.corr_scale[i])
            vals = np.where(np.abs(vals) <= tol, 0.0, vals)
            kg.set(k, COST, Cost(**{f: max(0.0, float(v)) for f, v in zip(FIELDS, vals)},
                                 estimated=any(c.estimated for c in mem)))
        return g, kg
