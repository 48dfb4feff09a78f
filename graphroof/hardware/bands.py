"""Error bands: how far a realistic figure has been from measurement, in the regime it falls in.

``graphroof validate --bands hw_profiles/accuracy/bands.json`` writes the table from the bundled measured datasets
(:mod:`graphroof.validate.bands`); this module reads it and looks a figure up.  A band is keyed
``FIGURE|DEVICE|RUNTIME``: FIGURE a figure kind (``ttft``, ``tpot``, ``throughput``, ``layer-kernel``,
``collective``, ``kernel``, ``vision-latency``, ``encoder-latency``), DEVICE a profile name, ``vendor:<vendor>`` or
``*``, RUNTIME a runtime preset name or ``*``.  Lookup, first key present wins::

    FIGURE|<profile>|<runtime>  ->  FIGURE|<profile>|*  ->  FIGURE|vendor:<vendor>|<runtime>
    ->  FIGURE|vendor:<vendor>|*  ->  FIGURE|*|*  ->  the fallback band (no measured data: wider)

When the profile's own keys are absent (no measured rows of the figure on that device), the vendor / ``*`` levels
are looked up first in the table's ``unseen`` bands (the GPU hold-out's errors: how the model did on devices left
out of every fit; the band says ``unseen``), then in the in-sample ones.

A figure *f* (a time) with band *b* lies in ``[f / (1 + b.p90_abs), f * (1 + b.p90_abs)]``: the factor within which
90% of the validated predictions of that regime fell.  Throughputs take the reciprocal band.  The table is data:
a band is never fitted per row, it summarises the validation of the regime.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..safe_read import parse_json, read_text, shown_path
from .load import profile_dir

__all__ = ["ErrorBand", "band_keys", "lookup_band", "load_bands", "band_for", "figure_bands", "band_range",
           "BANDS_FILE", "FIGURES"]

#: the figure kinds of an LLM's realistic figures (``llm``, ``sweep``, ``serve``, ``plan``)
FIGURES = ("ttft", "tpot", "throughput")

#: where the shipped table lives, relative to the profile directory
BANDS_FILE = Path("accuracy") / "bands.json"

#: when no table ships (a bare checkout before ``graphroof validate --bands`` ran): every figure gets this band
_NO_TABLE = {"n": 0, "median_abs": 0.25, "p90_abs": 0.5, "signed_median": 0.0, "fallback": True}


@dataclass(frozen=True)
class ErrorBand:
    """The band of one figure kind on one device under one runtime preset."""

    figure: str
    key: str                 # the table key that matched (``fallback`` when none did)
    n: int                   # validated rows behind it (0: no measured data in this regime)
    median_abs: float        # median |error| (a fraction)
    p90_abs: float           # 90th percentile |error|: the band's half-width as a factor
    signed_median: float     # > 0: predictions ran slow (times) in this regime
    fallback: bool           # no measured data covers this regime: the band is the table's wide fallback
    device: str = ""         # the regime looked up: the profile name ...
    runtime: str = ""        # ... and the runtime preset (empty: not given)
    unseen: bool = False     # no rows of the figure on this device: the GPU hold-out's band of its vendor / '*'

    def low(self, t_s: float) -> float:
        """The band's low end for a time *t_s* (for a throughput use :meth:`high` of its time, or 1/...)."""
        return t_s / (1.0 + self.p90_abs)

    def high(self, t_s: float) -> float:
        return t_s * (1.0 + self.p90_abs)

    def as_dict(self) -> dict[str, Any]:
        return {"figure": self.figure, "key": self.key, "n": self.n, "median_abs": self.median_abs,
                "p90_abs": self.p90_abs, "signed_median": self.signed_median, "fallback": self.fallback,
                "device": self.device, "runtime": self.runtime, "unseen": self.unseen}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ErrorBand:
        """The band of :meth:`as_dict` (a result read back from JSON)."""
        return cls(figure=str(d.get("figure", "")), key=str(d.get("key", "fallback")), n=int(d.get("n", 0)),
                   median_abs=float(d.get("median_abs", 0.0)), p90_abs=float(d.get("p90_abs", 0.0)),
                   signed_median=float(d.get("signed_median", 0.0)), fallback=bool(d.get("fallback", False)),
                   device=str(d.get("device", "")), runtime=str(d.get("runtime", "")),
                   unseen=bool(d.get("unseen", False)))

    def regime(self) -> str:
        """``ttft on h100-sxm under serving``: the regime the band was looked up for."""
        return self.figure + (f" on {self.device}" if self.device else "") + \
            (f" under {self.runtime}" if self.runtime else "")

    def describe(self) -> str:
        where = "no measured data in this regime (wide fallback)" if self.fallback else \
            (f"no measured rows of it for this device and runtime: the spread of {self.n} rows each predicted with "
             f"its own GPU left out of every fit (GPU hold-out, {self.key})") if self.unseen else \
            f"validated on {self.n} measured rows ({self.key})"
        return f"within a factor {1 + self.p90_abs:.2f} either way, {where}"


