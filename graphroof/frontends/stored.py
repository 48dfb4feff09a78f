"""The one wiring of the persistent store of traces (:mod:`.trace_store`): graphs and LLM sources, one key schema.

A model built from a transformers config (a config file or a zoo entry) or a zoo vision model is stored under
:func:`request`: ``{"model": {"source": <path or zoo:name>, "config": <the config's content>}, "options": <the
frontend / source options>}``, with the entry's kind (``graph`` for ``load``, ``llm`` for an LLM source) and the
:class:`~graphroof.options.Options` of the call (its ``fold`` switch is part of the key; its ``store`` switch off
means nothing is read or written).  The code and library versions are part of every key (see the store).

:func:`stored_graph` is ``load``'s capture through the store.  :class:`StoredSource` stands in for the
:class:`~graphroof.frontends.hf.source.HFSource` of a transformers config: its *manifest* (the model facts, notes,
KV-cache layout and parameter list) and every graph it traced are kept under its key.  A later run reads them
back without importing torch or transformers; the first graph that is not stored builds the real source and
traces it (then stores it and the updated manifest).  The figures are those of the real source: the same graphs,
the same manifest.

Decoder-only sources (``HFSource``, the state-space ``SSMSource``) and encoder-decoders (``EncDecSource``) are
stored.  An encoder-decoder's decode graph also depends on the request's encoder length (set by
:meth:`check_context`), which is then part of the graph's name in the store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..graph import OpGraph
from ..options import DEFAULT, Options
from . import trace_store
from .resolve import Resolved
from .source import LLMSource, ModelSpec, Param

__all__ = ["StoredSource", "open_stored", "request", "stored_graph"]

def request(res: Resolved, opts: Mapping[str, Any]) -> dict[str, Any]:
    """The store's key schema (see the module docstring): what the model is and the options it is built with."""
    return {"model": {"source": res.source, "config": res.config}, "options": dict(opts)}


def stored_graph(res: Resolved, opts: Mapping[str, Any], capture: Callable[[], OpGraph],
                 options: Options = DEFAULT) -> OpGraph:
    """``capture()`` through the store: keyed by :func:`request`, so a later run skips the imports and the trace."""
    entry = trace_store.Entry("graph", request(res, opts), options)
    return trace_store.capture(entry, "graph", capture, expect=OpGraph)


#: source classes whose state is the manifest below (anything else is returned as built)
_STORABLE = ("HFSource", "SSMSource", "EncDecSource")


def _valid(m: Any) -> bool:
    """Whether *m* is a manifest as :func:`_manifest` writes it (anything else read from the store is a miss)."""
    from ..graph import TensorSpec
    from .source import ModelSpec

    if type(m) is not dict or m.get("cls") not in _STORABLE or type(m.get("spec")) is not ModelSpec:
        return False
    notes, params, encdec = m.get("notes"), m.get("params", ()), m.get("encdec")
    if type(notes) is not list or not all(type(n) is str for n in notes) or type(m.get("kv_cache")) is not bool:
        return False
    if type(m.get("no_cache_reason", "")) not in (str, type(None)):
        return False
    if params is not None and not (type(params) is list and all(
            type(p) is tuple and len(p) == 2 and type(p[0]) is str and type(p[1]) is TensorSpec for p in params)):
        return False
    return encdec is None or (type(encdec) is dict and {"decoder_prompt", "features", "encoder_limit"} <= set(encdec))


def _manifest(src: Any) -> dict[str, Any]:
    m = {"cls": type(src).__name__, "spec": src.spec, "notes": list(src.notes), "kv_cache": src.kv_cache,
         "no_cache_reason": getattr(src, "no_cache_reason", ""), "params": src.params()}
    if getattr(src, "encoder_decoder", False):  # what the request's lengths are checked and set against
        m["encdec"] = {"decoder_prompt": src.decoder_prompt, "features": src.features,
                       "encoder_limit": src.encoder_limit}
    return m


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
        encdec = m.get("encdec")
        self.encoder_decoder = bool(encdec)
        if encdec and not hasattr(self, "encoder_len"):
            self.decoder_prompt, self.features = encdec["decoder_prompt"], encdec["features"]
            self.encoder_limit = encdec["encoder_limit"]
            self.encoder_len = self.encoder_limit if self.features else None

    def real(self) -> LLMSource:
        """The source itself (built on first need: torch and transformers are imported then)."""
        if self._real is None:
            self._real = self._make()
        return self._real

    def _graph(self, phase: str, batch: int, x: int) -> OpGraph:
        part = f"{phase}-{batch}-{x}"
        if self.encoder_decoder and phase == "decode":
            part += f"-encoder-{self.encoder_len}"

        def trace() -> OpGraph:
            src = self.real()
            if self.encoder_decoder:
                src.encoder_len = self.encoder_len  # type: ignore[attr-defined]
            g = src.decode_graph(batch, x) if phase == "decode" else src.prefill_graph(batch, x)
            m = _manifest(src)  # a trace may add notes and read the KV layout into the spec
            notes = self.notes + [n for n in m["notes"] if n not in self.notes]
            m["notes"] = notes
            self._apply(m)
            self._entry.put("manifest", m)
            return g

        return trace_store.capture(self._entry, part, trace, expect=OpGraph)

    def prefill_graph(self, batch: int, seq: int) -> OpGraph:
        return self._graph("prefill", batch, seq)

    def decode_graph(self, batch: int, past: int) -> OpGraph:
        return self._graph("decode", batch, past)

    def params(self) -> list[Param] | None:
        return self._params

    # an encoder-decoder's request lengths: the EncDecSource rules, on the stored facts
    def decode_start(self, prompt: int) -> int:
        return self.decoder_prompt if self.encoder_decoder else prompt

    def cross_tokens(self, prompt: int) -> int:
        if not self.encoder_decoder:
            return 0
        return self.encoder_limit if self.features and self.encoder_limit else prompt

    def check_context(self, prompt: int, gen: int) -> None:
        if not self.encoder_decoder:
            return super().check_context(prompt, gen)
        from .hf.encdec import EncDecSource

        EncDecSource.check_context(self, prompt, gen)  # type: ignore[arg-type]  # reads the facts set above


def open_stored(res: Resolved, opts: Mapping[str, Any], make: Callable[[], LLMSource],
                options: Options = DEFAULT) -> LLMSource:
    """The LLM source of *res* built with *opts* (plain data) through the store: a :class:`StoredSource` when the
    store is on and the source kind can be stored, else ``make()``."""
    entry = trace_store.Entry("llm", request(res, opts), options)
    if not entry:
        return make()
    m = entry.get("manifest")
    if _valid(m):
        return StoredSource(entry, make, m)
    if m is not None:  # stored, but not a manifest: a miss (rewritten below)
        entry.drop("manifest")
    src = make()
    if type(src).__name__ not in _STORABLE:
        return src
    m = _manifest(src)
    entry.put("manifest", m)
    return StoredSource(entry, make, m, real=src)
