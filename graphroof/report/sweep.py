"""Renderers of an LLM sweep (:class:`~graphroof.sweeps.SweepResult`): terminal / markdown tables, CSV, and
the throughput-latency frontier chart (one curve per device, points labelled batch / TP / dtype) as a
self-contained HTML page (inline SVG) or a PNG (matplotlib).  JSON is the result's ``to_json()``."""

from __future__ import annotations

import html
from collections.abc import Sequence

from ..errors import ReportError
from ..units import fmt_bytes, fmt_time
from .columns import Column, table
from .llm import fmt_energy as _energy
from .sweep_html import batch_sweep_html, llm_sweep_html, nice_ticks, tick_label
from .tables import csv_text

__all__ = ["render_sweep", "render_batch_sweep", "frontier_svg", "frontier_png", "Curve"]

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def _num(v: float | None, spec: str = "{:,.1f}") -> str:
    return "-" if v is None else spec.format(v)


def _fits(v: bool | None) -> str:
    return {True: "yes", False: "NO", None: "?"}[v]


def _columns(r, marks: dict[int, str]) -> tuple[Column, ...]:
    priced = any(p.usd_per_hour is not None for p in r.points)
    many = len(r.devices) > 1
    cols = [Column("", lambda p: marks.get(id(p), ""))]
    if many:
        cols.append(Column("device", lambda p: p.hw))
    cols += [Column("batch", lambda p: p.batch), Column("prompt", lambda p: p.prompt), Column("gen", lambda p: p.gen),
             Column("TP", lambda p: p.tp), Column("dtype", lambda p: p.dtype),
             Column("TTFT", lambda p: fmt_time(p.ttft_s)), Column("TPOT", lambda p: fmt_time(p.tpot_s)),
             Column("tok/s/GPU", lambda p: _num(p.tokens_per_s_per_gpu)),
             Column("tok/s/user", lambda p: _num(p.tokens_per_s_per_user)),
             Column("memory", lambda p: fmt_bytes(p.memory_bytes)), Column("fits", lambda p: _fits(p.fits)),
             Column("bound", lambda p: f"{p.prefill_bound}/{p.decode_bound or '-'}")]
    if priced:
        cols.append(Column("$/Mtok", lambda p: _num(p.usd_per_million_tokens, "{:,.3g}")))
    cols += [Column("J/tok", lambda p: _energy(p.joules_per_token)),
             Column("tok/J", lambda p: _energy(p.tokens_per_joule))]
    return tuple(cols)



def _marks(r) -> dict[int, str]:
    out: dict[int, str] = {}
    for f in r.frontier().values():
        for p in f:
            out[id(p)] = "*"
    for p in r.best().values():
        if p is not None:
            out[id(p)] = out.get(id(p), "") + ">"
    return out


def _slo_text(r) -> str:
    parts = []
    if r.max_ttft_s is not None:
        parts.append(f"TTFT <= {fmt_time(r.max_ttft_s)}")
    if r.max_tpot_s is not None:
        parts.append(f"TPOT <= {fmt_time(r.max_tpot_s)}")
    return " and ".join(parts) or "no latency SLO"


