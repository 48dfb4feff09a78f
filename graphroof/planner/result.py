"""The result of :func:`graphroof.plan`: plain data (no engine, no simulator), rendered by ``graphroof.report``.

* ``configs``: one record per configuration, in the stable order of :meth:`~graphroof.planner.space.Config.key`:
  its settings, status (``simulated`` / ``pruned`` / ``rejected``) and reason, memory per GPU, analytic bounds,
  capacity (max per-replica rate meeting the SLOs), one point per offered rate, and its engine flags;
* ``frontier``: the Pareto frontier of output tokens/s per GPU against tokens/s per user (1 / median TPOT) over the
  points meeting the SLOs within the GPU budget;
* ``cheapest``: per offered rate, the configuration meeting the SLOs with the fewest GPUs (ties: lower $ per hour)
  and, with prices, the one with the lowest $ per hour;
* ``counts``: configurations, simulations, rejected / pruned counts by reason; ``notes``: assumptions and axes left
  out;
* ``bands``: per device, the error band of each figure kind (``ttft``, ``tpot``, ``throughput``:
  :meth:`graphroof.hardware.bands.ErrorBand.as_dict`, looked up for the device and the runtime preset); every
  frontier point and cheapest pick carries the low / high ends of its figures: ``ttft_s`` / ``ttft_p50_s`` from the
  TTFT band, ``tpot_s`` / ``tpot_p50_s`` and ``tokens_per_s_per_user`` (1 / median TPOT) from the TPOT band,
  ``output_tokens_per_s_per_gpu`` from the throughput band (a figure f: ``[f / (1 + p90_abs), f (1 + p90_abs)]``).
  A plan's point is a serving simulation's percentile, made of engine steps each priced as ``graphroof llm``
  prices a step: the step figure's band applies to it (:mod:`graphroof.serving.result`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from .._version import __version__
from ..hardware.bands import band_range, figure_bands

__all__ = ["PlanResult", "pareto", "plan_bands", "SCHEMA_VERSION", "CONVENTIONS", "BANDED"]

SCHEMA_VERSION = 1
CONVENTIONS = {
    "tokens_per_s_per_user": "1 / median TPOT of the requests (output tokens per second one user sees while decoding)",
    "output_tokens_per_s_per_gpu": "one replica's output tokens/s over its simulated run / its GPUs",
    "replicas": "ceil(offered rate / capacity): the offered rate split evenly over identical replicas",
    "capacity_rps": "the largest per-replica rate found meeting every SLO at slo_percentile (bisection)",
    "gpus": "replicas x GPUs per replica (tp x pp x dp; a disaggregated group: both pools)",
    "usd_per_million_tokens": "gpus x usd_per_hour / (rate x mean output tokens x 3600) x 1e6",
    "memory": "per GPU: weights + one max_batched_tokens chunk's activations + KV blocks <= capacity x gpu_mem_util",
    "error_bands": "*_low_s / *_high_s (*_low / *_high for rates) of the frontier points and cheapest picks = figure "
                   "/ (1 + p90_abs), figure x (1 + p90_abs) of the device's band of the figure's kind (bands; see "
                   "graphroof.planner.result)",
}

#: a point's banded figures: (key, band kind, suffix of its low / high keys)
BANDED = (("ttft_s", "ttft", "_s"), ("ttft_p50_s", "ttft", "_s"), ("tpot_s", "tpot", "_s"),
          ("tpot_p50_s", "tpot", "_s"), ("tokens_per_s_per_user", "tpot", ""),
          ("output_tokens_per_s_per_gpu", "throughput", ""))


def plan_bands(profiles: list[Any], runtime: str, ideal: bool = False) -> dict[str, dict[str, dict[str, Any]]]:
    """Per device, its error bands under *runtime* as plain dicts (none for the ideal roofline: a bound)."""
    if ideal:
        return {}
    return {p.name: {k: b.as_dict() for k, b in figure_bands(p, runtime).items()} for p in profiles}


def pareto(points: list[dict[str, Any]], x: str = "tokens_per_s_per_user",
           y: str = "output_tokens_per_s_per_gpu") -> list[dict[str, Any]]:
    """The points no other point beats on both *x* and *y* (higher is better), sorted by *x* then *y*; points with a
    missing or non-finite figure are left out."""
    ok = [p for p in points if _fin(p.get(x)) and _fin(p.get(y))]
    ok.sort(key=lambda p: (-p[x], -p[y], p.get("config_index", 0), p.get("rate_rps", 0.0)))
    out, best_y = [], -math.inf
    for p in ok:  # descending x: a point is on the frontier when its y beats every point of higher x
        if p[y] > best_y:
            out.append(p)
            best_y = p[y]
    return sorted(out, key=lambda p: (p[x], p[y]))


def _fin(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _clean(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if hasattr(v, "item") and callable(v.item):  # numpy scalars
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


@dataclass
class PlanResult:
    """Plain data; ``to_dict()`` is its JSON form (``graphroof.report.render(result, "json")``)."""

    model: str
    settings: dict[str, Any]
    configs: list[dict[str, Any]]
    frontier: list[dict[str, Any]]
    cheapest: list[dict[str, Any]]
    counts: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    timing: dict[str, float] = field(default_factory=dict)
    #: per device, the error band of each figure kind (:func:`plan_bands`); empty: no ranges (ideal roofline)
    bands: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """The frontier points and the cheapest picks get the low / high ends of their figures (module docstring)."""
        if not self.bands:
            return
        for p in self.frontier + [row[k] for row in self.cheapest for k in ("by_gpus", "by_usd") if row.get(k)]:
            b = self.bands.get(self.device_of(p))
            if not b:
                continue
            for key, kind, unit in BANDED:
                r = band_range(p.get(key), b.get(kind))
                if r is not None:
                    base = key[:-2] if unit else key
                    p[f"{base}_low{unit}"], p[f"{base}_high{unit}"] = r

    def device_of(self, p: dict[str, Any]) -> str:
        """The device a point ran on: its configuration's (by index), else the first word of its label."""
        i = p.get("config_index")
        if isinstance(i, int) and 0 <= i < len(self.configs) and self.configs[i].get("hw"):
            return str(self.configs[i]["hw"])
        return str(p.get("config") or "").split(" ")[0]

    @property
    def rejected(self) -> list[dict[str, Any]]:
        return [c for c in self.configs if c["status"] == "rejected"]

    @property
    def pruned(self) -> list[dict[str, Any]]:
        return [c for c in self.configs if c["status"] == "pruned"]

    def points(self) -> list[dict[str, Any]]:
        """Every simulated (configuration, rate) point, with its configuration's label and index."""
        return [p for c in self.configs for p in c.get("points", [])]

    def values(self) -> dict[str, Any]:
        """What must be equal whichever way the plan ran (serial, processes, Ray): everything but timing."""
        d = self.to_dict()
        d.pop("timing", None)
        d.pop("graphroof_version", None)
        d.get("settings", {}).pop("fanout", None)
        return d

    def to_dict(self) -> dict[str, Any]:
        return _clean({"schema_version": SCHEMA_VERSION, "kind": "plan", "model": self.model,
                       "settings": self.settings, "conventions": CONVENTIONS, "counts": self.counts,
                       "frontier": self.frontier, "cheapest": self.cheapest, "configs": self.configs,
                       "notes": self.notes, "timing": self.timing, "error_bands": self.bands,
                       "graphroof_version": __version__})

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def __repr__(self) -> str:
        c = self.counts
        return (f"<PlanResult {self.model}: {c.get('configurations')} configurations, {c.get('simulated')} simulated, "
                f"{c.get('pruned')} pruned, {c.get('rejected')} rejected, {len(self.frontier)} on the frontier>")
