"""Graphs shared between the :class:`~graphroof.llm.phases.Pipeline` objects of one process: the traced graphs and
their KV-marked, requantized forms per source (:class:`_SharedGraphs`), and the counted graphs of pipelines that
differ only in the device (:class:`_SharedCounted`)."""

from __future__ import annotations

import warnings
import weakref
from typing import Any

from ..errors import GraphroofWarning, warn
from ..frontends.source import LLMSource
from ..graph import OpGraph
from .kvcache import mark_kv_cache
from .quant import Quant, requantize

__all__: list[str] = []


def _replayed(rec: list, show: bool = True) -> list[tuple[type[Warning], str]]:
    """graphroof's warnings among *rec* (recorded), raised again when *show*; others raised again as they were."""
    ours = []
    for w in rec:
        if issubclass(w.category, GraphroofWarning):
            ours.append((w.category, str(w.message)))
            if show:
                warn(str(w.message), w.category)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return ours


class _SharedGraphs:
    """Traced graphs, and their KV-marked and requantized forms, shared by every :class:`Pipeline` on the same
    source object (the planner's pipeline groups, a sweep's TP degrees and dtypes): tracing (or reading a stored
    trace) and re-typing do not depend on the device, the TP degree or the runtime, and the graphs are never edited
    in place (each stage returns a new graph).  Only the latest source's graphs are kept, at most
    :attr:`MAX_GRAPHS` of each kind; the warnings a trace raised are raised again on every hit, as a fresh trace
    raises them."""

    MAX_GRAPHS = 64

    def __init__(self) -> None:
        self.source: object | None = None
        self.raw: dict[tuple, tuple[OpGraph, list]] = {}
        self.quant: dict[tuple, tuple[OpGraph, OpGraph]] = {}   # (id(raw), quant) -> (raw, prepared minus TP)

    def traced(self, source: LLMSource, phase: str, batch: int, x: int) -> OpGraph:
        if self.source is not source:
            self.source, self.raw, self.quant = source, {}, {}
        key = (phase, batch, x)
        hit = self.raw.get(key)
        if hit is not None:
            for category, message in hit[1]:
                warn(message, category)
            return hit[0]
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            g = source.decode_graph(batch, x) if phase == "decode" else source.prefill_graph(batch, x)
        ours = _replayed(rec)  # raised again outside the recorder: the caller's filters decide
        if len(self.raw) >= self.MAX_GRAPHS:
            self.raw.clear()
            self.quant.clear()
        self.raw[key] = (g, ours)
        return g

    def quantized(self, graph: OpGraph, quant: Quant) -> tuple[OpGraph, bool]:
        """``requantize(mark_kv_cache(graph), quant)`` and whether it is a shared graph (only graphs of
        :meth:`traced` are shared)."""
        if not any(g is graph for g, _ in self.raw.values()):
            return requantize(mark_kv_cache(graph), quant), False
        key = (id(graph), quant)
        hit = self.quant.get(key)
        if hit is None or hit[0] is not graph:
            if len(self.quant) >= self.MAX_GRAPHS:
                self.quant.clear()
            hit = self.quant[key] = (graph, requantize(mark_kv_cache(graph), quant))
        return hit[1], True


_SHARED = _SharedGraphs()


class _SharedCounted:
    """Counted graphs shared by pipelines that differ only in the device: the count, the TP / EP split and the
    fuse stage read the graph, the dtypes, the layout and the runtime preset, never the hardware profile, so
    engines on one source object priced on several devices (a validation run's GPUs: its engines share their
    model's source) count and fuse each point once.  Keyed by the source, the runtime preset and the rules (the
    same objects) and :meth:`Pipeline.count_key` (equal values).  An entry lives as long as some pipeline keeps
    its counted graph (a weak reference: nothing is kept alive here).  Counted graphs are never edited in place
    (pricing copies them).  The warnings a count raised are kept with it and raised again for a pipeline whose
    first count is a hit."""

    def __init__(self) -> None:
        self.entries: dict[tuple, tuple[tuple, weakref.ref, list]] = {}

    @staticmethod
    def _key(pipe: Any, point: tuple) -> tuple | None:
        # a point the pipeline's grid interpolates (a virtual trace) is keyed by that grid: exact where the graph is
        # polynomial, and a graph extrapolated from one grid is not handed to a pipeline that would trace the point
        key = (id(pipe.source), id(pipe.runtime), id(pipe.rules), pipe.count_key(), pipe.virtual_plan(*point), point)
        try:
            hash(key)
        except TypeError:  # an unhashable setting: not shared
            return None
        return key

    def get(self, pipe: Any, point: tuple) -> tuple[Any, list] | None:
        key = self._key(pipe, point)
        if key is None:
            return None
        hit = self.entries.get(key)
        if hit is None or any(a is not b for a, b in zip(hit[0], (pipe.source, pipe.runtime, pipe.rules))):
            return None
        counted = hit[1]()
        return None if counted is None else (counted, hit[2])

    def put(self, pipe: Any, point: tuple, counted: Any, warned: list) -> None:
        key = self._key(pipe, point)
        if key is None:
            return
        entries = self.entries

        def gone(ref: weakref.ref, key: tuple = key) -> None:  # the graph was dropped: so is its entry
            if key in entries and entries[key][1] is ref:
                del entries[key]

        # the source, runtime and rules held while the entry lives: their ids in the key cannot be reused
        entries[key] = ((pipe.source, pipe.runtime, pipe.rules), weakref.ref(counted, gone), warned)


_COUNTED = _SharedCounted()
