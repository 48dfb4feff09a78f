"""The points of an LLM sweep, their Pareto frontier and SLO picks (:class:`SweepResult`, columns of arrays:
a million points take a few arrays, not a million objects; :class:`SweepPoint` objects are built on demand).

Definitions (per point, ``n = batch`` sequences on ``tp`` GPUs):

* ``tokens_per_s = n * gen / e2e_s`` (all GPUs of the point), ``tokens_per_s_per_gpu = tokens_per_s / tp``;
* ``tokens_per_s_per_user = gen / e2e_s``: output tokens per second one user sees, TTFT included;
* ``usd_per_million_tokens = usd_per_hour * tp / 3600 / tokens_per_s * 1e6`` (price per GPU-hour);
* ``joules_per_token = board_power_w * tp / tokens_per_s``: an upper bound, every GPU at its full board power
  (the profile's ``board_power_w``); ``tokens_per_joule`` its inverse (None without a board power).

The **frontier** of a device keeps the points that fit in memory and that no other such point beats on both
tokens/s per GPU and tokens/s per user.  :func:`pick_slo` picks per device the fitting point with the most
tokens/s per GPU among those meeting ``max_ttft_s`` / ``max_tpot_s``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .._version import __version__
from ..llm.tokens import e2e_s
from ..units import json_safe

__all__ = ["SweepPoint", "SweepResult", "RunningFrontier", "pareto", "pick_slo", "meets", "COLUMNS"]

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class SweepPoint:
    """One configuration on one device (times realistic unless the sweep is ideal)."""

    hw: str
    batch: int
    prompt: int
    gen: int
    tp: int
    ttft_s: float
    tpot_s: float | None
    prefill_bound: str
    decode_bound: str | None
    memory_bytes: float
    capacity_bytes: float | None   # usable device memory (capacity x the serving gpu_mem_util)
    weights: str | None = None
    activations: str | None = None
    kv: str | None = None
    usd_per_hour: float | None = None
    #: the device's board power (TDP / TBP) from its profile; None: not given (energy shown as n/a)
    board_power_w: float | None = None
    #: a disaggregated prefill / decode pair (``sweep(..., disagg=)``): the GPUs of both pools (None: ``tp``) and
    #: the pair's output tokens/s, pools working concurrently (None: ``batch * gen / e2e_s``)
    gpus: int | None = None
    pair_tokens_per_s: float | None = None

    @property
    def e2e_s(self) -> float:
        return e2e_s(self.ttft_s, self.tpot_s, self.gen)

    @property
    def tokens_per_s(self) -> float:
        if self.pair_tokens_per_s is not None:
            return self.pair_tokens_per_s
        return self.batch * self.gen / self.e2e_s if self.e2e_s else float("inf")

    @property
    def n_gpus(self) -> int:
        """The GPUs the throughput is spread over: ``tp``, or both pools of a disaggregated pair."""
        return self.gpus if self.gpus is not None else self.tp

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.n_gpus

    @property
    def tokens_per_s_per_user(self) -> float:
        return self.gen / self.e2e_s if self.e2e_s else float("inf")

    @property
    def fits(self) -> bool | None:
        return None if self.capacity_bytes is None else self.memory_bytes <= self.capacity_bytes

    @property
    def usd_per_million_tokens(self) -> float | None:
        if self.usd_per_hour is None:
            return None
        return self.usd_per_hour * self.n_gpus / 3600.0 / self.tokens_per_s * 1e6

    @property
    def joules_per_token(self) -> float | None:
        """Upper bound: every GPU of the point at its full board power for the whole request,
        ``board_power_w * tp * e2e_s / (batch * gen)`` = ``board_power_w * tp / tokens_per_s``."""
        if self.board_power_w is None or not self.tokens_per_s:
            return None
        return self.board_power_w * self.n_gpus / self.tokens_per_s

    @property
    def tokens_per_joule(self) -> float | None:
        j = self.joules_per_token
        return 1.0 / j if j else None

    @property
    def dtype(self) -> str:
        """``w=int4 kv=fp8`` style label of the what-if dtypes (``native`` when none)."""
        parts = [f"{k}={v}" for k, v in (("w", self.weights), ("a", self.activations), ("kv", self.kv)) if v]
        return " ".join(parts) or "native"

    @property
    def bound(self) -> str:
        return self.decode_bound or self.prefill_bound

    @property
    def label(self) -> str:
        return f"b{self.batch} tp{self.tp} {self.dtype}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(e2e_s=self.e2e_s, tokens_per_s=self.tokens_per_s, tokens_per_s_per_gpu=self.tokens_per_s_per_gpu,
                 tokens_per_s_per_user=self.tokens_per_s_per_user, fits=self.fits, dtype=self.dtype,
                 usd_per_million_tokens=self.usd_per_million_tokens, joules_per_token=self.joules_per_token,
                 tokens_per_joule=self.tokens_per_joule)
        return d


def pareto(points: Iterable[SweepPoint]) -> list[SweepPoint]:
    """The points that fit (or whose fit is unknown) and that no other such point beats on both tokens/s per GPU
    and tokens/s per user (ties on both keep the first); sorted by tokens/s per user, fastest first."""
    pts = [p for p in points if p.fits is not False]
    pts.sort(key=lambda p: (-p.tokens_per_s_per_user, -p.tokens_per_s_per_gpu))
    out: list[SweepPoint] = []
    best_gpu = float("-inf")
    for p in pts:
        if p.tokens_per_s_per_gpu > best_gpu:
            out.append(p)
            best_gpu = p.tokens_per_s_per_gpu
    return out


def meets(p: SweepPoint, max_ttft_s: float | None = None, max_tpot_s: float | None = None) -> bool:
    """Fits in memory (or unknown) and meets the SLOs (a point without decode steps has no TPOT to violate)."""
    if p.fits is False:
        return False
    if max_ttft_s is not None and p.ttft_s > max_ttft_s:
        return False
    return not (max_tpot_s is not None and p.tpot_s is not None and p.tpot_s > max_tpot_s)


def pick_slo(points: Iterable[SweepPoint], max_ttft_s: float | None = None,
             max_tpot_s: float | None = None) -> dict[str, SweepPoint | None]:
    """Per device (in first-seen order): the point meeting the SLOs with the most tokens/s per GPU (ties: the
    lower TPOT, then the lower TTFT); None for a device where no point meets them."""
    out: dict[str, SweepPoint | None] = {}
    for p in points:
        out.setdefault(p.hw, None)
        if not meets(p, max_ttft_s, max_tpot_s):
            continue
        cur = out[p.hw]
        key = (p.tokens_per_s_per_gpu, -(p.tpot_s or 0.0), -p.ttft_s)
        if cur is None or key > (cur.tokens_per_s_per_gpu, -(cur.tpot_s or 0.0), -cur.ttft_s):
            out[p.hw] = p
    return out


class RunningFrontier:
    """The per-device Pareto frontier and SLO pick of points seen one at a time, in constant memory per device:
    equal to :func:`pareto` and :func:`pick_slo` over all the points (candidates kept in arrival order, so ties
    resolve as they do over the whole list)."""

    def __init__(self, max_ttft_s: float | None = None, max_tpot_s: float | None = None):
        self.max_ttft_s, self.max_tpot_s = max_ttft_s, max_tpot_s
        self.front: dict[str, list[SweepPoint]] = {}
        self.best: dict[str, SweepPoint | None] = {}
        self.n = 0

    def add(self, p: SweepPoint) -> None:
        self.n += 1
        cands = self.front.setdefault(p.hw, [])
        if p.fits is not False:
            kept = {id(q) for q in pareto([*cands, p])}
            self.front[p.hw] = [q for q in (*cands, p) if id(q) in kept]
        self.best[p.hw] = pick_slo([x for x in (self.best.get(p.hw), p) if x is not None],
                                   self.max_ttft_s, self.max_tpot_s)[p.hw]


#: the columns of a :class:`SweepResult` (one array or list each), in :class:`SweepPoint`'s field order
COLUMNS = ("hw", "batch", "prompt", "gen", "tp", "ttft_s", "tpot_s", "prefill_bound", "decode_bound",
           "memory_bytes", "capacity_bytes", "weights", "activations", "kv", "usd_per_hour", "board_power_w",
           "gpus", "pair_tokens_per_s")


def _opt(v: Any) -> Any:
    """A column value as a point field: NaN -> None, numpy scalars -> Python numbers."""
    if v is None:
        return None
    if isinstance(v, (float, np.floating)):
        return None if np.isnan(v) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


class SweepResult:
    """Every point of one sweep, held as columns (:data:`COLUMNS`); ``points`` builds the :class:`SweepPoint`
    objects on first use.  The frontier and SLO picks are computed on the columns (equal to :func:`pareto` and
    :func:`pick_slo` over the points)."""

    def __init__(self, model: str, points: list[SweepPoint] | None = None, *,
                 columns: dict[str, Any] | None = None, hw_labels: dict[str, str] | None = None,
                 max_ttft_s: float | None = None, max_tpot_s: float | None = None, ideal: bool = False,
                 notes: list[str] | None = None, traces: int = 0, trace_s: float = 0.0,
                 streamed: RunningFrontier | None = None, hw_origins: dict[str, str] | None = None,
                 bands: dict[str, dict[str, dict[str, Any]]] | None = None):
        self.model = model
        self.hw_labels = dict(hw_labels or {})
        #: per device, where its timing constants come from (``fitted`` / ``derived`` / ``assumed``: HardwareProfile.origin)
        self.hw_origins = dict(hw_origins or {})
        #: per device, the error band of each realistic figure kind (``ttft``, ``tpot``, ``throughput``:
        #: :meth:`graphroof.hardware.bands.ErrorBand.as_dict`); empty for the ideal roofline
        self.bands = dict(bands or {})
        self.max_ttft_s, self.max_tpot_s, self.ideal = max_ttft_s, max_tpot_s, ideal
        self.notes = list(notes or [])
        self.traces, self.trace_s = traces, trace_s
        #: a streamed sweep (``on_point``): its points went to the caller; the frontier and picks are kept here
        self.streamed = streamed
        if columns is None:
            pts = list(points or [])
            columns = {c: [getattr(p, c) for p in pts] for c in COLUMNS}
            self._points: list[SweepPoint] | None = pts
        else:
            self._points = None
        n = len(columns["hw"])  # a column not given (the disaggregated pair's, in an aggregated sweep): NaN
        self.columns = {c: np.asarray(columns[c] if c in columns else np.full(n, np.nan),
                                      dtype=object if c in _OBJECT else float) for c in COLUMNS}

    def __len__(self) -> int:
        return len(self.columns["hw"])

    @property
    def points(self) -> list[SweepPoint]:
        if self._points is None:
            cols = [self.columns[c].tolist() for c in COLUMNS]
            self._points = [SweepPoint(*(_int(c, v) for c, v in zip(COLUMNS, row))) for row in zip(*cols)]
        return self._points

    def point(self, i: int) -> SweepPoint:
        if self._points is not None:
            return self._points[i]
        return SweepPoint(*(_int(c, self.columns[c][i]) for c in COLUMNS))

    # -- derived columns ------------------------------------------------------------------------------------
    def _derived(self) -> dict[str, np.ndarray]:
        c = self.columns
        gen, batch, tp = c["gen"], c["batch"], c["tp"]
        e2e = e2e_s(c["ttft_s"], c["tpot_s"], gen)
        with np.errstate(divide="ignore", invalid="ignore"):
            tps = np.where(e2e > 0, batch * gen / np.where(e2e > 0, e2e, 1.0), np.inf)
            if "gpus" in c:  # a disaggregated pair: its pipelined throughput over both pools' GPUs
                tps = np.where(np.isnan(c["pair_tokens_per_s"]), tps, c["pair_tokens_per_s"])
                tp = np.where(np.isnan(c["gpus"]), tp, c["gpus"])
            user = np.where(e2e > 0, gen / np.where(e2e > 0, e2e, 1.0), np.inf)
        cap = c["capacity_bytes"]
        fits_not = ~np.isnan(cap) & (c["memory_bytes"] > cap)   # fits is False (unknown counts as fitting)
        return {"gpu": tps / tp, "user": user, "fits_not": fits_not, "tpot0": np.nan_to_num(c["tpot_s"])}

    @property
    def devices(self) -> list[str]:
        if self.streamed is not None:
            return list(self.streamed.best)
        return list(dict.fromkeys(self.columns["hw"].tolist()))

    def frontier_indices(self) -> dict[str, list[int]]:
        """Per device, the indices of its frontier points (as :func:`pareto`: fastest per user first)."""
        d = self._derived()
        hw = self.columns["hw"]
        out = {}
        for dev in self.devices:
            idx = np.flatnonzero((hw == dev) & ~d["fits_not"])
            order = idx[np.lexsort((-d["gpu"][idx], -d["user"][idx]))]  # stable: ties keep the first
            g = d["gpu"][order]
            prev = np.concatenate([[-np.inf], np.maximum.accumulate(g)[:-1]]) if len(g) else g
            out[dev] = order[g > prev].tolist()
        return out

    def frontier(self, hw: str | None = None) -> dict[str, list[SweepPoint]] | list[SweepPoint]:
        if self.streamed is not None:
            fronts = {d: pareto(self.streamed.front.get(d, [])) for d in self.devices}
            return fronts.get(hw, []) if hw is not None else fronts
        fr = {dev: [self.point(i) for i in idx] for dev, idx in self.frontier_indices().items()}
        return fr.get(hw, []) if hw is not None else fr

    def best_indices(self) -> dict[str, int | None]:
        """Per device, the index of :func:`pick_slo`'s point (None: no point meets the SLOs)."""
        d = self._derived()
        c = self.columns
        ok = ~d["fits_not"]
        if self.max_ttft_s is not None:
            ok &= ~(c["ttft_s"] > self.max_ttft_s)
        if self.max_tpot_s is not None:
            ok &= ~(c["tpot_s"] > self.max_tpot_s)  # NaN (no decode step) never violates
        out: dict[str, int | None] = {}
        for dev in self.devices:
            idx = np.flatnonzero((c["hw"] == dev) & ok)
            if not len(idx):
                out[dev] = None
                continue
            # the most tokens/s per GPU, then the lower TPOT, then the lower TTFT; ties: the first point
            order = np.lexsort((idx, c["ttft_s"][idx], d["tpot0"][idx], -d["gpu"][idx]))
            out[dev] = int(idx[order[0]])
        return out

    def best(self) -> dict[str, SweepPoint | None]:
        if self.streamed is not None:
            return dict(self.streamed.best)
        return {dev: (None if i is None else self.point(i)) for dev, i in self.best_indices().items()}

    def best_overall(self) -> SweepPoint | None:
        """The SLO pick across devices: the most tokens/s per GPU among the per-device picks."""
        picks = [p for p in self.best().values() if p is not None]
        return max(picks, key=lambda p: p.tokens_per_s_per_gpu) if picks else None

    def origin_note(self, pick: SweepPoint | None = None) -> str | None:
        """What a cross-device pick must say when the devices' timing constants differ in origin (None: they don't,
        or there is no pick)."""
        pick = pick if pick is not None else self.best_overall()
        origins = {o for d, o in self.hw_origins.items() if d in self.devices}
        if pick is None or len(origins) < 2:
            return None
        by = "; ".join(f"{o}: {', '.join(d for d in self.devices if self.hw_origins.get(d) == o)}"
                       for o in ("fitted", "derived", "assumed") if o in origins)
        return (f"{pick.hw}'s constants are {self.hw_origins.get(pick.hw, '?')}, the devices' differ in origin "
                f"({by}): a ranking across them compares timing models of different standing")

    def cheapest(self) -> SweepPoint | None:
        """The SLO pick with the lowest $ per million output tokens (devices with a price only)."""
        priced = [p for p in self.best().values() if p is not None and p.usd_per_million_tokens is not None]
        return min(priced, key=lambda p: p.usd_per_million_tokens) if priced else None  # type: ignore[arg-type, return-value]

    def to_dict(self) -> dict[str, Any]:
        if self.streamed is not None:
            idx = {id(p): i for i, p in enumerate(self.points)}
            front = {d: [idx[id(p)] for p in f] for d, f in self.frontier().items()}  # type: ignore[union-attr]
            best = {d: (None if p is None else idx[id(p)]) for d, p in self.best().items()}
        else:
            front, best = self.frontier_indices(), self.best_indices()
        cheap = self.cheapest()
        cheap_i = None
        if cheap is not None:
            cheap_i = next(i for i in best.values() if i is not None and self.point(i) == cheap)
        return json_safe({
            "schema_version": SCHEMA_VERSION, "kind": "llm_sweep", "model": self.model,
            "mode": "ideal" if self.ideal else "realistic", "hardware": self.hw_labels,
            "hardware_timing_origin": self.hw_origins,
            "best_overall_origin_note": self.origin_note(), "cheapest_origin_note": self.origin_note(cheap),
            "slo": {"max_ttft_s": self.max_ttft_s, "max_tpot_s": self.max_tpot_s},
            "traces": self.traces, "trace_s": self.trace_s, "notes": self.notes,
            "error_bands": self.bands,
            "points": [self._banded(p) for p in self.points],
            "frontier": front, "best": best, "cheapest": cheap_i,
            "graphroof_version": __version__,
        })

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def _banded(self, p: SweepPoint) -> dict[str, Any]:
        """A point's dict with the low / high ends of its realistic figures from its device's error bands (a time
        *t* with band half-width factor f: ``[t / (1 + f), t (1 + f)]``; a rate the reciprocal)."""
        d = p.to_dict()
        b = self.bands.get(p.hw)
        if not b:
            return d
        for key, kind in (("ttft_s", "ttft"), ("tpot_s", "tpot")):
            v, f = d.get(key), 1.0 + float(b[kind]["p90_abs"])
            if v is not None:
                d[key.replace("_s", "_low_s")], d[key.replace("_s", "_high_s")] = v / f, v * f
        f = 1.0 + float(b["throughput"]["p90_abs"])
        v = d.get("tokens_per_s_per_gpu")
        if v is not None:
            d["tokens_per_s_per_gpu_low"], d["tokens_per_s_per_gpu_high"] = v / f, v * f
        return d

    def __repr__(self) -> str:
        return f"<SweepResult {self.model}: {len(self)} points on {', '.join(self.devices)}>"


_OBJECT = {"hw", "prefill_bound", "decode_bound", "weights", "activations", "kv"}
_INTS = {"batch", "prompt", "gen", "tp"}


def _int(column: str, v: Any) -> Any:
    if column in _INTS:
        return int(v)
    if column == "gpus":
        v = _opt(v)
        return None if v is None else int(v)
    return _opt(v)
