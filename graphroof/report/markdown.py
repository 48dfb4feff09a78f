"""GitHub-flavoured markdown report: the HTML report's content as tables (and the chart as an image link)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from tabulate import tabulate

from ..errors import sanitize_terminal
from ..units import fmt_time
from .columns import KERNEL_LEAD, LAYER_LEAD, ROOF_COLUMNS, Column, col, table
from .content import as_phases, build

__all__ = ["md_escape", "render_markdown"]

_BACKSLASH = re.compile(r"([\\`*\[\]|#~])")
_LONE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def md_escape(text: Any) -> str:
    """Text safe inside a GFM paragraph or table cell: no HTML, no table breaks, no stray emphasis, and no control
    characters (terminal escapes, BEL, NUL, bidi overrides become visible ``\\xNN`` / ``\\uNNNN`` text)."""
    s = sanitize_terminal(" ".join(str(text).split()))  # newlines would end a table row
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _BACKSLASH.sub(r"\\\1", s)
    return _LONE_UNDERSCORE.sub(r"\\_", s)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


_LAYER_COLUMNS = (*LAYER_LEAD, *ROOF_COLUMNS)
_OP_COLUMNS = (Column("op", lambda r: r.get("label", r["name"]), "name"),
               Column("module", lambda r: r.get("module") or r["scope"] or "(top)", "scope"),
               col("kind", "op"), col("dtype", "dtype"), *ROOF_COLUMNS)


def render_markdown(phases: Any, ops: bool = False, top: int | None = None, image: str | None = None,
                    chart_notes: list[str] | None = None, fold: bool = True, kernels: bool = False) -> str:
    """The report as markdown.  *image*: relative path of the chart image to link (written by the caller; any
    file name, the link percent-encodes it)."""
    ph = as_phases(phases)
    c = build(ph, fold)
    multi = len(c.phases) > 1
    out = [f"# graphroof: {md_escape(c.title)}", "", f"_{md_escape(c.stamp)}_", ""]
    out += [f"- **{label}**: {md_escape(text)}" for label, text in c.header]

    out += ["", "## Totals", ""]
    labels = [label for label, _ in c.phases[0].totals]
    by_phase = [dict(p.totals) for p in c.phases]
    rows = [[label, *(md_escape(d.get(label, "-")) for d in by_phase)] for label in labels]
    out.append(_table(["", *(md_escape(p.name) for p in c.phases)], rows))

    out += ["", "## Roofline", ""]
    if image:
        # percent-encoded: a space, a parenthesis or a bracket in the file name would end or break the link
        out.append(f"![Roofline chart: one point per layer, colour = bound, size = time share]({quote(image)})")
    else:
        out.append("_(the chart is written as an image next to the report when `-o FILE.md` is given; "
                   "`graphroof plot` draws it alone)_")
    out += [f"- {md_escape(n)}" for n in (chart_notes or [])]

    out += ["", "## Where the time goes"]
    for p in c.phases:
        suffix = f" ({md_escape(p.name)})" if multi else ""
        out += ["", f"_Roofline time of the kernels as priced under the {md_escape(p.analysis.runtime)} preset._"]
        out += ["", f"### By bound{suffix}", ""]
        out.append(_table(["bound", "kernels", "time", "share"],
                          [[s.label, str(s.n), fmt_time(s.time_s), f"{100 * s.share:.1f}%"]
                           for s in p.breakdown["by_bound"]]))
        out += ["", f"### By kernel{suffix}", ""]
        out.append(_table(["kernel (ops it runs)", "kernels", "time", "share"],
                          [[md_escape(s.label), str(s.n), fmt_time(s.time_s), f"{100 * s.share:.1f}%"]
                           for s in p.breakdown["by_kind"]]))

    for p in c.phases:
        out += ["", f"## Layers{' (' + md_escape(p.name) + ')' if multi else ''}", ""]
        out.append(table(p.layers, _LAYER_COLUMNS, "markdown", esc=md_escape))
        if kernels:
            krows = p.analysis.kernel_table(fold)
            krows = sorted(krows, key=lambda r: -r["time_realistic_s"])[:top] if top else krows
            out += ["", f"## Kernels{' (' + md_escape(p.name) + ')' if multi else ''}", ""]
            out.append(table(krows, (*KERNEL_LEAD, *ROOF_COLUMNS), "markdown", esc=md_escape))
        if ops:
            all_ops = p.analysis.op_table(fold)
            rows_ = sorted(all_ops, key=lambda r: -r["time_s"])[:top] if top else all_ops
            title = f"Slowest {top} ops" if top else "Ops"
            out += ["", f"## {title}{' (' + md_escape(p.name) + ')' if multi else ''}", ""]
            out.append(table(rows_, _OP_COLUMNS, "markdown", esc=md_escape))

    if c.next_steps:
        out += ["", "## Next steps", ""]
        out += [f"- {md_escape(it['text'])}" for it in c.next_steps]

    out += ["", "## Assumptions", ""]
    out += [f"- {md_escape(a)}" for a in c.assumptions]
    if any(r.get("estimated") for p in c.phases for r in p.analysis.ops):
        out.append("- \\* = estimated (no exact rule; bytes-only or approximate count)")
    return "\n".join(out) + "\n"
