"""The result of :func:`graphroof.plan`: plain data (no engine, no simulator), rendered by ``graphroof.report``.

* ``configs``: one record per configuration, in the stable order of :meth:`~graphroof.planner.space.Config.key`:
  its settings, status (``simulated`` / ``pruned`` / ``rejected``) and reason, memory per GPU, analytic bounds,
  capacity (max per-replica rate meeting the SLOs), one point per offered rate, and its engine flags;
* ``frontier``: the Pareto frontier of output tokens/s per GPU against tokens/s per user (1 / median TPOT) over the
  points meeting the SLOs within the GPU budget;
* ``cheapest``: per offered rate, the configuration meeting the SLOs with the fewest GPUs (ties: lower $ per hour)
  and, with prices, the one with the lowest $ per hour;
* ``counts``: configurations, simulations, rejected / pruned counts by reason; ``notes``: assumptions and axes left
  out.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from .._version import __version__

__all__ = ["PlanResult", "pareto", "SCHEMA_VERSION", "CONVENTIONS"]

SCHEMA_VERSION = 1
CONVENTIONS = {
    "tokens_per_s_per_user": "1 / median TPOT of the requests (output tokens per second one user sees while decoding)",
    "output_tokens_per_s_per_gpu": "one replica's output tokens/s over its simulated run / its GPUs",
    "replicas": "ceil(offered rate / capacity): the offered rate split evenly over identical replicas",
    "capacity_rps": "the largest per-replica rate found meeting every SLO at slo_percentile (bisection)",
    "gpus": "replicas x GPUs per replica (tp x pp x dp; a disaggregated group: both pools)",
    "usd_per_million_tokens": "gpus x usd_per_hour / (rate x mean output tokens x 3600) x 1e6",
    "memory": "per GPU: weights + one max_batched_tokens chunk's activations + KV blocks <= capacity x gpu_mem_util",
}


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
                       "notes": self.notes, "timing": self.timing, "graphroof_version": __version__})

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def __repr__(self) -> str:
        c = self.counts
        return (f"<PlanResult {self.model}: {c.get('configurations')} configurations, {c.get('simulated')} simulated, "
                f"{c.get('pruned')} pruned, {c.get('rejected')} rejected, {len(self.frontier)} on the frontier>")
