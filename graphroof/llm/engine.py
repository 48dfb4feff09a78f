"""``Engine``: one LLM on one device under one frozen set of pricing settings (:class:`Pricing`).

The engine opens the model's source once, keeps its traces and counts (its
:class:`~graphroof.llm.phases.Pipeline`) and prices through the one evaluator
(:class:`~graphroof.llm.price.PricedModel`):

* :meth:`Engine.estimate`: the serving estimate at some batches (what :func:`graphroof.llm.estimate` returns);
* :meth:`Engine.price`: any number of (batch, prompt, gen) points as arrays;
* :meth:`Engine.step_cost`: the time of engine steps of mixed prefill and decode work (a serving simulation);
* :meth:`Engine.step`: the per-op breakdown of one step.

Results hold data only: an estimate does not carry its engine; keep the engine to price more on the same traces.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from ..counters.settings import CountSettings
from ..errors import InputError
from ..errors import warn as warn_user
from ..frontends.source import LLMSource
from ..fuse import get_runtime
from ..graph import OpGraph
from ..hardware import HardwareProfile
from .estimate import batches_of, build_estimate, check_lengths, open_source
from .memory import ServingMemory
from .parallel import Layout, ParallelPipeline, check_layout
from .phases import Pipeline
from .pp import ParallelStepCost, check_no_spec, layout_note, parallel_figures
from .price import Figures, PricedModel
from .quant import Quant
from .result import LLMEstimate
from .specdec import SpecDec, check_spec, profile_of
from .tp import DEFAULT_PLAN, TPPlan, check_tp

__all__ = ["Engine", "Pricing", "estimate"]


@dataclass(frozen=True)
class Pricing:
    """How an LLM is priced: everything but the model, the device and the points.

    weights, activations, kv : what-if storage dtypes by role (``int4``, ``fp8``, ``bf16`` ...).
    tp : tensor-parallel degree (Megatron split, collectives on the profile's interconnect); *plan* its split.
    ideal : the ideal roofline only (100% of peaks, no launch overhead).
    attention, causal : counting settings (:mod:`graphroof.counters.settings`); *rules*, *strict*: counting rules.
    runtime : fusion + launch preset (:mod:`graphroof.fuse.runtimes`): ``serving``, ``compiled`` or ``eager``.
    gpu_mem_util, kv_block, max_batched_tokens : the serving memory model (:class:`~graphroof.llm.memory.
        ServingMemory`).
    depth, fold : layer-table depth (default: one level below the repeated block) and folding of blocks.
    spec_tokens, spec_acceptance : speculative decoding / multi-token prediction (:mod:`graphroof.llm.specdec`):
        *k* drafted tokens per step (0: off) and the probability each is accepted, or a per-position profile of
        *k* values (position i accepted only if 1 .. i-1 were).
    spec_draft, spec_draft_cost : the draft model (a zoo name, path or source graphroof can trace), else
        (MTP heads, self-speculation) the draft's time per drafted token as a fraction of one target decode step.
    pp, dp, ep : pipeline stages, attention-data-parallel ranks, expert-parallel ranks (1 or ``tp x dp``); the
        layout is ``tp x pp x dp`` GPUs (:mod:`graphroof.llm.parallel`, schedule in :mod:`graphroof.llm.pp`).
    ep_imbalance : the busiest EP rank's routed tokens over the mean (None: the expected multinomial maximum,
        :func:`graphroof.llm.ep.expected_imbalance`).
    microbatches : micro-batches a prefill batch is split into under PP (None: ``pp``).
    system, nodes : a system profile (``hw_profiles/systems``: NVLink domain size, network between nodes) and its
        node count (None: as many as the layout needs); without one every GPU shares one NVLink domain.
    """

    weights: str | None = None
    activations: str | None = None
    kv: str | None = None
    tp: int = 1
    plan: TPPlan = DEFAULT_PLAN
    ideal: bool = False
    attention: str = "flash"
    causal: str = "kernel"
    rules: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    strict: bool = False
    runtime: str = "serving"
    gpu_mem_util: float = 0.9
    kv_block: int = 16
    max_batched_tokens: int | None = None
    depth: int | None = None
    fold: bool = True
    spec_tokens: int = 0
    spec_acceptance: float | Sequence[float] = 0.0
    spec_draft: Any = None
    spec_draft_cost: float = 0.0
    pp: int = 1
    dp: int = 1
    ep: int = 1
    ep_imbalance: float | None = None
    microbatches: int | None = None
    system: Any = None
    nodes: int | None = None

    def __post_init__(self) -> None:  # checked before any model is built
        self.serving  # noqa: B018 - ServingMemory checks its settings
        self.quant  # noqa: B018
        check_tp(self.tp)
        self.settings  # noqa: B018
        get_runtime(self.runtime)
        if self.depth is not None and self.depth < 1:
            raise InputError(f"--depth must be >= 1, got {self.depth}")
        check_spec(self.spec_tokens, self.spec_acceptance, self.spec_draft, self.spec_draft_cost)
        if not isinstance(self.spec_acceptance, (int, float)):  # a profile: kept as a tuple (frozen, hashable)
            object.__setattr__(self, "spec_acceptance", tuple(float(a) for a in self.spec_acceptance))
        if not self.layout.plain:
            check_no_spec(self)

    @property
    def layout(self) -> Layout:
        """The parallel layout of the TP / PP / DP / EP flags on the system (checked)."""
        return check_layout(self.tp, self.pp, self.dp, self.ep, system=self.system, nodes=self.nodes,
                            microbatches=self.microbatches, ep_imbalance=self.ep_imbalance)

    @property
    def serving(self) -> ServingMemory:
        return ServingMemory(self.gpu_mem_util, self.kv_block, self.max_batched_tokens)

    @property
    def quant(self) -> Quant:
        return Quant.parse(self.weights, self.activations, self.kv)

    @property
    def settings(self) -> CountSettings:
        return CountSettings(attention=self.attention, causal=self.causal)

    def with_(self, **changes: Any) -> Pricing:
        return replace(self, **changes)

    @classmethod
    def split(cls, kw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the :class:`Pricing` fields of *kw*, the rest)."""
        names = {f.name for f in fields(cls)}
        return {k: v for k, v in kw.items() if k in names}, {k: v for k, v in kw.items() if k not in names}


