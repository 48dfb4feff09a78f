"""Renderers of a serving comparison (``graphroof.serving.compare.ServeComparison``: one traffic on several
devices, TP degrees and dtypes): a summary table with one row per configuration (max sustainable rate under the
SLOs, best output tokens/s per GPU among the rates that meet them, replicas, GPUs and $ per million output tokens
for a target rate), then every configuration's own report (:mod:`.serve`); CSV: every request of every
configuration with its configuration's columns; HTML: the summary and each configuration's page.

Read from the comparison's plain data: no engine, no simulator imported.
"""

from __future__ import annotations

from typing import Any

from .columns import Column, table
from .serve import get, num, rate_str, records_rows, render_serve
from .serve_bands import range_text
from .tables import csv_text

__all__ = ["render_serve_comparison"]


def _label(row: dict[str, Any]) -> str:
    dt = " ".join(f"{k}={row[k]}" for k in ("weights", "kv") if row.get(k)) or "native"
    return f"{row.get('config') or row['hw'] + ' tp' + str(row['tp'])} {dt}"


def _opt(v: Any, spec: str = "{:,.1f}") -> str:
    return "-" if v is None else num(v, spec)


SUMMARY = (
    Column("configuration", _label),
    Column("GPUs / replica", lambda r: str(r.get("gpus_per_group") or r["tp"])),
    Column("max rate req/s", lambda r: _opt(r["max_rate_rps"], "{:,.2f}")),
    Column("binding SLO", lambda r: r["binding_slo"] or "-"),
    Column("best out tok/s/GPU (SLO met)", lambda r: _opt(r["best_output_tokens_per_s_per_gpu"])),
    Column("replicas", lambda r: _opt(r["replicas_needed"], "{:,.0f}")),
    Column("GPUs", lambda r: _opt(r["gpus"], "{:,.0f}")),
    Column("$ / M out tok", lambda r: _opt(r["usd_per_million_tokens"], "{:,.3f}")),
)

#: the error-band ranges of a row (ServeComparison.rows: from each result's bands), shown when any row has them
BAND_COLUMNS = (
    Column("max rate range", lambda r: range_text(r.get("max_rate_rps_low"), r.get("max_rate_rps_high"), rate_str)),
    Column("tok/s/GPU range", lambda r: range_text(r.get("best_output_tokens_per_s_per_gpu_low"),
                                                   r.get("best_output_tokens_per_s_per_gpu_high"),
                                                   lambda v: f"{v:,.1f}")),
)


def summary_columns(rows: list[dict[str, Any]]) -> tuple[Column, ...]:
    banded = any(r.get(k) is not None for r in rows for k in ("max_rate_rps_low", "best_output_tokens_per_s_per_gpu_low"))
    return SUMMARY + (BAND_COLUMNS if banded else ())


def render_serve_comparison(c: Any, fmt: str = "terminal") -> str:
    """*c* in ``terminal`` | ``markdown`` | ``csv`` | ``html``."""
    rows = c.rows()
    results = get(c, "results") or []
    if fmt == "csv":
        out = []
        for row, r in zip(rows, results):
            cfg = {"hw": row["hw"], "tp": row["tp"], "weights": row["weights"], "kv": row["kv"]}
            out += [{**cfg, **rec, "configuration": _label(row)} for rec in records_rows(r)]
        cols = list(dict.fromkeys(k for row in out for k in row))  # a disaggregated run adds transfer columns
        return csv_text(out, cols)
    if fmt == "html":
        return _html(c, rows, results)
    md = fmt == "markdown"
    lines = [f"{'# ' if md else ''}serve comparison: {get(c, 'model')}, {len(rows)} configurations on the same "
             "requests", ""]
    lines += [table(rows, summary_columns(rows), "markdown" if md else "terminal"), ""]
    for row, r in zip(rows, results):
        lines += [f"{'## ' if md else '== '}{_label(row)}", "", render_serve(r, fmt)]
    return "\n".join(lines)


def _html(c: Any, rows: list[dict[str, Any]], results: list[Any]) -> str:
    from .html import html_fragment
    from .serve_html import render_serve_html

    parts = [f"<h1>serve comparison: {_esc(get(c, 'model'))}</h1>",
             f"<p>{len(rows)} configurations on the same requests.</p>",
             _html_table(rows)]
    for row, r in zip(rows, results):
        parts += [f"<h2>{_esc(_label(row))}</h2>", html_fragment(render_serve_html(r))]
    body = "\n".join(parts)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>serve comparison: {_esc(get(c, 'model'))}</title></head><body>\n{body}\n</body></html>\n")


def _html_table(rows: list[dict[str, Any]]) -> str:
    cols = summary_columns(rows)
    head = "".join(f"<th>{_esc(c.header)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c.cell(r, 'terminal'))}</td>" for c in cols) + "</tr>"
                   for r in rows)
    return f'<table class="serve-comparison"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _esc(s: Any) -> str:
    import html

    return html.escape(str(s))
