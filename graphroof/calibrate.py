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
so a sample lasts at least ``min_sample_s``); the rate is ``work / (sample / inner)``.

Timing goes through a :class:`Clock` (``now`` + ``sync``) and kernels come from a kernel factory, so the
logic is tested with a fake clock and fake kernels.  A CPU run never calls a CUDA API: the CUDA clock and
kernels are only built for ``device="cuda"``, after ``torch.cuda.is_available()`` said yes.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import platform
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import GraphroofError, InputError

__all__ = ["Clock", "WallClock", "Plan", "Benchmark", "Measurement", "Calibration", "time_samples",
           "run_benchmark", "calibrate", "TorchKernels", "host_info", "compare_rows", "DTYPES"]

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
    fma_bytes: tuple[int, ...] = (64 * 1024, 256 * 1024)   # per operand (4 operands stay in L2)
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


# -- torch kernels ------------------------------------------------------------------------------------

class TorchKernels:
    """Builds the benchmark callables on one torch device.  Only this class imports torch."""

    def __init__(self, device: str = "cpu"):
        import torch

        self.torch = torch
        self.device = device
        self._dt = {"fp64": torch.float64, "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

    def _rand(self, shape, dtype: str):
        return self.torch.rand(shape, dtype=self._dt[dtype], device=self.device)

    def gemm(self, n: int, dtype: str) -> tuple[Callable[[], Any], float, str]:
        a, b = self._rand((n, n), dtype), self._rand((n, n), dtype)
        c = self.torch.empty((n, n), dtype=self._dt[dtype], device=self.device)
        mm = self.torch.mm
        return (lambda: mm(a, b, out=c)), 2.0 * n**3, f"torch.mm {n}x{n} @ {n}x{n}"  # 2 FLOPs per MAC

    def fma(self, nbytes: int, dtype: str) -> tuple[Callable[[], Any], float, str]:
        n = max(1, nbytes // (self.torch.finfo(self._dt[dtype]).bits // 8))
        x, y, z = self._rand(n, dtype), self._rand(n, dtype), self._rand(n, dtype)
        o = self.torch.empty(n, dtype=self._dt[dtype], device=self.device)
        addcmul = self.torch.addcmul
        return (lambda: addcmul(x, y, z, out=o)), 2.0 * n, f"torch.addcmul x+y*z, {n} elements ({nbytes // 1024} KiB per operand)"

    def copy(self, nbytes: int) -> tuple[Callable[[], Any], float, str]:
        n = max(1, nbytes // 4)
        src = self._rand(n, "fp32")
        dst = self.torch.empty(n, dtype=self.torch.float32, device=self.device)
        return (lambda: dst.copy_(src)), 2.0 * 4 * n, f"copy_ of {4 * n / 1e6:.0f} MB fp32 (read + write)"

    def tiny(self) -> tuple[Callable[[], Any], float, str]:
        x = self.torch.ones(1, device=self.device)
        add = self.torch.add
        return (lambda: add(x, x)), 1.0, "torch.add of 1 element, new output (per-op dispatch + allocation)"


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


# -- host facts ---------------------------------------------------------------------------------------

def _cpuinfo() -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                k, sep, v = line.partition(":")
                if sep and k.strip() not in out:
                    out[k.strip()] = v.strip()
    except OSError:
        pass
    return out


def _meminfo_bytes() -> float | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _llc_bytes() -> float | None:
    """Size of the largest CPU cache listed in sysfs (Linux), in bytes."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    best = None
    try:
        for d in os.listdir(base):
            try:
                with open(os.path.join(base, d, "size"), encoding="utf-8") as f:
                    s = f.read().strip()
            except OSError:
                continue
            mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(s[-1:], 1)
            v = float(s.rstrip("KMG")) * mult
            best = max(best or 0.0, v)
    except (OSError, ValueError):
        return None
    return best


def host_info(device: str = "cpu", threads: int | None = None) -> dict[str, Any]:
    """Model name, vendor, memory, cache, torch version and thread count of the device measured."""
    import torch

    info: dict[str, Any] = {"torch": torch.__version__, "threads": threads or torch.get_num_threads(),
                            "date": _dt.date.today().isoformat(), "hostname": platform.node()}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(model=props.name, vendor="NVIDIA", kind="gpu", capacity_bytes=float(props.total_memory),
                    cache_bytes=float(getattr(props, "L2_cache_size", 0)) or None)
        return info
    cpu = _cpuinfo()
    vendor = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}.get(cpu.get("vendor_id", ""), cpu.get("vendor_id", ""))
    info.update(model=cpu.get("model name") or platform.processor() or platform.machine(), vendor=vendor,
                kind="cpu", capacity_bytes=_meminfo_bytes(), cache_bytes=_llc_bytes())
    return info


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

        from .hardware import profile_from_dict

        return profile_from_dict(self.profile_dict(name), Path(f"{name}.yaml"))

    def rows(self) -> list[list[str]]:
        """One table row per benchmark that counts: key, what ran, median time, rate, spread, inner calls."""
        from .units import fmt_rate, fmt_time

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
        kernels = TorchKernels(device)
        if clock is None:
            clock = WallClock(torch.cuda.synchronize if device == "cuda" else None)
    clock = clock or WallClock()
    skipped: list[str] = []
    benches = _benchmarks(kernels, plan, skipped)
    results = []
    for b in benches:
        if progress:
            progress(f"{b.key}: {b.detail}")
        results.append(run_benchmark(b, clock, plan))
    return Calibration(device, plan, results, host if host is not None else host_info(device, threads), skipped)


def compare_rows(cal: Calibration, ref) -> list[list[str]]:
    """Measured vs the peaks of profile *ref*: one row per figure either side has."""
    from .units import fmt_rate, fmt_time

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
