"""The inputs of :func:`graphroof.serving.serve`, checked before any model is built.

Every bad value is an :class:`~graphroof.errors.InputError` with a one-line message naming the field and the fix.
Length distributions and arrival processes are parsed into small frozen values (:class:`Lengths`,
:class:`Arrivals`); a trace file is read whole here (:class:`Trace`), so a missing column or an unsorted time
fails before the model is traced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from ..safe_read import parse_json, read_text, shown

__all__ = ["Lengths", "Arrivals", "Trace", "parse_lengths", "parse_arrivals", "read_trace", "positive",
           "rates_of", "check_choice", "whole"]

TRACE_COLUMNS = ("arrival_s", "input_tokens", "output_tokens")


def positive(name: str, value: Any, *, allow_none: bool = False, integer: bool = False) -> Any:
    """*value* when it is a finite number > 0 (an integer when *integer*), else a one-line InputError."""
    if value is None and allow_none:
        return None
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if ok and integer:
        ok = float(value) == int(value)
    if not ok or not math.isfinite(float(value)) or float(value) <= 0:
        kind = "an integer" if integer else "a finite number"
        raise InputError(f"{name} must be {kind} > 0, got {shown(value)}")
    return int(value) if integer else float(value)


def whole(name: str, value: Any, lo: int) -> int:
    """*value* as an int >= *lo* (bools refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
        raise InputError(f"{name} must be an integer >= {lo}, got {shown(value)}")
    return int(value)


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise InputError(f"{name} must be one of {', '.join(choices)}, got {shown(value)}")
    return str(value)


def rates_of(rate: Any) -> tuple[float, ...]:
    """The request rates (requests per second), each finite and > 0, at least one."""
    values = [rate] if isinstance(rate, (int, float, np.integer, np.floating)) else list(rate or ())
    if not values:
        raise InputError("rate needs at least one value in requests/s, e.g. rate=(1, 2, 4)")
    return tuple(positive("rate (requests/s)", v) for v in values)


def _num(field: str, text: str, spec: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise InputError(f"{field}: {shown(spec)} has a non-number {shown(text)}; e.g. fixed:1024, uniform:128:2048, "
                         "lognormal:1024:512") from None
    if not math.isfinite(v):
        raise InputError(f"{field}: {shown(spec)} has a non-finite number; give finite token counts")
    return v


@dataclass(frozen=True)
class Lengths:
    """A token-count distribution: ``fixed`` (a), ``uniform`` (a..b inclusive), ``lognormal`` (mean a, std b of
    the counts), ``file`` (values sampled with replacement)."""

    kind: str
    a: float = 0.0
    b: float = 0.0
    values: tuple[int, ...] = ()
    spec: str = ""

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            out = np.full(n, self.a)
        elif self.kind == "uniform":
            out = rng.integers(int(self.a), int(self.b) + 1, n)
        elif self.kind == "lognormal":
            # the counts' mean a and std b: sigma^2 = ln(1 + b^2 / a^2), mu = ln(a) - sigma^2 / 2
            s2 = math.log1p((self.b / self.a) ** 2)
            out = np.rint(rng.lognormal(math.log(self.a) - s2 / 2, math.sqrt(s2), n))
        else:
            out = np.asarray(self.values)[rng.integers(0, len(self.values), n)]
        return np.maximum(1, np.asarray(out, dtype=np.int64))

    @property
    def mean(self) -> float:
        if self.kind in ("fixed", "lognormal"):
            return self.a
        if self.kind == "uniform":
            return (self.a + self.b) / 2
        return float(np.mean(self.values))


def parse_lengths(field: str, spec: Any) -> Lengths:
    """``fixed:N``, ``uniform:A:B``, ``lognormal:MEAN:STD`` or ``file:PATH`` (one integer per line)."""
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        spec = f"fixed:{int(spec)}"
    if not isinstance(spec, str) or ":" not in spec:
        raise InputError(f"{field} must be fixed:N, uniform:A:B, lognormal:MEAN:STD or file:PATH, got {shown(spec)}")
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "file":
        text = read_text(rest, f"{field} file")
        vals = []
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                v = int(line.strip())
            except ValueError:
                raise InputError(f"{field}: line {i} of {shown(rest)} is not an integer; write one token count per "
                                 "line") from None
            if v < 1:
                raise InputError(f"{field}: line {i} of {shown(rest)} is {v}; token counts must be >= 1")
            vals.append(v)
        if not vals:
            raise InputError(f"{field}: {shown(rest)} holds no token counts; write one integer per line")
        return Lengths("file", values=tuple(vals), spec=spec)
    parts = [p for p in rest.split(":")]
    need = {"fixed": 1, "uniform": 2, "lognormal": 2}
    if kind not in need:
        raise InputError(f"{field}: unknown distribution {shown(kind)}; use fixed:N, uniform:A:B, "
                         "lognormal:MEAN:STD or file:PATH")
    if len(parts) != need[kind]:
        raise InputError(f"{field}: {kind} takes {need[kind]} number(s), got {shown(spec)}")
    nums = [_num(field, p, spec) for p in parts]
    if kind == "fixed" and (nums[0] < 1 or nums[0] != int(nums[0])):
        raise InputError(f"{field}: fixed:N needs an integer N >= 1, got {shown(spec)}")
    if kind == "uniform" and not (1 <= nums[0] <= nums[1] and all(v == int(v) for v in nums)):
        raise InputError(f"{field}: uniform:A:B needs integers 1 <= A <= B, got {shown(spec)}")
    if kind == "lognormal" and not (nums[0] > 0 and nums[1] >= 0):
        raise InputError(f"{field}: lognormal:MEAN:STD needs MEAN > 0 and STD >= 0, got {shown(spec)}")
    return Lengths(kind, nums[0], nums[1] if len(nums) > 1 else 0.0, spec=spec)


@dataclass(frozen=True)
class Arrivals:
    """An arrival process: ``poisson``, ``gamma`` (coefficient of variation *cv*), ``constant``, ``closed``
    (*users* concurrent users, each sending a new request when its last one finishes)."""

    kind: str
    cv: float = 1.0
    users: int = 0

    def unit_gaps(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Gaps between arrivals at 1 request/s (divide by the rate): the same draws serve every rate."""
        if self.kind == "poisson":
            return rng.exponential(1.0, n)
        if self.kind == "gamma":
            shape = 1.0 / self.cv ** 2       # mean shape * scale = 1, std sqrt(shape) * scale = cv
            return rng.gamma(shape, 1.0 / shape, n)
        return np.ones(n)


def parse_arrivals(spec: Any) -> Arrivals:
    if not isinstance(spec, str):
        raise InputError(f"arrival must be poisson, gamma:CV, constant or closed:N, got {shown(spec)}")
    kind, _, rest = spec.strip().lower().partition(":")
    if kind in ("poisson", "constant") and not rest:
        return Arrivals(kind)
    if kind == "gamma":
        cv = _num("arrival", rest, spec) if rest else float("nan")
        if not cv > 0:
            raise InputError(f"arrival: gamma:CV needs a coefficient of variation CV > 0 (1 = Poisson), got {shown(spec)}")
        return Arrivals("gamma", cv=cv)
    if kind == "closed":
        n = _num("arrival", rest, spec) if rest else 0.0
        if n < 1 or n != int(n):
            raise InputError(f"arrival: closed:N needs an integer N >= 1 of concurrent users, got {shown(spec)}")
        return Arrivals("closed", users=int(n))
    raise InputError(f"arrival: unknown process {shown(spec)}; use poisson, gamma:CV, constant or closed:N")


@dataclass(frozen=True)
class Trace:
    """A replayed request trace: arrival times (s, sorted), input and output token counts."""

    path: str
    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray

    @property
    def rate(self) -> float:
        """Its own arrival rate: requests per second over the span of its arrivals (inf when they coincide)."""
        span = float(self.arrival_s[-1] - self.arrival_s[0])
        return (len(self.arrival_s) - 1) / span if span > 0 else math.inf


def _rows(path: str, text: str) -> list[dict[str, Any]]:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise InputError(f"trace {shown(path)} is empty; give a CSV header arrival_s,input_tokens,output_tokens and rows")
    if lines[0].lstrip().startswith("{"):
        rows = []
        for i, ln in enumerate(lines, 1):
            row = parse_json(ln, f"trace {path} line {i}")
            if not isinstance(row, dict):
                raise InputError(f"trace {shown(path)} line {i} is not a JSON object; write one object per line")
            rows.append(row)
        return rows
    import csv

    reader = csv.DictReader(lines)
    return [dict(r) for r in reader]


def read_trace(path: Any) -> Trace:
    """A CSV (with a header) or JSONL file with columns arrival_s, input_tokens, output_tokens."""
    if not isinstance(path, (str, bytes)) and not hasattr(path, "__fspath__"):
        raise InputError(f"trace must be a path to a CSV or JSONL file, got {shown(path)}")
    p = str(path)
    rows = _rows(p, read_text(p, "trace"))
    cols: dict[str, list[float]] = {c: [] for c in TRACE_COLUMNS}
    for i, row in enumerate(rows, 1):
        for c in TRACE_COLUMNS:
            if c not in row or row[c] in (None, ""):
                raise InputError(f"trace {shown(p)}: row {i} has no column {c}; give every row arrival_s, "
                                 "input_tokens and output_tokens")
            try:
                v = float(row[c])
            except (TypeError, ValueError):
                raise InputError(f"trace {shown(p)}: row {i} column {c} is not a number ({shown(row[c])})") from None
            if not math.isfinite(v) or v < 0 or (c != "arrival_s" and (v < 1 or v != int(v))):
                need = "a finite time >= 0" if c == "arrival_s" else "an integer >= 1"
                raise InputError(f"trace {shown(p)}: row {i} column {c} must be {need}, got {shown(row[c])}")
            cols[c].append(v)
    t = np.asarray(cols["arrival_s"])
    bad = np.flatnonzero(np.diff(t) < 0)
    if len(bad):
        raise InputError(f"trace {shown(p)}: arrival_s is not sorted (row {bad[0] + 2} comes before row {bad[0] + 1}); "
                         "sort the rows by arrival_s")
    return Trace(p, t, np.asarray(cols["input_tokens"], dtype=np.int64),
                 np.asarray(cols["output_tokens"], dtype=np.int64))
