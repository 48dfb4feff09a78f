"""Serving figures at thousands of (batch, prompt, gen) points without tracing or counting each point's graph.

:class:`KernelGrid` takes one phase's counted kernel graphs on a :class:`~graphroof.llm.poly.GridPlan` (the
traces of :mod:`graphroof.llm.poly`).  At any covered ``(b, x)`` a kernel's cost is the Lagrange interpolation of
its grid samples, except for the ops whose rules are not polynomial in the shapes (found by checking the rule on
interpolated op nodes at a lattice of points): those are counted by their rule at each point (each distinct op
once: the decoder blocks share theirs) and the rest of the kernel's cost is interpolated.  Kernels with identical
samples, ops, kind, dtype and shapes (the same kernel in every decoder block) are one group with a multiplicity.

:class:`PhaseEval` prices one phase on one device exactly as :meth:`graphroof.llm.phases.Pipeline.phase`
does (same :class:`~graphroof.llm.series.OpSeries` sums, same per-step kernel-time samples), group by group:
a group constant in the context is priced once per batch, the kernel-time model once per (batch, context) or
over the whole sampled range at once (:mod:`graphroof.timing.vectorized`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..counters.cost import Cost
from ..graph import COST, OpNode
from ..hardware import HardwareProfile
from ..roofline import Bound, bound_name, compute_dtype, evaluate
from ..timing.profile import timing_of
from .memory import activation_live_bytes
from .poly import GridPlan, NotPolynomial, interp
from .series import FIELDS, OpSeries, StepSums

__all__ = ["KernelGrid", "PhaseEval", "LiveGrid", "ScalarGrid", "Totals"]


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
                 check: Sequence[tuple[int, int]] = ()):
        self.plan, self.recount = plan, recount
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
            costs = self.recount([interp(nodes, list(w), memo) for nodes in self.op_nodes])
            for k, c in enumerate(costs):
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

    def _node(self, gi: int, w: Sequence[float]) -> OpNode:
        mnks = self._light[gi]
        nodes = self.nodes[gi]
        if mnks is None:
            return interp(nodes, w)
        if all(m == mnks[0] for m in mnks[1:]):
            return nodes[0]
        return replace(nodes[0], attrs={**nodes[0].attrs, "gemm_mnk": interp(mnks, w)})


class _MemoSeries(OpSeries):
    """An OpSeries whose per-step kernel times are computed once per x: for the whole sampled range at once
    with the vectorised model (:func:`graphroof.timing.vectorized.kernel_times`) where it has the kernel's kind,
    else one by one and remembered (the same x recurs across many points)."""

    def __init__(self, samples):
        super().__init__(samples)
        self._memo: dict[tuple[int, int], float] = {}
        self._vec: dict[int, np.ndarray | None] = {}

    def evaluate_mean(self, mean: Cost, hw: HardwareProfile, dtype: str, op: OpNode) -> Bound:
        """As the base class, without running the kernel-time model on the mean step: only the roofline terms
        and the launch of the result are used (the times are the step sums), and the launch is the timing
        model's per kernel launch for any kernel that works."""
        b = evaluate(mean, hw, dtype)
        if hw.timing is None:
            return b
        works = bool(mean.flops or mean.bytes or mean.net_bytes)
        launch = timing_of(hw).launch_overhead_s if works else 0.0
        return replace(b, t_launch_s=launch)

    def kernel_s(self, i: int, x: int, hw: HardwareProfile, dtype: str) -> float:
        v = self._range(i, hw, dtype)
        if v is not None and self.xs[0] <= x <= self.xs[-1]:
            return float(v[x - self.xs[0]])
        key = (i, x)
        if key not in self._memo:
            self._memo[key] = super().kernel_s(i, x, hw, dtype)
        return self._memo[key]

    def kernel_mean(self, i: int, xs: Sequence[int], hw: HardwareProfile, dtype: str) -> float:
        v = self._range(i, hw, dtype)
        if v is not None and self.xs[0] <= xs[0] and xs[-1] <= self.xs[-1]:
            return float(v[np.asarray(xs) - self.xs[0]].sum()) / len(xs)
        return super().kernel_mean(i, xs, hw, dtype)

    def _range(self, i: int, hw: HardwareProfile, dtype: str) -> np.ndarray | None:
        """Kernel times of op i at every x of the sampled range (None: not vectorised)."""
        lo, hi = self.xs[0], self.xs[-1]
        if lo == hi:
            return None
        if i not in self._vec:
            self._vec[i] = self._vector(i, np.arange(lo, hi + 1), hw, dtype)
        return self._vec[i]

    def _vector(self, i: int, xs: np.ndarray, hw: HardwareProfile, dtype: str) -> np.ndarray | None:
        from ..timing.vectorized import kernel_times

        op = self.ops[i]
        xf = xs.astype(float)
        cost = {f: np.maximum(0.0, p[0] + p[1] * xf + p[2] * xf * xf) for f, p in self.coeffs[i].items()}
        mnk = None
        if i in self.mnk:
            mnk = tuple(np.maximum(1, np.round(p[0] + p[1] * xf + p[2] * xf * xf)).astype(np.int64)
                        for p in self.mnk[i])
        elif op.attrs.get("gemm_mnk"):
            mnk = tuple(np.full(xs.shape, int(v), dtype=np.int64) for v in op.attrs["gemm_mnk"])
        kind = op.attrs.get("kernel_kind")
        if not kind:
            return None
        return kernel_times(str(kind), op.attrs.get("op_keys") or (op.op,), dtype, cost, mnk, hw)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Totals:
    """Phase totals as :class:`graphroof.analysis.Analysis` sums them (per step, mean over the steps)."""

    t_ideal_s: float
    t_realistic_s: float
    t_compute_s: float
    t_memory_s: float
    t_network_s: float

    @property
    def bound(self) -> str:
        return bound_name(self.t_compute_s, self.t_memory_s, self.t_network_s)


