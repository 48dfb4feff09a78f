"""``graphroof serve -f html``: one self-contained page (inline SVG, a few lines of inline script, no network).

Sections: the header facts; TTFT and TPOT percentiles (p50 / p90 / p99) against the offered rate with the SLO
drawn as a dashed red line; completed requests/s and goodput against the offered rate (the diagonal = every
request served); the timeline of one rate (running and waiting sequences, KV-cache use); the rate table
(sortable: click a header); the maximum sustainable rate, the replicas; notes.  Every text is escaped.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from typing import Any

from ..units import fmt_time
from .columns import Column
from .content import generated_stamp
from .serve import (
    get,
    has_slo,
    header_lines,
    max_rate_text,
    num,
    pct,
    rate_str,
    replicas_text,
    serve_band_line,
    serve_columns,
    slo_text,
)
from .serve_bands import RANGE_VALUES, range_columns
from .sweep_html import _JS as SORT_JS
from .sweep_html import nice_ticks, sortable_table, tick_label

__all__ = ["render_serve_html", "line_chart", "Series", "MAX_TIMELINE_POINTS"]

#: The timeline is drawn from at most this many points (min and max of each bucket kept: no spike is lost).
MAX_TIMELINE_POINTS = 1200

_CSS = """
body { font: 14px system-ui, sans-serif; margin: 24px auto; max-width: 1320px; color: #222; padding: 0 16px; }
h1 { font-size: 20px; } h2 { font-size: 16px; border-bottom: 1px solid #ddd; padding-bottom: 4px; margin-top: 28px; }
.muted { color: #666; font-size: 12px; } ul.facts { list-style: none; padding: 0; } ul.facts li { margin: 2px 0; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; } figure { margin: 4px 0; } figure svg { max-width: 100%; height: auto; }
svg text { font: 11px system-ui, sans-serif; fill: #333; } svg .axis { stroke: #666; fill: none; }
svg .grid { stroke: #eee; } svg .slo { stroke: #c00; stroke-dasharray: 6 4; stroke-width: 1.5; }
svg .maxrate { stroke: #2ca02c; stroke-dasharray: 3 3; stroke-width: 1.5; }
.wrap { overflow-x: auto; max-width: 100%; } .key { font-weight: 600; }
table.sweep { border-collapse: collapse; font-size: 12px; margin: 8px 0; }
table.sweep th, table.sweep td { padding: 3px 5px; text-align: right; white-space: nowrap; }
table.sweep th { background: #f3f4f6; cursor: pointer; user-select: none; }
table.sweep th[aria-sort=ascending]::after { content: " \\25B2"; }
table.sweep th[aria-sort=descending]::after { content: " \\25BC"; }
table.sweep tr:nth-child(even) td { background: #fafafa; } table.sweep tr.miss td { color: #b00; }
"""

_JS = SORT_JS  # the sweep page's sortable tables (same table class)

PCT_STYLE = {"p50": ("#0072B2", ""), "p90": ("#E69F00", "6 3"), "p99": ("#D55E00", "2 2")}


class Series:
    """One line: *name*, x and y values (None = no point), colour and dash pattern."""

    def __init__(self, name: str, xs: Sequence[float], ys: Sequence[float | None], color: str, dash: str = "",
                 markers: bool = True):
        self.name, self.xs, self.ys, self.color, self.dash, self.markers = name, list(xs), list(ys), color, dash, markers


def _log_ticks(lo: float, hi: float) -> list[float]:
    out = []
    for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10.0 ** k
            if lo * 0.999 <= v <= hi * 1.001:
                out.append(v)
    return out


def _wants_log(vals: Sequence[float], ratio: float) -> bool:
    return bool(vals) and min(vals) > 0 and max(vals) / min(vals) >= ratio


def line_chart(series: Sequence[Series], *, title: str, x_label: str, y_label: str, css_id: str,
               y_fmt=tick_label, log_x: bool | None = None, log_y: bool | None = None,
               hlines: Sequence[tuple[float, str, str]] = (), vlines: Sequence[tuple[float, str, str]] = (),
               y_floor: float | None = None, w: int = 570, h: int = 320) -> str:
    """An inline SVG line chart.  *hlines* / *vlines*: (value, label, css class) reference lines (the SLO, the
    maximum rate).  Log axes are chosen when the values span a wide range (or forced by *log_x* / *log_y*)."""
    e = html.escape
    xs = [x for s in series for x, y in zip(s.xs, s.ys) if y is not None]
    ys = [y for s in series for y in s.ys if y is not None] + [v for v, _, _ in hlines]
    xs += [v for v, _, _ in vlines]
    if y_floor is not None:
        ys.append(y_floor)
    if not xs or not ys:
        return f'<svg id="{e(css_id)}" xmlns="http://www.w3.org/2000/svg" width="{w}" height="40"><text x="8" ' \
               f'y="24">{e(title)}: no data</text></svg>'
    lx = _wants_log(xs, 8) if log_x is None else log_x and min(xs) > 0
    ly = _wants_log([y for y in ys if y > 0], 30) if log_y is None else log_y
    if ly:
        ys = [y for y in ys if y > 0] or [1.0]
    L, R, T, B = 66, 16, 44, 44

    def span(vals: list[float], log: bool) -> tuple[float, float]:
        lo, hi = min(vals), max(vals)
        if log:
            lo, hi = math.log10(lo), math.log10(hi)
        if hi <= lo:
            lo, hi = (lo - 0.5, hi + 0.5) if log else (lo - abs(lo) * 0.1 - 1 if lo else 0.0, hi * 1.1 + 1)
        pad = (hi - lo) * 0.05
        return (lo - pad, hi + pad) if log else (max(0.0, lo - pad) if lo >= 0 else lo - pad, hi + pad)

    x0, x1 = span(xs, lx)
    y0, y1 = span(ys, ly)

    def sx(x: float) -> float:
        v = math.log10(x) if lx else x
        return L + (v - x0) / (x1 - x0) * (w - L - R)

    def sy(y: float) -> float:
        v = math.log10(max(y, 1e-300)) if ly else y
        return h - B - (v - y0) / (y1 - y0) * (h - T - B)

    out = [f'<svg id="{e(css_id)}" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
           f'aria-label="{e(title)}">', f'<text x="{w / 2}" y="16" text-anchor="middle" font-size="13">{e(title)}</text>']
    xt = _log_ticks(10 ** x0, 10 ** x1) if lx else nice_ticks(x0, x1)
    yt = _log_ticks(10 ** y0, 10 ** y1) if ly else nice_ticks(y0, y1, 5)
    for v in yt:
        out.append(f'<line class="grid" x1="{L}" x2="{w - R}" y1="{sy(v):.1f}" y2="{sy(v):.1f}"/>'
                   f'<text class="ytick" x="{L - 5}" y="{sy(v) + 4:.1f}" text-anchor="end">{e(y_fmt(v))}</text>')
    for v in xt:
        out.append(f'<line class="axis" x1="{sx(v):.1f}" x2="{sx(v):.1f}" y1="{h - B}" y2="{h - B + 4}"/>'
                   f'<text class="xtick" x="{sx(v):.1f}" y="{h - B + 16}" text-anchor="middle">{tick_label(v)}</text>')
    out += [f'<path class="axis" d="M{L},{T} V{h - B} H{w - R}"/>',
            f'<text x="{(L + w - R) / 2}" y="{h - 8}" text-anchor="middle">{e(x_label)}{" (log)" if lx else ""}</text>',
            f'<text transform="translate(14 {(T + h - B) / 2}) rotate(-90)" text-anchor="middle">{e(y_label)}'
            f'{" (log)" if ly else ""}</text>']
    for v, label, cls in hlines:
        out.append(f'<g class="ref"><line class="{cls}" x1="{L}" x2="{w - R}" y1="{sy(v):.1f}" y2="{sy(v):.1f}"/>'
                   f'<text x="{w - R - 4}" y="{sy(v) - 4:.1f}" text-anchor="end" style="fill:#c00">{e(label)}</text></g>')
    for v, label, cls in vlines:
        right = sx(v) > (L + w - R) / 2  # the label on the side with room
        out.append(f'<g class="ref"><line class="{cls}" x1="{sx(v):.1f}" x2="{sx(v):.1f}" y1="{T}" y2="{h - B}"/>'
                   f'<text x="{sx(v) + (-4 if right else 4):.1f}" y="{h - B - 6}" text-anchor="{"end" if right else "start"}" '
                   f'style="fill:#2ca02c">{e(label)}</text></g>')
    for k, s in enumerate(series):
        pts = [(sx(x), sy(y)) for x, y in zip(s.xs, s.ys) if y is not None and (not ly or y > 0)]
        if not pts:
            continue
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        out.append(f'<polyline class="series" points="{path}" fill="none" stroke="{s.color}" stroke-width="2"{dash}>'
                   f"<title>{e(s.name)}</title></polyline>")
        if s.markers:
            out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{s.color}"/>' for x, y in pts]
        lx0 = L + 10 + 110 * k
        out.append(f'<line x1="{lx0}" x2="{lx0 + 18}" y1="{T - 14}" y2="{T - 14}" stroke="{s.color}" stroke-width="2"'
                   f'{dash}/><text x="{lx0 + 22}" y="{T - 10}">{e(s.name)}</text>')
    out.append("</svg>")
    return "".join(out)


def _latency_chart(r: Any, metric: str, slo_key: str) -> str:
    pts = get(r, "points") or []
    rates = [float(get(p, "rate_rps")) for p in pts]
    series = [Series(q, rates, [pct(get(p, f"{metric.lower()}_s"), q) for p in pts], *PCT_STYLE[q]) for q in PCT_STYLE]
    s = get(r, "settings") or {}
    slo = s.get(slo_key)
    hl = [(float(slo), f"SLO {fmt_time(slo)}", "slo")] if slo is not None else []
    return line_chart(series, title=f"{metric} percentiles vs offered rate", x_label="offered rate (req/s)",
                      y_label=metric, css_id=f"chart-{metric.lower()}", y_fmt=fmt_time, hlines=hl,
                      vlines=_max_rate_line(r))


def _max_rate_line(r: Any) -> list[tuple[float, str, str]]:
    """The maximum rate as a vertical line, when it lies near the simulated rates (else only the text says it)."""
    m = get(r, "max_rate")
    rate = get(m, "rate_rps") if m else None
    rates = [float(get(p, "rate_rps")) for p in get(r, "points") or [] if get(p, "rate_rps") is not None]
    if rate is None or not rates or not min(rates) / 2 <= rate <= max(rates) * 2:
        return []
    return [(float(rate), f"max {rate_str(rate)} req/s", "maxrate")] if rate is not None else []


def _throughput_chart(r: Any) -> str:
    pts = get(r, "points") or []
    rates = [float(get(p, "rate_rps")) for p in pts]
    series = [Series("offered", rates, rates, "#999", "4 3", markers=False),
              Series("completed", rates, [get(p, "throughput_rps") for p in pts], "#0072B2")]
    if has_slo(r) and any(get(p, "goodput_rps") is not None for p in pts):
        series.append(Series("goodput", rates, [get(p, "goodput_rps") for p in pts], "#009E73", "6 3"))
    return line_chart(series, title="throughput vs offered rate", x_label="offered rate (req/s)",
                      y_label="requests/s", css_id="chart-throughput", log_x=None, log_y=False, y_floor=0.0,
                      vlines=_max_rate_line(r))


def _downsample(ts: list[float], cols: list[list[float]], limit: int) -> tuple[list[float], list[list[float]]]:
    """At most about *limit* points: per bucket the first time with each column's min and max (a spike stays)."""
    n = len(ts)
    if n <= limit:
        return ts, cols
    step = math.ceil(n / (limit / 2))
    out_t: list[float] = []
    out_c: list[list[float]] = [[] for _ in cols]
    for i in range(0, n, step):
        j = min(i + step, n)
        out_t += [ts[i], ts[j - 1]]
        for c, o in zip(cols, out_c):
            chunk = c[i:j]
            o += [min(chunk), max(chunk)]
    return out_t, out_c


def _timeline_charts(r: Any) -> tuple[str, str]:
    tl = get(r, "timeline") or {}
    ts = [float(x) for x in tl.get("time_s", [])]
    if not ts:
        return "", ""
    names = ("running", "waiting", "kv_used_fraction")
    cols = [[float(x) for x in tl.get(k, [0.0] * len(ts))] for k in names]
    ts, (run, wait, kv) = _downsample(ts, cols, MAX_TIMELINE_POINTS)
    batch = line_chart([Series("running", ts, run, "#0072B2", markers=False),
                        Series("waiting", ts, wait, "#E69F00", "5 3", markers=False)],
                       title="sequences in the engine", x_label="time (s)", y_label="sequences", css_id="timeline-batch",
                       log_x=False, log_y=False, y_floor=0.0, w=940, h=260)
    kvc = line_chart([Series("KV in use", ts, [100 * v for v in kv], "#D55E00", markers=False)],
                     title="KV-cache use", x_label="time (s)", y_label="% of KV blocks", css_id="timeline-kv",
                     log_x=False, log_y=False, y_floor=0.0, hlines=[(100.0, "capacity", "slo")], w=940, h=220)
    return batch, kvc


def _timeline_rate(r: Any) -> str:
    tl = get(r, "timeline") or {}
    for key in ("rate_rps", "rate"):
        v = tl.get(key)
        if isinstance(v, (int, float)):
            return f" at {rate_str(v)} req/s"
    pts = get(r, "points") or []
    idx = tl.get("rate_index", -1)  # graphroof.serve keeps the timeline of the last rate it simulated
    if isinstance(idx, int) and -len(pts) <= idx < len(pts) and get(pts[idx], "rate_rps") is not None:
        return f" at {rate_str(get(pts[idx], 'rate_rps'))} req/s"
    return ""


def _table(r: Any) -> str:
    """The rate table; with error bands, their range columns after the figures (:mod:`.serve_bands`)."""
    cols = serve_columns(r) + (range_columns() if serve_band_line(r) else ())
    raw = {"rate": "rate_rps", "req/s": "throughput_rps", "out tok/s": "output_tokens_per_s",
           "tok/s/GPU": "output_tokens_per_s_per_gpu", "preempt": "preemptions", "goodput": "goodput_rps",
           "SLO met": "slo_attainment", "KV mean/max": "kv_used_mean"}

    def value(c: Column) -> Callable[[Any], Any]:
        if c.header in RANGE_VALUES:
            return RANGE_VALUES[c.header]
        if c.header in raw:
            return lambda p: get(p, raw[c.header])
        if c.header.endswith(" busy"):  # disaggregated: a pool's busy share
            return lambda p: ((get(p, "pools") or {}).get(c.header.split()[0]) or {}).get("busy")
        if c.header.startswith("xfer "):
            return lambda p: pct(get(p, "transfer_s"), c.header.split()[1])
        metric, _, q = c.header.partition(" ")
        return lambda p: pct(get(p, f"{metric.lower()}_s"), q)

    def text(c: Column) -> Callable[[Any], Any]:
        return lambda p: c.cell(p, "html")

    spec = [(c.header, text(c), value(c)) for c in cols]
    att = "slo_attainment"
    target = ((get(r, "settings") or {}).get("slo_percentile") or 99.0) / 100
    return sortable_table(get(r, "points") or [], spec,
                          lambda p: "miss" if get(p, att) is not None and get(p, att) < target else "")


def render_serve_html(r: Any) -> str:
    e = html.escape
    title = f"serve: {get(r, 'model')} on {get(r, 'hw_label') or get(r, 'hw')}"
    batch, kv = _timeline_charts(r)
    parts = ["<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>", e(title), "</title><style>",
             _CSS, "</style></head><body>\n<h1>", e(title), "</h1>\n",
             '<ul class="facts">', "".join(f"<li>{e(x)}</li>" for x in header_lines(r)), "</ul>"]
    for line in (max_rate_text(r), replicas_text(r)):
        if line:
            parts.append(f'<p class="key">{e(line)}</p>')
    parts += ["<h2>Latency vs rate</h2>", f'<p class="muted">{e(slo_text(r))}; red dashed line: the SLO</p>',
              '<div class="charts"><figure>', _latency_chart(r, "TTFT", "slo_ttft_s"), "</figure><figure>",
              _latency_chart(r, "TPOT", "slo_tpot_s"), "</figure></div>",
              "<h2>Throughput vs rate</h2><figure>", _throughput_chart(r), "</figure>"]
    if batch:
        parts += [f"<h2>Timeline{e(_timeline_rate(r))}</h2><figure>", batch, "</figure><figure>", kv, "</figure>"]
    band = serve_band_line(r)
    parts += ["<h2>Rates</h2>", '<p class="muted">click a header to sort; rows in red miss the SLO attainment '
              "target" + ("; the range columns: each figure's error band" if band else "") + "</p>", _table(r)]
    if band:
        parts.append(f'<p class="muted bands">{e(band)}</p>')
    pts = get(r, "points") or []
    little = [get(p, "littles_law") for p in pts]
    if any(little):
        parts.append('<p class="muted">Little\'s law check (mean in system / (arrival rate x mean time in '
                     "system)): " + e(", ".join(f"{get(p, 'rate_rps'):g} req/s: {num(get(x, 'ratio'), '{:.3f}')}"
                                              for p, x in zip(pts, little) if x)) + "</p>")
    notes = list(get(r, "notes") or ())
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
    parts.append(f'<p class="muted">{e(generated_stamp())}</p><script>{_JS}</script></body></html>\n')
    return "".join(parts)
