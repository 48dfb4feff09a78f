"""The timer of ``graphroof calibrate``: a :class:`Clock` (``now`` + ``sync``), the run plan, and timed samples taken
round-robin over benchmarks with timeit-style autoranging and a time budget per benchmark (see
:mod:`graphroof.measure.calibrate` for what is measured)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import InputError

__all__ = ["DTYPES", "Clock", "WallClock", "Plan", "Benchmark", "Measurement", "time_samples", "autorange",
           "budget_repeats", "run_benchmark", "run_interleaved", "fmt_s", "first_call_s"]

#: Float dtypes tried for matrix and vector peaks (canonical names = profile keys).
DTYPES: tuple[str, ...] = ("fp64", "fp32", "bf16", "fp16")


class Clock(Protocol):
    """Wall time in seconds plus a barrier that waits for queued device work (a no-op on CPU)."""

    def now(self) -> float: ...

    def sync(self) -> None: ...


class WallClock:
    """``time.perf_counter``; *sync* (``torch.cuda.synchronize`` for CUDA) is called around every sample."""

    def __init__(self, sync: Callable[[], None] | None = None):
        import time

        self._now = time.perf_counter
        self._sync = sync

    def now(self) -> float:
        return self._now()

    def sync(self) -> None:
        if self._sync is not None:
            self._sync()


@dataclass(frozen=True)
class Plan:
    """Sizes and repetition counts.  ``Plan.quick()`` is for tests and smoke runs (well under a second)."""

    gemm_sizes: tuple[int, ...] = (1024, 2048)
    fma_bytes: tuple[int, ...] = (256 * 1024, 512 * 1024)  # per operand: 4 operands stay in the L2 caches
    copy_bytes: int = 256 * 10**6
    dtypes: tuple[str, ...] = DTYPES
    warmup: int = 2
    repeats: int = 7
    min_sample_s: float = 0.02
    budget_s: float | None = 4.0   # per benchmark: warm-up + autorange + samples (None: no limit)
    emulated_factor: float = 8.0   # a dtype this many times slower than fp32 at the probe size is "emulated"
    probe_gemm: int = 256          # GEMM size of the per-dtype probe (capped by the smallest GEMM size)
    smoke: bool = False            # a --quick run: the profile says it is not representative

    @classmethod
    def quick(cls) -> Plan:
        return cls(gemm_sizes=(128,), fma_bytes=(32 * 1024,), copy_bytes=8 * 10**6, warmup=0, repeats=3,
                   min_sample_s=0.001, budget_s=0.05, probe_gemm=128, smoke=True)

    def check(self) -> None:
        if self.repeats < 1 or self.warmup < 0:
            raise InputError("calibrate: --repeats must be >= 1 and --warmup >= 0")
        if self.budget_s is not None and self.budget_s <= 0:
            raise InputError("calibrate: --budget must be > 0 seconds")


@dataclass(frozen=True)
class Benchmark:
    """One microbenchmark: *fn* does *work* FLOPs (or bytes, for ``kind="memory"``) per call."""

    key: str        # "matrix.fp32", "vector.bf16", "memory", "launch"
    kind: str       # matrix | vector | memory | launch
    dtype: str
    work: float     # FLOPs or bytes per call (1 for "launch": the rate is calls/s)
    detail: str     # what ran, e.g. "torch.mm 2048x2048 @ 2048x2048"
    fn: Callable[[], Any]
    emulated: bool = False  # far slower than fp32 at the probe size: no native kernels for this dtype


@dataclass
class Measurement:
    bench: Benchmark
    samples_s: list[float]   # seconds per call, one per repeat
    inner: int

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples_s)

    @property
    def rate(self) -> float:
        """Work per second at the median sample."""
        return self.bench.work / self.median_s

    @property
    def spread(self) -> float:
        """(slowest - fastest) / median of the samples: the run-to-run noise of this benchmark."""
        return (max(self.samples_s) - min(self.samples_s)) / self.median_s


def time_samples(fn: Callable[[], Any], clock: Clock, *, warmup: int, repeats: int, inner: int = 1) -> list[float]:
    """Seconds per call of *fn*: *warmup* untimed calls, then *repeats* samples of *inner* calls each."""
    for _ in range(warmup):
        fn()
    clock.sync()
    out = []
    for _ in range(repeats):
        clock.sync()
        t0 = clock.now()
        for _ in range(inner):
            fn()
        clock.sync()
        out.append((clock.now() - t0) / inner)
    return out


def autorange(fn: Callable[[], Any], clock: Clock, min_sample_s: float, max_inner: int = 100_000) -> int:
    """Calls per sample so that one sample lasts at least *min_sample_s* (from one timed call)."""
    return _autorange(fn, clock, min_sample_s, max_inner)[0]


def _autorange(fn, clock: Clock, min_sample_s: float, max_inner: int = 100_000) -> tuple[int, float]:
    (t,) = time_samples(fn, clock, warmup=0, repeats=1)
    if t >= min_sample_s:
        return 1, t
    return int(min(max_inner, math.ceil(min_sample_s / max(t, 1e-9)))), t


def budget_repeats(plan: Plan, spent_s: float, sample_s: float) -> int:
    """Samples that fit in what is left of the benchmark's budget (at least 1, at most ``plan.repeats``)."""
    if plan.budget_s is None:
        return plan.repeats
    return max(1, min(plan.repeats, int((plan.budget_s - spent_s) / max(sample_s, 1e-12))))