def render_sweep(r, fmt: str = "terminal") -> str | bytes:
    """*r* in ``terminal`` | ``markdown`` | ``csv`` | ``html`` | ``png``."""
    if hasattr(r, "critical_batch"):
        return render_batch_sweep(r, fmt)
    if fmt == "csv":
        rows = [p.to_dict() for p in r.points]
        front = {id(p) for f in r.frontier().values() for p in f}
        best = {id(p) for p in r.best().values() if p is not None}
        for row, p in zip(rows, r.points):
            row["frontier"] = id(p) in front
            row["slo_pick"] = id(p) in best
        return csv_text(rows)
    if fmt in ("html", "png"):
        curves = llm_curves(r)
        title = f"{r.model}: throughput per GPU vs per-user speed"
        axes = ("output tokens/s per user (gen / e2e)", "output tokens/s per GPU")
        if fmt == "png":
            return frontier_png(curves, title, axes)
        return llm_sweep_html(r, frontier_svg(curves, title, axes), _marks(r), _slo_text(r))
    md = fmt == "markdown"
    marks = _marks(r)
    mode = "ideal roofline" if r.ideal else "realistic (profile efficiencies and launch overhead)"
    lines = [f"{'# ' if md else ''}sweep: {r.model}", "",
             f"{len(r.points)} points on {', '.join(r.hw_labels.values())}; {r.traces} traced graphs; "
             f"times {mode}", "",
             "tok/s/GPU = batch * gen / e2e / TP; tok/s/user = gen / e2e (TTFT included); "
             "`*` = on the device's Pareto frontier (fits, no point better on both); "
             f"`>` = the device's best point under {_slo_text(r)} (most tok/s/GPU); J/tok = board power x TP / "
             "(tok/s), an upper bound at full board power (n/a: the profile gives none); tok/J its inverse", ""]
    lines.append(table(r.points, _columns(r, marks), "markdown" if md else "terminal"))
    lines += ["", f"{'## ' if md else ''}best per device under {_slo_text(r)}", ""]
    for hw, p in r.best().items():
        if p is None:
            lines.append(f"{'- ' if md else ''}{hw}: no point fits and meets the SLO")
            continue
        cost = f", ${p.usd_per_million_tokens:,.3g} per million output tokens" if p.usd_per_hour is not None else ""
        cost += (f", at most {_energy(p.joules_per_token)} J per output token ({_energy(p.tokens_per_joule)} tok/J)"
                 if p.joules_per_token is not None else ", energy n/a (no board power in the profile)")
        origin = f" [{r.hw_origins[hw]}]" if getattr(r, "hw_origins", None) and hw in r.hw_origins else ""
        lines.append(f"{'- ' if md else ''}{hw}{origin}: batch {p.batch}, TP {p.tp}, {p.dtype}, prompt {p.prompt}, gen "
                     f"{p.gen}: TTFT {fmt_time(p.ttft_s)}, TPOT {fmt_time(p.tpot_s)}, "
                     f"{p.tokens_per_s_per_gpu:,.1f} tok/s/GPU, {p.tokens_per_s_per_user:,.1f} tok/s/user{cost}")
    top = r.best_overall() if hasattr(r, "best_overall") else None
    if top is not None and len(r.devices) > 1:
        note = r.origin_note(top)
        lines += ["", f"most tok/s/GPU under the SLO: {top.hw} ({top.label}), {top.tokens_per_s_per_gpu:,.1f} tok/s/GPU"
                  + (f" ({note})" if note else "")]
    cheap = r.cheapest()
    if cheap is not None:
        note = r.origin_note(cheap) if hasattr(r, "origin_note") else None
        lines += ["", f"cheapest under the SLO: {cheap.hw} ({cheap.label}), "
                      f"${cheap.usd_per_million_tokens:,.3g} per million output tokens" + (f" ({note})" if note else "")]
    bands = getattr(r, "bands", None) or {}
    if bands:
        lines += ["", "error bands (the factor within which 90% of graphroof validate's measured predictions of the "
                      "regime fell; fallback: no measured data): " + "; ".join(
                          f"{hw} TTFT {1 + b['ttft']['p90_abs']:.2f}x, TPOT {1 + b['tpot']['p90_abs']:.2f}x, tok/s "
                          f"{1 + b['throughput']['p90_abs']:.2f}x" + (" (fallback)" if b["tpot"].get("fallback") else "")
                          for hw, b in bands.items())]
    for n in r.notes:
        lines += ["", f"note: {n}"]
    return "\n".join(lines) + "\n"


