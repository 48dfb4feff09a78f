"""Open a model given by name / path / object as an :class:`~graphroof.llm.source.LLMSource`."""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from .source import LLMSource

__all__ = ["open_model"]


def open_model(model: Any, **opts: Any) -> LLMSource:
    raise InputError(f"cannot open {model!r} as an LLM yet")
