"""Quantities in and out: parse ``57.8M``, ``25MB``, ``1.2 GFLOP``, ``96GB/s``, ``4.6T``; format SI.

Decimal units throughout (1 GB = 1e9 bytes); binary units are accepted on input when spelled ``GiB``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from .errors import InputError, sanitize_terminal

__all__ = ["check_dims", "parse_quantity", "parse_time_s", "parse_bandwidth", "parse_flop_rate", "warn_implausible",
           "PLAUSIBLE", "fmt_si", "fmt_bytes", "fmt_flops", "fmt_time", "fmt_rate", "json_safe"]

_SI = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
       "m": 1e-3, "u": 1e-6, "µ": 1e-6, "n": 1e-9}
_BIN = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
_UNITS = ("flop/s", "flops/s", "flops", "flop", "ops", "op", "b/s", "bytes/s", "bytes", "byte", "b", "s",
          "tokens", "token", "")
_RE = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(Ki|Mi|Gi|Ti|Pi|[kKMGTPEmuµn]?)\s*([A-Za-z/]*)\s*$")


def parse_quantity(text: str | float | int, what: str = "value") -> float:
    """Parse a number with an optional SI / binary prefix and unit.

    >>> parse_quantity("57.8M"), parse_quantity("25MB"), parse_quantity("1.2 GFLOP"), parse_quantity("96GB/s")
    (57800000.0, 25000000.0, 1200000000.0, 96000000000.0)
    >>> parse_quantity("4608e9"), parse_quantity("1GiB")
    (4608000000000.0, 1073741824.0)
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    s = str(text).strip().replace(",", "").replace("_", "")
    m = _RE.match(s)
    if m:
        num, prefix, unit = m.groups()
        u = unit.lower()
        if u in _UNITS:
            # "MB" parses as prefix M + unit b; a lone "B" is bytes, not a prefix
            scale = _BIN[prefix] if prefix in _BIN else _SI[prefix]
            if prefix == "m" and u in ("b", "bytes", "byte", "b/s", "bytes/s"):
                raise InputError(f"{what}: {_quoted(text)} reads as milli-bytes; did you mean {num}MB?")
            v = float(num) * scale
            if math.isfinite(v):
                return v
    raise InputError(f"{what}: cannot parse {_quoted(text)} as a number; use e.g. 4.6T, 96GB/s, 57.8M or 4608e9")


#: What a time / bandwidth / FLOP-rate flag may plausibly be: outside, the value is parsed but warned about
#: (``--mem-bw 4`` read as 4 B/s is almost surely a missing unit).
PLAUSIBLE: dict[str, tuple[float, float, str]] = {
    "time": (1e-6, 3600.0, "1 us to 1 h"),
    "bandwidth": (1e9, 1e15, "1 GB/s to 1 PB/s"),
    "flop_rate": (1e9, 1e18, "1 GFLOP/s to 1e18 FLOP/s"),
}
_KIND_UNITS = {"time": ("s",), "bandwidth": ("b/s", "bytes/s"), "flop_rate": ("flop/s", "flops/s", "flops", "")}


def _parse_kind(text: str | float | int, flag: str, kind: str) -> float:
    """*text* as a quantity of *kind* that must carry its unit (a FLOP rate may omit it: ``4.6T``)."""
    value = parse_quantity(text, flag)  # garbage: the usual "cannot parse" message
    if isinstance(text, (int, float)):
        return value
    m = _RE.match(str(text).strip().replace(",", "").replace("_", ""))
    num, prefix, unit = m.groups() if m else ("", "", "")
    if unit.lower() in _KIND_UNITS[kind]:
        return value
    shown = sanitize_terminal(str(text).strip())[:40]
    if kind == "time":
        hint = f"{num}ms or {float(num) * 1e-3:g}s" if not unit else "50ms or 0.05s"
        what = "give a unit" if not unit else "expected a time"
    elif kind == "bandwidth":
        hint = f"{num}{prefix}B/s" if prefix or float(num) >= 1e6 else f"{num}GB/s or {num}TB/s"
        what = ("give a unit" if not unit else "a bandwidth is bytes per second" if unit.lower() in
                ("b", "byte", "bytes") else "expected a bandwidth")
    else:
        hint, what = "312TFLOP/s or 312T", "expected a FLOP rate"
    raise InputError(f"{flag} {shown}: {what}, e.g. {hint}")