def run_benchmark(b: Benchmark, clock: Clock, plan: Plan) -> Measurement:
    for _ in range(plan.warmup):
        b.fn()
    inner = autorange(b.fn, clock, plan.min_sample_s)
    return Measurement(b, time_samples(b.fn, clock, warmup=0, repeats=plan.repeats, inner=inner), inner)


def run_interleaved(benches: Sequence[Benchmark], clock: Clock, plan: Plan,
                    progress: Callable[[str], None] | None = None) -> list[Measurement]:
    """Warm up and autorange every benchmark, then take the samples round-robin (sample k of every benchmark,
    then sample k + 1 ...), so a slow spell of a shared machine lands on a few samples of many benchmarks
    instead of all the samples of one, and the medians stay put."""
    inners, reps = [], []
    if progress and plan.budget_s is not None:
        progress(f"{len(benches)} benchmarks, at most ~{plan.budget_s:g} s each: done in "
                 f"< {fmt_s(len(benches) * plan.budget_s)}")
    for k, b in enumerate(benches, 1):
        if progress:
            progress(f"[{k}/{len(benches)}] {b.key}: {b.detail}")
        t0 = clock.now()
        for _ in range(plan.warmup):
            if plan.budget_s is not None and clock.now() - t0 > plan.budget_s / 3:
                break  # a slow kernel: its first calls were warm-up enough
            b.fn()
        inner, t1 = _autorange(b.fn, clock, plan.min_sample_s)
        inners.append(inner)
        reps.append((budget_repeats(plan, clock.now() - t0, inner * t1), inner * t1))
    if progress:
        eta = sum(n * c for n, c in reps)
        progress(f"sampling round-robin ({max(n for n, _ in reps)} rounds): ETA ~{fmt_s(eta)}")
    samples: list[list[float]] = [[] for _ in benches]
    for r in range(plan.repeats):
        for i, b in enumerate(benches):
            if r < reps[i][0]:
                samples[i] += time_samples(b.fn, clock, warmup=0, repeats=1, inner=inners[i])
    return [Measurement(b, s, n) for b, s, n in zip(benches, samples, inners)]


def fmt_s(t: float) -> str:
    return f"{t:.1f} s" if t < 10 else f"{t:.0f} s" if t < 120 else f"{t / 60:.1f} min"


def first_call_s(fn, clock: Clock, calls: int = 3, cap_s: float | None = None) -> float:
    """The fastest of up to *calls* timed calls (the first one pays one-time setup; stop once *cap_s* is spent)."""
    out: list[float] = []
    for _ in range(calls):
        out += time_samples(fn, clock, warmup=0, repeats=1)
        if cap_s is not None and sum(out) > cap_s:
            break
    return min(out)
