"""The error bands of a serve or plan report, read from the result's plain data (``bands`` of a result object,
``error_bands`` of its dict form; a result without them renders as before):

* the range columns of a serve run (TTFT / TPOT p50 and p99, e2e p99, tok/s per GPU, one row per rate: each the
  figure divided and multiplied by ``1 + p90_abs`` of its band, as :class:`graphroof.serving.ServeResult` holds it);
* the range of the max sustainable rate and of the replicas a target rate needs;
* the line naming each band's regime (figure, device, runtime preset) and whether measured rows cover it.

No engine, no simulator imported.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ..hardware.bands import ErrorBand
from ..units import fmt_time
from .columns import Column

__all__ = ["bands_of", "band_line", "band_parts", "range_text", "range_columns", "RANGE_VALUES", "STEP_NOTE"]

#: why a serving percentile takes the band of a step figure (the long form: graphroof.serving.result's docstring)
STEP_NOTE = ("a serving percentile is made of engine steps priced as graphroof llm prices a prefill or decode step, "
             "so the TTFT / TPOT band of the device and runtime applies to it (queueing near saturation can "
             "amplify the error beyond it)")


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def bands_of(r: Any) -> dict[str, ErrorBand]:
    """The bands of a result (object: ``bands``; dict form: ``error_bands``), as :class:`ErrorBand` objects."""
    b = _get(r, "bands")
    if b is None:
        b = _get(r, "error_bands")
    return {str(k): v if isinstance(v, ErrorBand) else ErrorBand.from_dict(v) for k, v in (b or {}).items()
            if isinstance(v, (ErrorBand, Mapping))}


def band_parts(bands: Mapping[str, ErrorBand], names: Mapping[str, str]) -> list[str]:
    """``TTFT (ttft on h100-sxm under serving): within a factor 1.10 either way, validated on ...`` per band."""
    return [f"{names[k]} ({b.regime()}): {b.describe()}" for k, b in bands.items() if k in names]


def band_line(bands: Mapping[str, ErrorBand], names: Mapping[str, str], why: str = "") -> str:
    """One line: what the ranges are, then each band's regime and its coverage."""
    head = ("error bands (the ranges: the factor within which 90% of graphroof validate's measured predictions of "
            "the regime fell" + (f"; {why}" if why else "") + "): ")
    return head + "; ".join(band_parts(bands, names))


def range_text(lo: Any, hi: Any, fmt: Callable[[float], str]) -> str:
    """``1.2 ms - 1.5 ms``; ``-`` when either end is missing."""
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (lo, hi)):
        return "-"
    return f"{fmt(lo)} - {fmt(hi)}"


def _q(stats: Any, q: str) -> float | None:
    v = _get(stats, q) if stats is not None else None
    return None if v is None or not math.isfinite(float(v)) else float(v)


def _lat(metric: str, name: str, q: str) -> tuple[Column, Callable[[Any], Any]]:
    col = Column(f"{name} {q} range", lambda p: range_text(_q(_get(p, f"{metric}_low_s"), q),
                                                           _q(_get(p, f"{metric}_high_s"), q), fmt_time))
    return col, lambda p: _q(_get(p, f"{metric}_low_s"), q)


def _tps(p: Any) -> str:
    return range_text(_get(p, "output_tokens_per_s_per_gpu_low"), _get(p, "output_tokens_per_s_per_gpu_high"),
                      lambda v: f"{v:,.1f}")


_RANGES = (_lat("ttft", "TTFT", "p50"), _lat("ttft", "TTFT", "p99"), _lat("tpot", "TPOT", "p50"),
           _lat("tpot", "TPOT", "p99"), _lat("e2e", "e2e", "p99"),
           (Column("tok/s/GPU range", _tps), lambda p: _get(p, "output_tokens_per_s_per_gpu_low")))

#: header -> the raw value a range column sorts by (its low end), for the HTML rate table
RANGE_VALUES: dict[str, Callable[[Any], Any]] = {c.header: v for c, v in _RANGES}


def range_columns() -> tuple[Column, ...]:
    """The range columns of a serve run's rate table (rows: the rate points, objects or dicts)."""
    return tuple(c for c, _ in _RANGES)
