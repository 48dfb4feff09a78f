"""What a validation run holds: one :class:`Row` per measured value (its inputs, the measured and predicted figure,
the error, the equivalent command), the statistics per subset, and the :class:`ValidationResult` (plain data and
``to_dict()``; :mod:`graphroof.report.validate` renders it).

Error convention: for a time, ``error = predicted / measured - 1``; for a throughput (tokens/s, images/s,
TFLOP/s, GB/s) the same figure on the time it implies, ``error = measured / predicted - 1``.  Either way a positive
error means graphroof predicts the work takes longer than it did.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Row", "Stats", "ValidationResult", "stats_of", "error_of", "SUBSET_KEYS", "CONVENTION"]

CONVENTION = ("error = predicted / measured - 1 on times; on throughputs the error of the time they imply, "
              "measured / predicted - 1 (positive: graphroof predicts slower than measured); |error| statistics "
              "per subset: n, median, p90, worst, and the signed median (bias)")

#: The keys a subset is grouped by, coarse to fine.
SUBSET_KEYS = ("dataset", "engine", "gpu", "family", "regime")


@dataclass
class Row:
    """One measured value and graphroof's prediction of it."""

    dataset: str              # vidur_ops | vidur_allreduce | gptfast | llamacpp | trtllm | vision | kernels ...
    row_id: str               # file:line of the measured row
    engine: str               # the engine / framework that measured it (vLLM-style kernels, gpt-fast, TensorRT-LLM ...)
    gpu: str                  # the graphroof profile it is priced on ('' when none)
    vendor: str               # the profile's vendor ('' when none)
    family: str               # model family (llama-2-7b, resnet-50, gemm ...)
    regime: str               # decode / prefill / small batch / large batch / intra-node ...
    figure: str               # what is compared: layer-kernel, allreduce, tpot, ttft, throughput, vision-latency ...
    runtime: str              # the runtime preset it is priced under ('' for collectives / kernels)
    metric: str               # the measured column
    unit: str                 # its unit
    inputs: dict[str, Any]
    measured: float
    predicted: float | None = None
    is_rate: bool = False     # a throughput: the error is taken on the time it implies
    command: str = ""         # the equivalent graphroof command (or Python call) giving the predicted figure
    excluded: str = ""        # why it is not scored (a reason the source gives), else ''
    not_covered: str = ""     # why graphroof cannot price it, else ''
    holdout: dict[str, float] = field(default_factory=dict)  # holdout kind -> predicted with held-out constants

    @property
    def scored(self) -> bool:
        return not self.excluded and not self.not_covered and self.predicted is not None

    @property
    def error(self) -> float | None:
        return error_of(self.predicted, self.measured, self.is_rate)

    def holdout_error(self, kind: str) -> float | None:
        return error_of(self.holdout.get(kind), self.measured, self.is_rate)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["error"] = self.error
        d["scored"] = self.scored
        return d


def error_of(predicted: float | None, measured: float, is_rate: bool) -> float | None:
    if predicted is None or not math.isfinite(predicted) or predicted <= 0 or measured <= 0:
        return None
    return measured / predicted - 1.0 if is_rate else predicted / measured - 1.0


@dataclass(frozen=True)
class Stats:
    """|error| statistics of a set of rows (fractions, 0.05 = 5%)."""

    n: int
    median_abs: float
    p90_abs: float
    worst_abs: float
    signed_median: float

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def _quantile(sorted_vals: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of sorted values (numpy's default method)."""
    if len(sorted_vals) == 1:
        return sorted_vals[0]
    pos = q * (len(sorted_vals) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def stats_of(errors: Iterable[float | None]) -> Stats | None:
    errs: list[float] = [e for e in errors if e is not None and math.isfinite(e)]
    if not errs:
        return None
    a = sorted(abs(e) for e in errs)
    return Stats(len(errs), statistics.median(a), _quantile(a, 0.9), a[-1], statistics.median(errs))


@dataclass
class ValidationResult:
    """Every measured row of the chosen datasets priced through graphroof's own path, and the errors."""

    rows: list[Row]
    datasets: list[str]
    holdout: str | None = None
    holdout_notes: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def scored(self) -> list[Row]:
        return [r for r in self.rows if r.scored]

    def subsets(self, keys: Sequence[str] = SUBSET_KEYS) -> list[dict[str, Any]]:
        """One entry per subset (the values of *keys*): its plain and (with a hold-out) held-out statistics."""
        groups: dict[tuple, list[Row]] = {}
        for r in self.scored:
            groups.setdefault(tuple(getattr(r, k) for k in keys), []).append(r)
        out = []
        for key, rows in sorted(groups.items()):
            s = stats_of(r.error for r in rows)
            entry: dict[str, Any] = dict(zip(keys, key))
            entry["stats"] = s.to_dict() if s else None
            if self.holdout:
                h = stats_of(r.holdout_error(self.holdout) for r in rows)
                entry["holdout_stats"] = h.to_dict() if h else None
            out.append(entry)
        return out

    def per_dataset(self) -> list[dict[str, Any]]:
        return self.subsets(("dataset",))

    def overall(self) -> Stats | None:
        return stats_of(r.error for r in self.scored)

    def not_scored(self) -> list[dict[str, Any]]:
        """Rows left out of the scores, grouped by dataset and reason (excluded by the source / not covered)."""
        groups: dict[tuple, list[str]] = {}
        for r in self.rows:
            if r.scored:
                continue
            kind = "excluded" if r.excluded else "not covered"
            reason = r.excluded or r.not_covered or "no prediction"
            groups.setdefault((r.dataset, kind, reason), []).append(r.row_id)
        return [{"dataset": d, "kind": k, "reason": why, "n": len(ids), "rows": ids}
                for (d, k, why), ids in sorted(groups.items())]

    def to_dict(self) -> dict[str, Any]:
        o = self.overall()
        return {
            "kind": "validation", "convention": CONVENTION, "datasets": self.datasets, "holdout": self.holdout,
            "holdout_notes": self.holdout_notes, "wall_s": self.wall_s, "notes": self.notes,
            "n_rows": len(self.rows), "n_scored": len(self.scored), "overall": o.to_dict() if o else None,
            "per_dataset": self.per_dataset(), "subsets": self.subsets(), "not_scored": self.not_scored(),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)

    def row_dicts(self) -> list[dict[str, Any]]:
        """The per-row table (``--rows``): inputs flattened to one text column."""
        out = []
        for r in self.rows:
            out.append({
                "dataset": r.dataset, "row": r.row_id, "engine": r.engine, "gpu": r.gpu, "family": r.family,
                "regime": r.regime, "figure": r.figure, "runtime": r.runtime, "metric": r.metric, "unit": r.unit,
                "inputs": json.dumps(r.inputs, sort_keys=True), "measured": r.measured, "predicted": r.predicted,
                "error": r.error, "holdout_predicted": r.holdout.get(self.holdout) if self.holdout else None,
                "holdout_error": r.holdout_error(self.holdout) if self.holdout else None,
                "scored": r.scored, "excluded": r.excluded, "not_covered": r.not_covered, "command": r.command,
            })
        return out