class Engine:
    """One LLM on one device under one :class:`Pricing`.

    *model*: a zoo name, a transformers ``config.json`` (or its folder), an ``.onnx`` decoder, ``"pkg.mod:factory"``,
    an ``nn.Module``, an :class:`~graphroof.frontends.source.LLMSource`, an OpGraph or a (prefill, decode) pair of them.
    *options*: the run-wide switches (:class:`graphroof.options.Options`: folding, the trace store).
    *progress*: called with a stage message before each trace.
    """

    def __init__(self, model: Any, *, hw: str | HardwareProfile | None = "a100", pricing: Pricing | None = None,
                 options: Any = None, progress: Callable[[str], None] | None = None,
                 peak_flops_per_s: float | None = None, mem_bw_bytes_per_s: float | None = None,
                 **frontend_opts: Any):
        from ..api import resolve_hardware

        p = self.pricing = pricing or Pricing()
        if hw is None and p.system is not None:  # the system's device
            hw = p.layout.system.device  # type: ignore[union-attr]  # a system is set
        self.hw = resolve_hardware(hw, peak_flops_per_s=peak_flops_per_s, mem_bw_bytes_per_s=mem_bw_bytes_per_s,
                                   ideal=p.ideal)
        if progress and not isinstance(model, (LLMSource, OpGraph, tuple)):
            progress(f"building {model if isinstance(model, str) else type(model).__name__}")
        if options is not None:
            frontend_opts["options"] = options
        self.source = src = open_source(model, **frontend_opts)
        check_tp(p.tp, src.spec.heads, src.spec.kv_heads, src.spec.intermediate)
        if p.tp > 1 and not self.hw.interconnect_bw_bytes_per_s:
            raise InputError(f"--tp {p.tp}: hardware profile {self.hw.name} has no interconnect."
                             "bw_bytes_per_s_per_direction to cost the collectives on; pick a profile with an "
                             "interconnect")
        self.runtime = get_runtime(p.runtime)
        self.layout = lay = p.layout
        if lay.system is not None:  # the system's network between nodes in the device's collectives
            self.hw = lay.system.apply(self.hw)
        plan = p.plan if self.runtime.vocab_parallel else replace(p.plan, embed=frozenset(), lm_head=frozenset())
        kw: dict[str, Any] = dict(quant=p.quant, tp=p.tp, plan=plan, settings=p.settings, rules=p.rules,
                                  strict=p.strict, depth=p.depth, progress=progress, runtime=self.runtime)
        self.pipeline = (Pipeline(src, self.hw, **kw) if lay.plain
                         else ParallelPipeline(src, self.hw, layout=lay, **kw))
        self._priced: dict[tuple, PricedModel] = {}
        self.spec: SpecDec | None = None
        if p.spec_tokens:
            draft = None
            if p.spec_draft is not None:  # the draft: its own engine on the same device, the target's pricing at TP 1
                dp = p.with_(tp=1, spec_tokens=0, spec_acceptance=0.0, spec_draft=None)
                draft = Engine(p.spec_draft, hw=self.hw, pricing=dp, options=options, progress=progress)
                if not draft.source.kv_cache:
                    raise InputError(f"--spec-draft {draft.source.name}: the draft model needs a KV cache")
            self.spec = SpecDec(p.spec_tokens, profile_of(p.spec_tokens, p.spec_acceptance), p.spec_draft_cost,
                                draft)

    def notes(self) -> list[str]:
        """The source's notes, the runtime preset, the no-cache warning (what every estimate states)."""
        src = self.source
        out = list(getattr(src, "notes", []) or [])
        out.append(self.runtime.describe())
        if not src.kv_cache:
            msg = (f"{src.name} has no KV cache ({src.no_cache_reason}): each decode step is estimated as a full "
                   "forward pass over the whole context (prompt + tokens so far, no cache reuse), summed exactly "
                   "over the steps; KV-cache bytes are 0")
            out.append(msg)
            warn_user(msg)
        if self.spec is not None:
            out.append(self.spec.note())
        if not self.layout.plain:
            out.append(layout_note(self.layout))
        return out

    def priced(self, batches: Sequence[int], prompts: Sequence[int], gens: Sequence[int], *,
               grid_batches: Sequence[int] | None = None) -> PricedModel:
        """The priced model whose grids cover these values (kept per request)."""
        key = (tuple(batches), tuple(prompts), tuple(gens), tuple(grid_batches or ()))
        if key not in self._priced:
            self._priced[key] = PricedModel(self.pipeline, batches, prompts, gens, grid_batches=grid_batches)
        return self._priced[key]

    def stage_priced(self, stage: int, batches: Sequence[int], prompts: Sequence[int], gens: Sequence[int]
                     ) -> PricedModel:
        """The priced model of one pipeline stage's rank under the layout (kept per request)."""
        key = ("stage", stage, tuple(batches), tuple(prompts), tuple(gens))
        if key not in self._priced:
            pipe = self.pipeline
            view = pipe.stage_view(stage) if isinstance(pipe, ParallelPipeline) else pipe
            self._priced[key] = PricedModel(view, batches, prompts, gens)
        return self._priced[key]

    def price(self, batch: Any, prompt: Any, gen: Any) -> Figures:
        """Every figure of the points ``(batch[i], prompt[i], gen[i])`` (arrays; scalars broadcast); under a
        parallel layout *batch* is the whole layout's (:func:`graphroof.llm.pp.parallel_figures`)."""
        if not self.layout.plain:
            return parallel_figures(self, batch, prompt, gen)
        b, p, g = (np.asarray(v, dtype=np.int64).reshape(-1) for v in np.broadcast_arrays(batch, prompt, gen))
        bs = sorted(set(b.tolist()))
        grid = (bs[0], bs[0] + 1) if self.spec is not None and len(bs) == 1 else None  # the verify extrapolates in b
        pm = self.priced(bs, sorted(set(p.tolist())), sorted(set(g.tolist())), grid_batches=grid)
        return pm.price(self.hw, b, p, g, ideal=self.pricing.ideal, serving=self.pricing.serving, spec=self.spec)

    def estimate(self, *, prompt: int = 1024, gen: int = 256, batch: int | Sequence[int] = 1) -> Any:
        """The serving estimate at each batch (:class:`~graphroof.llm.result.LLMEstimate`)."""
        return build_estimate(self, prompt, gen, batch)

    def step(self, phase: str, batch: int, x: int) -> Any:
        """The per-op breakdown (an :class:`~graphroof.analysis.Analysis`) of one step: ``step("decode", 32,
        1024)`` is the decode step of 32 sequences with 1024 cached tokens; ``step("prefill", 1, 512)`` a prefill."""
        return self.pipeline.step(phase, batch, x)

    def step_cost(self, **kw: Any) -> Any:
        """The step-cost function of a serving simulation (:class:`~graphroof.llm.stepcost.StepCost`)."""
        from .stepcost import StepCost

        if not self.layout.plain:
            return ParallelStepCost(self, **kw)
        return StepCost(self, **kw)


