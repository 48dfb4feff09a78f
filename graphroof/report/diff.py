"""Terminal / markdown / JSON rendering of an :class:`graphroof.diff.AnalysisDiff` (``graphroof diff``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..units import fmt_bytes, fmt_flops, fmt_time
from .columns import Column, table
from .markdown import md_escape

__all__ = ["render_diff", "DIFF_FORMATS"]

DIFF_FORMATS = ("terminal", "markdown", "json")


def _signed(fmt: Callable[[float], str]) -> Callable[[float | None], str]:
    def out(v: float | None) -> str:
        if v is None:
            return "-"
        a = float(f"{abs(v):.6g}")  # 0.000999999... (a difference of sums) is shown as 1 ms, not 1e+03 us
        return "0" if a == 0 else ("+" if v > 0 else "-") + fmt(a)
    return out


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.1f}%"


_TOTAL_FMT: dict[str, Callable[[float], str]] = {"time_s": fmt_time, "time_realistic_s": fmt_time,
                                                  "time_floor_s": fmt_time, "flops": fmt_flops,
                                                  "n_kernels": lambda v: f"{v:,.0f}"}


def _total_cell(row: dict[str, Any], key: str) -> str:
    v = row[key]
    if v is None:
        return "-"
    if row["figure"] == "bound":
        return str(v)
    fmt = _TOTAL_FMT.get(row["figure"], fmt_bytes)
    return _signed(fmt)(v) if key == "delta" else fmt(v)


TOTAL_COLUMNS = (Column("figure", lambda r: r["label"]), Column("before", lambda r: _total_cell(r, "before")),
                 Column("after", lambda r: _total_cell(r, "after")), Column("change", lambda r: _total_cell(r, "delta")),
                 Column("change %", lambda r: _pct(r["pct"])))


def _pct_cell(fig: str) -> Callable[[dict[str, Any]], str]:
    def cell(r: dict[str, Any]) -> str:
        if r["status"] in ("added", "removed"):
            return r["status"]
        return _pct(r[f"pct_{fig}"])
    return cell


def _bound(r: dict[str, Any]) -> str:
    b, a = r["before_bound"] or "-", r["after_bound"] or "-"
    return b if r["status"] == "removed" else a if (b == a or r["status"] == "added") else f"{b} -> {a}"


def _value(fmt: Callable[[float], str], key: str) -> Callable[[dict[str, Any]], str]:
    return lambda r: "-" if r[key] is None else fmt(r[key])


ROW_COLUMNS = (
    Column("time before", _value(fmt_time, "before_time_s")), Column("time after", _value(fmt_time, "after_time_s")),
    Column("Δ time", lambda r: _signed(fmt_time)(r["delta_time_s"])), Column("Δ time %", _pct_cell("time_s")),
    Column("bytes before", _value(fmt_bytes, "before_bytes")), Column("bytes after", _value(fmt_bytes, "after_bytes")),
    Column("Δ bytes", lambda r: _signed(fmt_bytes)(r["delta_bytes"])), Column("Δ bytes %", _pct_cell("bytes")),
    Column("bound", _bound),
)
LAYER_COLUMNS = (Column("layer", lambda r: r["name"]), *ROW_COLUMNS)
KERNEL_COLUMNS = (Column("kernel", lambda r: r["name"]), Column("scope", lambda r: r.get("scope") or "-"),
                  Column("kind", lambda r: r.get("kind") or "-"), *ROW_COLUMNS)


def _section(d: Any, what: str, columns: tuple[Column, ...], fmt: str, top: int | None) -> list[str]:
    rows = getattr(d, what)
    n = d.counts(what)
    shown = [r for r in rows if r["status"] != "same"]
    more = len(shown) - top if top and len(shown) > top else 0
    shown = shown[:top] if top else shown
    title = (f"{what.capitalize()}: {n['changed']} changed, {n['added']} added, {n['removed']} removed, "
             f"{n['same']} unchanged" + (f" (the {len(shown)} largest time changes)" if more else ""))
    out = [f"\n## {title}\n" if fmt == "markdown" else f"\n{title}"]
    if shown:
        out.append(table(shown, columns, fmt, esc=md_escape if fmt == "markdown" else None))
    else:
        out.append("no changes")
    if more:
        out.append(f"{'- ' if fmt == 'markdown' else ''}... {more} more changed rows (--top 0 lists them all)")
    return out


def render_diff(d: Any, fmt: str = "terminal", top: int | None = 20) -> str:
    """*d* (an :class:`AnalysisDiff`) as text; *top*: the most changed layer / kernel rows shown (None or 0: all;
    the JSON always holds every row)."""
    if fmt == "json":
        return d.to_json() + "\n"
    md = fmt == "markdown"
    bullet = "- " if md else ""
    out = [f"# graphroof diff: {d.before_file} -> {d.after_file}\n" if md
           else f"graphroof diff: {d.before_file} -> {d.after_file}"]
    for h in d.header:
        b, a = h["before"], h["after"]
        b, a = (md_escape(x) if md else x for x in (b, a))
        out.append(f"{bullet}{h['field']}: {b}" if b == a else f"{bullet}{h['field']}: {b} -> {a}")
    out.append("\n## Totals\n" if md else "\nTotals")
    out.append(table(d.totals, TOTAL_COLUMNS, fmt, esc=md_escape if md else None))
    out += _section(d, "layers", LAYER_COLUMNS, fmt, top)
    out += _section(d, "kernels", KERNEL_COLUMNS, fmt, top)
    if d.notes:
        out.append("")
        out.extend(f"{bullet}note: {n}" for n in d.notes)
    out.append(f"{bullet}change = after - before; % of before; layers matched by name, kernels by scope and kind "
               "(first op name without its number); times are the per-kernel roofline (time_s)")
    return "\n".join(out) + "\n"
