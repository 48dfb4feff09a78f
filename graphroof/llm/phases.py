"""Prefill and decode as roofline phases.

* **Prefill**: the graph at ``seq = prompt``; its time is the time to first token (TTFT).
* **Decode** (model with a KV cache): ``gen - 1`` steps after the first token; step ``j`` (1-based) feeds one
  token per sequence with ``past = prompt + j - 1`` tokens in the cache, so ``past`` runs over
  ``prompt .. prompt + gen - 2``.  Every cost field is affine in ``past``, so the step graph is counted at the
  two ends of that range and the sum of roofline times over all steps is computed exactly
  (:mod:`graphroof.llm.series`); TPOT is that sum over ``gen - 1``.
* **Decode without a KV cache**: each step recomputes the whole context, i.e. the prefill graph at
  ``seq = prompt + j``; costs are then quadratic in the context (attention), counted at three points, and
  summed exactly the same way.

The decode phase's op rows hold the mean cost and mean roofline times per step (shapes shown are those of the
first sampled step).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from ..analysis import Analysis
from ..counters.cost import Cost
from ..counters.count import CountSummary, count
from ..counters.registry import Rule
from ..counters.settings import CountSettings
from ..errors import FrontendError
from ..fuse import Runtime, fuse, get_runtime
from ..graph import BOUND, COST, OpGraph, OpNode
from ..hardware import HardwareProfile
from ..roofline import evaluate_graph
from .countgrid import CountedGrid
from .fastpath import LiveGrid
from .kvcache import mark_kv_cache
from .memory import activation_peak_bytes
from .poly import GraphGrid, GridPlan, NotPolynomial, poly_ok
from .quant import Quant, requantize
from .series import OpSeries
from .source import LLMSource
from .tp import DEFAULT_PLAN, TPPlan, scale_costs, shard

__all__ = ["Counted", "Pipeline", "Phase", "VirtualCounted"]


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


class VirtualCounted(Counted):
    """A :class:`Counted` interpolated at a virtual point (:mod:`graphroof.llm.countgrid`): its prepared graph is
    built only when something asks for it."""

    _graph: OpGraph | None

    def __init__(self, make_graph: Callable[[], OpGraph], counted: OpGraph, summary: CountSummary,
                 kernels: OpGraph):
        self._make = make_graph
        super().__init__(None, counted, summary, kernels)  # type: ignore[arg-type]

    @property  # type: ignore[override]
    def graph(self) -> OpGraph:
        g = self._graph
        if g is None:
            g = self._graph = self._make()
        return g

    @graph.setter
    def graph(self, g: OpGraph | None) -> None:
        self._graph = g


@dataclass
class Phase:
    """One phase of one configuration: an Analysis of the (mean) step and the step count."""

    name: str
    analysis: Analysis
    steps: int
    context: tuple[int, int]       # range of seq (prefill, recompute) or past (decode) covered
    notes: list[str] = field(default_factory=list)
    #: (ideal, realistic) time of the first and of the last step of the range
    first_step_s: tuple[float, float] = (0.0, 0.0)
    last_step_s: tuple[float, float] = (0.0, 0.0)

    @property
    def t_ideal_s(self) -> float:
        return self.analysis.totals.t_lower_s

    @property
    def t_realistic_s(self) -> float:
        return self.analysis.totals.t_realistic_s


class Pipeline:
    """source graph -> KV-cache semantics -> quantization -> TP split -> count -> per-device costs."""

    def __init__(self, source: LLMSource, hw: HardwareProfile, *, quant: Quant = Quant(), tp: int = 1,  # noqa: B008 - frozen
                 plan: TPPlan = DEFAULT_PLAN, settings: CountSettings | None = None,
                 rules: Mapping[str, Rule | None] | None = None, strict: bool = False, depth: int | None = None,
                 progress: Callable[[str], None] | None = None, runtime: str | Runtime | None = "serving"):
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
        #: interpolate counted graphs at virtual points (llm/countgrid.py) instead of counting virtual traces
        self.interpolate_counted = True
        self._cgrids: dict[str, CountedGrid | None] = {}
        self._live: dict[str, LiveGrid | None] = {}
        self.poly_notes: list[str] = []

    def prepare(self, graph: OpGraph, tp: int | None = None) -> OpGraph:
        g = requantize(mark_kv_cache(graph), self.quant)
        return shard(g, self.tp if tp is None else tp, self.plan)

    def raw(self, phase: str, batch: int, x: int) -> OpGraph:
        """The source's graph (traced once per key and kept: tracing is the slow part)."""
        key = (phase, batch, x)
        if key not in self._raw:
            g = self._virtual(phase, batch, x)
            if g is None:
                what = f"past {x}" if phase == "decode" else f"seq {x}"
                self.progress(f"tracing {self.source.name}: {phase} graph, batch {batch}, {what}")
                g = self.source.decode_graph(batch, x) if phase == "decode" else self.source.prefill_graph(batch, x)
            self._raw[key] = g
        return self._raw[key]

    def plan_grid(self, phase: str, plan: GridPlan) -> None:
        """Sample *phase* on *plan*: the counted graphs at any other point the plan covers are interpolated from
        the counted graphs at its points (:mod:`graphroof.llm.countgrid`; traced and counted on first need), or,
        where that cannot be done, the graph there from the traces (:mod:`graphroof.llm.poly`) and counted."""
        if poly_ok(self.source):
            self.plans[phase] = plan
            self._grids.pop(phase, None)
            self._cgrids.pop(phase, None)
            self._live.pop(phase, None)

    def _virtual(self, phase: str, batch: int, x: int) -> OpGraph | None:
        plan = self.plans.get(phase)
        if plan is None or (batch, x) in plan.points or not plan.covers(batch, x):
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

    def counted(self, phase: str, batch: int, x: int) -> Counted:
        """The graph of *phase* (``prefill`` at seq=x, ``decode`` at past=x) for *batch*, counted (cached)."""
        key = (phase, batch, x)
        if key not in self._cache:
            v = self._virtual_counted(phase, batch, x)
            if v is not None:
                self._cache[key] = v
                return v
            g = self._prepared.pop(key, None) or self._prepare_at(phase, batch, x)
            c = g.map_ops(lambda op: op)
            summary = count(c, rules=self.rules, strict=self.strict, settings=self.settings, warn=not self._warned)
            self._warned = True
            scale_costs(c)
            k = fuse(c, self.runtime).as_opgraph(c)
            self._cache[key] = Counted(g, c, summary, k)
        return self._cache[key]

    def _is_virtual(self, phase: str, batch: int, x: int) -> bool:
        plan = self.plans.get(phase)
        return plan is not None and (batch, x) not in plan.points and plan.covers(batch, x)

    def _virtual_counted(self, phase: str, batch: int, x: int) -> Counted | None:
        """The counted graphs at a virtual point interpolated from the grid's (:mod:`graphroof.llm.countgrid`),
        or None (not a virtual point, or the grid cannot be interpolated: the point is counted in full)."""
        if not self.interpolate_counted or not self._is_virtual(phase, batch, x):
            return None
        if phase not in self._cgrids:
            plan = self.plans[phase]
            try:
                self._cgrids[phase] = CountedGrid(plan, [self.counted(phase, *p) for p in plan.points],
                                                  self._recount)
            except NotPolynomial:
                self._cgrids[phase] = None
        grid = self._cgrids[phase]
        if grid is None:
            return None
        try:
            g, kg = grid.at(batch, x)
        except NotPolynomial:
            return None
        return VirtualCounted(lambda: self._prepare_at(phase, batch, x), g, grid.summary, kg)

    def _recount(self, nodes: list[OpNode], dims: Mapping) -> list[Cost]:
        """Count op nodes as :meth:`counted` counts a graph (rules, settings, then the per-device TP costs)."""
        g = OpGraph("ops", {"dims": dict(dims)})
        for nd in nodes:
            g.add_op(nd)
        count(g, rules=self.rules, settings=self.settings, warn=False)
        scale_costs(g)
        return [g.get(nd.name, COST) for nd in nodes]

    def activation_peak(self, phase: str, batch: int, x: int) -> float:
        """Activation peak of the prepared graph (:func:`~graphroof.llm.memory.activation_peak_bytes`); at an
        interpolated point, from the liveness sums of the grid's graphs (:class:`~graphroof.llm.fastpath.LiveGrid`)."""
        c = self.counted(phase, batch, x)
        if isinstance(c, VirtualCounted) and c._graph is None:
            if phase not in self._live:
                plan = self.plans[phase]
                try:
                    self._live[phase] = LiveGrid(plan, [self.counted(phase, *p).graph for p in plan.points])
                except NotPolynomial:
                    self._live[phase] = None
            live = self._live[phase]
            if live is not None:
                return live.peak(batch, x)
        return activation_peak_bytes(c.graph)

    def phase(self, name: str, graph_phase: str, batch: int, lo: int, hi: int, degree: int,
              meta: Mapping | None = None) -> Phase:
        """Mean step over ``x = lo .. hi`` (costs polynomial of *degree* in x), as an Analysis."""
        n = hi - lo + 1
        if n <= degree + 1:
            xs = list(range(lo, hi + 1))
        else:
            xs = [lo, hi] if degree == 1 else [lo, (lo + hi) // 2, hi]
        notes: list[str] = []
        graphs = self.cuda_graphs(graph_phase)
        try:
            series = OpSeries({x: self.counted(graph_phase, batch, x).ops for x in xs})
            kseries = OpSeries({x: self.counted(graph_phase, batch, x).kernel_ops for x in xs})
            base = self.counted(graph_phase, batch, xs[0])
        except FrontendError:
            mid = (lo + hi) // 2
            base = self.counted(graph_phase, batch, mid)
            series, kseries = OpSeries({mid: base.ops}), OpSeries({mid: base.kernel_ops})
            notes.append(f"{name}: the graph changes structure with the context, so every step is approximated "
                         f"by the step at context {mid} (the middle of the range)")
        # the op view (every op its own kernel) and the kernel view (the runtime's kernels): totals from kernels
        g = base.counted.map_ops(lambda op: op)
        for i, op in enumerate(series.ops):
            s = series.sums(i, self.hw, lo, hi)
            g.set(op.name, COST, s.mean_cost)
            g.set(op.name, BOUND, s.bound)
        g.meta["dims"] = {**base.counted.meta.get("dims", {})}
        kg = base.kernels.map_ops(lambda op: op) if base.kernels is not None else None
        if kg is not None:
            for i, op in enumerate(kseries.ops):
                s = kseries.sums(i, self.hw, lo, hi, cuda_graphs=graphs)
                kg.set(op.name, COST, s.mean_cost)
                kg.set(op.name, BOUND, s.bound)
            kg.meta["dims"] = dict(g.meta["dims"])
        step_launch = self.step_launch_s(graph_phase)
        a = Analysis(g, self.hw, base.summary, depth=self.depth, meta=dict(meta or {}), kernels=kg,
                     runtime=self.runtime.name, step_launch_s=step_launch)
        ends = []
        for x in (lo, hi):
            bs = [kseries.bound_at(i, x, self.hw) for i in range(len(kseries))]
            real = sum(b.t_realistic_s - (b.t_launch_s if graphs else 0.0) for b in bs) + step_launch
            ends.append((sum(b.t_s for b in bs), real))
        return Phase(name, a, n, (lo, hi), notes, ends[0], ends[1])

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
            evaluate_graph(kg, self.hw)
            if self.cuda_graphs(phase):
                for n in kg.nx.nodes:
                    b = kg.get(n, BOUND)
                    kg.set(n, BOUND, replace(b, t_realistic_s=b.t_realistic_s - b.t_launch_s, t_launch_s=0.0))
        return Analysis(g, self.hw, c.summary, depth=self.depth, kernels=kg, runtime=self.runtime.name,
                        step_launch_s=self.step_launch_s(phase))
