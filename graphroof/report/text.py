"""Terminal renderer (tabulate) over the Analysis rows; ``markdown=True`` hands over to :mod:`.markdown`."""

from __future__ import annotations

from ..units import fmt_bytes, fmt_flops, fmt_rate, fmt_time
from .columns import KERNEL_LEAD, LAYER_LEAD, ROOF_COLUMNS, Column, col, fmt_ai_terminal, table

__all__ = ["render", "layer_table", "op_table", "kernel_table", "header_lines", "footer_lines", "runtime_line",
           "time_line", "memory_line"]

#: Leading columns of the op table (the roofline columns follow: :data:`.columns.ROOF_COLUMNS`).
OP_LEAD = (Column("op", lambda r: r.get("label", r["name"]), "name"), Column("module", lambda r: r.get("module") or r["scope"] or "(top)", "scope"),
           col("type", "op"), col("dtype", "dtype"))


def layer_table(rows: list[dict], markdown: bool) -> str:
    return table(rows, (*LAYER_LEAD, *ROOF_COLUMNS), "markdown" if markdown else "terminal")


def op_table(rows: list[dict], markdown: bool, top: int | None = None) -> str:
    rows = sorted(rows, key=lambda r: -r["time_s"])[:top] if top else rows
    return table(rows, (*OP_LEAD, *ROOF_COLUMNS), "markdown" if markdown else "terminal")


def header_lines(a) -> list[str]:
    h = a.header()
    peaks = ", ".join(f"{k} {fmt_rate(v)}" for k, v in h["peaks_used_flops_per_s"].items()) or "-"
    ridges = ", ".join(f"{k} {v:.1f}" for k, v in h["ridge_points_flop_per_byte"].items()) or "-"
    dims = ", ".join(f"{k}={v}" for k, v in h["dims"].items())
    lines = [
        f"model: {h['model']}" + (f" ({dims})" if dims else "") + (f"; capture: {h['capture']}" if h["capture"] else ""),
        f"hardware: {h['hardware']}" + (f" ({h['hardware_timing_origin']} timing constants)"
                                        if h.get("hardware_timing_origin") else "")
        + f"; memory bandwidth {fmt_rate(h['mem_bw_bytes_per_s'], 'B/s')}; peaks used: {peaks}",
        f"ridge point (FLOP/byte): {ridges}",
        runtime_line(a),
        f"conventions: {h['conventions']}",
    ]
    return lines


def runtime_line(a) -> str:
    """``runtime preset: compiled (1752 ops -> 357 kernels); eager (one kernel per op): ...``."""
    e = a.eager_totals
    return (f"runtime preset: {a.runtime} ({len(a.graph)} ops -> {len(a.timed_graph)} kernels); eager, one "
            f"kernel per op: roofline {fmt_time(e.t_lower_s)}, realistic {fmt_time(e.t_realistic_s)}")


def time_line(a) -> str:
    """The totals' times, each named for what it is, and the parts of the realistic time."""
    t, p = a.totals, a.time_parts()
    coll = f", collectives {fmt_time(p['time_collectives_s'])} of it" if p["time_collectives_s"] else ""
    return (f"time: floor {fmt_time(p['time_floor_s'])} (max(Σ Tc, Σ Tm) over kernels); roofline "
            f"{fmt_time(t.time_roofline_s)} (Σ max(Tc, Tm) per kernel); no overlap {fmt_time(t.t_upper_s)} (Σ Tc + Tm); "
            f"realistic {fmt_time(t.t_realistic_s)} = roofline + derating {fmt_time(p['time_derating_s'])} + launch "
            f"{fmt_time(p['time_launch_s'])} ({p['n_kernels']} kernels){coll}; overall {t.bound}-bound{band_text(a)}")


def band_text(a) -> str:
    """``; error band 0.5 ms - 1.1 ms (vision-latency, within a factor ... )`` for the realistic total."""
    b = getattr(a, "band", None)
    if b is None:
        return ""
    t = a.totals.t_realistic_s
    return f"; realistic error band {fmt_time(b.low(t))} - {fmt_time(b.high(t))} ({b.figure}: {b.describe()})"


def memory_line(a) -> str:
    """``memory: weights 138 GB + peak activations 1.07 GB = 139 GB of 80.0 GB on H100: does not fit``."""
    m = a.memory_fit()
    if not m["weight_bytes"] and not m["activation_peak_bytes"]:
        return ""  # an op table: no tensors to hold
    head = (f"memory: weights {fmt_bytes(m['weight_bytes'])} + peak activations "
            f"{fmt_bytes(m['activation_peak_bytes'])} = {fmt_bytes(m['total_bytes'])}")
    if m["fits"] is None:
        return head + f" ({a.hw.name} lists no memory capacity)"
    verdict = "fits" if m["fits"] else "DOES NOT FIT (split it: graphroof llm --tp N, or a larger device)"
    return head + f" of {fmt_bytes(m['capacity_bytes'])} on {a.hw.name}: {verdict}"


def kernel_table(rows: list[dict], markdown: bool, top: int | None = None) -> str:
    rows = sorted(rows, key=lambda r: -r["time_realistic_s"])[:top] if top else rows
    return table(rows, (*KERNEL_LEAD, *ROOF_COLUMNS), "markdown" if markdown else "terminal")


def footer_lines(a) -> list[str]:
    t = a.totals
    c = t.cost
    lines = [
        f"total: {fmt_flops(c.flops)} (matrix {fmt_flops(c.matrix_flops)}, vector {fmt_flops(c.vector_flops)}); "
        f"{fmt_bytes(c.bytes)} (weights {fmt_bytes(c.weight_bytes)}, activations {fmt_bytes(c.act_bytes)}, "
        f"KV {fmt_bytes(c.kv_bytes)}); AI {fmt_ai_terminal(c.intensity)} FLOP/B",
        time_line(a),
    ]
    mem = memory_line(a)
    if mem:
        lines.append(mem)
    if c.net_bytes:
        lines.append(f"network: {fmt_bytes(c.net_bytes)} over {a.hw.interconnect_name or 'interconnect'}, "
                     f"{fmt_time(t.t_network_s)}")
    for n in a.notes():
        lines.append(f"note: {n}")
    if any(r.get("estimated") for r in a.ops):
        lines.append("note: * = estimated (no exact rule; bytes-only or approximate count)")
    return lines


def render(a, markdown: bool = False, ops: bool = False, top: int | None = None, kernels: bool = False,
           fold: bool = True) -> str:
    """The whole report: header, layer table, optional op table, footer."""
    if markdown:  # the full markdown report (same content as the HTML one) lives in markdown.py
        from .markdown import render_markdown

        return render_markdown(a, ops=ops, top=top, fold=fold)
    out: list[str] = []
    out.extend(header_lines(a))
    out.append("")
    out.append(layer_table(a.layer_table(fold), False))
    if kernels:
        out.append("")
        out.append(kernel_table(a.kernel_table(fold), False, top))
    if ops:
        out.append("")
        out.append(op_table(a.op_table(fold), False, top))
    out.append("")
    out.extend(footer_lines(a))
    steps = [it["text"] for it in a.next_steps]
    if steps:
        out += ["", "next steps:", *(f"  - {s}" for s in steps)]
    return "\n".join(out) + "\n"