def estimate(model: Any, *, hw: str | HardwareProfile | None = "a100", prompt: int = 1024, gen: int = 256,
             batch: int | Sequence[int] = 1, pricing: Pricing | None = None,
             progress: Callable[[str], None] | None = None, **kw: Any) -> LLMEstimate:
    """Serving estimate of an LLM: one configuration per batch size.

    Parameters
    ----------
    model : zoo name, transformers ``config.json`` (or its folder), ``.onnx`` with ``past_key_values`` inputs,
        ``"pkg.module:factory"``, an ``nn.Module``, an :class:`~graphroof.frontends.source.LLMSource`, or OpGraphs.
    hw : hardware profile name / path / object (``peak_flops_per_s`` / ``mem_bw_bytes_per_s`` override it).
    prompt, gen : prompt tokens and generated tokens per sequence.
    batch : one batch size or several.
    pricing : how to price (:class:`~graphroof.llm.engine.Pricing`: dtypes, TP, runtime preset, counting and
        serving-memory settings, table depth); any of its fields may also be given as a keyword
        (``weights="int4", tp=2``), which overrides *pricing*.
    options : the run-wide switches (:class:`graphroof.options.Options`: folding, the trace store).
    progress : called with a stage message before each trace (the CLI's :class:`graphroof.cli.progress.Progress`).
    Other keywords go to the frontend (``dtype``, ``dims``, ``decoder_prompt`` ...).

    The estimate is :meth:`graphroof.llm.engine.Engine.estimate`; keep an :class:`~graphroof.llm.engine.Engine`
    to price more on the same traces.

    Examples
    --------
    >>> import graphroof.llm as llm                                       # doctest: +SKIP
    >>> r = llm.estimate("llama-2-7b", hw="a100", prompt=1024, gen=256, batch=[1, 8, 32])  # doctest: +SKIP
    >>> r.configs[0].tpot_s                                              # doctest: +SKIP
    """
    check_lengths(prompt, gen)
    over, rest = Pricing.split(kw)
    p = (pricing or Pricing()).with_(**over)  # checked before any trace
    batches = batches_of(batch)
    eng = Engine(model, hw=hw, pricing=p, progress=progress, **rest)
    return eng.estimate(prompt=prompt, gen=gen, batch=batches)
