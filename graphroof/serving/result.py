"""The result of :func:`graphroof.serving.serve`: plain data, no rendering (the reports are built on it).

* :class:`RatePoint`: the figures of one request rate (latency percentiles, throughput, goodput, KV use,
  preemptions, Little's-law check);
* :class:`ServeResult`: the run (model, device, normalised settings), one point per rate, the max sustainable
  rate, the replicas for a target rate, one rate's step timeline and every request's record.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .._version import __version__

__all__ = ["RatePoint", "ServeResult", "SCHEMA_VERSION", "CONVENTIONS", "RECORD_FIELDS"]

SCHEMA_VERSION = 1
RECORD_FIELDS = ("arrival_s", "first_token_s", "finish_s", "input_tokens", "output_tokens", "queue_s", "ttft_s",
                 "tpot_s", "e2e_s", "preemptions")
CONVENTIONS = {
    "times": "seconds; a request's clock starts at its arrival",
    "ttft_s": "first token time - arrival (queueing included)",
    "tpot_s": "(finish - first token) / (output tokens - 1); NaN for one output token (those meet any TPOT SLO)",
    "itl_s": "inter-token latency: each step's duration, weighted by the decode tokens it produced",
    "queue_s": "first scheduled - arrival",
    "duration_s": "first arrival to last finish",
    "percentiles": "numpy linear interpolation over the requests (itl: over the decode tokens)",
    "goodput_rps": "requests meeting every SLO given, per second of duration_s",
    "kv_used": "KV blocks in use / KV blocks of the replica, time-weighted over steps (within a run of decode "
               "steps linear between its ends)",
    "littles_law": "mean_in_system: the time-average of running + waiting requests over the steps; ratio = "
                   "mean_in_system / (arrival_rate x mean_time_in_system), about 1 when the run is consistent",
    "per_gpu": "an engine replica is tp GPUs; *_per_gpu divides by the GPUs of the run (tp x replicas; "
               "disaggregated: both pools' GPUs)",
    "usd_per_million_tokens": "replicas x tp x usd_per_hour / (target_rate x mean output tokens x 3600) x 1e6",
    "disaggregated": "x prefill + y decode replicas: TTFT = prefill end - arrival; the KV transfer and the wait for "
                     "decode blocks delay the second token (in TPOT and in the second token's ITL); GPUs = x tp_prefill "
                     "+ y tp_decode, *_per_gpu divides by them",
}


def _clean(v: Any) -> Any:
    """JSON-safe: numpy scalars and arrays to Python, NaN / inf to None."""
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, np.ndarray):
        return [_clean(x) for x in v.tolist()]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else None
    return v


@dataclass
class RatePoint:
    """The figures of one request rate."""

    rate_rps: float
    requests: int
    duration_s: float
    throughput_rps: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    ttft_s: dict[str, float]
    tpot_s: dict[str, float]
    itl_s: dict[str, float]
    e2e_s: dict[str, float]
    queue_s: dict[str, float]
    preemptions: int
    kv_used_mean: float
    kv_used_max: float
    goodput_rps: float
    slo_attainment: float
    littles_law: dict[str, float]
    #: disaggregated serving: per pool (prefill, decode) replicas, busy share and KV use; None when aggregated
    pools: dict[str, dict[str, float]] | None = None
    #: disaggregated serving: prefill end -> KV landed at the decode pool (link queue + wire + latency), seconds
    transfer_s: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return _clean(asdict(self))


@dataclass
class ServeResult:
    """A serving simulation: one :class:`RatePoint` per rate and the data behind them."""

    model: str
    hw: str
    hw_label: str
    settings: dict[str, Any]
    points: list[RatePoint]
    max_rate: dict[str, Any] | None = None
    replicas: dict[str, Any] | None = None
    timeline: dict[str, np.ndarray] = field(default_factory=dict)
    records: list[dict[str, np.ndarray]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: every field, the records as lists, NaN / inf as null."""
        return _clean({"schema_version": SCHEMA_VERSION, "graphroof_version": __version__,
                       "kind": "serve", "conventions": CONVENTIONS, "model": self.model, "hw": self.hw,
                       "hw_label": self.hw_label, "settings": self.settings,
                       "points": [p.to_dict() for p in self.points], "max_rate": self.max_rate,
                       "replicas": self.replicas, "timeline": self.timeline, "records": self.records,
                       "notes": self.notes})

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def records_csv(self, rate_index: int = 0) -> str:
        """One row per request of the rate at *rate_index* (:data:`RECORD_FIELDS`; NaN as an empty cell)."""
        rec = self.records[rate_index]
        buf = io.StringIO()
        buf.write(",".join(RECORD_FIELDS) + "\n")
        cols = [np.asarray(rec[f]) for f in RECORD_FIELDS]
        for row in zip(*cols):
            cells = []
            for v in row:
                if isinstance(v, (np.integer, int)):
                    cells.append(str(int(v)))
                else:
                    cells.append("" if not math.isfinite(float(v)) else repr(float(v)))
            buf.write(",".join(cells) + "\n")
        return buf.getvalue()
