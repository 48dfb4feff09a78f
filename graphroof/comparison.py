"""One model on several devices: the :class:`DeviceComparison` result of ``graphroof compare`` (a row per device,
its main peak, and notes that say why the ranking comes out as it does)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .analysis import CONVENTIONS, Analysis
from .units import fmt_time

__all__ = ["DeviceComparison", "compare_devices", "main_peak", "ranking_notes"]


@dataclass
class DeviceComparison:
    """The same model analysed on several devices (``graphroof.compare``); speed-ups are vs the first device."""

    model: str
    flops: float
    bytes: float
    rows: list[dict[str, Any]]
    notes: list[str]
    analyses: list[Analysis] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "flops": self.flops, "bytes": self.bytes, "devices": self.rows,
                "notes": self.notes}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


def main_peak(a: Analysis) -> tuple[str, float]:
    """The matrix peak most of the FLOPs ran on (the model's headline roof on this device)."""
    by_key: dict[str, float] = {}
    for r in a.ops:
        if r["matrix_flops"]:
            key = r["peak_used"].split("+")[0]
            by_key[key] = by_key.get(key, 0.0) + r["matrix_flops"]
    if by_key:
        key = max(by_key, key=lambda k: by_key[k])
        return key, a.peaks_used().get(key, 0.0)
    peaks = a.peaks_used()
    if peaks:
        key = max(peaks, key=lambda k: peaks[k])
        return key, peaks[key]
    return "-", 0.0


def ranking_notes(analyses: list[Analysis], rows: list[dict[str, Any]]) -> list[str]:
    """What a cross-device ranking must say: the realistic winner's ``rank_note`` (set on its row) when the devices'
    constants differ in origin (fitted / derived / assumed), and, for each device whose realistic order against the
    first device flips the roofline order, the physical reason (where each one's realistic time goes)."""
    out: list[str] = []
    if len(rows) < 2:
        return out
    if all(a.hw.timing is not None for a in analyses):
        from .timing.profile import sustained_note

        out.append(sustained_note([a.hw for a in analyses]))
    origins = {r["timing_origin"] for r in rows}
    win = min(range(len(rows)), key=lambda i: rows[i]["time_realistic_s"])
    if len(origins) > 1:
        by = ", ".join(f"{o}: {', '.join(r['hardware'] for r in rows if r['timing_origin'] == o)}"
                       for o in ("fitted", "derived", "assumed") if o in origins)
        rows[win]["rank_note"] = (f"fastest realistic, but the devices' timing constants differ in origin ({by}): "
                                  "the ranking compares models of different standing")
        out.append(f"* {rows[win]['hardware']}: {rows[win]['rank_note']}")
    parts = [a.time_parts() for a in analyses]

    def where(i: int) -> str:
        p, r = parts[i], rows[i]
        n = p["n_kernels"] or 1
        return (f"{r['hardware']}: roofline {fmt_time(r['time_s'])}, launches {p['n_kernels']} x "
                f"{fmt_time(p['time_launch_s'] / n)} = {p['time_launch_s'] / p['time_realistic_s']:.0%}, derating "
                f"{p['time_derating_s'] / p['time_realistic_s']:.0%} of {fmt_time(r['time_realistic_s'])}")

    for i in range(len(rows)):
        for j in range(len(rows)):
            ri, rj = rows[i], rows[j]
            if ri["time_s"] > rj["time_s"] and ri["time_realistic_s"] < rj["time_realistic_s"]:
                out.append(f"{ri['hardware']} ranks above {rj['hardware']} realistically but below it on the roofline: "
                           f"per-kernel launches and derating (kernel fixed times, tile / wave quantisation, sustained "
                           f"fractions of peak) differ: {where(i)}; {where(j)}")
    return out


def compare_devices(analyses: list[Analysis]) -> DeviceComparison:
    """Rows for the same model analysed on several devices (first = the baseline of the speed-ups)."""
    if not analyses:
        from .errors import ReportError

        raise ReportError("compare needs at least one hardware profile")
    base = analyses[0].totals
    rows = []
    for a in analyses:
        t = a.totals
        key, peak = main_peak(a)
        compute_share = sum(r["share"] for r in a.ops if r["bound"] == "compute")
        rows.append({
            "hardware": a.hw.label, "profile": a.hw.name, "time_s": t.t_lower_s,
            "time_realistic_s": t.t_realistic_s, "time_upper_s": t.t_upper_s, "bound": t.bound,
            "speedup": base.t_lower_s / t.t_lower_s if t.t_lower_s else None,
            "speedup_realistic": base.t_realistic_s / t.t_realistic_s if t.t_realistic_s else None,
            "compute_bound_share": compute_share, "mem_bw_bytes_per_s": a.hw.mem_bw_bytes_per_s,
            "peak_key": key, "peak_flops_per_s": peak, "ridge_flop_per_byte": peak / a.hw.mem_bw_bytes_per_s,
            "timing_origin": a.hw.origin,
        })
    a0 = analyses[0]
    ranking = ranking_notes(analyses, rows)
    notes = [CONVENTIONS, a0.summary.coverage_line(),
             f"speed-up = time on {a0.hw.label} / time on the device (roofline lower bound; realistic uses each "
             "profile's efficiencies and launch overhead)",
             "compute-bound share = share of the roofline time spent in compute-bound ops", *ranking]
    return DeviceComparison(a0.model_name, a0.totals.cost.flops, a0.totals.cost.bytes, rows, notes,
                            list(analyses))