class PhaseEval:
    """One phase of one pipeline on one device: totals of the mean step over ``x = lo .. hi`` at batch ``b``."""

    def __init__(self, grid: KernelGrid, hw: HardwareProfile, *, cuda_graphs: bool = False,
                 step_launch_s: float = 0.0):
        self.grid, self.hw, self.cuda_graphs, self.step_launch_s = grid, hw, cuda_graphs, step_launch_s
        self._series: dict[int, _MemoSeries] = {}
        self._const: dict[int, dict[int, StepSums]] = {}
        self._points: dict[tuple[int, int], Totals] = {}

    def _at(self, b: int) -> _MemoSeries:
        if b not in self._series:
            self._series[b] = _MemoSeries({x: self.grid.at(b, x) for x in self.grid.plan.xs})
            self._const[b] = {}
        return self._series[b]

    def totals(self, b: int, lo: int, hi: int) -> Totals:
        """Totals of the mean step over ``lo .. hi``; one step (``lo == hi``) is priced from the kernels at that
        exact point, as a single-sample phase is."""
        if not (self.grid.plan.covers(b, lo) and self.grid.plan.covers(b, hi)):
            raise NotPolynomial(f"batch {b}, context {lo}..{hi} is outside the grid {self.grid.plan}")
        if lo == hi:
            if (b, lo) not in self._points:
                self._points[b, lo] = self._sum(_MemoSeries({lo: self.grid.at(b, lo)}), {}, lo, hi)
            return self._points[b, lo]
        return self._sum(self._at(b), self._const[b], lo, hi)

    def _sum(self, s: _MemoSeries, const: dict[int, StepSums], lo: int, hi: int) -> Totals:
        t = t_r = tc = tm = tn = 0.0
        for i, mult in enumerate(self.grid.mult):
            if i in const:
                r = const[i]
            else:
                r = s.sums(i, self.hw, lo, hi, cuda_graphs=self.cuda_graphs)
                if s._constant(i):  # noqa: SLF001 - same series class family
                    const[i] = r
            bd = r.bound
            t += mult * bd.t_s
            t_r += mult * bd.t_realistic_s
            tc += mult * bd.t_compute_s
            tm += mult * bd.t_memory_s
            tn += mult * bd.t_network_s
        return Totals(t, t_r + self.step_launch_s, tc, tm, tn)


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