def band_keys(figure: str, device: str = "", vendor: str = "", runtime: str = "") -> list[str]:
    """The keys a figure is looked up under, most specific first (see the module docstring)."""
    keys = []
    if device:
        keys += [f"{figure}|{device}|{runtime or '*'}", f"{figure}|{device}|*"]
    if vendor:
        keys += [f"{figure}|vendor:{vendor}|{runtime or '*'}", f"{figure}|vendor:{vendor}|*"]
    keys.append(f"{figure}|*|*")
    return list(dict.fromkeys(keys))


def lookup_band(table: dict[str, Any], figure: str, device: str = "", vendor: str = "",
                runtime: str = "") -> dict[str, Any]:
    """The band of a figure in a bands table (the JSON ``graphroof validate --bands`` writes), falling back."""
    bands, unseen = table.get("bands", {}), table.get("unseen", {})
    keys = band_keys(figure, device, vendor, runtime)
    own = [k for k in keys if device and k.split("|")[1] == device]
    for key in own:
        if key in bands:
            return dict(bands[key], key=key)
    for table_, mark in ((unseen, True), (bands, False)):  # no rows on the device: the hold-out's bands first
        for key in keys[len(own):]:
            if key in table_:
                return dict(table_[key], key=key, **({"unseen": True} if mark else {}))
    return dict(table.get("fallback", _NO_TABLE), key="fallback")


@lru_cache(maxsize=4)
def load_bands(path: str | None = None) -> dict[str, Any]:
    """The bands table (the shipped one by default); an empty table when none ships."""
    p = Path(path) if path else profile_dir() / BANDS_FILE
    if not p.is_file():
        return {"bands": {}, "fallback": dict(_NO_TABLE)}
    data = parse_json(read_text(p, "error-band table"), shown_path(p))
    if not isinstance(data, dict) or not isinstance(data.get("bands", {}), dict):
        raise InputError(f"{shown_path(p)}: not an error-band table (write one with graphroof validate --bands)")
    return data


def band_for(figure: str, device: str, vendor: str = "", runtime: str = "",
             table: dict[str, Any] | None = None) -> ErrorBand:
    """The :class:`ErrorBand` of *figure* on profile *device* (its *vendor*) under runtime preset *runtime*."""
    b = lookup_band(load_bands() if table is None else table, figure, device, vendor, runtime)
    return ErrorBand(figure=figure, key=str(b.get("key", "fallback")), n=int(b.get("n", 0)),
                     median_abs=float(b.get("median_abs", 0.0)), p90_abs=float(b.get("p90_abs", 0.0)),
                     signed_median=float(b.get("signed_median", 0.0)),
                     fallback=bool(b.get("fallback", False)) or b.get("key") == "fallback", device=device,
                     runtime=runtime, unseen=bool(b.get("unseen", False)))


def figure_bands(hw: Any, runtime: str = "", figures: tuple[str, ...] = FIGURES,
                 table: dict[str, Any] | None = None) -> dict[str, ErrorBand]:
    """The band of each figure kind on hardware profile *hw* (its ``name`` and ``vendor``) under *runtime*."""
    return {f: band_for(f, hw.name, getattr(hw, "vendor", "") or "", runtime, table) for f in figures}


def band_range(value: float | None, band: ErrorBand | dict[str, Any] | None) -> tuple[float, float] | None:
    """``(value / (1 + p90_abs), value * (1 + p90_abs))``: the band's range of a time, or of a rate (the reciprocal
    band of its time is the same pair); None for a missing or non-finite value or no band."""
    if value is None or band is None or not math.isfinite(float(value)):
        return None
    f = 1.0 + float(band["p90_abs"] if isinstance(band, dict) else band.p90_abs)
    return float(value) / f, float(value) * f
