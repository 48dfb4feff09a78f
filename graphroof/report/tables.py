"""Machine-readable outputs for scripts: CSV (layer or op rows) and JSON over one or more phases."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from ..errors import csv_safe
from .content import as_phases

__all__ = ["render_csv", "render_json", "csv_text"]

_LAYER_DROP = ("ops",)


def _flat(v: Any) -> Any:
    """Lists and dicts in a row become one cell: ``a;b`` and ``key:value;key:value``."""
    if isinstance(v, dict):
        return ";".join(f"{k}:{x}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ";".join("" if x is None else str(x) for x in v)
    if isinstance(v, float) and v != v:  # nan
        return ""
    return v


def csv_text(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    cols = columns or (list(rows[0]) if rows else [])
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _cell(_flat(r.get(k))) for k in cols})
    return buf.getvalue()


def _cell(v: Any) -> Any:
    """Strings from the model (op and layer names) cannot start a spreadsheet formula."""
    return csv_safe(v) if isinstance(v, str) else v


def render_csv(phases: Any, ops: bool = False) -> str:
    """One row per layer (or per op with *ops*), raw numbers, with a leading ``phase`` column."""
    rows: list[dict[str, Any]] = []
    for p in as_phases(phases):
        src = p.analysis.ops if ops else p.analysis.layers
        rows += [{"phase": p.name, **{k: v for k, v in r.items() if ops or k not in _LAYER_DROP}} for r in src]
    return csv_text(rows)


def render_json(phases: Any) -> str:
    """One Analysis: its ``to_dict()`` (``next_steps`` included); several phases:
    ``{"phases": [{"phase": name, ...}, ...]}``."""
    ph = as_phases(phases)
    if len(ph) == 1:
        return json.dumps(ph[0].analysis.to_dict(), indent=2) + "\n"
    return json.dumps({"phases": [{"phase": p.name, **p.analysis.to_dict()} for p in ph]}, indent=2) + "\n"