def render_batch_sweep(r, fmt: str = "terminal") -> str | bytes:
    """A :class:`~graphroof.sweeps.BatchSweep`: one row per (device, batch), the compute-bound batch per device."""
    if fmt == "csv":
        return csv_text([p.to_dict() for p in r.points])
    if fmt in ("html", "png"):
        curves = [Curve(hw, [(p.t_s * 1e3, p.samples_per_s, p.label) for p in f],
                        [(p.t_s * 1e3, p.samples_per_s, p.label) for p in f]) for hw, f in r.frontier().items()]
        title = f"{r.model}: throughput vs latency over the batch"
        axes = ("latency of one batch (ms)", "samples/s")
        if fmt == "png":
            return frontier_png(curves, title, axes, log_x=True)
        return batch_sweep_html(r, frontier_svg(curves, title, axes))
    md = fmt == "markdown"
    many = len(r.devices) > 1
    cols = ([Column("device", lambda p: p.hw)] if many else []) + [
        Column("batch", lambda p: p.batch), Column("latency", lambda p: fmt_time(p.t_s)),
        Column("ideal", lambda p: fmt_time(p.t_ideal_s)), Column("samples/s", lambda p: _num(p.samples_per_s)),
        Column("compute", lambda p: fmt_time(p.t_compute_s)), Column("memory", lambda p: fmt_time(p.t_memory_s)),
        Column("bound", lambda p: p.bound)]
    mode = "ideal roofline" if r.ideal else "realistic (profile efficiencies and launch overhead)"
    lines = [f"{'# ' if md else ''}batch sweep: {r.model}", "",
             f"{len(r.points)} points on {', '.join(r.hw_labels.values())}; latency of one batch, {mode}; "
             "compute / memory: summed ideal times of the ops", "",
             table(r.points, cols, "markdown" if md else "terminal"), "",
             f"{'## ' if md else ''}compute-bound batch (summed compute time >= summed memory time; solved from "
             "the affine costs)", ""]
    for hw, c in r.critical_batch.items():
        exact = c.get("critical_batch_exact")
        val = (f"batch {c['critical_batch']} (exact {exact:.4g})" if c.get("critical_batch") is not None
               else "none")
        lines.append(f"{'- ' if md else ''}{hw}: {val}: {c['reason']}")
    for n in r.notes:
        lines += ["", f"note: {n}"]
    return "\n".join(lines) + "\n"


# -- the frontier chart --------------------------------------------------------------------------------------

class Curve:
    """One device: all its points (x, y, label) and the frontier among them (drawn as the line)."""

    def __init__(self, name: str, points: Sequence[tuple[float, float, str]],
                 frontier: Sequence[tuple[float, float, str]], pick: tuple[float, float, str] | None = None):
        self.name, self.points, self.frontier = name, list(points), list(frontier)
        #: the device's SLO pick (ringed on the chart), None when there is none
        self.pick = pick


def llm_curves(r) -> list[Curve]:
    out = []
    best = r.best()
    for hw, front in r.frontier().items():
        pts = [(p.tokens_per_s_per_user, p.tokens_per_s_per_gpu, p.label) for p in r.points
               if p.hw == hw and p.fits is not False]
        b = best.get(hw)
        pick = (b.tokens_per_s_per_user, b.tokens_per_s_per_gpu, b.label) if b is not None else None
        out.append(Curve(hw, pts, [(p.tokens_per_s_per_user, p.tokens_per_s_per_gpu, p.label) for p in front], pick))
    return out


def _span(vals: list[float]) -> tuple[float, float]:
    lo, hi = min(vals), max(vals)
    if hi <= lo:
        hi = lo * 1.1 + 1.0
    pad = (hi - lo) * 0.06
    return max(0.0, lo - pad), hi + pad


