"""Light what-if figures for the advice (:mod:`graphroof.report.advice`): one configuration's TTFT, TPOT,
throughput and memory fit under a change (weights dtype, TP degree, batch), without a full :func:`estimate`.

A what-if needs no layer tables, op view or critical batches, only the phase totals and the memory fit, so it
prices the phases with :class:`~graphroof.llm.fastpath.PhaseEval` on a :class:`~graphroof.llm.fastpath.KernelGrid`
of counted kernel graphs, and takes the memory fit from :meth:`graphroof.llm.estimate._Run.memory` with the
activation peak and KV bytes per token read off the same grids:

* a change of batch only (same dtypes, TP and runtime as the estimate): the estimate's own pipeline and its grids
  (:mod:`graphroof.llm.poly`), whose points it has already counted; the kernels at the new batch are
  interpolated, and the ops whose rule is not polynomial (checked at the new batch itself) counted there;
* any other change: a pipeline of its own whose grid is the what-if's exact points (one batch, the contexts of the
  phases), counted from the estimate's traces, so every figure is a counted one.

Figures are computed on first access (the quantize item reads only TPOT: no prefill is counted for it).  The
what-if is what ``estimate(..., batch=b, <change>)`` on the estimate's traces gives, to float rounding, with the
estimate's runtime preset and serving-memory settings; :func:`what_if` returns None for
sources it does not cover (no KV cache, encoder-decoder, state-space layers): the caller re-runs the estimate.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import cached_property
from typing import Any

from ..counters.settings import CountSettings
from ..errors import FrontendError, InputError
from .estimate import _Run, kv_bytes_per_token_of, kv_write_sums
from .fastpath import KernelGrid, LiveGrid, PhaseEval, ScalarGrid
from .memory import MemoryFit, ServingMemory
from .phases import Pipeline
from .poly import DEGREE, GridPlan, NotPolynomial
from .quant import Quant
from .source import LLMSource
from .sweep_fast import _recounter
from .tp import check_tp

__all__ = ["CachedSource", "WhatIf", "what_if"]

class CachedSource(LLMSource):
    """*pipe*'s source with its traced graphs reused: a pipeline on it re-counts, it does not re-trace."""

    def __init__(self, pipe: Pipeline):
        src = pipe.source
        self._pipe, self._src = pipe, src
        self.spec = src.spec
        self.kv_cache = src.kv_cache
        self.no_cache_reason = getattr(src, "no_cache_reason", "")
        self.notes: list[str] = []

    @property
    def name(self) -> str:
        return self._src.name

    def prefill_graph(self, batch: int, seq: int):
        return self._pipe.raw("prefill", batch, seq)

    def decode_graph(self, batch: int, past: int):
        return self._pipe.raw("decode", batch, past)

    def params(self):
        return self._src.params()

    def decode_start(self, prompt: int) -> int:
        return self._src.decode_start(prompt)

    def cross_tokens(self, prompt: int) -> int:
        return self._src.cross_tokens(prompt)

    def check_context(self, prompt: int, gen: int) -> None:
        return None


def covered(src: LLMSource, prompt: int) -> bool:
    """Whether :func:`what_if` prices *src*: a decoder with a KV cache (no cross-attention, no recurrent state)."""
    return bool(src.kv_cache and src.decode_start(prompt) == prompt and not src.cross_tokens(prompt)
                and not src.spec.state_layers)


class _GridRun(_Run):
    """A :class:`_Run` whose activation peak and KV bytes per token come from the what-if's grids."""

    def __init__(self, w: WhatIf):
        super().__init__(w.pipe.source, w.pipe, w.prompt, w.gen, None, True, w.ideal, w.serving)
        self.w = w

    def activation_peak(self, b: int) -> float:
        return self.w.live.peak(b, self.prompt)

    def kv_bytes_per_token(self, b: int) -> float:
        appended, all_kv = self.w.kv_sums
        return kv_bytes_per_token_of(appended.at(b, self.prompt), all_kv.at(b, self.prompt), b, self.src,
                                     self.pipe.quant, self.pipe.tp)


def _figure(fn: Callable[[WhatIf], Any]) -> cached_property:
    """A figure computed on first access, warnings silenced (as a re-run's); when the grids cannot price it
    (the kernels change structure with the context: a re-run approximates such a phase by its middle step),
    the figure of the full re-run (*fallback*) instead."""
    def get(self: WhatIf) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return fn(self)
            except (NotPolynomial, FrontendError):
                if self.fallback is None:
                    raise
                return getattr(self.full, fn.__name__)

    get.__name__ = fn.__name__
    get.__doc__ = fn.__doc__
    return cached_property(get)


