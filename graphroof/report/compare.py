"""One model on several devices, side by side: time, bound and speed-up vs the first device."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tabulate import tabulate

from ..analysis import CONVENTIONS
from ..errors import ReportError
from ..units import fmt_bytes, fmt_flops, fmt_rate, fmt_time
from .content import fmt_ai, generated_stamp
from .markdown import md_escape
from .tables import csv_text

__all__ = ["Comparison", "compare", "render_compare", "COMPARE_FORMATS"]

COMPARE_FORMATS = ("terminal", "markdown", "json", "csv", "html")


@dataclass
class Comparison:
    model: str
    flops: float
    bytes: float
    rows: list[dict[str, Any]]
    notes: list[str]
    stamp: str


def _main_peak(a) -> tuple[str, float]:
    """The matrix peak most of the FLOPs ran on (the model's headline roof on this device)."""
    by_key: dict[str, float] = {}
    for r in a.ops:
        if r["matrix_flops"]:
            key = r["peak_used"].split("+")[0]
            by_key[key] = by_key.get(key, 0.0) + r["matrix_flops"]
    if by_key:
        key = max(by_key, key=lambda k: by_key[k])
        return key, a.peaks_used().get(key, 0.0)
    peaks = a.peaks_used()
    if peaks:
        key = max(peaks, key=lambda k: peaks[k])
        return key, peaks[key]
    return "-", 0.0


def compare(analyses: list) -> Comparison:
    """Rows for the same model analysed on several devices (first = the baseline of the speed-ups)."""
    if not analyses:
        raise ReportError("compare needs at least one hardware profile")
    base = analyses[0].totals
    rows = []
    for a in analyses:
        t = a.totals
        key, peak = _main_peak(a)
        compute_share = sum(r["share"] for r in a.ops if r["bound"] == "compute")
        rows.append({
            "hardware": a.hw.label, "profile": a.hw.name, "time_s": t.t_lower_s,
            "time_realistic_s": t.t_realistic_s, "time_upper_s": t.t_upper_s, "bound": t.bound,
            "speedup": base.t_lower_s / t.t_lower_s if t.t_lower_s else None,
            "speedup_realistic": base.t_realistic_s / t.t_realistic_s if t.t_realistic_s else None,
            "compute_bound_share": compute_share, "mem_bw_bytes_per_s": a.hw.mem_bw_bytes_per_s,
            "peak_key": key, "peak_flops_per_s": peak, "ridge_flop_per_byte": peak / a.hw.mem_bw_bytes_per_s,
        })
    a0 = analyses[0]
    notes = [CONVENTIONS, a0.summary.coverage_line(),
             f"speed-up = time on {a0.hw.label} / time on the device (roofline lower bound; realistic uses each "
             "profile's efficiencies and launch overhead)",
             "compute-bound share = share of the roofline time spent in compute-bound ops"]
    return Comparison(a0.model_name, a0.totals.cost.flops, a0.totals.cost.bytes, rows, notes, generated_stamp())


def _text_rows(c: Comparison, esc=lambda s: s) -> list[list[str]]:
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


def render_compare(c: Comparison, fmt: str = "terminal") -> str:
    if fmt == "json":
        return json.dumps({"model": c.model, "flops": c.flops, "bytes": c.bytes, "devices": c.rows,
                           "notes": c.notes}, indent=2) + "\n"
    if fmt == "csv":
        return csv_text([{"model": c.model, "flops": c.flops, "bytes": c.bytes, **r} for r in c.rows])
    if fmt == "html":
        from .html import render_compare_html

        return render_compare_html(c, HEADERS, _text_rows(c))
    if fmt == "markdown":
        out = [f"# graphroof compare: {md_escape(c.model)}", "", f"_{md_escape(c.stamp)}_", "",
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
