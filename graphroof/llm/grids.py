"""Counted kernels of one phase on a grid of traces, and their costs at any (batch, context) the grid covers.

:class:`KernelGrid` takes one phase's counted kernel graphs on a :class:`~graphroof.llm.poly.GridPlan` (the
traces of :mod:`graphroof.llm.poly`).  At any covered ``(b, x)`` a kernel's cost is the Lagrange interpolation of
its grid samples, except for the ops whose rules are not polynomial in the shapes (found by checking the rule on
interpolated op nodes at a lattice of points): those are counted by their rule at each point (each distinct op
once: the decoder blocks share theirs) and the rest of the kernel's cost is interpolated.  Kernels with identical
samples, ops, kind, dtype and shapes (the same kernel in every decoder block) are one group with a multiplicity.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..counters.cost import Cost
from ..graph import COST, OpNode
from ..hardware import HardwareProfile
from ..roofline import compute_dtype
from .memory import activation_live_bytes
from .poly import GridPlan, NotPolynomial, interp

#: the cost fields of a kernel (:class:`~graphroof.counters.cost.Cost`), in array order
FIELDS = ("matrix_flops", "vector_flops", "weight_bytes", "act_read_bytes", "act_write_bytes", "kv_read_bytes",
          "kv_write_bytes", "net_bytes")

#: how many interpolated kernel nodes a :class:`KernelGrid` keeps (:meth:`KernelGrid.node_at`)
NODE_CACHE = 4096

__all__ = ["FIELDS", "NODE_CACHE", "KernelGrid", "LiveGrid", "ScalarGrid", "lattice", "recounter", "step_launch_s"]


def _signature(nodes: Sequence[OpNode]) -> tuple:
    """What an op's cost depends on, on every grid point (its name and scope aside)."""
    return tuple((o.op, o.inputs, o.outputs, repr(sorted(o.attrs.items()))) for o in nodes)


