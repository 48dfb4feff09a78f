"""An LLM source whose traced graphs persist across runs (:mod:`graphroof.frontends.trace_store`).

:class:`StoredSource` stands in for the :class:`~graphroof.llm.hf.HFSource` of a transformers config (zoo entry
or ``config.json``).  Its *manifest* (the model facts, notes, KV-cache layout and parameter list) and every graph
it traced are kept under a key made of the config's content, the source options, the folding switch and the code
(see the store).  A later run reads them back without importing torch or transformers; the first graph that is
not stored builds the real source and traces it (then stores it and the updated manifest).  The figures are those
of the real source: the same graphs, the same manifest.

Only plain decoder-only sources are stored (``HFSource`` and the state-space ``SSMSource``); an encoder-decoder
depends on the request (its encoder length) and is always traced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..frontends import trace_store
from ..graph import OpGraph
from .source import LLMSource, ModelSpec, Param

__all__ = ["StoredSource", "open_stored"]

#: source classes whose state is the manifest below (anything else is returned as built)
_STORABLE = ("HFSource", "SSMSource")


def _manifest(src: Any) -> dict[str, Any]:
    return {"cls": type(src).__name__, "spec": src.spec, "notes": list(src.notes), "kv_cache": src.kv_cache,
            "no_cache_reason": getattr(src, "no_cache_reason", ""), "params": src.params()}


class StoredSource(LLMSource):
    """See the module docstring; *make* builds the real source on the first graph that is not stored."""

    def __init__(self, entry: trace_store.Entry, make: Callable[[], LLMSource], manifest: dict[str, Any],
                 real: LLMSource | None = None):
        self._entry, self._make, self._real = entry, make, real
        self._apply(manifest)

    def _apply(self, m: dict[str, Any]) -> None:
        self.spec: ModelSpec = m["spec"]
        self.notes: list[str] = list(m["notes"])
        self.kv_cache = bool(m["kv_cache"])
        self.no_cache_reason = m["no_cache_reason"]
        self._params: list[Param] | None = m["params"]
        self.kind = m["cls"]

    def real(self) -> LLMSource:
        """The source itself (built on first need: torch and transformers are imported then)."""
        if self._real is None:
            self._real = self._make()
        return self._real

    def _graph(self, phase: str, batch: int, x: int) -> OpGraph:
        part = f"{phase}-{batch}-{x}"

        def trace() -> OpGraph:
            src = self.real()
            g = src.decode_graph(batch, x) if phase == "decode" else src.prefill_graph(batch, x)
            m = _manifest(src)  # a trace may add notes and read the KV layout into the spec
            notes = self.notes + [n for n in m["notes"] if n not in self.notes]
            m["notes"] = notes
            self._apply(m)
            self._entry.put("manifest", m)
            return g

        return trace_store.capture(self._entry, part, trace)

    def prefill_graph(self, batch: int, seq: int) -> OpGraph:
        return self._graph("prefill", batch, seq)

    def decode_graph(self, batch: int, past: int) -> OpGraph:
        return self._graph("decode", batch, past)

    def params(self) -> list[Param] | None:
        return self._params


def open_stored(request: dict[str, Any], make: Callable[[], LLMSource]) -> LLMSource:
    """The source of *request* (plain data: config content and options) through the store: a
    :class:`StoredSource` when the store is on and the source kind can be stored, else ``make()``."""
    entry = trace_store.Entry("llm", request)
    if not entry:
        return make()
    m = entry.get("manifest")
    if isinstance(m, dict) and m.get("cls") in _STORABLE:
        return StoredSource(entry, make, m)
    src = make()
    if type(src).__name__ not in _STORABLE:
        return src
    m = _manifest(src)
    entry.put("manifest", m)
    return StoredSource(entry, make, m, real=src)
