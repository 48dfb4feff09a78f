"""The switch for folded blocks (:mod:`graphroof.frontends.torch_fold`), importable without torch: the CLI and
callers of ``graphroof.llm`` turn folding off around a call with ``with folding(False): ...``."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

__all__ = ["fold_enabled", "folding"]

_ENABLED: contextvars.ContextVar[bool] = contextvars.ContextVar("graphroof_fold_blocks", default=True)


def fold_enabled() -> bool:
    """Whether torch captures fold runs of identical blocks (on unless inside ``folding(False)``)."""
    return _ENABLED.get()


@contextlib.contextmanager
def folding(enabled: bool) -> Iterator[None]:
    """Captures inside this context fold identical blocks (``True``, the default) or trace every block."""
    token = _ENABLED.set(bool(enabled))
    try:
        yield
    finally:
        _ENABLED.reset(token)
