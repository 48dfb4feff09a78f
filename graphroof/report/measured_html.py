"""HTML for ``graphroof profile``: the standard report (:mod:`graphroof.report.html`) of the prediction, with
the measured points added to its roofline chart as a second series, and a predicted-vs-measured section.

Measured points sit at the same arithmetic intensity as their predicted twins (the counted FLOPs / bytes) at
y = FLOPs / measured time; they are drawn with the chart's second marker shape, coloured by the predicted
bound, and toggled with the chart's series checkboxes.  Every model-supplied string goes through Jinja2's
autoescape (the report's own environment).
"""

from __future__ import annotations

from .chart import Point, chart_data, svg_geometry
from .columns import MEASURED_COLUMNS
from .content import as_phases, build
from .html import environment, static_text
from .measured import LAYER_LEAD, summary_lines

__all__ = ["render_measured_html", "measured_points"]

_SECTION = """<section id="measured">
<h2>Measured vs predicted</h2>
<p class="muted">measured on: {{ runtime }}</p>
<ul class="assume">{% for line in summary %}<li>{{ line }}</li>{% endfor %}</ul>
<table class="layers sortable" id="measured-layers">
<thead><tr>{% for h in headers %}<th>{{ h }}</th>{% endfor %}</tr></thead>
<tbody>{% for row in rows %}<tr>{% for cell in row %}<td>{{ cell }}</td>{% endfor %}</tr>{% endfor %}</tbody>
</table>
{% if unmatched %}<p class="muted">unmatched nodes (no measured op): {{ unmatched }}</p>{% endif %}
</section>
"""


def measured_points(c, phase: int = 1) -> list[Point]:
    """One point per layer and per op with a measured time, FLOPs and bytes."""
    total = sum(r["measured_s"] for r in c.layers if r["measured_s"]) or 1.0
    pts = []
    for level, rows in (("layer", c.layers), ("op", c.ops)):
        for r in rows:
            t = r["measured_s"]
            if not t or not r["flops"] or not r["bytes"]:
                continue
            kind = r.get("op") or f"{r['n_matched']} ops measured"
            pts.append(Point(phase, level, r["name"], kind, r["flops"], r["bytes"], r["flops"] / r["bytes"],
                             r["flops"] / t, t, t / total, r["bound"]))
    return pts


def render_measured_html(c) -> str:
    ph = as_phases([("predicted", c.a)])
    content = build(ph)
    cd = chart_data(ph)
    cd.phases.append("measured")
    cd.points.extend(measured_points(c, phase=len(cd.phases) - 1))
    skipped = {level: cd.skipped_notes(level) for level in ("layer", "op")}
    env = environment()
    page = env.get_template("report.html.j2").render(
        c=content, g=svg_geometry(cd), skipped=skipped, css=static_text("report.css"), js=static_text("report.js"))
    columns = (*LAYER_LEAD, *MEASURED_COLUMNS)
    rows = [[col.cell(r, "html") for col in columns] for r in c.layers]
    section = env.from_string(_SECTION).render(
        runtime=c.summary["runtime"], summary=summary_lines(c) + list(c.m.notes),
        headers=[col.header for col in columns],
        rows=rows, unmatched=", ".join(c.unmatched[:40]) + (" ..." if len(c.unmatched) > 40 else ""))
    marker = '<section id="assumptions">'
    if marker in page:
        return page.replace(marker, section + marker, 1)
    return page.replace("</body>", section + "</body>", 1)
