"""A measured run (``graphroof profile``): what a runner measured, and predicted vs measured per layer and op.

Definitions (also printed with the report):

* **predicted**: the roofline time on the ``--hw`` profile, ``roof`` = Σ max(Tc, Tm) (ideal) and ``real`` =
  the realistic time (efficiency factors + the profile's per-op launch overhead).  A profile written by
  ``graphroof calibrate`` has efficiencies 1.0 and the measured dispatch overhead.
* **measured**: per node, the median over profiled runs of the time of the runtime op(s) mapped onto it (see
  :mod:`graphroof.measure.match`); a layer's measured time is the sum over its matched nodes, and its
  predicted time, FLOPs and bytes are summed over the same nodes, so unmatched nodes do not skew a ratio.
  The whole model is also timed without the profiler (median wall time of a forward pass).
* **ratio** = measured / predicted (> 1: slower than predicted).  Summary: whole model, and the median and
  90th percentile of the per-layer ratios.
* **achieved** = FLOPs / measured (and bytes / measured); **% roof** = achieved / the roofline ceiling at the
  layer's intensity (min(peak, AI x bandwidth)); **% BW** = achieved bytes/s / memory bandwidth.
* **bound** (predicted) of a layer: ``compute``, ``memory`` or ``network``, whichever of its summed Tc, Tm, Tn
  (over the matched nodes) is largest: the rule of every layer table (:func:`graphroof.layers.summarize`).
* **measured bound** of a layer: ``overhead`` when it ran more than ``overhead_factor`` (2) times slower than
  its roofline time (neither roof explains it: dispatch, launch, poor kernels); otherwise ``compute`` or
  ``memory``, whichever predicted term (Tc, Tm) is nearer the measured time on a log scale (a layer
  predicted memory-bound that beats the memory roof, e.g. because its data stayed in cache, is compute).
  **Bound attribution** = share of measured time in layers whose measured bound equals the predicted one.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..analysis import Analysis
from ..graph import BOUND, COST
from ..layers import attainable_flops_per_s, summarize
from ..units import json_safe
from .hygiene import calibrated_threads, loaded_message, spread, spread_message, threads_message
from .match import MatchResult

__all__ = ["Measured", "MeasuredComparison", "measured_bound", "percentile", "work_nodes", "auto_runs"]


def percentile(xs: Sequence[float], q: float) -> float | None:
    """Linear-interpolated *q*-th percentile (0-100); ``None`` for no data."""
    v = sorted(xs)
    if not v:
        return None
    pos = (len(v) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def measured_bound(t_c: float, t_m: float, t_meas: float, overhead_factor: float = 2.0) -> str:
    """``compute`` | ``memory`` | ``overhead`` for a measured time against predicted Tc / Tm (module docstring)."""
    roof = max(t_c, t_m)
    if roof <= 0 or t_meas > overhead_factor * roof:
        return "overhead"
    if t_c <= 0:
        return "memory"
    if t_m <= 0:
        return "compute"
    return "compute" if abs(math.log(t_meas / t_c)) <= abs(math.log(t_meas / t_m)) else "memory"


def auto_runs(t_forward_s: float, budget_s: float = 2.0, lo: int = 5, hi: int = 50) -> int:
    """Passes per measurement so that one measurement lasts about *budget_s* (at least *lo*, at most *hi*)."""
    return int(min(hi, max(lo, math.ceil(budget_s / max(t_forward_s, 1e-9)))))


def work_nodes(graph) -> list[tuple[str, str, str, float]]:
    """``(name, op, scope, predicted t_s)`` of every node with FLOPs or bytes, in topological order."""
    out = []
    for op in graph.ops():
        c = graph.get(op.name, COST)
        if c is not None and (c.flops or c.bytes):
            out.append((op.name, op.op, op.scope, graph.get(op.name, BOUND).t_s))
    return out


@dataclass
class Measured:
    """What a runner measured: one :class:`MatchResult` per profiled run plus plain wall times."""

    runtime: str                       # "torch 2.13.0 eager, cpu, 2 threads"
    runs: list[MatchResult]
    wall_s: list[float]                # forward pass without the profiler
    profiled_s: list[float] = field(default_factory=list)  # forward pass under the profiler
    notes: list[str] = field(default_factory=list)
    threads: int | None = None         # CPU threads the runtime used (None: its default, not known)
    load_1min: float | None = None     # the machine's 1-min load average before measuring
    cpus: int | None = None

    def node_times(self) -> dict[str, float]:
        per: dict[str, list[float]] = {}
        for r in self.runs:
            for n, t in r.node_time_s.items():
                per.setdefault(n, []).append(t)
        return {n: statistics.median(ts) for n, ts in per.items()}

    def unmatched_nodes(self) -> list[str]:
        times = self.node_times()
        seen: dict[str, None] = {}
        for r in self.runs:
            for n in r.unmatched_nodes:
                if n not in times:
                    seen.setdefault(n)
        return list(seen)

    def unmatched_events(self) -> list[dict[str, Any]]:
        """Per (scope, op): calls and seconds per forward pass, slowest first."""
        agg: dict[tuple[str, str], list[float]] = {}
        for r in self.runs:
            for e in r.unmatched_events:
                k = (e.scope, e.label or e.name)
                agg.setdefault(k, [0.0, 0.0])
                agg[k][0] += 1
                agg[k][1] += e.t_s
        n = max(1, len(self.runs))
        rows = [{"scope": s, "op": o, "calls": c / n, "time_s": t / n} for (s, o), (c, t) in agg.items()]
        return sorted(rows, key=lambda r: -r["time_s"])

    def how_counts(self) -> Counter:
        c: Counter = Counter()
        if self.runs:
            c.update(self.runs[0].how.values())
        return c


def _row_metrics(hw, flops, nbytes, t_c, t_m, t_roof, t_real, t_meas, attainable, pred_bound, k) -> dict:
    r: dict[str, Any] = {"flops": flops, "bytes": nbytes, "t_compute_s": t_c, "t_memory_s": t_m,
                         "predicted_s": t_roof, "predicted_realistic_s": t_real, "measured_s": t_meas,
                         "attainable_flops_per_s": attainable, "bound": pred_bound}
    if t_meas is None or t_meas <= 0:
        r.update(ratio=None, ratio_realistic=None, achieved_flops_per_s=None, achieved_bytes_per_s=None,
                 roof_fraction=None, bw_fraction=None, measured_bound=None, bound_correct=None)
        return r
    ach_f, ach_b = flops / t_meas, nbytes / t_meas
    mb = measured_bound(t_c, t_m, t_meas, k)
    r.update(ratio=t_meas / t_roof if t_roof else None, ratio_realistic=t_meas / t_real if t_real else None,
             achieved_flops_per_s=ach_f, achieved_bytes_per_s=ach_b,
             roof_fraction=ach_f / attainable if attainable and flops else None,
             bw_fraction=ach_b / hw.mem_bw_bytes_per_s, measured_bound=mb, bound_correct=mb == pred_bound)
    return r


class MeasuredComparison:
    """Predicted (:class:`Analysis`) vs :class:`Measured`, as op rows, layer rows and summary figures."""

    def __init__(self, analysis: Analysis, measured: Measured, overhead_factor: float = 2.0):
        self.a = analysis
        self.m = measured
        self.k = overhead_factor
        self.times = measured.node_times()
        self.unmatched = measured.unmatched_nodes()
        self.ops = self._op_rows()
        self.layers = self._layer_rows()
        self.summary = self._summary()

    def _op_rows(self) -> list[dict[str, Any]]:
        hw, rows = self.a.hw, []
        how = self.m.runs[0].how if self.m.runs else {}
        for r in self.a.ops:
            if not (r["flops"] or r["bytes"]):
                continue
            t = self.times.get(r["name"])
            row = {"name": r["name"], "op": r["op"], "scope": r["scope"], "dtype": r["dtype"],
                   "matched_by": how.get(r["name"]), "intensity": r["intensity"],
                   **_row_metrics(hw, r["flops"], r["bytes"], r["t_compute_s"], r["t_memory_s"], r["time_s"],
                                  r["time_realistic_s"], t, r["attainable_flops_per_s"], r["bound"], self.k)}
            rows.append(row)
        return rows

    def _layer_rows(self) -> list[dict[str, Any]]:
        hw = self.a.hw
        by_name = {r["name"]: r for r in self.ops}
        out = []
        for L in self.a.layers:
            work = [by_name[n] for n in L["ops"] if n in by_name]
            if not work:
                continue
            got = [r for r in work if r["measured_s"] is not None]
            # predicted figures over the matched ops only, through the common rollup (one bound rule)
            cost, t = summarize(self.a.graph, [r["name"] for r in got], hw)
            s = {"flops": cost.flops, "bytes": cost.bytes, "t_compute_s": t.t_compute_s,
                 "t_memory_s": t.t_memory_s, "predicted_s": t.t_lower_s,
                 "predicted_realistic_s": t.t_realistic_s, "measured_s": sum(r["measured_s"] for r in got)}
            ai = s["flops"] / s["bytes"] if s["bytes"] else (math.inf if s["flops"] else 0.0)
            attainable = attainable_flops_per_s(cost, t, hw)
            bound = t.bound if got else "-"
            row = {"name": L["name"], "n_work_ops": len(work), "n_matched": len(got), "intensity": ai,
                   **_row_metrics(hw, s["flops"], s["bytes"], s["t_compute_s"], s["t_memory_s"], s["predicted_s"],
                                  s["predicted_realistic_s"], s["measured_s"] if got else None, attainable, bound,
                                  self.k)}
            out.append(row)
        return out

    def _summary(self) -> dict[str, Any]:
        t = self.a.totals
        wall = statistics.median(self.m.wall_s) if self.m.wall_s else None
        prof = statistics.median(self.m.profiled_s) if self.m.profiled_s else None
        rows = [r for r in self.layers if r["measured_s"]]
        ratios = [r["ratio"] for r in rows if r["ratio"]]
        ratios_r = [r["ratio_realistic"] for r in rows if r["ratio_realistic"]]
        meas_total = sum(r["measured_s"] for r in rows) or 0.0
        by_class: dict[str, float] = {"correct": 0.0, "wrong_bound": 0.0, "overhead": 0.0}
        for r in rows:
            key = "correct" if r["bound_correct"] else ("overhead" if r["measured_bound"] == "overhead" else "wrong_bound")
            by_class[key] += r["measured_s"]
        unm_ev = self.m.unmatched_events()
        n_work = len(self.ops)
        ws = self.m.wall_s
        return {
            "runtime": self.m.runtime,
            "predicted_s": t.t_lower_s, "predicted_realistic_s": t.t_realistic_s,
            "measured_wall_s": wall, "measured_profiled_s": prof,
            "measured_wall_min_s": min(ws) if ws else None, "measured_wall_max_s": max(ws) if ws else None,
            "measured_wall_spread": spread(ws), "n_wall_runs": len(ws),
            "threads": self.m.threads, "profile_threads": calibrated_threads(self.a.hw),
            "load_1min": self.m.load_1min, "cpus": self.m.cpus, "warnings": self._warnings(),
            "ratio": wall / t.t_lower_s if wall and t.t_lower_s else None,
            "ratio_realistic": wall / t.t_realistic_s if wall and t.t_realistic_s else None,
            "matched_op_time_s": sum(self.times.values()),
            "unmatched_event_time_s": sum(e["time_s"] for e in unm_ev),
            "n_work_nodes": n_work, "n_matched": n_work - len(self.unmatched), "n_unmatched": len(self.unmatched),
            "unmatched_predicted_s": sum(r["predicted_s"] for r in self.ops if r["measured_s"] is None),
            "matched_by": dict(self.m.how_counts()),
            "n_layers": len(rows),
            "layer_ratio_median": percentile(ratios, 50), "layer_ratio_p90": percentile(ratios, 90),
            "layer_ratio_realistic_median": percentile(ratios_r, 50),
            "layer_ratio_realistic_p90": percentile(ratios_r, 90),
            "bound_correct_share": by_class["correct"] / meas_total if meas_total else None,
            "bound_wrong_share": by_class["wrong_bound"] / meas_total if meas_total else None,
            "bound_overhead_share": by_class["overhead"] / meas_total if meas_total else None,
            "overhead_factor": self.k,
            "bad_profile": self._bad_profile(rows),
        }

    def _warnings(self) -> list[str]:
        """What makes this measurement doubtful: a loaded machine, noisy passes, another thread count than the
        profile's (:mod:`graphroof.measure.hygiene`)."""
        msgs = [loaded_message(self.m.load_1min, self.m.cpus, "profile", "measured times are high and noisy and "
                               "layers look overhead-bound"),
                spread_message(self.m.wall_s, "the forward pass"),
                threads_message(self.m.threads, calibrated_threads(self.a.hw), self.a.hw.name)]
        return [m for m in msgs if m]

    #: A layer measured faster than this multiple of its roofline ceiling means the --hw profile is wrong.
    BAD_PROFILE_ROOF = 1.5

    def _bad_profile(self, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The layer furthest above its ceiling when one ran at > 150 % of it (a roofline is an upper bound, so
        the profile's peaks are too low: a --quick smoke profile, or one calibrated on a loaded machine)."""
        over = [r for r in rows if (r["roof_fraction"] or 0) > self.BAD_PROFILE_ROOF]
        if not over:
            return None
        worst = max(over, key=lambda r: r["roof_fraction"])
        return {"n_layers": len(over), "worst_layer": worst["name"], "worst_roof_fraction": worst["roof_fraction"],
                "message": f"bad profile: {len(over)} layer(s) ran above 150% of their roofline ceiling (worst "
                           f"{worst['name']} at {100 * worst['roof_fraction']:.0f}%); a roofline is an upper bound, "
                           f"so the peaks of --hw {self.a.hw.name} are too low for this device: re-run "
                           "`graphroof calibrate` on an idle machine, without --quick"}

    # -- output ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return json_safe({
            "schema_version": 1, "kind": "profile", **self.a.header(),
            "hardware_profile": self.a.hw.as_dict(), "summary": self.summary,
            "notes": [*self.a.notes(), *self.m.notes],
            "layers": self.layers, "ops": self.ops,
            "unmatched_nodes": self.unmatched, "unmatched_events": self.m.unmatched_events(),
        })

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)