class KernelGrid:
    """Kernel costs of one phase of one pipeline (dtypes, TP) on a grid, identical kernels grouped.

    *counted*: the pipeline's :class:`~graphroof.llm.phases.Counted` at ``plan.points`` (same order).
    *recount*: counts a list of op nodes as the pipeline does (rules, settings, TP scaling), one cost each.

    A kernel's cost at ``(b, x)`` = the interpolation of its samples without its *irregular* ops (those whose rule,
    run on the interpolated op nodes at the *check* points, disagrees with the interpolated cost: a gather reads at
    most its table, ``min(tokens, vocab)`` rows; an MoE grouped GEMM reads ``E (1 - (1 - k/E)^T)`` experts) + those
    ops counted by their rule at ``(b, x)``.  TP scaling and the dtype what-ifs are in the op nodes and the rule.
    """

    def __init__(self, plan: GridPlan, counted: Sequence, recount: Callable[[list[OpNode]], list[Cost]],
                 check: Sequence[tuple[int, int]] = (), lenient: bool = False):
        self.plan, self.recount, self._lenient = plan, recount, lenient
        kgs = [c.kernels if c.kernels is not None else c.counted for c in counted]
        ops = [list(c.counted.nx.nodes) for c in counted]
        if any(o != ops[0] for o in ops[1:]):
            raise NotPolynomial("the counted graphs differ between the traces")
        names = list(kgs[0].nx.nodes)
        for kg in kgs[1:]:
            if list(kg.nx.nodes) != names or any(kg.node(n).op != kgs[0].node(n).op for n in names):
                raise NotPolynomial("the kernels differ between the traces")
        # op groups: ops with the same nodes on every grid point (the same op in every decoder block)
        op_group: dict[str, int] = {}
        sigs: dict[tuple, int] = {}
        self.op_nodes: list[list[OpNode]] = []
        op_y: list[np.ndarray] = []
        for n in ops[0]:
            nodes = [c.counted.node(n) for c in counted]
            sig = _signature(nodes)
            if sig not in sigs:
                sigs[sig] = len(self.op_nodes)
                self.op_nodes.append(nodes)
                op_y.append(np.array([[getattr(c.counted.get(n, COST), f) for f in FIELDS] for c in counted]).T)
            op_group[n] = sigs[sig]
        irregular = self._irregular(op_y, check)
        n_k, g = len(names), len(kgs)
        y = np.empty((n_k, len(FIELDS), g))
        kops: list[tuple[int, ...]] = []
        for i, name in enumerate(names):
            for j, kg in enumerate(kgs):
                c = kg.get(name, COST)
                y[i, :, j] = [getattr(c, f) for f in FIELDS]
            members = kgs[0].node(name).attrs.get("ops") if counted[0].kernels is not None else (name,)
            mine = tuple(sorted(op_group[m] for m in members or () if op_group[m] in irregular))
            for k in mine:
                y[i] -= op_y[k]
            kops.append(mine)
        groups: dict[tuple, list[int]] = {}
        for i, name in enumerate(names):
            nodes = [kg.node(name) for kg in kgs]
            nd = nodes[0]
            key = (y[i].tobytes(), kops[i], nd.attrs.get("kernel_kind"), compute_dtype(nd), nd.attrs.get("op_keys"),
                   nd.attrs.get("world_size"), nd.attrs.get("collective"), tuple(o.attrs.get("gemm_mnk") for o in nodes),
                   nd.attrs.get("quantize_input"),
                   tuple((tuple(t.shape if t is not None else None for t in o.inputs),
                          tuple(t.shape for t in o.outputs)) for o in nodes), nd.op)
            groups.setdefault(key, []).append(i)
        self.members = list(groups.values())
        self.mult = [len(m) for m in self.members]
        reps = [m[0] for m in self.members]
        self.y = y[reps]                                   # [groups, fields, grid points]: fusion corrections
        used = sorted({k for i in reps for k in kops[i]})
        self._used = used
        self.incidence = np.zeros((len(reps), len(used)))  # kernel group x op group: how many times
        pos = {k: j for j, k in enumerate(used)}
        for gi, i in enumerate(reps):
            for k in kops[i]:
                self.incidence[gi, pos[k]] += 1
        self.nodes = [[kg.node(names[i]) for kg in kgs] for i in reps]
        # the timing model reads a kernel's kind, op keys, dtype and GEMM shape; only collectives (output bytes)
        # and GEMMs without a recorded shape (derived from the tensors) need their tensors interpolated
        self._light: list[list | None] = []
        for nodes in self.nodes:
            kind, mnks = nodes[0].attrs.get("kernel_kind"), [o.attrs.get("gemm_mnk") for o in nodes]
            full = not kind or kind == "comm" or (kind == "gemm" and any(m is None for m in mnks))
            self._light.append(None if full else mnks)
        self.estimated = [any(kg.get(names[i], COST).estimated for kg in kgs) for i in reps]
        self.names = [[names[i] for i in m] for m in self.members]  # kernel names of each group
        self._at: dict[tuple[int, int, int], OpNode] = {}           # node_at's nodes, by (group, b, x)

    def _irregular(self, op_y: list[np.ndarray], check: Sequence[tuple[int, int]]) -> set[int]:
        """Op groups whose rule, run on the interpolated nodes at the *check* points, does not give the
        interpolated cost (caps such as ``min(tokens, vocab)``, the MoE experts-visited expectation): those are
        counted at every point, the others interpolated with their kernels."""
        out: set[int] = set()
        pts = self.plan.points
        for b, x in check:
            if (b, x) in pts or not self.plan.covers(b, x):
                continue
            w = np.asarray(self.plan.weights(b, x))
            memo: dict = {}
            ks, nodes_at = [], []
            for k, nodes in enumerate(self.op_nodes):
                try:
                    nodes_at.append(interp(nodes, list(w), memo))
                    ks.append(k)
                except NotPolynomial:
                    if not self._lenient:
                        raise
                    # lenient (a step cost's chunk grid): an op whose attributes differ between the traces is
                    # left interpolated with its kernel, as it is without check points
            for k, c in zip(ks, self.recount(nodes_at)):
                want = np.array([getattr(c, f) for f in FIELDS])
                if not np.allclose(op_y[k] @ w, want, rtol=1e-9, atol=1e-6):
                    out.add(k)
        return out

    def __len__(self) -> int:
        return len(self.members)

    def at(self, b: int, x: int) -> list[tuple[OpNode, Cost]]:
        """Every group's (kernel node, cost) at ``(b, x)``."""
        if not self.plan.covers(b, x):
            raise NotPolynomial(f"batch {b}, context {x} is outside the grid {self.plan}")
        w = self.plan.weights(b, x)
        vals = self.y @ np.asarray(w)                      # [groups, fields]
        if self._used:
            memo: dict = {}
            costs = self.recount([interp(self.op_nodes[k], w, memo) for k in self._used])
            vals = vals + self.incidence @ np.array([[getattr(c, f) for f in FIELDS] for c in costs])
        out = []
        for gi in range(len(self.members)):
            cost = Cost(**{f: max(0.0, float(c)) for f, c in zip(FIELDS, vals[gi])}, estimated=self.estimated[gi])
            out.append((self._node(gi, w), cost))
        return out

    def costs_many(self, b: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, list[tuple | None]]:
        """Costs ``[groups, fields, points]`` at the points ``(b[j], x[j])`` (clipped at 0), and per group its
        GEMM shape at each point (three int arrays) or None (a group whose node must be interpolated: see
        :meth:`node_at`).  The regular part is one matrix product; the irregular ops are counted per point."""
        for bv, xv in set(zip(b.tolist(), x.tolist())):
            if not self.plan.covers(bv, xv):
                raise NotPolynomial(f"batch {bv}, context {xv} is outside the grid {self.plan}")
        w = self.plan.weights_many(b, x)                                        # [points, grid points]
        vals = np.einsum("gfp,np->gfn", self.y, w)
        if self._used:
            extra = np.empty((len(self._used), len(FIELDS), len(b)))
            for j in range(len(b)):
                memo: dict = {}
                wj = w[j].tolist()
                costs = self.recount([interp(self.op_nodes[k], wj, memo) for k in self._used])
                extra[:, :, j] = [[getattr(c, f) for f in FIELDS] for c in costs]
            vals += np.einsum("gu,ufn->gfn", self.incidence, extra)
        mnks: list[tuple | None] = []
        for light in self._light:
            if light is None or light[0] is None:  # interpolated node, or a kernel without a GEMM shape
                mnks.append(None)
            elif all(m == light[0] for m in light[1:]):
                mnks.append(tuple(np.full(len(b), int(v), dtype=np.int64) for v in light[0]))
            else:
                m = np.rint(w @ np.asarray(light, dtype=float)).astype(np.int64)  # [points, 3]
                mnks.append((m[:, 0], m[:, 1], m[:, 2]))
        return np.maximum(vals, 0.0), mnks

    def node_at(self, gi: int, b: int, x: int) -> OpNode:
        """Group *gi*'s kernel node at ``(b, x)`` (its tensors interpolated), the same object on every call for
        the same point: the evaluator asks for a group's node once per step it prices (a decode range at one
        batch asks for the node at its first context as many times as the range has steps), and its memo of
        kernel times is keyed by the node's identity.  At most :data:`NODE_CACHE` nodes are kept (the cache is emptied
        when full)."""
        key = (gi, b, x)
        hit = self._at.get(key)
        if hit is None:
            if len(self._at) >= NODE_CACHE:
                self._at.clear()
            hit = self._at[key] = self._node(gi, self.plan.weights(b, x))
        return hit

    def _node(self, gi: int, w: Sequence[float]) -> OpNode:
        mnks = self._light[gi]
        nodes = self.nodes[gi]
        if mnks is None:
            return interp(nodes, w)
        if all(m == mnks[0] for m in mnks[1:]):
            return nodes[0]
        # rounded as the tables' shapes are (_light rows above): a GEMM shape under expert parallelism follows the
        # busiest rank's rows, which carry the multinomial maximum's sqrt term (graphroof.llm.ep), not a polynomial
        mnk = tuple(int(v) for v in np.rint(np.asarray(w, dtype=float) @ np.asarray(mnks, dtype=float)))
        return replace(nodes[0], attrs={**nodes[0].attrs, "gemm_mnk": mnk})


