"""Terminal / markdown rendering of a measured run (:class:`graphroof.measure.run.MeasuredComparison`)."""

from __future__ import annotations

from ..units import fmt_time
from .columns import MEASURED_COLUMNS, Column, col, fmt_pct, fmt_ratio, table
from .text import header_lines

__all__ = ["render_measured", "summary_lines", "layer_table", "op_table", "LAYER_LEAD", "OP_LEAD"]

#: Leading columns of the measured layer and op tables (the predicted-vs-measured columns follow).
LAYER_LEAD = (col("layer", "name"), Column("matched", lambda r: f"{r['n_matched']}/{r['n_work_ops']}", "n_matched"))
OP_LEAD = (col("op", "name"), col("kind", "op"), Column("matched by", lambda r: r["matched_by"] or "-", "matched_by"))


def layer_table(c, markdown: bool) -> str:
    return table(c.layers, (*LAYER_LEAD, *MEASURED_COLUMNS), "markdown" if markdown else "terminal")


def op_table(c, markdown: bool, top: int | None) -> str:
    rows = sorted(c.ops, key=lambda r: -(r["measured_s"] or 0.0))
    rows = rows[:top] if top else rows
    return table(rows, (*OP_LEAD, *MEASURED_COLUMNS), "markdown" if markdown else "terminal")


def summary_lines(c) -> list[str]:
    s = c.summary
    out = [
        f"whole model: predicted {fmt_time(s['predicted_s'])} (roofline), {fmt_time(s['predicted_realistic_s'])} "
        f"(realistic); measured {fmt_time(s['measured_wall_s'])} (median forward pass, no profiler), "
        f"{fmt_time(s['measured_profiled_s'])} under the profiler; measured / predicted = {fmt_ratio(s['ratio'])} "
        f"(roofline), {fmt_ratio(s['ratio_realistic'])} (realistic)",
        f"per-layer measured / predicted over {s['n_layers']} layers: median {fmt_ratio(s['layer_ratio_median'])}, "
        f"p90 {fmt_ratio(s['layer_ratio_p90'])} (roofline); median {fmt_ratio(s['layer_ratio_realistic_median'])}, "
        f"p90 {fmt_ratio(s['layer_ratio_realistic_p90'])} (realistic)",
        f"bound attribution: {fmt_pct(s['bound_correct_share'])} of measured layer time is in layers whose measured "
        f"bound matches the prediction; {fmt_pct(s['bound_wrong_share'])} ran nearer the other roof; "
        f"{fmt_pct(s['bound_overhead_share'])} ran > {s['overhead_factor']:g}x slower than the roofline (overhead)",
        f"mapping: {s['n_matched']}/{s['n_work_nodes']} nodes with work got a measured time ("
        + ", ".join(f"{k} {v}" for k, v in sorted(s["matched_by"].items())) + f"); {s['n_unmatched']} unmatched "
        f"(predicted {fmt_time(s['unmatched_predicted_s'])}, {fmt_pct(s['unmatched_predicted_s'] / (s['predicted_s'] or 1))} "
        "of the prediction); "
        f"measured op time {fmt_time(s['matched_op_time_s'])} mapped, {fmt_time(s['unmatched_event_time_s'])} in "
        "runtime ops no node maps to (per forward pass)",
    ]
    if s.get("measured_wall_min_s") is not None:
        sp = s.get("measured_wall_spread")
        out.insert(1, f"run to run ({s['n_wall_runs']} forward passes, no profiler): min "
                   f"{fmt_time(s['measured_wall_min_s'])}, median {fmt_time(s['measured_wall_s'])}, max "
                   f"{fmt_time(s['measured_wall_max_s'])}; spread (max - min) / median "
                   + (f"{100 * sp:.0f}%" if sp is not None else "-"))
    bad = s.get("bad_profile")
    if bad:
        out.insert(0, f"WARNING: {bad['message']}")
    for w in reversed(s.get("warnings") or []):
        out.insert(0, f"WARNING: {w}")
    return out


def render_measured(c, markdown: bool = False, ops: bool = False, top: int | None = None) -> str:
    out: list[str] = []
    head = [*header_lines(c.a), f"measured on: {c.summary['runtime']}"]
    if markdown:
        out.append(f"# graphroof profile: {c.a.model_name} on {c.a.hw.label}\n")
        out.extend(f"- {ln}" for ln in head)
        out += ["\n## Layers: predicted vs measured\n", layer_table(c, True)]
        if ops:
            out += ["\n## Ops\n", op_table(c, True, top)]
        out.append("\n## Summary\n")
        out.extend(f"- {ln}" for ln in summary_lines(c))
    else:
        out += [*head, "", layer_table(c, False)]
        if ops:
            out += ["", op_table(c, False, top)]
        out += ["", *summary_lines(c)]
    unm = c.unmatched
    bullet = "- " if markdown else ""
    if unm:
        names = ", ".join(unm[:12]) + (f" ... (+{len(unm) - 12})" if len(unm) > 12 else "")
        out.append(f"{bullet}unmatched nodes (no measured op found): {names}")
    ev = c.m.unmatched_events()[:8]
    if ev:
        out.append(f"{bullet}slowest unmatched runtime ops: " + ", ".join(
            f"{e['op']}@{e['scope'] or '(top)'} {fmt_time(e['time_s'])}" for e in ev))
    for n in c.m.notes:
        out.append(f"{bullet}note: {n}")
    out.append(f"{bullet}definitions (`graphroof profile --help`): measured bound = overhead when > "
               f"{c.k:g}x the roofline time, else the predicted term (Tc or Tm) nearest the measured time")
    return "\n".join(out) + "\n"
