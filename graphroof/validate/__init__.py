"""``graphroof validate``: every bundled measured dataset (Vidur kernels and all-reduces, gpt-fast, TensorRT-LLM,
kernel benchmarks, vision / encoder latencies; ``data/``, cited in ``data/README.md``) priced through exactly the
path users run (``analyze``, the ``llm`` engine, the collective model), with the errors per subset, the rows not
scored and why, a hold-out score, and error bands per regime (:mod:`graphroof.validate.bands`).

``graphroof.validate(...)`` is :func:`graphroof.validate.run.validate`: the package is callable, so the name works
whether or not the package was imported first.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from .bands import bands_of, lookup_band
from .result import Row, Stats, ValidationResult
from .run import DATASETS, parse_datasets, validate

__all__ = ["validate", "ValidationResult", "Row", "Stats", "DATASETS", "parse_datasets", "bands_of", "lookup_band"]


class _CallableModule(types.ModuleType):
    """``graphroof.validate(...)`` runs :func:`validate` even where ``graphroof.validate`` is this package."""

    def __call__(self, *args: Any, **kwargs: Any) -> ValidationResult:
        return validate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
