"""The HTML page of a configuration search: the Pareto frontier chart (inline SVG: every point meeting the SLOs in
grey, the frontier in blue, each rate's cheapest pick ringed in green), the cheapest-per-rate table, the frontier
table, the engine flags of the picks, the pruned / rejected configurations with their reasons and the notes.  One
self-contained file, no script, no network.
"""

from __future__ import annotations

import html
import math
from typing import Any

from .plan import _final, frontier_columns, get, has_bands, header_lines, pick_columns, plan_band_line

__all__ = ["render_plan_html"]

W, H, PAD = 720, 420, 60


def _esc(s: Any) -> str:
    return html.escape(str(s))


def _scale(vals: list[float], lo_px: float, hi_px: float):
    lo, hi = min(vals), max(vals)
    log = lo > 0 and hi / lo > 20
    if log:
        lo, hi = math.log10(lo), math.log10(hi)
    span = (hi - lo) or 1.0

    def f(v: float) -> float:
        x = math.log10(v) if log else v
        return lo_px + (x - lo) / span * (hi_px - lo_px)

    return f, log


def _chart(r: Any) -> str:
    pts = []
    for c in get(r, "configs") or []:
        for p in c.get("points") or []:
            if p.get("meets_slo") and not p.get("over_budget"):
                pts.append(_final(p))
    front = [_final(p) for p in get(r, "frontier") or []]
    picks = [row["by_gpus"] for row in get(r, "cheapest") or [] if row.get("by_gpus")]
    ok = [p for p in pts + front + picks if _pos(p)]
    if not ok:
        return "<p>No point meets the SLOs: nothing to chart.</p>"
    fx, lx = _scale([p["tokens_per_s_per_user"] for p in ok], PAD, W - 20)
    fy, ly = _scale([p["output_tokens_per_s_per_gpu"] for p in ok], H - PAD, 20)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" '
           'aria-label="Pareto frontier">',
           f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - 20}" y2="{H - PAD}" stroke="#333"/>',
           f'<line x1="{PAD}" y1="20" x2="{PAD}" y2="{H - PAD}" stroke="#333"/>',
           f'<text x="{W / 2}" y="{H - 20}" text-anchor="middle">tokens/s per user{" (log)" if lx else ""}</text>',
           f'<text x="16" y="{H / 2}" transform="rotate(-90 16 {H / 2})" text-anchor="middle">output tokens/s per '
           f'GPU{" (log)" if ly else ""}</text>']
    for p in pts:
        if _pos(p):
            out.append(f'<circle cx="{fx(p["tokens_per_s_per_user"]):.1f}" cy="{fy(p["output_tokens_per_s_per_gpu"]):.1f}" '
                       f'r="2.5" fill="#bbb"><title>{_esc(p.get("config"))}</title></circle>')
    line = " ".join(f'{fx(p["tokens_per_s_per_user"]):.1f},{fy(p["output_tokens_per_s_per_gpu"]):.1f}'
                    for p in front if _pos(p))
    out.append(f'<polyline points="{line}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
    for p in front:
        if _pos(p):
            out.append(f'<circle cx="{fx(p["tokens_per_s_per_user"]):.1f}" cy="{fy(p["output_tokens_per_s_per_gpu"]):.1f}" '
                       f'r="4" fill="#1f77b4"><title>{_esc(p.get("config"))} at {p["rate_rps"]:g} req/s</title></circle>')
    for p in picks:
        if _pos(p):
            out.append(f'<circle cx="{fx(p["tokens_per_s_per_user"]):.1f}" cy="{fy(p["output_tokens_per_s_per_gpu"]):.1f}" '
                       f'r="8" fill="none" stroke="#2ca02c" stroke-width="2"><title>cheapest at {p["rate_rps"]:g} '
                       f'req/s: {_esc(p.get("config"))}</title></circle>')
    out.append("</svg>")
    return "\n".join(out)


def _pos(p: Any) -> bool:
    x, y = p.get("tokens_per_s_per_user"), p.get("output_tokens_per_s_per_gpu")
    return all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in (x, y))


def _table(rows: list[Any], columns: Any) -> str:
    head = "".join(f"<th>{_esc(c.header)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c.cell(r, 'html'))}</td>" for c in columns) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_plan_html(r: Any) -> str:
    pct = (get(r, "settings") or {}).get("slo_percentile", 99.0)
    banded = has_bands(r)
    hl = header_lines(r)
    parts = [f"<h1>{_esc(hl[0])}</h1>"] + [f"<p>{_esc(x)}</p>" for x in hl[1:]]
    parts += ["<h2>Pareto frontier</h2>", _chart(r)]
    parts.append("<h2>Cheapest configuration per rate</h2>")
    for row in get(r, "cheapest") or []:
        picks = [p for p in (row.get("by_gpus"), row.get("by_usd")) if p]
        if picks:
            uniq = [picks[0]] + [p for p in picks[1:] if p["config_index"] != picks[0]["config_index"]]
            parts += [f"<h3>{row['rate_rps']:g} req/s</h3>", _table(uniq, pick_columns(pct, banded))]
        else:
            parts.append(f"<p>{row['rate_rps']:g} req/s: no configuration meets the SLOs</p>")
    front = [{**_final(p), "rate_rps": p["rate_rps"]} for p in get(r, "frontier") or []]
    parts += ["<h2>Frontier points</h2>", _table(front, frontier_columns(pct, banded))]
    band = plan_band_line(r)
    if band:
        parts.append(f'<p class="bands">{_esc(band)}</p>')
    configs = get(r, "configs") or []
    flags = []
    for row in get(r, "cheapest") or []:
        p = row.get("by_gpus")
        if p:
            fl = configs[p["config_index"]].get("flags") or {}
            cmds = "\n".join(fl[e] for e in ("vllm", "sglang", "trtllm") if e in fl)
            flags.append(f"<h3>{_esc(p['config'])} ({row['rate_rps']:g} req/s)</h3><pre>{_esc(cmds)}</pre>")
    if flags:
        parts += ["<h2>Engine flags of the picks</h2>", *flags]
    bad = [c for c in configs if c["status"] in ("pruned", "rejected")]
    if bad:
        parts += ["<h2>Pruned and rejected</h2>", "<ul>" + "".join(
            f"<li>{_esc(c['status'])}: {_esc(c['label'])}: {_esc(c['reason'])}</li>" for c in bad) + "</ul>"]
    notes = get(r, "notes") or []
    if notes:
        parts += ["<h2>Notes</h2>", "<ul>" + "".join(f"<li>{_esc(n)}</li>" for n in notes) + "</ul>"]
    style = ("body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:.5em 0}"
             "td,th{border:1px solid #ccc;padding:2px 6px;font-size:90%}pre{background:#f6f6f6;padding:.5em;"
             "white-space:pre-wrap}")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_esc(hl[0])}</title><style>{style}</style></head><body>\n" + "\n".join(parts)
            + "\n</body></html>\n")
