"""One column model for every table the reports print.

A :class:`Column` names its header, turns a row (a dict of raw numbers, or a result object) into the cell text,
and names the raw value that sorts it (the HTML tables' ``data-v``).  A table is a list of columns; the terminal
and markdown renderers print it with :func:`table`, the HTML templates iterate :func:`cells`.  The column sets of
the analysis (:data:`ROOF_COLUMNS`), the measured run (:data:`MEASURED_COLUMNS`) and the device comparison
(:data:`COMPARE_COLUMNS`) live here, so one figure is formatted the same way wherever it appears.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tabulate import tabulate

from ..units import fmt_bytes as _fmt_bytes
from ..units import fmt_flops as _fmt_flops
from ..units import fmt_rate, fmt_si, fmt_time

__all__ = ["Column", "cells", "table", "col", "count_col", "fmt_ai", "fmt_ai_terminal", "ROOF_COLUMNS",
           "MEASURED_COLUMNS",
           "COMPARE_COLUMNS", "LAYER_LEAD", "KERNEL_LEAD", "fmt_ratio", "fmt_pct", "fmt_params"]


@dataclass(frozen=True)
class Column:
    """One table column: *header*, *text* (row -> cell), *sort_key* (row key of the raw value, for sorting).

    *text_terminal*: a different cell text for the terminal table (the arithmetic intensity is ``1,365`` there and
    ``1.37e+03`` in markdown / HTML); ``None`` = the same everywhere.
    """

    header: str
    text: Callable[[Any], Any]
    sort_key: str | None = None
    text_terminal: Callable[[Any], Any] | None = None

    def cell(self, row: Any, fmt: str = "markdown") -> Any:
        """The cell of *row* in *fmt* (text; the terminal's count columns stay ints, right-aligned)."""
        fn = self.text_terminal if (fmt == "terminal" and self.text_terminal) else self.text
        return fn(row)

    def value(self, row: Any) -> Any:
        return row.get(self.sort_key) if self.sort_key and isinstance(row, Mapping) else None


def col(header: str, key: str, fmt: Callable[[Any], str] = str, sort: bool = True) -> Column:
    """A column showing ``fmt(row[key])``, sorted by ``row[key]``."""
    return Column(header, lambda r: fmt(r[key]), key if sort else None)


def count_col(header: str, key: str) -> Column:
    """A count (ops per layer): an int in the terminal table (right-aligned), text elsewhere."""
    return Column(header, lambda r: str(r[key]), key, text_terminal=lambda r: r[key])


def cells(row: Any, columns: Sequence[Column], fmt: str = "html") -> list[tuple[str, Any]]:
    """(display text, sort value) per column of one row (what the HTML templates iterate)."""
    return [(c.cell(row, fmt), c.value(row)) for c in columns]


def table(rows: Sequence[Any], columns: Sequence[Column], fmt: str = "terminal",
          esc: Callable[[str], str] | None = None) -> str:
    """The rows as a terminal (``simple``) or markdown (``github``) table; *esc* escapes markdown cell text."""
    body = [[esc(x) if esc and isinstance(x, str) else x for x in (c.cell(r, fmt) for c in columns)] for r in rows]
    return tabulate(body, headers=[c.header for c in columns], tablefmt="github" if fmt == "markdown" else "simple",
                    disable_numparse=True)


# -- cell formats ------------------------------------------------------------------------------------------

def fmt_ai(x: float | None) -> str:
    """Arithmetic intensity in markdown / HTML: 3 significant digits, ``inf`` for ops that move no bytes."""
    if x is None:
        return "-"
    if x == float("inf"):
        return "inf"
    return f"{x:.3g}"


def fmt_ai_terminal(x: float | None) -> str:
    """Arithmetic intensity in the terminal: like :func:`fmt_ai`, whole numbers with separators from 1,000."""
    if x is not None and x != float("inf") and x >= 1000:
        return f"{x:,.0f}"
    return fmt_ai(x)


def fmt_params(n: float | None) -> str:
    """A parameter count: ``25.6 M``, ``6.74 G``; ``-`` for a layer that reads no weights."""
    return fmt_si(n) if n else "-"


def fmt_ratio(v: float | None, spec: str = "{:.3g}") -> str:
    return "-" if v is None else spec.format(v)


def fmt_pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def _flops(r: Mapping[str, Any]) -> str:
    return _fmt_flops(r["flops"]) + ("*" if r.get("estimated") else "")


#: The roofline columns of an analysis layer or op row (``Analysis.layers`` / ``.ops``).
ROOF_COLUMNS: tuple[Column, ...] = (
    Column("FLOPs", _flops, "flops"),
    col("bytes", "bytes", _fmt_bytes),
    Column("AI (FLOP/B)", lambda r: fmt_ai(r["intensity"]), "intensity",
           text_terminal=lambda r: fmt_ai_terminal(r["intensity"])),
    col("attainable", "attainable_flops_per_s", fmt_rate),
    col("time", "time_s", fmt_time),
    col("realistic", "time_realistic_s", fmt_time),
    col("bound", "bound"),
    col("share", "share", lambda v: f"{100 * v:.1f}%"),
)


def _opt(fn: Callable[[float], str], key: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda r: "-" if r[key] is None else fn(r[key])


#: Leading columns of a layer table: the layer's name and how many ops it holds.
#: The name cell is the display label (``model.layers.* ×32``, structural rows explained: :func:`graphroof.layers.label_of`) when set.
LAYER_LEAD: tuple[Column, ...] = (Column("layer", lambda r: r.get("label", r["name"]), "name"),
                                  count_col("ops", "n_ops"),
                                  Column("params", lambda r: fmt_params(r.get("params")), "params"))


#: Leading columns of a kernel table (rows: :meth:`graphroof.analysis.Analysis.kernel_table`): the kernel (``×N``
#: when identical kernels of repeated blocks are folded), the module it belongs to, its kind, ops, dtype and model.
KERNEL_LEAD: tuple[Column, ...] = (
    Column("kernel", lambda r: r.get("label", r["name"]), "name"),
    Column("module", lambda r: r.get("module") or r["scope"] or "(top)", "scope"),
    col("kind", "kind"), col("ops", "n_ops"), col("dtype", "dtype"), col("model", "time_model"),
)


#: Predicted vs measured columns of a measured run's layer or op row
#: (:class:`graphroof.measure.run.MeasuredComparison`).
MEASURED_COLUMNS: tuple[Column, ...] = (
    col("predicted", "predicted_s", fmt_time),
    col("realistic", "predicted_realistic_s", fmt_time),
    Column("measured", lambda r: fmt_time(r["measured_s"]) if r["measured_s"] is not None else "unmatched",
           "measured_s"),
    Column("meas/pred", lambda r: fmt_ratio(r["ratio"]), "ratio"),
    Column("meas/real", lambda r: fmt_ratio(r["ratio_realistic"]), "ratio_realistic"),
    Column("achieved", _opt(fmt_rate, "achieved_flops_per_s"), "achieved_flops_per_s"),
    Column("% roof", lambda r: fmt_pct(r["roof_fraction"]), "roof_fraction"),
    Column("achieved BW", _opt(lambda v: fmt_rate(v, "B/s"), "achieved_bytes_per_s"), "achieved_bytes_per_s"),
    Column("% BW", lambda r: fmt_pct(r["bw_fraction"]), "bw_fraction"),
    col("bound", "bound"),
    Column("measured bound", lambda r: r["measured_bound"] or "-", "measured_bound"),
)


def _speedup(key: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda r: "-" if r[key] is None else f"{r[key]:.2f}x"


#: One device per row of a device comparison (:class:`graphroof.comparison.DeviceComparison`).
COMPARE_COLUMNS: tuple[Column, ...] = (
    col("hardware", "hardware", sort=False),
    col("time", "time_s", fmt_time),
    col("realistic", "time_realistic_s", fmt_time),
    Column("constants", lambda r: r.get("timing_origin", "-") + (" *" if r.get("rank_note") else "")),
    col("bound", "bound", sort=False),
    Column("speed-up", _speedup("speedup"), "speedup"),
    Column("realistic speed-up", _speedup("speedup_realistic"), "speedup_realistic"),
    col("compute-bound share", "compute_bound_share", lambda v: f"{100 * v:.0f}%"),
    col("memory bw", "mem_bw_bytes_per_s", lambda v: fmt_rate(v, "B/s")),
    Column("matrix peak (dense)", lambda r: f"{r['peak_key']} {fmt_rate(r['peak_flops_per_s'])}", "peak_flops_per_s"),
    col("ridge (FLOP/B)", "ridge_flop_per_byte", fmt_ai),
)
