"""``graphroof compare``: one model on several devices (:class:`graphroof.analysis.DeviceComparison`) as a table."""

from __future__ import annotations

from tabulate import tabulate

from ..analysis import DeviceComparison
from ..errors import ReportError
from ..units import fmt_bytes, fmt_flops, fmt_rate, fmt_time
from .content import fmt_ai, generated_stamp
from .markdown import md_escape
from .tables import csv_text

__all__ = ["render_compare", "COMPARE_FORMATS", "HEADERS"]

COMPARE_FORMATS = ("terminal", "markdown", "json", "csv", "html")


def _text_rows(c: DeviceComparison, esc=lambda s: s) -> list[list[str]]:
    out = []
    for r in c.rows:
        sp = "-" if r["speedup"] is None else f"{r['speedup']:.2f}x"
        spr = "-" if r["speedup_realistic"] is None else f"{r['speedup_realistic']:.2f}x"
        out.append([esc(r["hardware"]), fmt_time(r["time_s"]), fmt_time(r["time_realistic_s"]), r["bound"], sp, spr,
                    f"{100 * r['compute_bound_share']:.0f}%", fmt_rate(r["mem_bw_bytes_per_s"], "B/s"),
                    f"{esc(r['peak_key'])} {fmt_rate(r['peak_flops_per_s'])}", fmt_ai(r["ridge_flop_per_byte"])])
    return out


HEADERS = ["hardware", "time", "realistic", "bound", "speed-up", "realistic speed-up", "compute-bound share",
           "memory bw", "matrix peak (dense)", "ridge (FLOP/B)"]


def render_compare(c: DeviceComparison, fmt: str = "terminal") -> str:
    if fmt == "json":
        return c.to_json() + "\n"
    if fmt == "csv":
        return csv_text([{"model": c.model, "flops": c.flops, "bytes": c.bytes, **r} for r in c.rows])
    if fmt == "html":
        from .html import render_compare_html

        return render_compare_html(c, HEADERS, _text_rows(c), generated_stamp())
    if fmt == "markdown":
        out = [f"# graphroof compare: {md_escape(c.model)}", "", f"_{md_escape(generated_stamp())}_", "",
               f"- **model**: {md_escape(c.model)}: {fmt_flops(c.flops)}, {fmt_bytes(c.bytes)}", "",
               tabulate(_text_rows(c, md_escape), headers=HEADERS, tablefmt="github", disable_numparse=True), ""]
        out += [f"- {md_escape(n)}" for n in c.notes]
        return "\n".join(out) + "\n"
    if fmt == "terminal":
        out = [f"model: {c.model}: {fmt_flops(c.flops)}, {fmt_bytes(c.bytes)}", "",
               tabulate(_text_rows(c), headers=HEADERS, disable_numparse=True), ""]
        out += [f"note: {n}" for n in c.notes]
        return "\n".join(out) + "\n"
    raise ReportError(f"unknown format {fmt!r}; use one of: {', '.join(COMPARE_FORMATS)}")
