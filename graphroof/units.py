"""Quantities in and out: parse ``57.8M``, ``25MB``, ``1.2 GFLOP``, ``96GB/s``, ``4.6T``; format SI.

Decimal units throughout (1 GB = 1e9 bytes); binary units are accepted on input when spelled ``GiB``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from .errors import InputError, sanitize_terminal

__all__ = ["check_dims", "parse_quantity", "fmt_si", "fmt_bytes", "fmt_flops", "fmt_time", "fmt_rate", "json_safe"]

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
    a = abs(t_s)
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