class LiveGrid:
    """Live activation bytes after each op of the prepared prefill graphs on a grid: the activation peak at
    any covered ``(b, x)`` is the largest interpolated entry (0 at least), as :func:`activation_peak_bytes`."""

    def __init__(self, plan: GridPlan, graphs: Sequence):
        rows = [activation_live_bytes(g) for g in graphs]
        if len({len(r) for r in rows}) != 1:
            raise NotPolynomial("the prefill graphs differ in size")
        self.plan = plan
        self.y = np.unique(np.asarray(rows).T, axis=0)     # [distinct live sums, grid points]

    def peak(self, b: int, x: int) -> float:
        return max(0.0, float((self.y @ np.asarray(self.plan.weights(b, x))).max()))


class ScalarGrid:
    """One number per grid point (a sum of costs of a step), interpolated."""

    def __init__(self, plan: GridPlan, values: Sequence[float]):
        self.plan, self.values = plan, list(values)

    def at(self, b: int, x: int) -> float:
        return sum(p * q for p, q in zip(self.plan.weights(b, x), self.values))


def lattice(batches: Sequence[int], xs: Sequence[int], n: int = 5) -> list[tuple[int, int]]:
    """Check points of the irregular ops: ``n`` quantiles of the batches x ``n`` of the contexts asked for."""
    def q(values: Sequence[int]) -> list[int]:
        vals = sorted(set(values))
        return sorted({vals[round(i * (len(vals) - 1) / (n - 1))] for i in range(n)})

    return [(b, x) for b in q(batches) for x in q(xs)]


def recounter(pipe: Any, meta: dict):
    """Counts op nodes as *pipe* counts its graphs (its rules and settings, then the per-device TP costs)."""
    from ..counters.count import count
    from ..graph import COST, OpGraph
    def recount(nodes):
        g = OpGraph("ops", {"dims": meta.get("dims", {})})
        for nd in nodes:
            g.add_op(nd)
        count(g, rules=pipe.rules, settings=pipe.settings, warn=False)
        pipe.scale(g)
        return [g.get(nd.name, COST) for nd in nodes]

    return recount


def step_launch_s(cuda_graphs: bool, hw: HardwareProfile) -> float:
    """The launch cost a step pays once (a CUDA-graph replay); 0 when kernels pay their own launches or the
    profile is ideal (no overheads)."""
    if not cuda_graphs or (hw.timing is None and not hw.launch_overhead_s):
        return 0.0
    from ..timing.profile import timing_of

    return timing_of(hw).graph_launch_overhead_s
