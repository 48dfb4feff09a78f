"""What a report says, computed once from one or more phases; the HTML and markdown renderers lay it out.

A *phase* is ``(name, Analysis)``: ``analyze`` gives one (named ``"model"``); an LLM run gives ``prefill`` and
``decode``.  Renderers see only ``Analysis.header() / .ops / .layers / .totals / .notes() / .hw / .summary``.
Every string here is plain text (unescaped); escaping is the renderer's job.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._version import __version__
from ..errors import ReportError
from ..units import fmt_bytes, fmt_flops, fmt_rate, fmt_time
from .columns import ROOF_COLUMNS, fmt_ai
from .columns import cells as row_cells

__all__ = ["Phase", "as_phases", "generated_stamp", "fmt_ai", "cells", "breakdown", "kernel_label",
           "assumptions",
           "runtime_assumptions", "timing_assumptions", "header_facts", "totals_facts", "ReportContent", "build",
           "phases_next_steps", "TABLE_COLUMNS"]

#: Header texts of the layer / op roofline columns (the columns themselves: :data:`.columns.ROOF_COLUMNS`).
TABLE_COLUMNS = tuple(c.header for c in ROOF_COLUMNS)


@dataclass(frozen=True)
class Phase:
    name: str
    analysis: Any  # graphroof.analysis.Analysis


def as_phases(obj: Any, default_name: str = "model") -> list[Phase]:
    """An Analysis, a ``{name: Analysis}`` mapping or a list of ``(name, Analysis)`` -> ``[Phase, ...]``."""
    if hasattr(obj, "layers") and hasattr(obj, "hw"):
        return [Phase(str(obj.meta.get("phase") or default_name), obj)]
    items: Iterable = obj.items() if isinstance(obj, Mapping) else obj
    phases = [p if isinstance(p, Phase) else Phase(str(p[0]), p[1]) for p in items]
    if not phases:
        raise ReportError("nothing to report: no analyses given")
    names = [p.name for p in phases]
    if len(set(names)) != len(names):
        raise ReportError(f"phase names must be unique, got {names}")
    return phases


def generated_stamp() -> str:
    """``graphroof 0.1.0, 2025-01-31 12:00 UTC``; honours ``SOURCE_DATE_EPOCH`` for reproducible files."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = (_dt.datetime.fromtimestamp(int(epoch), _dt.timezone.utc) if epoch and epoch.isdigit()
            else _dt.datetime.now(_dt.timezone.utc))
    return f"graphroof {__version__}, {when:%Y-%m-%d %H:%M} UTC"


