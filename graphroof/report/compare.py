"""``graphroof compare``: one model on several devices (:class:`graphroof.analysis.DeviceComparison`) as a table."""

from __future__ import annotations

from ..analysis import DeviceComparison
from ..errors import ReportError
from ..units import fmt_bytes, fmt_flops
from .columns import COMPARE_COLUMNS, table
from .content import generated_stamp
from .markdown import md_escape
from .tables import csv_text

__all__ = ["render_compare", "COMPARE_FORMATS"]

COMPARE_FORMATS = ("terminal", "markdown", "json", "csv", "html")


def render_compare(c: DeviceComparison, fmt: str = "terminal") -> str:
    if fmt == "json":
        return c.to_json() + "\n"
    if fmt == "csv":
        return csv_text([{"model": c.model, "flops": c.flops, "bytes": c.bytes, **r} for r in c.rows])
    if fmt == "html":
        from .html import render_compare_html

        return render_compare_html(c, generated_stamp())
    if fmt == "markdown":
        out = [f"# graphroof compare: {md_escape(c.model)}", "", f"_{md_escape(generated_stamp())}_", "",
               f"- **model**: {md_escape(c.model)}: {fmt_flops(c.flops)}, {fmt_bytes(c.bytes)}", "",
               table(c.rows, COMPARE_COLUMNS, "markdown", esc=md_escape), ""]
        out += [f"- {md_escape(n)}" for n in c.notes]
        return "\n".join(out) + "\n"
    if fmt == "terminal":
        out = [f"model: {c.model}: {fmt_flops(c.flops)}, {fmt_bytes(c.bytes)}", "",
               table(c.rows, COMPARE_COLUMNS, "terminal"), ""]
        out += [f"note: {n}" for n in c.notes]
        return "\n".join(out) + "\n"
    raise ReportError(f"unknown format {fmt!r}; use one of: {', '.join(COMPARE_FORMATS)}")
