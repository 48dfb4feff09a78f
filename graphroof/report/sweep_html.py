"""The sweep as one self-contained HTML page: the frontier chart (inline SVG) over a sortable table.

The table is a real ``<table>``: a click on a header sorts the rows by that column (numbers by their raw value,
kept in ``data-v``; a second click reverses), with plain inline JavaScript and no network.  Rows on a device's
Pareto frontier carry the class ``frontier``, the SLO picks ``pick`` (highlighted, marked ``*`` / ``>`` as in the
terminal table).  The chart's ticks are round numbers (:func:`nice_ticks`, labelled ``1.5k``, ``2k``, ...) and
each device's SLO pick is ringed on it.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from typing import Any

from ..units import fmt_bytes, fmt_time
from .llm import fmt_energy as _energy

__all__ = ["nice_ticks", "tick_label", "sortable_table", "sweep_page", "llm_sweep_html", "batch_sweep_html"]

_CSS = """
body { font: 14px system-ui, sans-serif; margin: 24px auto; max-width: 1320px; color: #222; padding: 0 16px; }
h1 { font-size: 20px; } h2 { font-size: 16px; border-bottom: 1px solid #ddd; padding-bottom: 4px; margin-top: 28px; }
.muted { color: #666; font-size: 12px; } .wrap { overflow-x: auto; max-width: 100%; }
figure.chart svg { max-width: 100%; height: auto; }
table.sweep { border-collapse: collapse; font-size: 12.5px; margin: 8px 0; }
table.sweep th, table.sweep td { padding: 3px 8px; text-align: right; white-space: nowrap; }
table.sweep th { background: #f3f4f6; cursor: pointer; user-select: none; position: sticky; top: 0; }
table.sweep th[aria-sort=ascending]::after { content: " \\25B2"; }
table.sweep th[aria-sort=descending]::after { content: " \\25BC"; }
table.sweep td.t { text-align: left; } table.sweep tr:nth-child(even) td { background: #fafafa; }
table.sweep tr.frontier td { background: #eef5fc; } table.sweep tr.pick td { background: #fff3cd; font-weight: 600; }
.legend span { display: inline-block; padding: 1px 8px; margin-right: 8px; }
"""

_JS = """
document.querySelectorAll('table.sweep').forEach(function (t) {
  t.querySelectorAll('th').forEach(function (th, i) {
    th.addEventListener('click', function () {
      var desc = th.getAttribute('aria-sort') !== 'descending';
      t.querySelectorAll('th').forEach(function (h) { h.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', desc ? 'descending' : 'ascending');
      var body = t.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      function key(r) { var c = r.cells[i], v = c.getAttribute('data-v'); return v === null ? c.textContent : v; }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b), nx = parseFloat(x), ny = parseFloat(y), d;
        if (x === '' && y !== '') return 1; if (y === '' && x !== '') return -1;
        d = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : String(x).localeCompare(String(y));
        return desc ? -d : d;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


def nice_ticks(lo: float, hi: float, target: int = 6) -> list[float]:
    """Round tick values covering [lo, hi]: multiples of 1, 2, 2.5 or 5 x 10^k, about *target* of them."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(target - 1, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    out = []
    v = first
    while v <= hi + step * 1e-9:
        out.append(round(v, 12))
        v += step
    return out


def tick_label(v: float) -> str:
    """``1500`` -> ``1.5k``, ``2000`` -> ``2k``, ``2.5e6`` -> ``2.5M``, ``0.25`` -> ``0.25``, ``0`` -> ``0``."""
    a = abs(v)
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{v / div:.3g}{suffix}"
    return f"{v:.3g}"


def sortable_table(rows: Sequence[Any], columns: Sequence[tuple[str, Callable[[Any], str], Callable[[Any], Any]]],
                   row_class: Callable[[Any], str] = lambda r: "") -> str:
    """``<table class="sweep">``: *columns* are (header, cell text, raw sort value or None for the text)."""
    e = html.escape
    head = "".join(f'<th scope="col">{e(h)}</th>' for h, _, _ in columns)
    body = []
    for r in rows:
        cells = []
        for _, text, value in columns:
            v = value(r)
            t = str(text(r))
            num = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            attr = f' data-v="{v!r}"' if num else (' data-v=""' if v is None and t in ("-", "n/a", "?") else "")
            cls = "" if num or v is None else ' class="t"'
            cells.append(f"<td{cls}{attr}>{e(t)}</td>")
        cls = row_class(r)
        body.append(f'<tr{f" class={chr(34)}{cls}{chr(34)}" if cls else ""}>{"".join(cells)}</tr>')
    return (f'<div class="wrap"><table class="sweep"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}'
            "</tbody></table></div>")


def sweep_page(title: str, chart_svg: str, table_html: str, paragraphs: Sequence[str], notes: Sequence[str]) -> str:
    e = html.escape
    parts = ["<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>", e(title), "</title><style>",
             _CSS, "</style></head><body>\n<h1>", e(title), "</h1>\n",
             "".join(f'<p class="muted">{e(p)}</p>' for p in paragraphs),
             f'<figure class="chart" id="chart">{chart_svg}</figure>\n<h2>Points</h2>\n',
             '<p class="legend"><span style="background:#eef5fc">* on the Pareto frontier</span>'
             '<span style="background:#fff3cd">&gt; SLO pick</span><span>click a header to sort</span></p>',
             table_html]
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
    parts.append(f"<script>{_JS}</script></body></html>\n")
    return "".join(parts)


def _n(v: float | None, spec: str = "{:,.1f}") -> str:
    return "-" if v is None else spec.format(v)



def llm_sweep_html(r, chart_svg: str, marks: dict[int, str], slo_text: str) -> str:
    """The page of an LLM :class:`~graphroof.sweeps.SweepResult` (*marks*: ``id(point)`` -> ``*`` / ``>``)."""
    cols: list[tuple[str, Callable[[Any], str], Callable[[Any], Any]]] = [("", lambda p: marks.get(id(p), ""),
                                                                        lambda p: marks.get(id(p), ""))]
    if len(r.devices) > 1:
        cols.append(("device", lambda p: p.hw, lambda p: p.hw))
    cols += [("batch", lambda p: p.batch, lambda p: p.batch), ("prompt", lambda p: p.prompt, lambda p: p.prompt),
             ("gen", lambda p: p.gen, lambda p: p.gen), ("TP", lambda p: p.tp, lambda p: p.tp),
             ("dtype", lambda p: p.dtype, lambda p: p.dtype),
             ("TTFT", lambda p: fmt_time(p.ttft_s), lambda p: p.ttft_s),
             ("TPOT", lambda p: fmt_time(p.tpot_s) if p.tpot_s is not None else "-", lambda p: p.tpot_s),
             ("tok/s/GPU", lambda p: _n(p.tokens_per_s_per_gpu), lambda p: p.tokens_per_s_per_gpu),
             ("tok/s/user", lambda p: _n(p.tokens_per_s_per_user), lambda p: p.tokens_per_s_per_user),
             ("memory", lambda p: fmt_bytes(p.memory_bytes), lambda p: p.memory_bytes),
             ("fits", lambda p: {True: "yes", False: "NO", None: "?"}[p.fits], lambda p: str(p.fits)),
             ("bound", lambda p: f"{p.prefill_bound}/{p.decode_bound or '-'}",
              lambda p: f"{p.prefill_bound}/{p.decode_bound or '-'}")]
    if any(p.usd_per_hour is not None for p in r.points):
        cols.append(("$/Mtok", lambda p: _n(p.usd_per_million_tokens, "{:,.3g}"), lambda p: p.usd_per_million_tokens))
    cols += [("J/tok", lambda p: _energy(p.joules_per_token), lambda p: p.joules_per_token),
             ("tok/J", lambda p: _energy(p.tokens_per_joule), lambda p: p.tokens_per_joule)]

    def row_class(p) -> str:
        m = marks.get(id(p), "")
        return "pick" if ">" in m else ("frontier" if "*" in m else "")

    mode = "ideal roofline" if r.ideal else "realistic (profile efficiencies and launch overhead)"
    paras = [f"{len(r.points)} points on {', '.join(r.hw_labels.values())}; {r.traces} traced graphs; times {mode}",
             "tok/s/GPU = batch * gen / e2e / TP; tok/s/user = gen / e2e (TTFT included); J/tok = board power x TP / "
             "(tok/s), an upper bound at full board power (n/a: the profile gives none)",
             f"* = on the device's Pareto frontier; > = the device's best point under {slo_text} (ringed on the chart)"]
    best = []
    for hw, p in r.best().items():
        best.append(f"best on {hw} under {slo_text}: " + ("no point fits and meets the SLO" if p is None else
                    f"{p.label}: TTFT {fmt_time(p.ttft_s)}, TPOT {fmt_time(p.tpot_s)}, "
                    f"{p.tokens_per_s_per_gpu:,.1f} tok/s/GPU, {p.tokens_per_s_per_user:,.1f} tok/s/user"))
    return sweep_page(f"sweep: {r.model}", chart_svg, sortable_table(r.points, cols, row_class), paras + best,
                      list(r.notes))


def batch_sweep_html(r, chart_svg: str) -> str:
    """The page of a :class:`~graphroof.sweeps.BatchSweep` (one row per device and batch)."""
    front = {id(p) for f in r.frontier().values() for p in f}
    cols: list[tuple[str, Callable[[Any], str], Callable[[Any], Any]]] = []
    if len(r.devices) > 1:
        cols.append(("device", lambda p: p.hw, lambda p: p.hw))
    cols += [("batch", lambda p: p.batch, lambda p: p.batch),
             ("latency", lambda p: fmt_time(p.t_s), lambda p: p.t_s),
             ("ideal", lambda p: fmt_time(p.t_ideal_s), lambda p: p.t_ideal_s),
             ("samples/s", lambda p: _n(p.samples_per_s), lambda p: p.samples_per_s),
             ("compute", lambda p: fmt_time(p.t_compute_s), lambda p: p.t_compute_s),
             ("memory", lambda p: fmt_time(p.t_memory_s), lambda p: p.t_memory_s),
             ("bound", lambda p: p.bound, lambda p: p.bound)]
    paras = [f"{len(r.points)} points on {', '.join(r.hw_labels.values())}; latency of one batch"]
    for hw, c in r.critical_batch.items():
        val = f"batch {c['critical_batch']}" if c.get("critical_batch") is not None else "none"
        paras.append(f"compute-bound batch on {hw}: {val}: {c['reason']}")
    return sweep_page(f"batch sweep: {r.model}", chart_svg,
                      sortable_table(r.points, cols, lambda p: "frontier" if id(p) in front else ""), paras,
                      list(r.notes))
