"""``graphroof llm -f html``: one self-contained page (no scripts, no network) for an LLM serving estimate.

Sections: the header facts; the batch sweep as a table and as a chart (output tokens/s and TPOT against the
batch, log-scaled batch axis); per batch a memory bar (weights / KV cache / activation peak against the device
capacity); prefill and decode side by side per layer; next steps (the estimate's ``next_steps``); notes.  Every name is
escaped; the tables are the terminal report's columns (:mod:`.llm`).
"""

from __future__ import annotations

import math
from html import escape

from ..units import fmt_bytes, fmt_rate, fmt_time
from .content import generated_stamp
from .llm import header_lines, memory_lines, settings_note, side_by_side, sweep_columns

__all__ = ["render_llm_html", "sweep_svg", "memory_bar"]

_CSS = """
body { font: 14px system-ui, sans-serif; margin: 24px auto; max-width: 1320px; color: #222; padding: 0 16px; }
h1 { font-size: 20px; } h2 { font-size: 16px; border-bottom: 1px solid #ddd; padding-bottom: 4px; margin-top: 28px; }
.muted { color: #666; font-size: 12px; } ul.facts { list-style: none; padding: 0; } ul.facts li { margin: 2px 0; }
table { border-collapse: collapse; font-size: 12.5px; margin: 8px 0; } th, td { padding: 3px 8px; text-align: right; }
th { background: #f3f4f6; } td:first-child, th:first-child { text-align: left; } tr:nth-child(even) td { background: #fafafa; }
.wrap { overflow-x: auto; max-width: 100%; }
.bar { display: flex; height: 22px; width: 100%; max-width: 900px; background: #f3f4f6; position: relative; margin: 4px 0 2px; }
.bar span { display: block; height: 100%; color: #fff; font-size: 11px; line-height: 22px; overflow: hidden; white-space: nowrap; padding-left: 4px; box-sizing: border-box; }
.bar .w { background: #0072B2; } .bar .kv { background: #E69F00; } .bar .act { background: #009E73; }
.bar .cap { position: absolute; top: -4px; bottom: -4px; width: 2px; background: #c00; padding: 0; }
.over { color: #c00; font-weight: 600; }
figure.roofline { margin: 8px 0; } figure.roofline svg { max-width: 100%; height: auto; }
svg text { font: 11px system-ui, sans-serif; fill: #333; } svg .axis { stroke: #999; fill: none; }
svg .tps { stroke: #0072B2; fill: none; stroke-width: 2; } svg .tpot { stroke: #E69F00; fill: none; stroke-width: 2; stroke-dasharray: 5 3; }
"""


def _table(rows, columns) -> str:
    head = "".join(f"<th>{escape(c.header)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c.cell(r, 'html')))}</td>" for c in columns) + "</tr>"
                   for r in rows)
    return f'<div class="wrap"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def memory_bar(c) -> str:
    """Weights / KV cache / activation peak as a stacked bar, scaled to max(capacity, total); red mark = capacity."""
    m = c.memory
    scale = max(m.capacity_bytes or 0.0, m.total_bytes) or 1.0
    parts = [("w", "weights", m.weight_bytes), ("kv", "KV cache", m.kv_cache_bytes),
             ("act", "activations", m.activation_peak_bytes)]
    spans = "".join(f'<span class="{k}" style="width:{100 * v / scale:.2f}%" title="{escape(label)} {fmt_bytes(v)}">'
                    f"{escape(label)} {fmt_bytes(v)}</span>" for k, label, v in parts if v > 0)
    cap = ""
    if m.capacity_bytes:
        cap = (f'<span class="cap" style="left:{100 * m.capacity_bytes / scale:.2f}%" '
               f'title="capacity {fmt_bytes(m.capacity_bytes)}"></span>')
    return f'<div class="bar" role="img" aria-label="memory of batch {c.batch}">{spans}{cap}</div>'


