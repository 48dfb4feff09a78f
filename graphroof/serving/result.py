"""The result of :func:`graphroof.serving.serve`: plain data, no rendering (the reports are built on it).

* :class:`RatePoint`: the figures of one request rate (latency percentiles, throughput, goodput, KV use,
  preemptions, Little's-law check);
* :class:`ServeResult`: the run (model, device, normalised settings), one point per rate, the max sustainable
  rate, the replicas for a target rate, one rate's step timeline and every request's record, and the error bands
  of its realistic figures (:meth:`ServeResult.attach_bands`).

Error bands: a serving percentile is made of engine steps (a TTFT of the queueing behind steps and the prefill
steps, a TPOT of decode steps), each priced by the same step cost ``graphroof llm`` prices a prefill or a decode
step with; so the TTFT / TPOT band of the device and runtime preset (:mod:`graphroof.hardware.bands`) applies to
the TTFT / TPOT percentiles, and the throughput band to the e2e percentiles, the output tokens/s and the max
sustainable rate (as ``graphroof llm`` bands e2e and tok/s).  Queueing amplifies step-time errors near
saturation, which the band (fitted on isolated steps) does not widen for; below saturation the throughput follows
the offered rate, so its band there overstates the spread.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .._version import __version__
from ..hardware.bands import ErrorBand, band_range

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
    "error_bands": "*_low_s / *_high_s (*_low / *_high for rates) = figure / (1 + p90_abs), figure x (1 + "
                   "p90_abs) of the band of its kind (error_bands: ttft for TTFT, tpot for TPOT, throughput for e2e, "
                   "tok/s and the max rate), looked up for the device (disaggregated: TTFT the prefill pool's, the "
                   "rest the decode pool's) and runtime preset; absent for the ideal roofline",
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
    #: the error-band ranges (:meth:`ServeResult.attach_bands`): per latency figure its {mean, p50, p90, p99} low
    #: and high ends, the output tok/s (and per GPU) low and high; None without bands
    ttft_low_s: dict[str, float] | None = None
    ttft_high_s: dict[str, float] | None = None
    tpot_low_s: dict[str, float] | None = None
    tpot_high_s: dict[str, float] | None = None
    e2e_low_s: dict[str, float] | None = None
    e2e_high_s: dict[str, float] | None = None
    output_tokens_per_s_low: float | None = None
    output_tokens_per_s_high: float | None = None
    output_tokens_per_s_per_gpu_low: float | None = None
    output_tokens_per_s_per_gpu_high: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in _BAND_FIELDS:  # a point without bands keeps the JSON it had
            if d[k] is None:
                del d[k]
        return _clean(d)

    def attach_bands(self, bands: dict[str, ErrorBand]) -> None:
        """Fill the ranges from *bands* (``ttft``, ``tpot``, ``throughput``: see the module docstring)."""
        for name, kind in (("ttft", "ttft"), ("tpot", "tpot"), ("e2e", "throughput")):
            stats = getattr(self, f"{name}_s")
            ranges = {q: band_range(v, bands.get(kind)) for q, v in stats.items()}
            setattr(self, f"{name}_low_s", {q: r[0] if r else math.nan for q, r in ranges.items()})
            setattr(self, f"{name}_high_s", {q: r[1] if r else math.nan for q, r in ranges.items()})
        for name in ("output_tokens_per_s", "output_tokens_per_s_per_gpu"):
            r = band_range(getattr(self, name), bands.get("throughput"))
            setattr(self, f"{name}_low", r[0] if r else None)
            setattr(self, f"{name}_high", r[1] if r else None)


_BAND_FIELDS = ("ttft_low_s", "ttft_high_s", "tpot_low_s", "tpot_high_s", "e2e_low_s", "e2e_high_s",
                "output_tokens_per_s_low", "output_tokens_per_s_high", "output_tokens_per_s_per_gpu_low",
                "output_tokens_per_s_per_gpu_high")


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
    #: the error band of each figure kind (``ttft``, ``tpot``, ``throughput``); empty for the ideal roofline
    bands: dict[str, ErrorBand] = field(default_factory=dict)

    def attach_bands(self, bands: dict[str, ErrorBand]) -> None:
        """Hold *bands* and the ranges they give: every point's (:meth:`RatePoint.attach_bands`), the max
        sustainable rate's ``rate_rps_low`` / ``rate_rps_high`` and the replicas that range needs for the target
        rate (``replicas_needed_low`` / ``_high``: ceil(target / capacity) at the capacity's high / low end)."""
        self.bands = dict(bands)
        if not self.bands:  # the ideal roofline: a bound, no band
            return
        for p in self.points:
            p.attach_bands(self.bands)
        r = band_range((self.max_rate or {}).get("rate_rps"), self.bands.get("throughput"))
        if self.max_rate is not None and r is not None:
            self.max_rate["rate_rps_low"], self.max_rate["rate_rps_high"] = r
        rep = self.replicas
        cap = band_range((rep or {}).get("capacity_rps_per_replica"), self.bands.get("throughput"))
        if rep is not None and cap is not None and rep.get("replicas_needed") is not None:
            need = [max(1, math.ceil(rep["target_rate_rps"] / c - 1e-9)) for c in (cap[1], cap[0])]
            rep["replicas_needed_low"], rep["replicas_needed_high"] = need

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: every field, the records as lists, NaN / inf as null."""
        return _clean({"schema_version": SCHEMA_VERSION, "graphroof_version": __version__,
                       "kind": "serve", "conventions": CONVENTIONS, "model": self.model, "hw": self.hw,
                       "hw_label": self.hw_label, "settings": self.settings,
                       "points": [p.to_dict() for p in self.points], "max_rate": self.max_rate,
                       "replicas": self.replicas, "timeline": self.timeline, "records": self.records,
                       "notes": self.notes, "error_bands": {k: b.as_dict() for k, b in self.bands.items()}})

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