def frontier_svg(curves: Sequence[Curve], title: str, axes: tuple[str, str], w: int = 820, h: int = 520) -> str:
    """An inline SVG: every point as a dot, each device's frontier as a labelled line."""
    pts = [p for c in curves for p in c.points]
    if not pts:
        raise ReportError("nothing to chart: no point fits in memory on any device")
    x0, x1 = _span([p[0] for p in pts])
    y0, y1 = _span([p[1] for p in pts])
    L, R, T, B = 80, 180, 40, 60

    def sx(x):
        return L + (x - x0) / (x1 - x0) * (w - L - R)

    def sy(y):
        return h - B - (y - y0) / (y1 - y0) * (h - T - B)

    e = html.escape
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
           f'font-size="11">', f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">{e(title)}</text>',
           f'<line x1="{L}" y1="{h - B}" x2="{w - R}" y2="{h - B}" stroke="#000"/>',
           f'<line x1="{L}" y1="{T}" x2="{L}" y2="{h - B}" stroke="#000"/>',
           f'<text x="{(L + w - R) / 2}" y="{h - 15}" text-anchor="middle">{e(axes[0])}</text>',
           f'<text transform="translate(18 {(T + h - B) / 2}) rotate(-90)" text-anchor="middle">{e(axes[1])}</text>']
    for xv in nice_ticks(x0, x1):
        out.append(f'<line x1="{sx(xv):.1f}" y1="{h - B}" x2="{sx(xv):.1f}" y2="{h - B + 4}" stroke="#000"/>'
                   f'<text class="xtick" x="{sx(xv):.1f}" y="{h - B + 15}" text-anchor="middle">'
                   f"{tick_label(xv)}</text>")
    for yv in nice_ticks(y0, y1):
        out.append(f'<line x1="{L - 4}" y1="{sy(yv):.1f}" x2="{L}" y2="{sy(yv):.1f}" stroke="#000"/>'
                   f'<text class="ytick" x="{L - 6}" y="{sy(yv) + 4:.1f}" text-anchor="end">{tick_label(yv)}</text>')
    for k, c in enumerate(curves):
        col = PALETTE[k % len(PALETTE)]
        for x, y, lab in c.points:
            out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{col}" fill-opacity="0.35">'
                       f'<title>{e(c.name)}: {e(lab)}</title></circle>')
        if c.frontier:
            path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y, _ in c.frontier)
            out.append(f'<polyline points="{path}" fill="none" stroke="{col}" stroke-width="2"/>')
            for x, y, lab in c.frontier:
                out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" fill="{col}"/>'
                           f'<text x="{sx(x) + 6:.1f}" y="{sy(y) - 6:.1f}" fill="{col}">{e(lab)}</text>')
        if c.pick is not None:
            x, y, lab = c.pick
            out.append(f'<g class="pick"><circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="9" fill="none" stroke="{col}" '
                       f'stroke-width="2.5"/><text x="{sx(x) + 12:.1f}" y="{sy(y) + 14:.1f}" fill="{col}" '
                       f'font-weight="bold">SLO pick</text><title>{e(c.name)}: SLO pick {e(lab)}</title></g>')
        out.append(f'<rect x="{w - R + 15}" y="{T + 18 * k}" width="12" height="12" fill="{col}"/>'
                   f'<text x="{w - R + 32}" y="{T + 18 * k + 10}">{e(c.name)}</text>')
    if any(c.pick is not None for c in curves):
        k = len(curves)
        out.append(f'<circle cx="{w - R + 21}" cy="{T + 18 * k + 6}" r="6" fill="none" stroke="#333" '
                   f'stroke-width="2"/><text x="{w - R + 32}" y="{T + 18 * k + 10}">SLO pick</text>')
    out.append("</svg>")
    return "\n".join(out)


def frontier_png(curves: Sequence[Curve], title: str, axes: tuple[str, str], log_x: bool = False) -> bytes:
    """The same chart as a PNG (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ReportError("the PNG chart needs matplotlib (pip install matplotlib); use --format html") from None
    import io

    if not any(c.points for c in curves):
        raise ReportError("nothing to chart: no point fits in memory on any device")
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=110)
    for k, c in enumerate(curves):
        col = PALETTE[k % len(PALETTE)]
        if c.points:
            ax.scatter([p[0] for p in c.points], [p[1] for p in c.points], s=10, color=col, alpha=0.35)
        if c.frontier:
            ax.plot([p[0] for p in c.frontier], [p[1] for p in c.frontier], "-o", color=col, ms=4, label=c.name)
            for x, y, lab in c.frontier:
                ax.annotate(lab, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7, color=col)
    if log_x:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(axes[0])
    ax.set_ylabel(axes[1])
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()