def sweep_svg(r, width: int = 720, height: int = 300) -> str:
    """Output tokens/s (solid, left axis) and TPOT (dashed, right axis) against the batch (log scale)."""
    cs = r.configs
    ml, mr, mt, mb = 70, 80, 16, 40
    pw, ph = width - ml - mr, height - mt - mb
    bs = [c.batch for c in cs]
    lo, hi = math.log2(min(bs)), math.log2(max(bs))
    span = (hi - lo) or 1.0

    def X(b):
        return ml + (pw / 2 if hi == lo else (math.log2(b) - lo) / span * pw)

    def scaler(vals):
        top = max(vals) * 1.15 or 1.0
        return lambda v: mt + ph - v / top * ph, top

    tps = [c.output_tokens_per_s for c in cs]
    tpot = [c.tpot_s or 0.0 for c in cs]
    Yl, top_l = scaler(tps)
    Yr, top_r = scaler(tpot)
    out = [f'<svg id="sweep" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="batch sweep">',
           f'<path class="axis" d="M{ml} {mt}V{mt + ph}H{ml + pw}V{mt}"/>']
    for c in cs:
        out.append(f'<text x="{X(c.batch):.1f}" y="{mt + ph + 16}" text-anchor="middle">{c.batch}</text>')
    out.append(f'<text x="{ml + pw / 2}" y="{height - 6}" text-anchor="middle">batch</text>')
    for k in range(5):
        v = top_l * k / 4
        out.append(f'<text x="{ml - 6}" y="{Yl(v) + 4:.1f}" text-anchor="end">{escape(fmt_rate(v, "tok/s"))}</text>')
        w = top_r * k / 4
        out.append(f'<text x="{ml + pw + 6}" y="{Yr(w) + 4:.1f}">{escape(fmt_time(w))}</text>')
    pl = " ".join(f"{X(c.batch):.1f},{Yl(t):.1f}" for c, t in zip(cs, tps))
    pr = " ".join(f"{X(c.batch):.1f},{Yr(t):.1f}" for c, t in zip(cs, tpot))
    out.append(f'<polyline class="tps" points="{pl}"/><polyline class="tpot" points="{pr}"/>')
    for c, t, u in zip(cs, tps, tpot):
        out.append(f'<circle cx="{X(c.batch):.1f}" cy="{Yl(t):.1f}" r="3.5" fill="#0072B2"><title>batch {c.batch}: '
                   f'{escape(fmt_rate(t, "tok/s"))}</title></circle>')
        out.append(f'<circle cx="{X(c.batch):.1f}" cy="{Yr(u):.1f}" r="3.5" fill="#E69F00"><title>batch {c.batch}: '
                   f'TPOT {escape(fmt_time(u))}</title></circle>')
    out.append(f'<text x="{ml + 8}" y="{mt + 12}" fill="#0072B2">— output tok/s (left)</text>'
               f'<text x="{ml + 8}" y="{mt + 26}" fill="#E69F00">- - TPOT (right)</text></svg>')
    return "".join(out)


def phase_roofline_svg(c, phase: str) -> str:
    """The roofline chart of one phase (``prefill`` / ``decode``) of configuration *c*, as inline SVG (layer
    points; drawn by :func:`.chart.render_static`), or a note when matplotlib is missing."""
    from ..errors import ReportError
    from .chart import chart_data, render_static
    from .content import Phase

    ph = c.prefill if phase == "prefill" else c.decode
    what = (f"prefill, batch {c.batch}, seq {c.prompt}" if phase == "prefill"
            else f"decode step, batch {c.batch}, past {ph.context[0]}..{ph.context[1]} (mean step)")
    try:
        svg = render_static(chart_data([Phase(phase, ph.analysis)]), "svg", level="layer",
                            title=f"{phase} roofline: {what}").decode("utf-8")
    except ReportError as e:
        return f'<p class="muted">{escape(str(e))}</p>'
    svg = svg[svg.index("<svg"):]  # drop the XML prolog and doctype: inline in the page
    return f'<figure class="roofline" id="roofline-{phase}">{svg}</figure>'


def render_llm_html(r, advice: bool = True) -> str:
    title = f"graphroof llm: {r.model} on {r.hw.label}"
    out = ["<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">",
           f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
           f"<h1>{escape(title)}</h1><p class=\"muted\">{escape(generated_stamp())}</p>",
           '<ul class="facts">' + "".join(f"<li>{escape(x)}</li>" for x in header_lines(r)) + "</ul>",
           "<section id=\"sweep-section\"><h2>Batch sweep</h2>", _table(r.configs, sweep_columns(r)),
           sweep_svg(r), "</section>", "<section id=\"memory\"><h2>Memory</h2>"]
    for c in r.configs:
        cls = "" if c.memory.fits is not False else ' class="over"'
        out.append(f"<p{cls}>{escape(memory_lines(r, c)[0])}</p>{memory_bar(c)}")
    out.append("</section>")
    if r.configs:
        c0 = r.configs[0]
        charts = [phase_roofline_svg(c0, "prefill")] + ([phase_roofline_svg(c0, "decode")] if c0.decode_steps else [])
        out.append(f'<section id="rooflines"><h2>Rooflines, batch {c0.batch}: prefill and decode</h2>'
                   '<p class="muted">one point per layer (size = time share), the prefill and one decode step of the '
                   "first batch size</p>" + "".join(charts) + "</section>")
    for c in r.configs:
        rows, columns = side_by_side(c, r.ideal)
        out.append(f'<section class="layers"><h2>Layers, batch {c.batch}: prefill (seq {c.prompt}) and decode '
                   f"(mean step) side by side</h2>{_table(rows, columns)}</section>")
    steps = r.next_steps if advice else []
    if steps:
        out.append('<section id="next-steps"><h2>Next steps</h2><ul>'
                   + "".join(f"<li>{escape(s['text'])}</li>" for s in steps) + "</ul></section>")
    counted = settings_note(r)
    out.append('<section id="notes"><h2>Notes</h2><ul>' + "".join(f"<li>{escape(n)}</li>" for n in r.notes)
               + (f"<li>{escape(counted)}</li>" if counted else "") + "</ul></section></body></html>\n")
    return "".join(out)
