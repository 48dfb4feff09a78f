"""Renderers of a serving simulation (``graphroof.serving.ServeResult``): terminal / markdown tables (one row per
offered rate), the per-request records as CSV, and the HTML page (:mod:`.serve_html`).  JSON is the result's
``to_dict()``.

Everything is read from the result's plain data (points, max_rate, replicas, settings, timeline, records):
this module imports no engine and no simulator.  A rate point may be an object or a dict (a result read back
from JSON renders the same).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ReportError
from ..units import fmt_time
from .columns import Column, table
from .serve_bands import STEP_NOTE, band_line, bands_of, range_columns, range_text
from .serve_disagg import disagg_columns, disagg_lines, is_disagg
from .tables import csv_text

__all__ = ["render_serve", "serve_columns", "records_rows", "settings_text", "slo_text", "max_rate_text",
           "replicas_text", "rate_str", "header_lines", "has_slo", "CONVENTIONS", "get", "pct", "num",
           "serve_band_line", "BAND_NAMES"]

#: the figures each band covers in a serve report
BAND_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "throughput": "e2e, tok/s and max rate"}

#: How the figures are defined (printed in the header of every serve report).
CONVENTIONS = (
    "each engine step (a batch of prefill chunks and decode tokens) is priced by graphroof's step cost (roofline per "
    "kernel + derating + launches); a request's clock starts at its arrival: TTFT = first token - arrival (queueing "
    "included), TPOT = (finish - first token) / (output tokens - 1), queue = first scheduled - arrival; percentiles "
    "over the requests of a rate; tok/s/GPU = output tok/s / GPUs (TP x replicas; disaggregated: both pools); goodput = requests meeting every SLO per second; "
    "KV use = KV blocks in use / blocks of the replica, time-weighted mean / max over the steps"
)

_PCTS = ("p50", "p90", "p99")


def get(obj: Any, name: str, default: Any = None) -> Any:
    """*name* of a result object or of its dict form."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def pct(stats: Any, key: str) -> float | None:
    """One percentile (``p99``) of a ``{mean, p50, p90, p99}`` dict; None when absent."""
    if stats is None:
        return None
    v = get(stats, key)
    return None if v is None or not math.isfinite(float(v)) else float(v)


def num(v: float | None, spec: str = "{:,.1f}") -> str:
    return "-" if v is None else spec.format(v)


