"""What every dataset adapter shares in one run: the engines (kept per model, device and pricing: traces are the
slow part), the hold-out profiles, the exclusions and the progress line."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..frontends.source import SharedTraces
from ..hardware import HardwareProfile
from .data import Exclusion, exclusions, read_rows

__all__ = ["Context", "price_on", "preset", "priced_points", "shares_grid"]


def preset(name: str, fallback: str) -> str:
    """Runtime preset *name* where graphroof has it (a name or a preset file), else *fallback*."""
    from ..errors import GraphroofError
    from ..fuse import get_runtime

    try:
        get_runtime(name)
    except GraphroofError:
        return fallback
    return name


class Context:
    """One validation run's shared state.

    *holdout*: ``gpu`` / ``engine`` / ``model`` or None; :meth:`holdout_hw` gives the profile whose constants were
    not fitted on the row's group (see :mod:`graphroof.validate.holdout`).
    """

    def __init__(self, holdout: str | None = None, progress: Callable[[str], None] | None = None,
                 options: Any = None, only: Collection[str] | None = None):
        self.holdout = holdout
        self.only = set(only) if only is not None else None
        self.progress = progress or (lambda msg: None)
        self.options = options
        self.rules: list[Exclusion] = exclusions()
        self._engines: dict[tuple, Any] = {}
        self._sources: dict[tuple, SharedTraces] = {}
        self._hw: dict[str, HardwareProfile] = {}
        self._held: dict[tuple, HardwareProfile] = {}

    def sharing(self, only: Collection[str] | None, share_profiles: bool = True) -> Context:
        """A context (no hold-out) for pricing rows *only* again (the hold-outs' second pass: :mod:`.holdout_engine`,
        :func:`.holdout.gpu_holdout`): its own engines (they hold their runtime preset and profile), this one's model
        sources (traces do not depend on the preset or the device) and, with *share_profiles*, its loaded profiles."""
        other = Context(None, self.progress, self.options, only)
        other._sources = self._sources
        if share_profiles:
            other._hw = self._hw
        return other

    def rows(self, name: str) -> list[tuple[str, dict[str, str]]]:
        """``(file:line, row)`` of bundled file *name*, only the rows asked for (``only``) when given."""
        rows = read_rows(name)
        return rows if self.only is None else [r for r in rows if r[0] in self.only]

    def hw(self, name: str) -> HardwareProfile:
        from ..hardware import load_hardware

        if name not in self._hw:
            self._hw[name] = load_hardware(name)
        return self._hw[name]

    def holdout_hw(self, name: str, dataset: str = "", model: str = "") -> HardwareProfile | None:
        """Profile *name* without the constants fitted on the held-out group of a *dataset* row of *model* (the
        same object when nothing was fitted on it), or None when no hold-out is scored
        (:mod:`graphroof.validate.holdout`)."""
        if self.holdout is None:
            return None
        key = (name, self.holdout, dataset if self.holdout == "engine" else "",
               model if self.holdout == "model" else "")
        if key not in self._held:
            from .holdout import held_out_profile

            held = held_out_profile(name, self.holdout, dataset, model)
            self._held[key] = self.hw(name) if held == self.hw(name) else held  # unchanged: the same object
        return self._held[key]

    def source(self, model: str, **frontend: Any) -> SharedTraces:
        """The model's LLM source, opened once per (model, frontend options), its traces shared by every engine
        and a graph at another batch of a traced context derived from them (:class:`~.traces.BatchDerived`)."""
        from ..llm import open_source
        from .traces import BatchDerived

        key = (model, tuple(sorted(frontend.items())))
        if key not in self._sources:
            self.progress(f"opening {model}")
            self._sources[key] = BatchDerived(open_source(model, options=self.options, **frontend), self.progress)
        return self._sources[key]

    def engine(self, model: str, hw: str, pricing: Any, **frontend: Any) -> Any:
        """The :class:`~graphroof.llm.Engine` of (model, device, pricing, frontend options), built once; engines
        of one model share its source and traces (the traces do not depend on the device, TP or dtypes)."""
        from ..llm.engine import Engine

        key = (model, hw, pricing, tuple(sorted(frontend.items())))
        if key not in self._engines:
            dt = "/".join(str(v) for v in (pricing.weights, pricing.activations, pricing.kv) if v)
            rt = Path(pricing.runtime).stem if str(pricing.runtime).endswith(".toml") else pricing.runtime
            self.progress(f"engine {model} on {hw} (tp {pricing.tp}, {rt}" + (f", {dt}" if dt else "") + ")")
            self._engines[key] = Engine(self.source(model, **frontend), hw=self.hw(hw), pricing=pricing)
        return self._engines[key]


def shares_grid(eng: Any) -> bool:
    """Whether *eng* prices points from grids it interpolates (:class:`~graphroof.llm.price.PricedModel`), so it
    may price the union of its model's rows' points at the cost of its own (a dataset's engines of one model then
    share traces and counted graphs); else (sliding windows, state-space layers, speculative decoding, a parallel
    layout) each point of the union would be traced for every engine: it prices its own rows' points only."""
    from ..llm.poly import poly_ok

    src = eng.source
    return bool(poly_ok(src) and not getattr(src.spec, "state_layers", None) and eng.spec is None
                and eng.layout.plain)


def priced_points(eng: Any, model_points: Iterable[tuple], own_points: Iterable[tuple]) -> list[tuple]:
    """The points *eng* prices, once each in first-seen order: its model's rows' points (*model_points*) where it
    shares their grid (:func:`shares_grid`), else its own rows' (*own_points*)."""
    return list(dict.fromkeys(model_points if shares_grid(eng) else own_points))


def price_on(eng: Any, hw: HardwareProfile, batch: Any, prompt: Any, gen: Any) -> Any:
    """:meth:`Engine.price` on another profile *hw* of the same device (a hold-out): the engine's own traces and
    priced model, the one evaluator on *hw*.  With the engine's profile this is ``eng.price`` itself."""
    if hw is eng.hw:
        return eng.price(batch, prompt, gen)
    b, p, g = (np.asarray(v, dtype=np.int64).reshape(-1) for v in np.broadcast_arrays(batch, prompt, gen))
    bs = sorted(set(b.tolist()))
    grid = (bs[0], bs[0] + 1) if eng.spec is not None and len(bs) == 1 else None
    pm = eng.priced(bs, sorted(set(p.tolist())), sorted(set(g.tolist())), grid_batches=grid)
    return pm.price(hw, b, p, g, ideal=eng.pricing.ideal, serving=eng.pricing.serving, spec=eng.spec)