def parse_time_s(text: str | float | int, flag: str = "time") -> float:
    """A time that names its unit, in seconds: ``50ms``, ``0.05s``, ``200us``; a bare ``50`` is refused.

    >>> parse_time_s("50ms"), parse_time_s("2s")
    (0.05, 2.0)
    """
    return _parse_kind(text, flag, "time")


def parse_bandwidth(text: str | float | int, flag: str = "bandwidth") -> float:
    """A bandwidth that names its unit, in bytes/s: ``96GB/s``, ``2TB/s``, ``1.5TiB/s``; a bare ``4`` is refused.

    >>> parse_bandwidth("96GB/s")
    96000000000.0
    """
    return _parse_kind(text, flag, "bandwidth")


def parse_flop_rate(text: str | float | int, flag: str = "FLOP rate") -> float:
    """A FLOP rate in FLOP/s: ``4.6T``, ``312TFLOP/s``, ``4608e9``."""
    return _parse_kind(text, flag, "flop_rate")


def warn_implausible(value: float, flag: str, kind: str) -> None:
    """A :class:`~graphroof.errors.GraphroofWarning` when *value* lies outside :data:`PLAUSIBLE` for *kind*."""
    low, high, span = PLAUSIBLE[kind]
    if 0 < value < low or value > high:
        from .errors import warn

        shown = fmt_time(value) if kind == "time" else fmt_si(value, "B/s" if kind == "bandwidth" else "FLOP/s")
        warn(f"{flag} {shown} is outside the plausible range ({span}); check the value and its unit")


def _quoted(text: object, limit: int = 80) -> str:
    """*text* for a message: ``repr`` style, control characters escaped, cut to about *limit* characters."""
    q = sanitize_terminal(repr(text if not isinstance(text, str) else text[:limit + 1]))
    return q if len(q) <= limit else q[:limit] + "..."


def fmt_si(x: float, unit: str = "", digits: int = 3) -> str:
    """``fmt_si(2.5e12, "FLOP/s") -> '2.50 TFLOP/s'``."""
    if x is None:
        return "-"
    if x == 0:
        return f"0 {unit}".strip()
    if math.isinf(x):
        return "inf"
    for p, scale in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1)):
        if abs(x) >= scale:
            v = x / scale
            return f"{v:.{max(0, digits - 1 - int(math.floor(math.log10(abs(v)))))}f} {p}{unit}".strip()
    return f"{x:.{digits}g} {unit}".strip()


def fmt_bytes(x: float) -> str:
    return fmt_si(x, "B")


def fmt_flops(x: float) -> str:
    return fmt_si(x, "FLOP")


def fmt_rate(x: float, unit: str = "FLOP/s") -> str:
    return fmt_si(x, unit)


def fmt_time(t_s: float) -> str:
    """Seconds in the most readable unit: ``s``, ``ms``, ``us``, ``ns``."""
    if t_s is None:
        return "-"
    a = abs(float(f"{t_s:.3g}"))  # the unit of the value as shown: 0.99999 us is "1 us", not "1e+03 ns"
    if a == 0:
        return "0 s"
    if a >= 1:
        return f"{t_s:.3g} s"
    if a >= 1e-3:
        return f"{t_s * 1e3:.3g} ms"
    if a >= 1e-6:
        return f"{t_s * 1e6:.3g} us"
    return f"{t_s * 1e9:.3g} ns"


def json_safe(x: Any) -> Any:
    """JSON-safe numbers for ``to_dict()``: inf / nan become None (recursively through dicts and lists)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def check_dims(dims: Mapping[str, Any]) -> None:
    """Every bound dim a positive integer: a zero or negative size would analyse an empty (all-zero) model.  Only
    an assumed value read from a tensor (``value_N``, e.g. a detection count) may be 0."""
    for name, v in dims.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 0 or (v == 0 and not str(name).startswith("value_")):
            raise InputError(f"--dim {name}={v}: a dimension must be a positive integer (a zero or negative size "
                             f"gives an empty model); e.g. --dim {name}=1")
