"""``graphroof compare``: one model on several devices (:class:`graphroof.comparison.DeviceComparison`) as a table."""

from __future__ import annotations

from ..comparison import DeviceComparison
from ..errors import ReportError
from ..units import fmt_bytes, fmt_flops
from .columns import COMPARE_COLUMNS, Column, table
from .content import generated_stamp
from .llm import fmt_energy as _energy
from .markdown import md_escape
from .tables import csv_text

__all__ = ["render_compare", "COMPARE_FORMATS", "FIT_COLUMNS", "next_steps"]

COMPARE_FORMATS = ("terminal", "markdown", "json", "csv", "html")


def _bytes(v) -> str:
    return "-" if v is None else fmt_bytes(v)



#: the memory-fit and energy columns (rows from :func:`graphroof.memory.device_fit`)
FIT_COLUMNS = (
    Column("hardware", lambda r: r["hardware"]),
    Column("weights", lambda r: _bytes(r["memory_weight_bytes"])),
    Column("KV cache", lambda r: _bytes(r["memory_kv_bytes"])),
    Column("activations", lambda r: _bytes(r["memory_activation_peak_bytes"])),
    Column("total", lambda r: _bytes(r["memory_bytes"])),
    Column("capacity", lambda r: _bytes(r["capacity_bytes"])),
    Column("fits", lambda r: {True: "yes", False: "NO", None: "?"}[r["fits"]]),
    Column("samples", lambda r: r["samples"]),
    Column("J/sample", lambda r: _energy(r["joules_per_sample"])),
    Column("samples/J", lambda r: _energy(r["samples_per_joule"])),
)


def _has_fit(c: DeviceComparison) -> bool:
    return bool(c.rows) and all("memory_bytes" in r for r in c.rows)


def next_steps(c: DeviceComparison) -> list[str]:
    """Per device, what would change the picture (each analysis' ``next_steps``), prefixed with the device."""
    out = []
    for row, a in zip(c.rows, c.analyses):
        if row.get("fits") is False:
            out.append(f"{row['hardware']}: {fmt_bytes(row['memory_bytes'])} does not fit in "
                       f"{fmt_bytes(row['capacity_bytes'])}: split the model over devices (for an LLM, "
                       "`graphroof llm --tp N`) or narrow the weights (`graphroof llm --weights int4`)")
        for item in a.next_steps:
            if item.get("kind") != "fit" or row.get("fits") is not False:
                out.append(f"{row['hardware']}: {item['text']}")
    return out


def _fit_html(c: DeviceComparison) -> str:
    from html import escape

    head = "".join(f"<th>{escape(col.header)}</th>" for col in FIT_COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(col.cell(r, 'html')))}</td>" for col in FIT_COLUMNS)
                   + "</tr>" for r in c.rows)
    steps = next_steps(c)
    out = (f'<section id="memory-fit"><h2>Memory fit and energy</h2><table><thead><tr>{head}</tr></thead>'
           f"<tbody>{body}</tbody></table></section>")
    if steps:
        out += ('<section id="next-steps"><h2>Next steps</h2><ul>'
                + "".join(f"<li>{escape(s)}</li>" for s in steps) + "</ul></section>")
    return out


def render_compare(c: DeviceComparison, fmt: str = "terminal") -> str:
    if fmt == "json":
        return c.to_json() + "\n"
    if fmt == "csv":
        return csv_text([{"model": c.model, "flops": c.flops, "bytes": c.bytes, **r} for r in c.rows])
    if fmt == "html":
        from .html import render_compare_html

        page = render_compare_html(c, generated_stamp())
        return page.replace("</body>", _fit_html(c) + "</body>", 1) if _has_fit(c) else page
    if fmt == "markdown":
        out = [f"# graphroof compare: {md_escape(c.model)}", "", f"_{md_escape(generated_stamp())}_", "",
               f"- **model**: {md_escape(c.model)}: {fmt_flops(c.flops)}, {fmt_bytes(c.bytes)}", "",
               table(c.rows, COMPARE_COLUMNS, "markdown", esc=md_escape), ""]
        if _has_fit(c):
            out += ["## Memory fit and energy", "", table(c.rows, FIT_COLUMNS, "markdown", esc=md_escape), ""]
        steps = next_steps(c)
        if steps:
            out += ["## Next steps", ""] + [f"- {md_escape(s)}" for s in steps] + [""]
        out += [f"- {md_escape(n)}" for n in c.notes]
        return "\n".join(out) + "\n"
    if fmt == "terminal":
        out = [f"model: {c.model}: {fmt_flops(c.flops)}, {fmt_bytes(c.bytes)}", "",
               table(c.rows, COMPARE_COLUMNS, "terminal"), ""]
        if _has_fit(c):
            out += ["memory fit and energy per device:", table(c.rows, FIT_COLUMNS, "terminal"), ""]
        steps = next_steps(c)
        if steps:
            out += ["next steps:"] + [f"  - {s}" for s in steps] + [""]
        out += [f"note: {n}" for n in c.notes]
        return "\n".join(out) + "\n"
    raise ReportError(f"unknown format {fmt!r}; use one of: {', '.join(COMPARE_FORMATS)}")
