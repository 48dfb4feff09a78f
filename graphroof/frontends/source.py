"""Where the LLM's graphs come from: a prefill graph at ``(batch, seq)`` and a decode-step graph at
``(batch, past)``, plus the model facts the estimate needs (:class:`ModelSpec`).

Dim names used throughout: ``batch``; ``seq`` (prompt tokens in prefill); ``past`` (tokens already in the KV
cache at a decode step; the step attends to ``past + 1`` keys).

:class:`GraphSource` wraps ready OpGraphs with those symbolic dims (hand-built graphs, op tables, frontends
that trace symbolically).  A source with ``decode is None`` has no KV cache: each generated token is then a
full forward pass over the whole context (see :mod:`graphroof.llm.phases`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from ..graph import OpGraph, TensorSpec, bind

__all__ = ["ModelSpec", "GraphSource", "LLMSource", "Param", "SharedTraces"]

#: (module scope, tensor spec) of one parameter.
Param = tuple[str, TensorSpec]


@dataclass(frozen=True)
class ModelSpec:
    """Architecture facts (``None`` = unknown); used for checks (max positions, TP divisibility) and notes."""

    name: str = "model"
    layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    intermediate: int | None = None
    vocab: int | None = None
    max_positions: int | None = None
    dtype: str | None = None
    #: per layer, the tokens its KV cache keeps (sliding / chunked attention), None = the full context;
    #: ``windows`` None: every layer keeps the full context
    windows: tuple[int | None, ...] | None = None

    def kv_cache_tokens(self, context: int) -> float:
        """Tokens of KV cache per sequence and layer at *context* tokens, averaged over the layers:
        ``mean_l min(context, W_l)`` (``W_l`` = the layer's window, or the context for full-attention layers).
        KV bytes at a context = bytes per token (every layer writes one entry per token) * this; exact when
        every layer's entry has the same size."""
        if not self.windows:
            return float(context)
        return sum(min(context, w) if w else context for w in self.windows) / len(self.windows)

    #: K + V cache elements per token over all layers, as the model's cache receives them (MLA: the latent);
    #: None: ``2 * layers * kv_heads * head_dim``
    kv_elems_per_token: int | None = None
    #: layers that keep a fixed-size recurrent state instead of a per-token KV cache (Mamba, :mod:`.ssm`)
    state_layers: int = 0

    def kv_bytes_per_token(self, kv_bits: int) -> float | None:
        """``2 (K and V) * layers * kv_heads * head_dim * bytes`` (or ``kv_elems_per_token * bytes`` when the
        layout was read from the model), or None when a fact is missing."""
        if self.kv_elems_per_token:
            return self.kv_elems_per_token * kv_bits / 8
        if not (self.layers and self.kv_heads and self.head_dim):
            return None
        return 2 * self.layers * self.kv_heads * self.head_dim * kv_bits / 8


class LLMSource:
    """Interface: subclasses implement :meth:`prefill_graph` and, with a KV cache, :meth:`decode_graph`."""

    spec: ModelSpec = ModelSpec()
    kv_cache: bool = False
    #: Why there is no KV-cache decode graph (shown in the result's notes).
    no_cache_reason: str = ""
    notes: list[str]

    @property
    def name(self) -> str:
        return self.spec.name

    def prefill_graph(self, batch: int, seq: int) -> OpGraph:
        raise NotImplementedError

    def decode_graph(self, batch: int, past: int) -> OpGraph:
        raise NotImplementedError

    def params(self) -> list[Param] | None:
        """Every parameter once (tied ones once), or None when the source cannot list them."""
        return None

    def decode_start(self, prompt: int) -> int:
        """Tokens in the (self-attention) KV cache at the first decode step: the prompt; an encoder-decoder's
        decoder prompt (:mod:`graphroof.llm.encdec`)."""
        return prompt

    def cross_tokens(self, prompt: int) -> int:
        """Encoder tokens whose cross-attention K/V each sequence keeps (0: no cross-attention cache)."""
        return 0

    def check_context(self, prompt: int, gen: int) -> None:
        limit = self.spec.max_positions
        if limit and prompt > limit:
            raise InputError(f"--prompt {prompt} is longer than {self.name}'s maximum of {limit} positions "
                             f"(max_position_embeddings); use --prompt <= {limit}")
        if limit and prompt + gen > limit:
            fix = f"lower --gen to <= {limit - prompt}" if limit > prompt else f"use --prompt <= {limit - gen}"
            raise InputError(f"--prompt {prompt} + --gen {gen} = {prompt + gen} tokens exceeds {self.name}'s maximum "
                             f"of {limit} positions (max_position_embeddings); {fix}")



class SharedTraces(LLMSource):
    """An LLM source whose graphs are traced once per (phase, batch, context) and shared by every engine or
    pipeline built on it (a sweep across TP degrees and dtypes, a validation run); everything else is the wrapped
    source's.  ``trace_s``: the wall time spent tracing; ``traces``: how many graphs were traced."""

    def __init__(self, src: LLMSource):
        self._src = src
        self._graphs: dict[tuple[str, int, int], OpGraph] = {}
        self.trace_s = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._src, name)

    name = property(lambda self: self._src.name)  # type: ignore[assignment]
    spec = property(lambda self: self._src.spec)  # type: ignore[assignment]
    kv_cache = property(lambda self: self._src.kv_cache)  # type: ignore[assignment]
    no_cache_reason = property(lambda self: self._src.no_cache_reason)  # type: ignore[assignment]
    notes = property(lambda self: self._src.notes)  # type: ignore[assignment]

    @property
    def traces(self) -> int:
        return len(self._graphs)

    def _get(self, phase: str, batch: int, x: int) -> OpGraph:
        key = (phase, batch, x)
        if key not in self._graphs:
            fn = self._src.decode_graph if phase == "decode" else self._src.prefill_graph
            t0 = time.perf_counter()
            self._graphs[key] = fn(batch, x)
            self.trace_s += time.perf_counter() - t0
        return self._graphs[key]

    def prefill_graph(self, batch: int, seq: int) -> OpGraph:
        return self._get("prefill", batch, seq)

    def decode_graph(self, batch: int, past: int) -> OpGraph:
        return self._get("decode", batch, past)

    def params(self) -> list[Param] | None:
        return self._src.params()

    def decode_start(self, prompt: int) -> int:
        return self._src.decode_start(prompt)

    def cross_tokens(self, prompt: int) -> int:
        return self._src.cross_tokens(prompt)

    def check_context(self, prompt: int, gen: int) -> None:
        self._src.check_context(prompt, gen)

