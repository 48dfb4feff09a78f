"""Renderers of a validation run (``graphroof.validate.ValidationResult``): per-dataset and per-subset error
tables, the rows not scored and why (terminal / markdown), the per-row table (csv); JSON is ``to_dict()``.

Reads the result's plain data only (its ``to_dict()`` and ``row_dicts()``): this module imports no engine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tabulate import tabulate

from ..errors import ReportError
from .tables import csv_text

__all__ = ["render_validation", "rows_csv"]


def _pct(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "-"
    return f"{100 * v:+.1f}%" if signed else f"{100 * v:.1f}%"


def _stats_cells(s: Mapping[str, Any] | None) -> list[Any]:
    if not s:
        return [0, "-", "-", "-", "-"]
    return [s["n"], _pct(s["median_abs"]), _pct(s["p90_abs"]), _pct(s["worst_abs"]), _pct(s["signed_median"], True)]


def _table(rows: list[list[Any]], headers: list[str], markdown: bool) -> str:
    return tabulate(rows, headers=headers, tablefmt="github" if markdown else "simple")


def render_validation(result: Any, fmt: str = "terminal") -> str:
    """The report in ``terminal`` / ``markdown`` / ``json`` / ``csv`` (csv: the per-row table).  *result*: a
    ValidationResult, or its ``to_dict()`` (e.g. read back from ``graphroof validate -f json``)."""
    if isinstance(result, Mapping):  # a result's to_dict() read back from JSON renders the same
        if fmt == "json":
            return json.dumps(result, indent=2, default=str) + "\n"
        if fmt == "csv":
            raise ReportError("the per-row csv needs the result itself (the JSON holds the statistics only)")
    elif fmt == "json":
        return str(result.to_json()) + "\n"
    if fmt == "csv":
        return rows_csv(result)
    md = fmt == "markdown"
    d = result if isinstance(result, Mapping) else result.to_dict()
    hold = d.get("holdout")
    stat_h = ["rows", "median abs err", "p90 abs err", "worst abs err", "signed median"]
    out: list[str] = []
    title = "Accuracy against published measurements"
    out.append(f"### {title}" if md else title)
    out.append("")
    out.append(f"{d['n_scored']} of {d['n_rows']} rows scored ({', '.join(d['datasets'])}); {d['convention']}.")
    out.append("")
    head = ["dataset", *stat_h] + (["held-out median", "held-out worst"] if hold else [])
    rows = []
    for e in d["per_dataset"]:
        r = [e["dataset"], *_stats_cells(e["stats"])]
        if hold:
            h = e.get("holdout_stats") or {}
            r += [_pct(h.get("median_abs")), _pct(h.get("worst_abs"))]
        rows.append(r)
    if d["overall"]:
        rows.append(["all", *_stats_cells(d["overall"])] + (["", ""] if hold else []))
    out.append(_table(rows, head, md))
    out.append("")
    out.append("#### Per subset" if md else "Per subset (dataset, engine, GPU, model family, regime)")
    out.append("")
    head = ["dataset", "engine", "gpu", "family", "regime", *stat_h] + (["held-out median"] if hold else [])
    rows = []
    for e in d["subsets"]:
        r = [e["dataset"], e["engine"], e["gpu"], e["family"], e["regime"], *_stats_cells(e["stats"])]
        if hold:
            r.append(_pct((e.get("holdout_stats") or {}).get("median_abs")))
        rows.append(r)
    out.append(_table(rows, head, md))
    if hold:
        out.append("")
        out.append(f"#### Hold-out: {hold}" if md else f"Hold-out: {hold}")
        out.extend(f"- {n}" for n in d["holdout_notes"])
    if d["not_scored"]:
        out.append("")
        out.append("#### Not scored" if md else "Not scored")
        out.append("")
        rows = [[e["dataset"], e["kind"], e["n"], e["reason"]] for e in d["not_scored"]]
        out.append(_table(rows, ["dataset", "kind", "rows", "reason"], md))
    out.append("")
    out.extend(f"- {n}" if md else n for n in d["notes"])
    out.append("")
    out.append(f"wall time {d['wall_s']:.1f} s")
    return "\n".join(out) + "\n"


def rows_csv(result: Any) -> str:
    """One line per measured row: inputs, measured, predicted, error, why not scored, the equivalent command."""
    rows = result.row_dicts()
    return csv_text(rows) if rows else ""
