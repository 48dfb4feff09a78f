"""``batch_sweep``: any model (vision, encoder, op table ...) over the batch on several devices.

Per (device, batch): latency of one batch (realistic unless ideal, the ideal roofline beside it), samples per
second ``batch / latency``, bound, FLOPs and bytes.  The model is built and traced once per batch and counted once
per device (:func:`graphroof.api.analyze_on_profiles`).

**Compute-bound batch, solved.**  Every op's FLOPs and bytes are affine in the batch (weights read once, activations
grow with it), so the model's summed ideal compute time and summed memory / network time are ``c0 + c1 B`` and
``m0 + m1 B`` (``n0 + n1 B``); both lines are taken from the two smallest swept batches, and the model turns
compute-bound (summed compute time >= summed memory and network time) from ``B* = (m0 - c0) / (c1 - m1)`` on
(:func:`graphroof.llm.critical.critical_batch`).  Every further swept batch checks the lines: a model whose
costs are not affine in the batch gets a note and no solved batch.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .._version import __version__
from ..errors import GraphroofWarning, InputError
from ..units import json_safe

__all__ = ["BatchPoint", "BatchSweep", "batch_sweep"]

SCHEMA_VERSION = 1
_REL_TOL = 1e-6


@dataclass(frozen=True)
class BatchPoint:
    hw: str
    batch: int
    t_s: float                 # one batch: realistic unless the sweep is ideal
    t_ideal_s: float
    t_compute_s: float         # summed over ops, ideal
    t_memory_s: float
    t_network_s: float
    bound: str
    flops: float
    bytes: float

    @property
    def samples_per_s(self) -> float:
        return self.batch / self.t_s if self.t_s else float("inf")

    @property
    def label(self) -> str:
        return f"b{self.batch}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "samples_per_s": self.samples_per_s}


@dataclass
class BatchSweep:
    model: str
    points: list[BatchPoint]
    hw_labels: dict[str, str] = field(default_factory=dict)
    critical_batch: dict[str, dict[str, Any]] = field(default_factory=dict)
    ideal: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def devices(self) -> list[str]:
        return list(dict.fromkeys(p.hw for p in self.points))

    def frontier(self) -> dict[str, list[BatchPoint]]:
        """Per device, every batch in order: the latency-throughput curve."""
        return {d: sorted((p for p in self.points if p.hw == d), key=lambda p: p.batch) for d in self.devices}

    def to_dict(self) -> dict[str, Any]:
        return json_safe({"schema_version": SCHEMA_VERSION, "kind": "batch_sweep", "model": self.model,
                          "mode": "ideal" if self.ideal else "realistic", "hardware": self.hw_labels,
                          "points": [p.to_dict() for p in self.points], "critical_batch": self.critical_batch,
                          "notes": self.notes, "graphroof_version": __version__})

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def __repr__(self) -> str:
        return f"<BatchSweep {self.model}: {len(self.points)} points on {', '.join(self.devices)}>"


def _batch_opts(model: Any, b: int) -> dict[str, Any]:
    from ..frontends import classify

    kind = classify(model).kind
    if kind in ("zoo", "hf_config", "onnx"):  # ONNX: binds the inputs' leading dim (or re-batches a fixed one)
        return {"batch": b}
    if kind in ("table", "graph"):
        return {"dims": {"batch": b}}
    raise InputError(f"cannot sweep the batch of a {kind} model; use a zoo name, a config.json, an .onnx or op "
                     "table with a symbolic 'batch' dim")


def solve_critical(points: Sequence[BatchPoint]) -> dict[str, Any]:
    """The compute-bound batch of one device's points (see the module docstring)."""
    from ..llm.critical import critical_batch

    ps = sorted(points, key=lambda p: p.batch)
    if len(ps) < 2:
        return {"critical_batch": None, "critical_batch_exact": None, "reason": "needs two batch sizes"}
    a, b = ps[0], ps[1]
    terms = [(t(a), (t(b) - t(a)) / (b.batch - a.batch)) for t in
             (lambda p: p.t_compute_s, lambda p: p.t_memory_s, lambda p: p.t_network_s)]
    lines = [(v0 - s * a.batch, s) for v0, s in terms]
    for p in ps[2:]:
        for (i0, s), got in zip(lines, (p.t_compute_s, p.t_memory_s, p.t_network_s)):
            want = i0 + s * p.batch
            if abs(want - got) > _REL_TOL * max(abs(got), 1e-30):
                return {"critical_batch": None, "critical_batch_exact": None,
                        "reason": f"costs are not affine in the batch (batch {p.batch} is off the line)"}
    c0, c1 = lines[0]
    # equal slopes up to float rounding are equal: the lines never cross instead of crossing at 1e16
    others = [(o0, c1 if abs(o1 - c1) <= 1e-9 * max(abs(o1), abs(c1)) else o1) for o0, o1 in lines[1:]]
    bstar = critical_batch((c0, c1), others)
    if bstar is None:
        return {"critical_batch": None, "critical_batch_exact": None,
                "reason": "never: its bytes grow as fast as its FLOPs with the batch"}
    return {"critical_batch": max(1, math.ceil(bstar - 1e-9)), "critical_batch_exact": bstar,
            "reason": "compute-bound at any batch" if bstar == 0 else "compute-bound from this batch on"}


def batch_sweep(model: Any, *, hw: str | Sequence[Any] = ("a100",), batch: Sequence[int] = (1, 4, 16, 64),
                ideal: bool = False, strict: bool = False, progress: Callable[[str], None] | None = None,
                **frontend_opts: Any) -> BatchSweep:
    """*model* at every batch of *batch* on every device of *hw* (see the module docstring)."""
    from ..api import analyze_on_profiles, resolve_hardware

    batches = sorted(dict.fromkeys(batch))
    if not batches or any(not isinstance(b, int) or isinstance(b, bool) or b < 1 for b in batches):
        raise InputError(f"--batch values must be integers >= 1, got {list(batch)!r}")
    names = [hw] if isinstance(hw, str) else list(hw)
    if not names:
        raise InputError("--hw needs at least one hardware profile")
    profs = [resolve_hardware(h, ideal=ideal) for h in names]
    _batch_opts(model, 1)
    points: list[BatchPoint] = []
    name = str(model)
    for i, b in enumerate(batches):
        opts = {**frontend_opts, **_batch_opts(model, b)}
        with warnings.catch_warnings():
            if i:  # unknown-op warnings are the same at every batch: say them once
                warnings.simplefilter("ignore", GraphroofWarning)
            analyses = analyze_on_profiles(model, profs, strict=strict, progress=progress, **opts)
        for pr, a in zip(profs, analyses):
            name = a.model_name
            t = a.totals
            points.append(BatchPoint(hw=pr.name, batch=b, t_s=t.t_lower_s if ideal else t.t_realistic_s,
                                     t_ideal_s=t.t_lower_s, t_compute_s=t.t_compute_s, t_memory_s=t.t_memory_s,
                                     t_network_s=t.t_network_s, bound=t.bound, flops=t.cost.flops,
                                     bytes=t.cost.bytes))
    order = {pr.name: i for i, pr in enumerate(profs)}
    points.sort(key=lambda p: (order[p.hw], p.batch))
    crit = {pr.name: solve_critical([p for p in points if p.hw == pr.name]) for pr in profs}
    return BatchSweep(model=name, points=points, hw_labels={pr.name: pr.label for pr in profs},
                      critical_batch=crit, ideal=ideal)
