"""Self-contained HTML report: Jinja2 (autoescape on) + an inline SVG roofline + a little vanilla JS.

No CDN, no network, no external files: the CSS and JS are inlined, the chart is SVG drawn from
:func:`graphroof.report.chart.svg_geometry`.  Every string from a model (node names, op types, scopes) goes
through Jinja2's autoescape.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..units import fmt_bytes, fmt_flops, fmt_time
from .chart import _shape_path, chart_data, svg_geometry
from .columns import COMPARE_COLUMNS, fmt_params
from .content import TABLE_COLUMNS, as_phases, build, cells

__all__ = ["render_html", "render_compare_html", "environment", "static_text", "html_fragment"]

#: The page templates, CSS and JS (package data beside this module).
TEMPLATES = Path(__file__).with_name("templates")

_SHAPE_GLYPH = {"circle": "●", "square": "■", "triangle": "▲", "diamond": "◆"}


def _num(v: Any) -> str:
    """Sort key for a ``data-v`` attribute: compact numbers, ``Infinity`` for inf, text as is."""
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, (int, float)):
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        if math.isnan(v):
            return ""
        return f"{v:.6g}"
    return "" if v is None else str(v)


@lru_cache(maxsize=1)
def environment():
    try:
        import jinja2
    except ImportError:  # pragma: no cover - jinja2 is a dependency
        from ..errors import ReportError

        raise ReportError("HTML reports need jinja2: pip install jinja2") from None
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             trim_blocks=False, lstrip_blocks=False, undefined=jinja2.StrictUndefined)
    env.globals.update(num=_num, fmt_time=fmt_time, cells=cells, shape_path=_shape_path,
                       shape_glyph=_SHAPE_GLYPH, columns=TABLE_COLUMNS, fmt_params=fmt_params)
    return env


def static_text(name: str):
    """A template-folder asset (CSS / JS) as markup to inline into a page."""
    from markupsafe import Markup

    text = (TEMPLATES / name).read_text(encoding="utf-8")
    if "</script" in text.lower() or "</style" in text.lower():  # pragma: no cover - guards our own files
        raise AssertionError(f"{name} must not contain </script or </style")
    return Markup(text)


def render_html(phases: Any, fold: bool = True) -> str:
    """The report for an Analysis, a ``{phase: Analysis}`` mapping or a list of ``(phase, Analysis)``."""
    ph = as_phases(phases)
    content = build(ph, fold)
    cd = chart_data(ph)
    skipped = {level: cd.skipped_notes(level) for level in ("layer", "op")}
    from .whatif_html import whatif_panel

    return environment().get_template("report.html.j2").render(
        c=content, g=svg_geometry(cd), skipped=skipped, css=static_text("report.css"), js=static_text("report.js"),
        whatif=whatif_panel(ph, cd, environment(), static_text))


def render_compare_html(cmp, stamp: str) -> str:
    """The ``graphroof compare`` table as a standalone page (columns: :data:`.columns.COMPARE_COLUMNS`)."""
    t_max = max((r["time_s"] for r in cmp.rows), default=0.0) or 1.0
    rows = [(r, [c.cell(r, "html") for c in COMPARE_COLUMNS]) for r in cmp.rows]
    sort_cols = {i: c.sort_key for i, c in enumerate(COMPARE_COLUMNS) if c.sort_key}
    return environment().get_template("compare.html.j2").render(
        cmp=cmp, stamp=stamp, headers=[c.header for c in COMPARE_COLUMNS], rows=rows, sort_cols=sort_cols,
        t_max=t_max, fmt_flops=fmt_flops, fmt_bytes=fmt_bytes, css=static_text("report.css"),
        js=static_text("report.js"))


_STYLE = re.compile(r"<style>(.*?)</style>", re.S)
_BODY = re.compile(r"<body>(.*)</body>", re.S)
_PAGE_SELECTOR = re.compile(r"^(?::root|body|html)\s*\{", re.M)


def html_fragment(page: str) -> str:
    """A report page as a fragment for a notebook cell (:func:`graphroof.notebook_html`): the page's body inside
    ``<div class="graphroof-report">``, with its CSS nested under that class (the page's ``:root`` / ``body`` rules
    apply to the div) so that it styles nothing else on the notebook's page."""
    style = _STYLE.search(page)
    body = _BODY.search(page)
    css = _PAGE_SELECTOR.sub("& {", style.group(1)) if style else ""
    inner = body.group(1) if body else page
    return (f'<div class="graphroof-report"><style>.graphroof-report {{\n{css}\n}}</style>'
            f"{inner}</div>")