def rate_str(v: float) -> str:
    """A request rate: 3 significant digits, whole numbers from 1,000 up (``8,192``, not ``8.19e+03``)."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def _t(v: float | None) -> str:
    return "-" if v is None else fmt_time(v)


def _share(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def _kv(p: Any) -> str:
    mean, peak = get(p, "kv_used_mean"), get(p, "kv_used_max")
    if mean is None and peak is None:
        return "-"
    return f"{_share(mean)} / {_share(peak)}"


def _lat(metric: str, q: str) -> Column:
    return Column(f"{metric} {q}", lambda p: _t(pct(get(p, f"{metric.lower()}_s"), q)))


def serve_columns(r: Any) -> tuple[Column, ...]:
    """The rate table: offered rate, completed req/s, output tok/s (and per GPU), latency percentiles, e2e and
    queue p99, preemptions, KV use, goodput and SLO attainment (the last two when an SLO was given)."""
    cols = [Column("rate", lambda p: "-" if get(p, "rate_rps") is None else rate_str(get(p, "rate_rps"))),
            Column("req/s", lambda p: num(get(p, "throughput_rps"), "{:,.2f}")),
            Column("out tok/s", lambda p: num(get(p, "output_tokens_per_s"))),
            Column("tok/s/GPU", lambda p: num(get(p, "output_tokens_per_s_per_gpu"))),
            *(_lat("TTFT", q) for q in _PCTS), *(_lat("TPOT", q) for q in _PCTS),
            _lat("e2e", "p99"), Column("queue p99", lambda p: _t(pct(get(p, "queue_s"), "p99"))),
            Column("preempt", lambda p: num(get(p, "preemptions"), "{:,.0f}")),
            Column("KV mean/max", _kv)]
    if is_disagg(r):
        cols += list(disagg_columns())
    if has_slo(r):
        cols += [Column("goodput", lambda p: num(get(p, "goodput_rps"), "{:,.2f}")),
                 Column("SLO met", lambda p: _share(get(p, "slo_attainment")))]
    return tuple(cols)


def has_slo(r: Any) -> bool:
    s = get(r, "settings") or {}
    return s.get("slo_ttft_s") is not None or s.get("slo_tpot_s") is not None


def slo_text(r: Any) -> str:
    """``TTFT <= 2 s and TPOT <= 50 ms at p99`` (or ``no latency SLO``)."""
    s = get(r, "settings") or {}
    parts = []
    if s.get("slo_ttft_s") is not None:
        parts.append(f"TTFT <= {fmt_time(s['slo_ttft_s'])}")
    if s.get("slo_tpot_s") is not None:
        parts.append(f"TPOT <= {fmt_time(s['slo_tpot_s'])}")
    if not parts:
        return "no latency SLO"
    return " and ".join(parts) + f" at p{s.get('slo_percentile', 99.0):g}"


def _value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return ",".join(_value(x) for x in v)
    if isinstance(v, Mapping):
        return ",".join(f"{k}={_value(x)}" for k, x in v.items())
    return str(v)


#: Settings shown elsewhere in the header (the rates are the table's rows; the SLO has its own line).
_SHOWN_ELSEWHERE = ("rate", "rates", "rate_rps", "slo_ttft_s", "slo_tpot_s", "slo_percentile", "model", "hw",
                    "disagg")


def settings_text(r: Any) -> str:
    """Every input the simulation ran with, ``name value; ...`` (None values left out)."""
    s = get(r, "settings") or {}
    items = [f"{k} {_value(v)}" for k, v in s.items() if v is not None and k not in _SHOWN_ELSEWHERE]
    return "; ".join(items) or "-"


def max_rate_text(r: Any) -> str | None:
    """``maximum sustainable rate: 7.3 req/s under TTFT <= 2 s ... (7.4 req/s misses it: TTFT binds; 9
    simulations)`` from the result's ``max_rate`` (None when no search ran)."""
    m = get(r, "max_rate")
    if not m:
        return None
    rate, upper = get(m, "rate_rps"), get(m, "upper_rps")
    binding = get(m, "binding_slo") or get(m, "binding")
    binds = f"{str(binding).upper()} binds" if binding else ""
    if rate is None:
        low = f" even {rate_str(upper)} req/s misses it" if upper is not None else ""
        return (f"maximum sustainable rate: none found under {slo_text(r)}:{low}" + (f" ({binds})" if binds else ""))
    extra = []
    if upper is not None:
        extra.append(f"{rate_str(upper)} req/s misses it" + (f": {binds}" if binds else ""))
    elif binds:
        extra.append(binds)
    band = range_text(get(m, "rate_rps_low"), get(m, "rate_rps_high"), rate_str)
    if band != "-":
        extra.append(f"error band {band} req/s")
    its = get(m, "iterations")
    if its is not None:
        extra.append(f"{its} simulations" + ("" if get(m, "converged", True) else ", not converged"))
    tail = f" ({'; '.join(extra)})" if extra else ""
    return f"maximum sustainable rate: {rate_str(rate)} req/s under {slo_text(r)}{tail}"


def replicas_text(r: Any) -> str | None:
    """``replicas: 3 (3 GPUs) for 20 req/s at 7.3 req/s each (max rate under the SLO); $0.61 per million output
    tokens`` from the result's ``replicas``."""
    rep = get(r, "replicas")
    if not rep:
        return None
    n, gpus = get(rep, "replicas_needed"), get(rep, "gpus")
    target = get(rep, "target_rate_rps")
    cap, basis = get(rep, "capacity_rps_per_replica"), get(rep, "basis")
    goal = f" for {rate_str(target)} req/s" if target is not None else ""
    if n is None:
        return f"replicas{goal}: n/a, no capacity per replica known" + (f" ({basis})" if basis else "")
    line = f"replicas: {n}" + (f" ({gpus} GPU{'s' if gpus != 1 else ''})" if gpus is not None else "") + goal
    if cap is not None:
        line += f" at {rate_str(cap)} req/s each" + (f" ({basis})" if basis else "")
    lo, hi = get(rep, "replicas_needed_low"), get(rep, "replicas_needed_high")
    if lo is not None and hi is not None and (lo, hi) != (n, n):
        line += f" (error band of the capacity: {lo} - {hi} replicas)"
    usd = get(rep, "usd_per_million_tokens")
    if usd is not None:
        line += f"; ${usd:,.3g} per million output tokens"
    return line