class WhatIf:
    """One configuration's figures under a change: ``ttft_s``, ``tpot_s``, ``output_tokens_per_s``, ``memory``
    (its ``min_tp`` is not searched: None), computed on first access.  *fallback*: the full re-run, for figures
    the grids cannot price."""

    def __init__(self, pipe: Pipeline, plans: dict[str, GridPlan], batch: int, prompt: int, gen: int, ideal: bool,
                 fallback: Callable[[], Any] | None = None, serving: ServingMemory | None = None):
        self.pipe, self.plans, self.batch, self.prompt, self.gen, self.ideal = pipe, plans, batch, prompt, gen, ideal
        self.serving = serving or ServingMemory()  # the estimate's (gpu_mem_util, kv_block, max_batched_tokens)
        self.lo, self.hi = prompt, prompt + max(gen - 2, 0)  # the decode steps' cache lengths
        self.fallback = fallback

    @cached_property
    def full(self) -> Any:
        """The full re-run's configuration (only built when a figure needs it)."""
        return self.fallback()  # type: ignore[misc]

    def _counted(self, phase: str) -> list:
        return [self.pipe.counted(phase, b, x) for b, x in self.plans[phase].points]

    def _eval(self, phase: str, check: list[tuple[int, int]]) -> PhaseEval:
        counted = self._counted(phase)
        grid = KernelGrid(self.plans[phase], counted, _recounter(self.pipe, counted[0].counted.meta), check)
        return PhaseEval(grid, self.pipe.hw, cuda_graphs=self.pipe.cuda_graphs(phase),
                         step_launch_s=self.pipe.step_launch_s(phase))

    def _time(self, phase: str, lo: int, hi: int) -> float:
        t = self._eval(phase, sorted({(self.batch, lo), (self.batch, hi)})).totals(self.batch, lo, hi)
        return t.t_ideal_s if self.ideal else t.t_realistic_s

    @_figure
    def ttft_s(self) -> float:
        return self._time("prefill", self.prompt, self.prompt)

    @_figure
    def tpot_s(self) -> float | None:
        return self._time("decode", self.lo, self.hi) if self.gen > 1 else None

    @property
    def output_tokens_per_s(self) -> float:
        e2e = self.ttft_s + (self.gen - 1) * (self.tpot_s or 0.0)  # as LLMConfig.tokens_per_s
        return self.batch * self.gen / e2e if e2e else float("inf")

    @cached_property
    def live(self) -> LiveGrid:
        plan = self.plans["prefill"]
        return LiveGrid(plan, [self.pipe.prepared("prefill", b, x) for b, x in plan.points])

    @cached_property
    def kv_sums(self) -> tuple[ScalarGrid, ScalarGrid]:
        plan = self.plans["decode"]
        sums = [kv_write_sums(c.ops) for c in self._counted("decode")]
        return ScalarGrid(plan, [s[0] for s in sums]), ScalarGrid(plan, [s[1] for s in sums])

    @_figure
    def memory(self) -> MemoryFit:
        return _GridRun(self).memory(self.batch, min_tp=False)


def what_if(est: Any, batch: int, *, weights: str | None = None, tp: int | None = None,
            fallback: Callable[[], Any] | None = None) -> WhatIf | None:
    """The figures of ``estimate`` on *est*'s traces at *batch* with the weights dtype *weights* and TP degree
    *tp* (``None``: the estimate's), or None when :func:`covered` says no (re-run the estimate instead).
    *fallback* (the full re-run) prices what the grids cannot (see :func:`_figure`)."""
    from ..api import resolve_hardware

    pipe0 = est.pipeline
    src, P, G = pipe0.source, est.prompt, est.gen
    if not covered(src, P):
        return None
    tp = est.tp if tp is None else tp
    quant = Quant.parse(weights if weights is not None else est.quant.weights, est.quant.activations, est.quant.kv)
    settings = CountSettings(attention=est.settings.attention, causal=est.settings.causal)
    check_tp(tp, src.spec.heads, src.spec.kv_heads, src.spec.intermediate)
    hw = resolve_hardware(est.hw, ideal=est.ideal)
    if tp > 1 and not hw.interconnect_bw_bytes_per_s:
        raise InputError(f"--tp {tp}: hardware profile {hw.name} has no interconnect to cost the collectives on")
    lo, hi = P, P + max(G - 2, 0)
    exact = {"prefill": GridPlan((batch,), (P,), DEGREE["prefill"]),
             "decode": GridPlan((batch,), tuple(sorted({lo, hi})), DEGREE["decode"])}
    serving = est.configs[0].memory.serving if est.configs else None
    same = quant == pipe0.quant and tp == pipe0.tp and settings == pipe0.settings and hw == pipe0.hw
    if same and all(p in pipe0.plans and pipe0.plans[p].covers(batch, x) for p, x in (("prefill", P), ("decode", lo),
                                                                                      ("decode", hi))):
        w = WhatIf(pipe0, dict(pipe0.plans), batch, P, G, est.ideal, fallback, serving)
        if "decode" not in w.plans or w.plans["decode"].xs != exact["decode"].xs:
            w.plans = exact
        return w
    pipe = Pipeline(CachedSource(pipe0), hw, quant=quant, tp=tp, plan=pipe0.plan, settings=settings,
                    rules=pipe0.rules, strict=pipe0.strict, runtime=pipe0.runtime)
    return WhatIf(pipe, exact, batch, P, G, est.ideal, fallback, serving)


__all__ += ["NotPolynomial", "covered"]
