"""Counting settings that change modelling assumptions (not shapes), passed to the rules that take them.

* ``attention``: the attention byte model.  ``"flash"`` (default): scores stay on chip, the kernel reads Q, K,
  V (and a mask if given) once and writes O.  ``"naive"``: the score matrix S = QK^T and P = softmax(S) are
  written to and read back from main memory (unfused math path).
* ``causal``: ``"kernel"`` (default) counts the (query, key) pairs a causal kernel computes, about half the
  square; ``"full"`` counts the full square as FlopCounterMode and most calculators do.

They travel one way, as an argument: ``count(graph, settings=...)`` hands them to every rule whose signature
takes a second parameter named ``settings`` (``def rule(node, settings=DEFAULT)``); one-argument rules never see them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError

__all__ = ["ATTENTION_MODELS", "CAUSAL_MODES", "DEFAULT", "CountSettings"]

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


#: The settings a rule sees when called without any (``rule(node)``).
DEFAULT = CountSettings()
