"""Counting settings that change modelling assumptions (not shapes), read by rules via :func:`current`.

* ``attention``: the attention byte model.  ``"flash"`` (default): scores stay on chip, the kernel reads Q, K,
  V (and a mask if given) once and writes O.  ``"naive"``: the score matrix S = QK^T and P = softmax(S) are
  written to and read back from main memory (unfused math path).
* ``causal``: ``"kernel"`` (default) counts the (query, key) pairs a causal kernel computes, about half the
  square; ``"full"`` counts the full square as FlopCounterMode and most calculators do.

``count(graph, settings=...)`` makes them current for the duration of the pass; tests may use
``with use(CountSettings(...)):``.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import InputError

__all__ = ["CountSettings", "current", "use", "ATTENTION_MODELS", "CAUSAL_MODES"]

ATTENTION_MODELS = ("flash", "naive")
CAUSAL_MODES = ("kernel", "full")


@dataclass(frozen=True, slots=True)
class CountSettings:
    attention: str = "flash"
    causal: str = "kernel"

    def __post_init__(self) -> None:
        if self.attention not in ATTENTION_MODELS:
            raise InputError(f"attention byte model {self.attention!r} unknown; use one of {', '.join(ATTENTION_MODELS)}")
        if self.causal not in CAUSAL_MODES:
            raise InputError(f"causal counting {self.causal!r} unknown; use one of {', '.join(CAUSAL_MODES)}")

    def describe(self) -> str:
        att = ("flash (attention scores stay on chip; Q, K, V read once, O written once)" if self.attention == "flash"
               else "naive (attention scores and probabilities written to and read from memory)")
        cau = ("causal attention counts the pairs a causal kernel computes (about half the square)"
               if self.causal == "kernel" else "causal attention counts the full square")
        return f"attention byte model: {att}; {cau}"


_CURRENT: contextvars.ContextVar[CountSettings] = contextvars.ContextVar("graphroof_count_settings",
                                                                         default=CountSettings())


def current() -> CountSettings:
    """The settings in force for the rule being run."""
    return _CURRENT.get()


@contextlib.contextmanager
def use(settings: CountSettings) -> Iterator[CountSettings]:
    token = _CURRENT.set(settings)
    try:
        yield settings
    finally:
        _CURRENT.reset(token)
