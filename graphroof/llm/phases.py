"""The pipeline of an LLM source (trace -> KV-cache marks -> quantization -> TP split -> count -> fuse) and the
per-op breakdown of a phase.

* **Prefill**: the graph at ``seq = prompt``; its time is the time to first token (TTFT).
* **Decode**: the ``gen - 1`` steps after the first token over the contexts of
  :func:`graphroof.llm.tokens.decode_range` (with a KV cache, one token per sequence over the cache; without
  one, the prefill graph over the whole context).  Costs are polynomial in the context, so the counted graphs at
  a few contexts give every step, and the one evaluator (:class:`~graphroof.llm.evaluator.PhasePricer`) sums
  them.

A phase's op and kernel rows hold the mean cost and mean times per step (shapes shown are those of the first
step).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from ..analysis import Analysis
from ..counters.cost import Cost
from ..counters.count import CountSummary, count
from ..counters.registry import Rule
from ..counters.settings import CountSettings
from ..errors import FrontendError, warn
from ..frontends.source import LLMSource
from ..fuse import Runtime, fuse, get_runtime
from ..graph import BOUND, COST, OpGraph, OpNode
from ..hardware import HardwareProfile
from ..roofline import compute_dtype, evaluate, evaluate_graph
from .evaluator import PhasePricer
from .grids import FIELDS, KernelGrid
from .poly import GraphGrid, GridPlan, NotPolynomial, interp, poly_ok
from .quant import Quant
from .shared import _COUNTED, _SHARED, _replayed
from .tp import DEFAULT_PLAN, TPPlan, scale_costs, shard

__all__ = ["Counted", "Pipeline", "Phase"]


@dataclass
class Counted:
    """One counted graph: per-device costs (after quantization and the TP split) on every node."""

    graph: OpGraph          # quantized and sharded, before counting (kept for memory liveness)
    counted: OpGraph
    summary: CountSummary
    kernels: OpGraph | None = None  # the kernels under the runtime preset (fuse stage), costs set

    @property
    def kernel_ops(self) -> list[tuple[OpNode, Cost]]:
        g = self.kernels if self.kernels is not None else self.counted
        return [(op, g.get(op.name, COST)) for op in g.ops()]

    @property
    def ops(self) -> list[tuple[OpNode, Cost]]:
        return [(op, self.counted.get(op.name, COST)) for op in self.counted.ops()]


@dataclass
class Phase:
    """The per-op breakdown of one phase of one configuration: an Analysis of the mean step (its rows and totals
    are the evaluator's per-kernel means: :meth:`~graphroof.llm.evaluator.PhasePricer.group_means`)."""

    name: str
    analysis: Analysis
    steps: int
    context: tuple[int, int]       # range of seq (prefill, recompute) or past (decode) covered
    notes: list[str] = field(default_factory=list)


class Pipeline:
    """source graph -> KV-cache semantics -> quantization -> TP split -> count -> per-device costs."""

    def __init__(self, source: LLMSource, hw: HardwareProfile, *, quant: Quant = Quant(), tp: int = 1,  # noqa: B008 - frozen
                 plan: TPPlan = DEFAULT_PLAN, settings: CountSettings | None = None,
                 rules: Mapping[str, Rule | None] | None = None, strict: bool = False, depth: int | None = None,
                 progress: Callable[[str], None] | None = None, runtime: str | Runtime | None = "serving"):
        kv_heads = getattr(getattr(source, "spec", None), "kv_heads", None)
        if plan.kv_heads is None and kv_heads:  # a TP degree above the KV heads replicates them (llm/tp.py)
            plan = replace(plan, kv_heads=int(kv_heads))
        self.source, self.hw, self.quant, self.tp, self.plan = source, hw, quant, tp, plan
        self.runtime = get_runtime(runtime or "serving")
        self.progress = progress or (lambda message: None)
        self.settings = settings or CountSettings()
        self.rules, self.strict, self.depth = rules, strict, depth
        self._cache: dict[tuple[str, int, int], Counted] = {}
        self._raw: dict[tuple[str, int, int], OpGraph] = {}
        self._prepared: dict[tuple[str, int, int], OpGraph] = {}
        self._warned = False
        #: grids the phases are sampled on (llm/poly.py): other covered points are virtual traces
        self.plans: dict[str, GridPlan] = {}
        self._grids: dict[str, GraphGrid | None] = {}
        self._breakdowns: dict[tuple, tuple | None] = {}
        self.poly_notes: list[str] = []

    def prepare(self, graph: OpGraph, tp: int | None = None) -> OpGraph:
        g, shared = _SHARED.quantized(graph, self.quant)
        out = shard(g, self.tp if tp is None else tp, self.plan)
        # the shared graph is never handed out: subclasses may edit the prepared graph in place
        return out.map_ops(lambda op: op) if shared and out is g else out

    def scale(self, graph: OpGraph) -> None:
        """Counted costs -> per-device costs (the TP split; :class:`~graphroof.llm.parallel.ParallelPipeline`
        adds expert parallelism)."""
        scale_costs(graph)

    def rank_params(self, params: list) -> list:
        """The parameters one device holds (all of them here; a pipeline stage holds its layers')."""
        return params

    def raw(self, phase: str, batch: int, x: int) -> OpGraph:
        """The source's graph (traced once per key and kept: tracing is the slow part)."""
        key = (phase, batch, x)
        if key not in self._raw:
            g = self._virtual(phase, batch, x)
            if g is None:
                what = f"past {x}" if phase == "decode" else f"seq {x}"
                self.progress(f"tracing {self.source.name}: {phase} graph, batch {batch}, {what}")
                g = _SHARED.traced(self.source, phase, batch, x)
            self._raw[key] = g
        return self._raw[key]

    def plan_grid(self, phase: str, plan: GridPlan) -> None:
        """Sample *phase* on *plan*: the counted graphs at any other point the plan covers are interpolated from
        the counted graphs at its points (:mod:`graphroof.llm.countgrid`; traced and counted on first need), or,
        where that cannot be done, the graph there from the traces (:mod:`graphroof.llm.poly`) and counted."""
        if poly_ok(self.source):
            self.plans[phase] = plan
            self._grids.pop(phase, None)

    def virtual_plan(self, phase: str, batch: int, x: int) -> GridPlan | None:
        """The grid that makes the graph at ``(batch, x)`` (a virtual trace), or None when it is traced."""
        plan = self.plans.get(phase)
        if plan is None or (batch, x) in plan.points or not plan.covers(batch, x):
            return None
        return plan

    def _virtual(self, phase: str, batch: int, x: int) -> OpGraph | None:
        plan = self.virtual_plan(phase, batch, x)
        if plan is None:
            return None
        if phase not in self._grids:
            try:
                self._grids[phase] = GraphGrid(plan, {p: self.raw(phase, *p) for p in plan.points})
            except NotPolynomial as e:
                self._grids[phase] = None
                self.poly_notes.append(f"{phase}: every point traced ({e})")
        grid = self._grids[phase]
        if grid is None:
            return None
        try:
            return grid.at(batch, x)
        except NotPolynomial:
            return None

    def _prepare_at(self, phase: str, batch: int, x: int) -> OpGraph:
        g = self.prepare(self.raw(phase, batch, x))
        if g.symbolic_dims():
            from ..graph import bind

            g = bind(g, g.meta.get("default_dims", {}))
        return g

    def prepared(self, phase: str, batch: int, x: int) -> OpGraph:
        """The quantized and sharded graph :meth:`counted` counts (kept; no counting when not counted yet)."""
        key = (phase, batch, x)
        if key in self._cache:
            return self._cache[key].graph
        if key not in self._prepared:
            self._prepared[key] = self._prepare_at(phase, batch, x)
        return self._prepared[key]

    def count_key(self) -> tuple:
        """What this pipeline's counted graphs depend on besides the source, the runtime, the rules and the point
        (compared by value): everything but the device, which only prices them."""
        return (type(self), self.quant, self.tp, self.plan, self.settings, self.strict)

    def counted(self, phase: str, batch: int, x: int) -> Counted:
        """The graph of *phase* (``prefill`` at seq=x, ``decode`` at past=x) for *batch*, counted (cached, and
        shared with the pipelines that differ from this one only in the device: :class:`_SharedCounted`)."""
        key = (phase, batch, x)
        if key not in self._cache:
            hit = _COUNTED.get(self, key)
            if hit is not None:
                self._prepared.pop(key, None)
                self.raw(phase, batch, x)  # its trace's warnings and the grid's notes, as a fresh count has them
                if not self._warned:  # the count's warnings, as this pipeline's first count raises them
                    for category, message in hit[1]:
                        warn(message, category)
                self._warned = True
                self._cache[key] = hit[0]
                return hit[0]
            g = self._prepared.pop(key, None) or self._prepare_at(phase, batch, x)
            c = g.map_ops(lambda op: op)
            with warnings.catch_warnings(record=True) as rec:
                warnings.simplefilter("always")
                summary = count(c, rules=self.rules, strict=self.strict, settings=self.settings, warn=True)
            ours = _replayed(rec, show=not self._warned)
            self._warned = True
            self.scale(c)
            k = fuse(c, self.runtime).as_opgraph(c)
            self._cache[key] = Counted(g, c, summary, k)
            _COUNTED.put(self, key, self._cache[key], ours)
        return self._cache[key]

    def phase(self, name: str, graph_phase: str, batch: int, lo: int, hi: int, degree: int,
              meta: Mapping | None = None) -> Phase:
        """The breakdown of the mean step over ``x = lo .. hi`` (costs polynomial of *degree* in x) at *batch*:
        every op and kernel priced by the one evaluator on the phase's grid when it interpolates the batch, else
        on the counted graphs at this batch (the range's ends, and its middle for degree 2)."""
        notes: list[str] = []
        plan = self.plans.get(graph_phase)
        if plan is not None and batch not in plan.bs and plan.covers(batch, lo) and plan.covers(batch, hi):
            a = self._priced(graph_phase, plan, ((batch, lo), (batch, hi)), batch, lo, hi, meta)
            if a is not None:
                return Phase(name, a, hi - lo + 1, (lo, hi), notes)
        n = hi - lo + 1
        xs = tuple(range(lo, hi + 1)) if n <= degree + 1 else ((lo, hi) if degree == 1 else (lo, (lo + hi) // 2, hi))
        a = self._priced(graph_phase, GridPlan((batch,), xs, len(xs) - 1), (), batch, lo, hi, meta)
        if a is None:
            mid = (lo + hi) // 2
            a = self._priced(graph_phase, GridPlan((batch,), (mid,), 0), (), batch, lo, hi, meta)
            notes.append(f"{name}: the graph changes structure with the context, so every step is approximated "
                         f"by the step at context {mid} (the middle of the range)")
            if a is None:
                raise NotPolynomial(f"{name}: the counted graph at context {mid} cannot be priced")
        return Phase(name, a, hi - lo + 1, (lo, hi), notes)

    def _priced(self, graph_phase: str, plan: GridPlan, check: tuple, batch: int, lo: int, hi: int,
                meta: Mapping | None) -> Analysis | None:
        """The breakdown on *plan*, or None when its counted graphs cannot be interpolated there."""
        grids = self.breakdown(graph_phase, plan, check)
        if grids is None:
            return None
        kgrid, ogrid, counted = grids
        graphs = self.cuda_graphs(graph_phase)
        launch = self.step_launch_s(graph_phase)
        w = plan.weights(batch, lo if len(plan.xs) > 1 or lo in plan.xs else plan.xs[0])
        try:
            g = _priced_view(counted, "counted", ogrid, PhasePricer(ogrid, self.hw).group_means(batch, lo, hi), w,
                             self.hw)
            kp = PhasePricer(kgrid, self.hw, cuda_graphs=graphs, step_launch_s=launch, runtime=self.runtime)
            kg = _priced_view(counted, "kernels", kgrid, kp.group_means(batch, lo, hi), w, self.hw, self.runtime)
        except NotPolynomial:
            return None
        return Analysis(g, self.hw, counted[0].summary, depth=self.depth, meta=dict(meta or {}), kernels=kg,
                        runtime=self.runtime.name, step_launch_s=launch)

    def breakdown(self, graph_phase: str, plan: GridPlan, check: tuple) -> tuple | None:
        """(kernel grid, op grid, counted graphs at the plan's points) of *graph_phase* on *plan*; None when the
        counted graphs cannot be interpolated (they differ in structure)."""
        key = (graph_phase, plan, check)
        if key not in self._breakdowns:
            from .grids import recounter

            try:
                counted = [self.counted(graph_phase, *p) for p in plan.points]
                recount = recounter(self, counted[0].counted.meta)
                kgrid = KernelGrid(plan, counted, recount, check)
                ogrid = KernelGrid(plan, [Counted(c.graph, c.counted, c.summary, None) for c in counted], recount,
                                   check)
                self._breakdowns[key] = (kgrid, ogrid, counted)
            except (NotPolynomial, FrontendError):
                self._breakdowns[key] = None
        return self._breakdowns[key]

    def cuda_graphs(self, graph_phase: str) -> bool:
        """Whether steps of *graph_phase* replay as one CUDA graph (decode under the serving preset)."""
        return graph_phase == "decode" and self.runtime.decode_launch == "step"

    def step_launch_s(self, graph_phase: str) -> float:
        """The per-step launch cost paid once (a CUDA-graph replay), 0 when kernels pay their own."""
        if not self.cuda_graphs(graph_phase) or (self.hw.timing is None and not self.hw.launch_overhead_s):
            return 0.0  # eager launches, or an ideal profile (no overheads)
        from ..timing.profile import timing_of

        return timing_of(self.hw).graph_launch_overhead_s

    def step(self, phase: str, batch: int, x: int) -> Analysis:
        """Analysis of one step: ``step("decode", 32, 1024)`` is the decode step with 1024 cached tokens."""
        c = self.counted(phase, batch, x)
        g = c.counted.map_ops(lambda op: op)
        for op in c.counted.ops():
            g.set(op.name, COST, c.counted.get(op.name, COST))
        evaluate_graph(g, self.hw)
        kg = None
        if c.kernels is not None:
            kg = c.kernels.map_ops(lambda op: op)
            for op in c.kernels.ops():
                kg.set(op.name, COST, c.kernels.get(op.name, COST))
            evaluate_graph(kg, self.hw, self.runtime)
            if self.cuda_graphs(phase):
                for n in kg.nx.nodes:
                    b = kg.get(n, BOUND)
                    kg.set(n, BOUND, replace(b, t_realistic_s=b.t_realistic_s - b.t_launch_s, t_launch_s=0.0))
        return Analysis(g, self.hw, c.summary, depth=self.depth, kernels=kg, runtime=self.runtime.name,
                        step_launch_s=self.step_launch_s(phase))


def _priced_view(counted: list, which: str, grid: KernelGrid, priced: tuple, w: list[float],
                 hw: HardwareProfile, runtime: Runtime | None = None) -> OpGraph:
    """The counted op graph (*which* ``counted``) or kernel graph (``kernels``) of the grid's first point, its
    nodes interpolated at the weights *w* (shapes as at the breakdown's first step) and every node's cost and
    bound set to its group's mean step (*priced*: :meth:`PhasePricer.group_means`)."""
    graphs = [getattr(c, which) for c in counted]
    base = graphs[0]
    memo: dict = {}
    nodes = {}
    for n in base.nx.nodes:
        samples = [gr.node(n) for gr in graphs]
        nodes[n] = samples[0] if all(v == samples[0] for v in samples[1:]) else interp(samples, w, memo)
    g = base.map_ops(lambda op: nodes[op.name])
    meta = {}
    for k, v in base.meta.items():
        try:
            meta[k] = interp([gr.meta.get(k) for gr in graphs], w, memo)
        except NotPolynomial:
            meta[k] = v
    g.meta = meta
    g.meta["dims"] = dict(meta.get("dims", {}))
    means, rows = priced
    for gi, members in enumerate(grid.names):
        mean = Cost(**{f: float(v) for f, v in zip(FIELDS, means[gi])}, estimated=grid.estimated[gi])
        node = g.node(members[0])
        b = evaluate(mean, hw, compute_dtype(node), node=node, runtime=runtime)
        r = rows[gi]
        b = replace(b, t_s=float(r[0]), t_realistic_s=float(r[1]), t_launch_s=float(r[5]))
        for n in members:
            g.set(n, COST, mean)
            g.set(n, BOUND, b)
    return g