@dataclass
class GraphSource(LLMSource):
    """Symbolic OpGraphs: *prefill* with dims ``batch``, ``seq``; *decode* with ``batch``, ``past`` (or None).

    Either argument may also be a callable ``(batch, x) -> OpGraph`` (x = seq or past).
    """

    prefill: OpGraph | Callable[[int, int], OpGraph]
    decode: OpGraph | Callable[[int, int], OpGraph] | None = None
    spec: ModelSpec = field(default_factory=ModelSpec)
    param_list: Iterable[Param] | None = None
    no_cache_reason: str = "the graph has no decode step with a KV cache"
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.kv_cache = self.decode is not None

    @staticmethod
    def _at(g, batch: int, x: int, dim: str) -> OpGraph:
        if callable(g) and not isinstance(g, OpGraph):
            return g(batch, x)
        dims = {**g.meta.get("default_dims", {}), "batch": batch, dim: x}
        return bind(g, dims) if g.symbolic_dims() else g

    def prefill_graph(self, batch: int, seq: int) -> OpGraph:
        return self._at(self.prefill, batch, seq, "seq")

    def decode_graph(self, batch: int, past: int) -> OpGraph:
        if self.decode is None:
            raise InputError(f"{self.name}: {self.no_cache_reason}")
        return self._at(self.decode, batch, past, "past")

    def params(self) -> list[Param] | None:
        return list(self.param_list) if self.param_list is not None else None
