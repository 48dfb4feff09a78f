"""What-if figures for the advice (:mod:`graphroof.llm.advice`): one configuration's TTFT, TPOT, throughput and
memory fit under a change (weights dtype, TP degree, batch), priced by the one engine
(:class:`~graphroof.llm.price.PricedModel`) at that point only, on the estimate's traces:

* a change of batch only (same dtypes, TP and runtime): the estimate's own pipeline, whose grids
  (:mod:`graphroof.llm.poly`) give the counted graphs at the new batch without a trace;
* any other change: a pipeline of its own on the estimate's traced graphs (:class:`CachedSource`): re-counted,
  not re-traced.

Each figure is computed on first access (the quantize item reads only TPOT: no prefill is counted for it).
:func:`what_if` returns None for sources it does not cover (no KV cache, encoder-decoder, state-space layers):
the caller re-prices the configuration in full.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import cached_property
from typing import Any

import numpy as np

from ..counters.settings import CountSettings
from ..errors import FrontendError, InputError
from ..frontends.source import LLMSource
from .memfit import memory_fit, memory_of
from .memory import MemoryFit, ServingMemory
from .phases import Pipeline
from .poly import NotPolynomial
from .price import PricedModel
from .quant import Quant
from .tokens import decode_range, e2e_s, tokens_per_s
from .tp import check_tp

__all__ = ["CachedSource", "WhatIf", "what_if", "covered", "NotPolynomial"]


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


def _figure(fn: Callable[[WhatIf], Any]) -> cached_property:
    """A figure computed on first access, warnings silenced; when it cannot be priced from the counted graphs at
    the point (they change structure with the context), the figure of the full re-pricing (*fallback*)."""
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
    (its ``min_tp`` is not searched: None), computed on first access by :class:`PricedModel` at the point."""

    def __init__(self, pipe: Pipeline, batch: int, prompt: int, gen: int, ideal: bool,
                 fallback: Callable[[], Any] | None = None, serving: ServingMemory | None = None):
        self.pipe, self.batch, self.prompt, self.gen, self.ideal = pipe, batch, prompt, gen, ideal
        self.serving = serving or ServingMemory()  # the estimate's (gpu_mem_util, kv_block, max_batched_tokens)
        plan = pipe.plans.get("decode")
        # on the estimate's pipeline: its grid (counted already) prices the new batch; else the point's own counts
        self.priced = PricedModel(pipe, [batch], [prompt], [gen], grid_batches=plan.bs if plan else None,
                                  interpolate=plan is not None)
        self.fallback = fallback

    @cached_property
    def full(self) -> Any:
        """The full re-pricing (only built when a figure needs it)."""
        return self.fallback()  # type: ignore[misc]

    def _time(self, phase: str, lo: int, hi: int) -> float:
        t = self.priced.phase_totals(phase, self.pipe.hw, np.array([self.batch]), np.array([lo]), np.array([hi]))
        return float(t.t_s(self.ideal)[0])

    @_figure
    def ttft_s(self) -> float:
        b, p = np.array([self.batch]), np.array([self.prompt])
        return float(self.priced.prefill_totals(self.pipe.hw, b, p, self.serving, self.ideal)[0].t_s(self.ideal)[0])

    @_figure
    def tpot_s(self) -> float | None:
        return self._time("decode", *decode_range(self.prompt, self.gen)) if self.gen > 1 else None

    @property
    def output_tokens_per_s(self) -> float:
        return tokens_per_s(self.batch, self.gen, e2e_s(self.ttft_s, self.tpot_s, self.gen))

    @_figure
    def memory(self) -> MemoryFit:
        b, p, g = (np.array([v]) for v in (self.batch, self.prompt, self.gen))
        mem = memory_fit(self.priced, self.pipe.hw, b, p, g, self.serving)
        return memory_of(self.priced, mem, self.batch, self.prompt, 0, self.serving, min_tp=False)


def what_if(est: Any, batch: int, *, weights: str | None = None, tp: int | None = None,
            fallback: Callable[[], Any] | None = None, pipeline: Pipeline | None = None) -> WhatIf | None:
    """The figures of *est*'s configuration on its traces at *batch* with the weights dtype *weights* and TP
    degree *tp* (``None``: the estimate's), or None when :func:`covered` says no (re-price in full instead).
    *pipeline*: the pipeline that produced *est*; *fallback* (the full re-pricing) prices what the counted
    graphs at the point cannot (see :func:`_figure`)."""
    from ..api import resolve_hardware

    if pipeline is None:
        raise InputError("what_if needs the pipeline that produced the estimate")
    pipe0 = pipeline
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
    serving = est.configs[0].memory.serving if est.configs else None
    if quant == pipe0.quant and tp == pipe0.tp and settings == pipe0.settings and hw == pipe0.hw:
        return WhatIf(pipe0, batch, P, G, est.ideal, fallback, serving)
    pipe = Pipeline(CachedSource(pipe0), hw, quant=quant, tp=tp, plan=pipe0.plan, settings=settings,
                    rules=pipe0.rules, strict=pipe0.strict, runtime=pipe0.runtime)
    return WhatIf(pipe, batch, P, G, est.ideal, fallback, serving)