def header_lines(r: Any) -> list[str]:
    n = len(get(r, "points") or [])
    return [f"model: {get(r, 'model')}",
            f"hardware: {get(r, 'hw_label') or get(r, 'hw')}",
            f"{n} offered rate{'s' if n != 1 else ''}; settings: {settings_text(r)}",
            *disagg_lines(r),
            f"SLO: {slo_text(r)}",
            f"conventions: {CONVENTIONS}"]


def render_serve(r: Any, fmt: str = "terminal", rate: int | None = None) -> str:
    """*r* in ``terminal`` | ``markdown`` | ``csv`` (the page: :func:`.serve_html.render_serve_html`); *rate*:
    the index of the rate whose records the CSV holds (None: every rate, with a ``rate_rps`` column)."""
    if fmt == "csv":
        return csv_text(records_rows(r, rate))
    md = fmt == "markdown"
    lines = [f"{'# ' if md else ''}serve: {get(r, 'model')} on {get(r, 'hw_label') or get(r, 'hw')}", ""]
    lines += [f"- {x}" if md else x for x in header_lines(r)]
    lines += ["", table(get(r, "points") or [], serve_columns(r), "markdown" if md else "terminal"), ""]
    lines.append("KV mean/max: KV-cache blocks in use, mean and peak over the engine steps; preempt: requests "
                 "evicted and recomputed")
    line = serve_band_line(r)
    if line:
        lines += ["", table(get(r, "points") or [], _range_cols(), "markdown" if md else "terminal"), "", line]
    for line in (max_rate_text(r), replicas_text(r)):
        if line:
            lines += ["", f"**{line}**" if md else line]
    for n in get(r, "notes") or ():
        lines += ["", f"note: {n}"]
    return "\n".join(lines) + "\n"


def serve_band_line(r: Any) -> str | None:
    """The line naming each band's regime and coverage (None: the result has no bands, e.g. the ideal roofline)."""
    bands = bands_of(r)
    return band_line(bands, BAND_NAMES, STEP_NOTE) if bands else None


def _range_cols() -> tuple[Column, ...]:
    return (Column("rate", lambda p: "-" if get(p, "rate_rps") is None else rate_str(get(p, "rate_rps"))),
            *range_columns())


# -- per-request records --------------------------------------------------------------------------------------

def _rates(r: Any) -> list[float]:
    return [float(get(p, "rate_rps")) for p in get(r, "points") or []]


def records_rows(r: Any, rate: int | None = None) -> list[dict[str, Any]]:
    """One row per request: the records of rate index *rate*, or of every rate (first column ``rate_rps``)."""
    recs: Sequence[Any] = get(r, "records") or []
    rates = _rates(r)
    if rate is not None and not -len(recs) <= rate < len(recs):
        raise ReportError(f"rate index {rate} is out of range: the result has {len(recs)} rates "
                          f"({', '.join(f'{x:g}' for x in rates)} req/s)")
    picked = list(enumerate(recs)) if rate is None else [(rate % len(recs), recs[rate])]
    rows: list[dict[str, Any]] = []
    for i, rec in picked:
        cols = {k: list(v) for k, v in (rec.items() if isinstance(rec, Mapping) else vars(rec).items())
                if (isinstance(v, Sequence) and not isinstance(v, str)) or hasattr(v, "tolist")}
        n = max((len(v) for v in cols.values()), default=0)
        for j in range(n):
            row: dict[str, Any] = {"rate_rps": rates[i] if i < len(rates) else i, "request": j}
            row.update({k: _plain(v[j]) for k, v in cols.items() if j < len(v)})
            rows.append(row)
    return rows


def _plain(v: Any) -> Any:
    """numpy scalars as Python numbers (the CSV writes ``1.5``, not ``np.float64(1.5)``)."""
    item = getattr(v, "item", None)
    return item() if callable(item) else v
