"""``graphroof calibrate``: measure the local device and write a hardware profile ``--hw`` accepts.

What is measured (every figure is the median over *repeats* timed samples, after *warmup* untimed calls):

* ``matrix_peak_flops_per_s[dtype]``: ``torch.mm`` of two n x n matrices into a preallocated output, counted as
  ``2 * n**3`` FLOPs (2 per multiply-add); the best median over the GEMM sizes tried.  Every float dtype the
  device runs is tried (fp64, fp32, bf16, fp16); one that raises is skipped and said so.
* ``vector_peak_flops_per_s[dtype]``: ``torch.addcmul(x, y, z, out=o)`` (``o = x + y * z``), a fused
  multiply-add per element counted as 2 FLOPs, over operands sized to stay in the L2 cache so the vector
  units (and the kernel's per-element overhead), not DRAM, set the rate; best median over the sizes tried.
* ``memory.bw_bytes_per_s``: ``dst.copy_(src)`` of a buffer far larger than the last-level cache that
  actually behaves as one (256 MB by default), counted as bytes read + bytes written (``2 * nbytes``).
* ``efficiency.launch_overhead_s``: the median time of a one-element ``torch.add`` into a new tensor (the
  per-op dispatch and allocation cost of eager PyTorch on this device; a kernel launch on a GPU), so the
  profile's "realistic" time includes it.  The efficiency factors
  are 1.0: measured rates are already what is achievable.

Fast kernels are repeated *inner* times per timed sample (chosen once per benchmark, timeit-autorange style,
so a sample lasts at least ``min_sample_s``); the rate is ``work / (sample / inner)``.  Samples are taken
round-robin over the benchmarks (:func:`run_interleaved`), so a slow spell on a shared machine spreads over
many benchmarks' samples, where the median discards it, instead of filling one benchmark's.

Timing goes through a :class:`Clock` (``now`` + ``sync``) and kernels come from a kernel factory, so the
logic is tested with a fake clock and fake kernels.  A CPU run never calls a CUDA API: the CUDA clock and
kernels are only built for ``device="cuda"``, after ``torch.cuda.is_available()`` said yes.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import GraphroofError, InputError

__all__ = ["Clock", "WallClock", "Plan", "Benchmark", "Measurement", "Calibration", "time_samples",
           "run_benchmark", "run_interleaved", "calibrate", "compare_rows", "DTYPES"]

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

    @classmethod
    def quick(cls) -> Plan:
        return cls(gemm_sizes=(256,), fma_bytes=(64 * 1024,), copy_bytes=16 * 10**6, warmup=1, repeats=3,
                   min_sample_s=0.002)

    def check(self) -> None:
        if self.repeats < 1 or self.warmup < 0:
            raise InputError("calibrate: --repeats must be >= 1 and --warmup >= 0")


@dataclass(frozen=True)
class Benchmark:
    """One microbenchmark: *fn* does *work* FLOPs (or bytes, for ``kind="memory"``) per call."""

    key: str        # "matrix.fp32", "vector.bf16", "memory", "launch"
    kind: str       # matrix | vector | memory | launch
    dtype: str
    work: float     # FLOPs or bytes per call (1 for "launch": the rate is calls/s)
    detail: str     # what ran, e.g. "torch.mm 2048x2048 @ 2048x2048"
    fn: Callable[[], Any]


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
    (t,) = time_samples(fn, clock, warmup=0, repeats=1)
    if t >= min_sample_s:
        return 1
    return int(min(max_inner, math.ceil(min_sample_s / max(t, 1e-9))))


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
    inners = []
    for b in benches:
        if progress:
            progress(f"{b.key}: {b.detail}")
        for _ in range(plan.warmup):
            b.fn()
        inners.append(autorange(b.fn, clock, plan.min_sample_s))
    samples: list[list[float]] = [[] for _ in benches]
    for _ in range(plan.repeats):
        for i, b in enumerate(benches):
            samples[i] += time_samples(b.fn, clock, warmup=0, repeats=1, inner=inners[i])
    return [Measurement(b, s, n) for b, s, n in zip(benches, samples, inners)]


def _benchmarks(kern, plan: Plan, skipped: list[str]) -> list[Benchmark]:
    """All benchmarks of *plan*; a dtype the device cannot run is dropped with a line in *skipped*."""
    out: list[Benchmark] = []
    for dt in plan.dtypes:
        for kind, sizes, make in (("matrix", plan.gemm_sizes, kern.gemm), ("vector", plan.fma_bytes, kern.fma)):
            for n in sizes:
                try:
                    fn, work, detail = make(n, dt)
                    fn()  # a dtype without kernels on this device raises here
                except (RuntimeError, NotImplementedError, TypeError) as e:
                    skipped.append(f"{kind}.{dt}: {str(e).splitlines()[0][:120]}")
                    break
                out.append(Benchmark(f"{kind}.{dt}", kind, dt, work, detail, fn))
    fn, work, detail = kern.copy(plan.copy_bytes)
    out.append(Benchmark("memory", "memory", "fp32", work, detail, fn))
    fn, work, detail = kern.tiny()
    out.append(Benchmark("launch", "launch", "fp32", work, detail, fn))
    return out


# -- the result ---------------------------------------------------------------------------------------

@dataclass
class Calibration:
    """All measurements of one run plus the host facts; :meth:`profile_dict` is a hardware profile."""

    device: str
    plan: Plan
    measurements: list[Measurement]
    host: dict[str, Any]
    skipped: list[str] = field(default_factory=list)

    def best(self, key: str) -> Measurement | None:
        """The fastest (highest median rate) measurement with this key over the sizes tried."""
        ms = [m for m in self.measurements if m.bench.key == key]
        return max(ms, key=lambda m: m.rate) if ms else None

    def peaks(self, kind: str) -> dict[str, float]:
        out = {}
        for dt in self.plan.dtypes:
            m = self.best(f"{kind}.{dt}")
            if m is not None:
                out[dt] = m.rate
        return out

    @staticmethod
    def _r(x: float) -> float:
        """4 significant digits: the noise is larger than that."""
        return float(f"{x:.4g}")

    @property
    def mem_bw_bytes_per_s(self) -> float:
        return self.best("memory").rate

    @property
    def launch_overhead_s(self) -> float:
        return self.best("launch").median_s

    def _how(self, kind: str) -> str:
        ms = [self.best(f"{kind}.{dt}") for dt in self.plan.dtypes]
        return "; ".join(f"{m.bench.dtype}: {m.bench.detail}" for m in ms if m is not None)

    def profile_dict(self, name: str = "local") -> dict[str, Any]:
        """A dict that :func:`graphroof.hardware.profile_from_dict` accepts."""
        h = self.host
        p = self.plan
        stamp = (f"measured by graphroof calibrate on {h['date']}, host {h['model']} ({h.get('hostname', '')}), "
                 f"torch {h['torch']}, threads {h['threads']}, median of {p.repeats} repeats after {p.warmup} warm-up")
        mem: dict[str, Any] = {"bw_bytes_per_s": self._r(self.mem_bw_bytes_per_s)}
        if h.get("capacity_bytes"):
            mem["capacity_bytes"] = h["capacity_bytes"]
        if h.get("cache_bytes"):
            mem["onchip_cache_bytes"] = h["cache_bytes"]
        spreads = ", ".join(f"{m.bench.key} {100 * m.spread:.1f}%" for m in self._best_all())
        d: dict[str, Any] = {
            "name": name,
            "display_name": f"{h['model']} (measured, {h['threads']} threads)" if h["kind"] == "cpu"
            else f"{h['model']} (measured)",
            "vendor": h.get("vendor", ""),
            "kind": h["kind"],
            "matrix_peak_flops_per_s": {k: self._r(v) for k, v in self.peaks("matrix").items()},
            "vector_peak_flops_per_s": {k: self._r(v) for k, v in self.peaks("vector").items()},
            "memory": mem,
            "efficiency": {"matrix": 1.0, "vector": 1.0, "mem_bw": 1.0, "interconnect": 1.0,
                           "launch_overhead_s": self._r(self.launch_overhead_s)},
            "sources": {
                "matrix_peak_flops_per_s": f"{stamp}; best of GEMM sizes {list(p.gemm_sizes)}: {self._how('matrix')}; 2 FLOPs per multiply-add",
                "vector_peak_flops_per_s": f"{stamp}; best of operand sizes {[f'{b // 1024} KiB' for b in p.fma_bytes]} (cache-resident): {self._how('vector')}; 2 FLOPs per element",
                "memory": f"{stamp}; {self.best('memory').bench.detail}, bytes read + written; capacity from "
                          "/proc/meminfo, on-chip cache = largest cache in sysfs",
                "efficiency": f"{stamp}; factors 1.0 because the peaks above are measured (achievable) rates; "
                              f"launch_overhead_s = {self.best('launch').bench.detail}",
            },
            "notes": f"sample spread (max-min)/median: {spreads}"
                     + (f"; skipped: {'; '.join(self.skipped)}" if self.skipped else ""),
        }
        return d

    def _best_all(self) -> list[Measurement]:
        keys = dict.fromkeys(m.bench.key for m in self.measurements)
        return [self.best(k) for k in keys]

    def to_yaml(self, name: str = "local") -> str:
        import yaml

        head = ("# graphroof hardware profile written by `graphroof calibrate`; use it with --hw THIS_FILE.\n"
                "# Rates are measured medians on this machine (see sources); edit freely.\n")
        return head + yaml.safe_dump(self.profile_dict(name), sort_keys=False, width=120, allow_unicode=True)

    def profile(self, name: str = "local"):
        from pathlib import Path

        from ..hardware import profile_from_dict

        return profile_from_dict(self.profile_dict(name), Path(f"{name}.yaml"))

    def rows(self) -> list[list[str]]:
        """One table row per benchmark that counts: key, what ran, median time, rate, spread, inner calls."""
        from ..units import fmt_rate, fmt_time

        out = []
        for m in self._best_all():
            unit = {"memory": "B/s", "launch": "call/s"}.get(m.bench.kind, "FLOP/s")
            out.append([m.bench.key, m.bench.detail, fmt_time(m.median_s), fmt_rate(m.rate, unit),
                        f"{100 * m.spread:.1f}%", str(m.inner)])
        return out


def check_device(device: str) -> None:
    """Fail early with a clear message; ``cuda`` is probed only when asked for."""
    if device not in ("cpu", "cuda"):
        raise InputError(f"--device {device!r}: use cpu or cuda")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise GraphroofError("no CUDA device is available to this torch "
                                 f"({torch.__version__}); run with --device cpu or on a machine with a CUDA GPU")


def calibrate(device: str = "cpu", plan: Plan | None = None, *, clock: Clock | None = None, kernels=None,
              threads: int | None = None, host: dict[str, Any] | None = None,
              progress: Callable[[str], None] | None = None) -> Calibration:
    """Measure *device*; *clock*, *kernels* and *host* are injectable (tests pass fakes for all three)."""
    plan = plan or Plan()
    plan.check()
    if kernels is None:
        check_device(device)
        import torch

        if threads:
            torch.set_num_threads(threads)
        from .host_kernels import TorchKernels

        kernels = TorchKernels(device)
        if clock is None:
            clock = WallClock(torch.cuda.synchronize if device == "cuda" else None)
    clock = clock or WallClock()
    skipped: list[str] = []
    benches = _benchmarks(kernels, plan, skipped)
    results = run_interleaved(benches, clock, plan, progress)
    if host is None:
        from .host_kernels import host_info

        host = host_info(device, threads)
    return Calibration(device, plan, results, host, skipped)


def compare_rows(cal: Calibration, ref) -> list[list[str]]:
    """Measured vs the peaks of profile *ref*: one row per figure either side has."""
    from ..units import fmt_rate, fmt_time

    def ratio(a, b):
        return f"{a / b:.3g}" if a and b else "-"

    rows = []
    for kind, table in (("matrix", ref.matrix_peak_flops_per_s), ("vector", ref.vector_peak_flops_per_s)):
        mine = cal.peaks(kind)
        for dt in [d for d in (*DTYPES, "tf32", "fp8", "int8", "int4") if d in mine or d in table]:
            a, b = mine.get(dt), table.get(dt)
            rows.append([f"{kind}.{dt}", fmt_rate(a) if a else "-", fmt_rate(b) if b else "-", ratio(a, b)])
    rows.append(["memory bandwidth", fmt_rate(cal.mem_bw_bytes_per_s, "B/s"), fmt_rate(ref.mem_bw_bytes_per_s, "B/s"),
                 ratio(cal.mem_bw_bytes_per_s, ref.mem_bw_bytes_per_s)])
    rows.append(["launch overhead", fmt_time(cal.launch_overhead_s), fmt_time(ref.launch_overhead_s),
                 ratio(cal.launch_overhead_s, ref.launch_overhead_s)])
    return rows


def parse_sizes(text: str | None, flag: str) -> tuple[int, ...] | None:
    if not text:
        return None
    try:
        out = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise InputError(f"{flag} {text!r}: expected comma-separated integers, e.g. 1024,2048") from None
    if not out or any(n <= 0 for n in out):
        raise InputError(f"{flag} {text!r}: sizes must be positive integers")
    return out


def parse_dtypes(text: str | None) -> tuple[str, ...] | None:
    if not text:
        return None
    out = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [d for d in out if d not in DTYPES]
    if bad or not out:
        raise InputError(f"--dtypes {text!r}: choose from {', '.join(DTYPES)}")
    return out


def default_plan(quick: bool = False, **over: Sequence | int | float | None) -> Plan:
    base = Plan.quick() if quick else Plan()
    kw = {k: v for k, v in over.items() if v is not None}
    from dataclasses import replace

    return replace(base, **kw)