def cells(r: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(display text, sort value) for the roofline columns of a layer or op row."""
    return row_cells(r, ROOF_COLUMNS)


# -- breakdowns -----------------------------------------------------------------------------------------

@dataclass
class Share:
    label: str
    time_s: float
    share: float
    n: int


def _shares(groups: dict[str, list[float]], total: float) -> list[Share]:
    out = [Share(k, sum(v), (sum(v) / total) if total else 0.0, len(v)) for k, v in groups.items()]
    return sorted(out, key=lambda s: (-s.time_s, s.label))


def kernel_label(r: Mapping[str, Any]) -> str:
    """What a kernel runs: its op kinds in order (``aten.conv2d + aten.batch_norm``), with the kernel kind when it
    fuses several (``gemm: aten.conv2d + aten.batch_norm``)."""
    keys = list(dict.fromkeys(r.get("op_keys") or [r["kind"]]))
    return " + ".join(keys) if len(keys) == 1 else f"{r['kind']}: " + " + ".join(keys)


def breakdown(a, top: int = 12) -> dict[str, list[Share]]:
    """Where the time goes: roofline time of the kernels as priced (so the shares sum to 100%), by what each
    kernel runs (top *top*, rest as "other") and by bound.  ``n`` counts kernels."""
    total = a.totals.t_lower_s
    by_kind: dict[str, list[float]] = {}
    by_bound: dict[str, list[float]] = {}
    for r in a.kernel_rows:
        by_kind.setdefault(kernel_label(r), []).append(r["time_s"])
        if r["time_s"] or r["flops"] or r["bytes"]:
            by_bound.setdefault(r["bound"], []).append(r["time_s"])
    kinds = _shares(by_kind, total)
    if len(kinds) > top:
        rest = kinds[top - 1:]
        kinds = kinds[:top - 1] + [Share(f"other ({len(rest)} kinds)", sum(s.time_s for s in rest),
                                         sum(s.share for s in rest), sum(s.n for s in rest))]
    return {"by_kind": kinds, "by_bound": _shares(by_bound, total)}


# -- header, totals, assumptions ------------------------------------------------------------------------

#: Integer dtypes of index arithmetic (position ids, masks): not what the model computes in, left out of the header.
INDEX_DTYPES = frozenset({"int64", "int32", "int16", "uint64", "uint32", "uint16", "bool"})


def _has_attention(a) -> bool:
    return any("attention" in r["op"].split(".")[-1].lower() for r in a.ops)


def header_facts(phases: list[Phase]) -> list[tuple[str, str]]:
    """(label, text) pairs: model, hardware, dtypes, phases, capture, dims, conventions, coverage."""
    a0 = phases[0].analysis
    h = a0.header()
    origin = f"; {h['hardware_timing_origin']} timing constants" if h.get("hardware_timing_origin") else ""
    facts = [("model", h["model"]), ("hardware", f"{h['hardware']} ({h['hardware_name']}{origin})")]
    facts.append(("memory bandwidth", fmt_rate(h["mem_bw_bytes_per_s"], "B/s")))
    peaks: dict[str, float] = {}
    ridges: dict[str, float] = {}
    dtypes: dict[str, None] = {}
    for p in phases:
        hp = p.analysis.header()
        peaks.update(hp["peaks_used_flops_per_s"])
        ridges.update(hp["ridge_points_flop_per_byte"])
        dtypes.update(dict.fromkeys(d for d in hp["dtypes"] if d not in INDEX_DTYPES))
    facts.append(("peaks used (dense)", ", ".join(f"{k} {fmt_rate(v)}" for k, v in peaks.items()) or "-"))
    facts.append(("ridge points (FLOP/B)", ", ".join(f"{k} {v:.1f}" for k, v in ridges.items()) or "-"))
    facts.append(("compute dtypes", ", ".join(dtypes) or "-"))
    facts.append(("phases", ", ".join(p.name for p in phases)))
    if h["capture"]:
        facts.append(("capture", str(h["capture"])))
    dims = {k: v for p in phases for k, v in p.analysis.header()["dims"].items()}
    if dims:
        facts.append(("dims", ", ".join(f"{k}={v}" for k, v in dims.items())))
    facts.append(("layer depth", str(h["depth"])))
    facts.append(("conventions", h["conventions"]))
    for p in phases:
        label = "coverage" if len(phases) == 1 else f"coverage ({p.name})"
        facts.append((label, p.analysis.summary.coverage_line()))
    return facts


def totals_facts(a) -> list[tuple[str, str]]:
    t = a.totals
    c = t.cost
    p = a.time_parts()
    e = a.eager_totals
    facts = [
        ("runtime preset", f"{a.runtime} ({len(a.graph)} ops in {len(a.timed_graph)} kernels); eager: roofline "
                           f"{fmt_time(e.t_lower_s)}, realistic {fmt_time(e.t_realistic_s)}"),
        ("floor", f"{fmt_time(p['time_floor_s'])} (max(Σ Tc, Σ Tm) over kernels)"),
        ("roofline", f"{fmt_time(t.time_roofline_s)} (Σ max(Tc, Tm) per kernel)"),
        ("realistic", f"{fmt_time(t.time_realistic_s)} = roofline + derating {fmt_time(p['time_derating_s'])} "
                           f"+ launch {fmt_time(p['time_launch_s'])} ({p['n_kernels']} kernels)"),
        *([("error band", f"{fmt_time(b.low(t.time_realistic_s))} - {fmt_time(b.high(t.time_realistic_s))}: "
                          f"{b.figure} {b.describe()}")] if (b := getattr(a, "band", None)) is not None else []),
        ("no-overlap bound", f"{fmt_time(t.t_upper_s)} (Σ Tc + Tm)"),
        ("bound", t.bound),
        ("FLOPs", f"{fmt_flops(c.flops)} (matrix {fmt_flops(c.matrix_flops)}, vector {fmt_flops(c.vector_flops)})"),
        ("bytes", f"{fmt_bytes(c.bytes)} (weights {fmt_bytes(c.weight_bytes)}, activations "
                  f"{fmt_bytes(c.act_bytes)}, KV {fmt_bytes(c.kv_bytes)})"),
        ("intensity", f"{fmt_ai(c.intensity)} FLOP/B"),
    ]
    if c.net_bytes:
        facts.append(("network", f"{fmt_bytes(c.net_bytes)}, {fmt_time(t.t_network_s)}"))
    return facts


def runtime_assumptions(phases: list[Phase]) -> list[str]:
    """The fusion line, from the runtime preset each phase's kernels were formed under."""
    out: dict[str, None] = {}
    for p in phases:
        a = p.analysis
        what = a.runtime_description()
        if a.kernels is None or len(a.timed_graph) == len(a.graph):
            out.setdefault(f"fusion: {what}; every op is its own kernel and reads its inputs from and writes its "
                           "outputs to main memory")
        else:
            out.setdefault(f"fusion: {what}; a kernel reads only the tensors entering it and writes only those "
                           "leaving it (tensors inside a kernel stay on chip); op rows keep unfused bytes")
    return list(out)


def timing_assumptions(phases: list[Phase]) -> list[str]:
    """How the realistic time was priced (the profile's kernel-level model, else its efficiency factors) and how
    launches were paid (per kernel, or once per step as a CUDA-graph replay), per phase where they differ."""
    a0 = phases[0].analysis
    hw = a0.hw
    if hw.timing is not None:
        tm = hw.timing
        out = [f"realistic time ({hw.name}): kernel-level model (docs/kernel_timing.md): GEMMs by tiles and waves "
               f"at matrix efficiency {tm.gemm_matrix_efficiency:g} and bandwidth efficiency "
               f"{tm.gemm_mem_bw_efficiency:g}, streaming kernels at their kind's sustained bandwidth, other "
               f"kernels at the profile's efficiencies (matrix {hw.matrix_efficiency:g}, vector "
               f"{hw.vector_efficiency:g}, memory bandwidth {hw.mem_bw_efficiency:g}, interconnect "
               f"{hw.interconnect_efficiency:g})"]
        per_kernel = tm.launch_overhead_s
    else:
        out = [f"realistic-time efficiencies ({hw.name}): matrix {hw.matrix_efficiency:g}, vector "
               f"{hw.vector_efficiency:g}, memory bandwidth {hw.mem_bw_efficiency:g}, interconnect "
               f"{hw.interconnect_efficiency:g}"]
        per_kernel = hw.launch_overhead_s
    for p in phases:
        a = p.analysis
        prefix = "" if len(phases) == 1 else f"{p.name}: "
        n = a.time_parts()["n_kernels"]
        if a.step_launch_s:
            out.append(f"{prefix}launch: the step runs as one CUDA-graph replay, {fmt_time(a.step_launch_s)} per "
                       f"step ({n} kernels, no per-kernel launch)")
        else:
            out.append(f"{prefix}launch overhead {fmt_time(per_kernel)} per kernel ({n} kernels)")
    return out


def assumptions(phases: list[Phase]) -> list[str]:
    """Byte model, efficiencies, what was estimated, and every note the analyses carry."""
    a0 = phases[0].analysis
    out = runtime_assumptions(phases)
    settings = a0.graph.meta.get("count_settings")
    if settings is not None and hasattr(settings, "describe") and any(_has_attention(p.analysis) for p in phases):
        out.append(settings.describe())  # the attention counting settings: only where there is attention
    out += timing_assumptions(phases)
    seen: set[str] = set(out)
    for p in phases:
        a = p.analysis
        est = [r for r in a.ops if r.get("estimated")]
        prefix = "" if len(phases) == 1 else f"{p.name}: "
        if est:
            kinds = sorted({r["op"] for r in est})
            share = sum(r["share"] for r in est)
            out.append(f"{prefix}estimated: {len(est)} of {len(a.ops)} ops ({100 * share:.1f}% of the roofline "
                       f"time) {'has' if len(est) == 1 else 'have'} no exact rule or an approximate count: "
                       f"{', '.join(kinds[:10])}"
                       + (f" and {len(kinds) - 10} more" if len(kinds) > 10 else "") + " (marked * in the tables)")
        else:
            out.append(f"{prefix}estimated: nothing; every op has an exact counting rule")
        for n in a.notes()[1:]:  # notes()[0] is the coverage line, already in the header
            if n not in seen:
                seen.add(n)
                out.append(n)
    return out


# -- the whole report -----------------------------------------------------------------------------------

@dataclass
class PhaseContent:
    name: str
    analysis: Any
    totals: list[tuple[str, str]]
    breakdown: dict[str, list[Share]]
    layers: list[dict[str, Any]]
    ops_by_name: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class ReportContent:
    title: str
    stamp: str
    header: list[tuple[str, str]]
    phases: list[PhaseContent]
    assumptions: list[str]
    next_steps: list[dict[str, Any]] = field(default_factory=list)  # the analyses' own (graphroof.advice)


def phases_next_steps(phases: list[Phase]) -> list[dict[str, Any]]:
    """The next steps each phase's analysis holds; the phase name prefixes the text when there are several."""
    out = []
    for p in phases:
        for it in getattr(p.analysis, "next_steps", None) or []:
            if len(phases) > 1:
                it = {**it, "phase": p.name, "text": f"{p.name}: {it['text']}"}
            out.append(it)
    return out


def build(phases: list[Phase], fold: bool = True) -> ReportContent:
    a0 = phases[0].analysis
    title = f"{a0.model_name} on {a0.hw.label}"
    pcs = [PhaseContent(p.name, p.analysis, totals_facts(p.analysis), breakdown(p.analysis),
                        p.analysis.layer_table(fold), {r["name"]: r for r in p.analysis.ops}) for p in phases]
    return ReportContent(title, generated_stamp(), header_facts(phases), pcs, assumptions(phases),
                         phases_next_steps(phases))
