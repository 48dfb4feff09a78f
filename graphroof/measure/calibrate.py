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

Every benchmark has a time budget (``Plan.budget_s``: warm-up, autorange and samples together; fewer samples
are taken when one is slow, and a GEMM size whose single call would not fit is skipped with a note), so a run
ends in about ``budget_s`` x the number of benchmarks at most; the progress lines give an ETA.  Every dtype is
first probed at a small size (two calls); one whose rate there is more than ``emulated_factor`` x below fp32's is
marked *emulated* (no native kernels, e.g. bf16/fp16 GEMM on an AVX2-only CPU) and measured at the probe size
only.  Warnings (a loaded machine, a spread above 30 %, a ``--quick`` smoke profile) are printed and kept in
the profile's notes.

Timing goes through a :class:`Clock` (``now`` + ``sync``) and kernels come from a kernel factory, so the
logic is tested with a fake clock and fake kernels.  A CPU run never calls a CUDA API: the CUDA clock and
kernels are only built for ``device="cuda"``, after ``torch.cuda.is_available()`` said yes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import GraphroofError, InputError
from .timer import (
    DTYPES,
    Benchmark,
    Clock,
    Measurement,
    Plan,
    WallClock,
    autorange,
    first_call_s,
    fmt_s,
    run_benchmark,
    run_interleaved,
    time_samples,
)

__all__ = ["Clock", "WallClock", "Plan", "Benchmark", "Measurement", "Calibration", "time_samples",
           "autorange", "run_benchmark", "run_interleaved", "calibrate", "compare_rows", "DTYPES"]



def _benchmarks(kern, plan: Plan, skipped: list[str], clock: Clock | None = None,
                notes: list[str] | None = None) -> list[Benchmark]:
    """All benchmarks of *plan*; a dtype the device cannot run is dropped with a line in *skipped*.

    Each (kind, dtype) is probed first at a small size (the smallest GEMM size, at most ``plan.probe_gemm``; the
    smallest FMA size), fp32 before the others; a dtype whose probe rate is more than ``plan.emulated_factor``
    times below fp32's is *emulated*: measured at the probe size only, with a line in *notes*.  A size whose one
    call (estimated from the probe rate) would take over half the budget is skipped with a note."""
    clock = clock or WallClock()
    notes = notes if notes is not None else []
    out: list[Benchmark] = []
    order = sorted(plan.dtypes, key=lambda d: d != "fp32")
    for kind, sizes, make in (("matrix", plan.gemm_sizes, kern.gemm), ("vector", plan.fma_bytes, kern.fma)):
        probe_n = min(min(sizes), plan.probe_gemm) if kind == "matrix" else min(sizes)
        rates: dict[str, float] = {}
        probes: dict[str, tuple] = {}
        for dt in (["fp32"] if "fp32" not in order else []) + order:
            try:
                fn, work, detail = make(probe_n, dt)
                t = first_call_s(fn, clock, cap_s=(plan.budget_s or 10.0) / 4)  # a dtype without kernels on this device raises here
            except (RuntimeError, NotImplementedError, TypeError) as e:
                if dt in plan.dtypes:
                    skipped.append(f"{kind}.{dt}: {str(e).splitlines()[0][:120]}")
                continue
            rates[dt] = work / max(t, 1e-12)
            probes[dt] = (fn, work, detail)
        ref = rates.get("fp32")
        by_dt: dict[str, list[Benchmark]] = {}
        for dt in plan.dtypes:
            if dt not in rates:
                continue
            key = f"{kind}.{dt}"
            if dt != "fp32" and ref and rates[dt] * plan.emulated_factor < ref:
                fn, work, detail = probes[dt]
                slow = ref / rates[dt]
                notes.append(f"{key} is emulated ({slow:.0f}x slower than fp32 at {detail}): measured briefly at "
                             "that size only; do not expect it to be faster than fp32 on this device")
                by_dt[dt] = [Benchmark(key, kind, dt, work, f"{detail} [emulated]", fn, emulated=True)]
                continue
            lst: list[Benchmark] = []
            # a size's time is estimated at the rate measured at the largest smaller size timed so far (the probe
            # first): rates grow with size, so the probe's rate alone made large sizes look slower than they are
            timed_n, timed_rate = probe_n, rates[dt]
            for n in sorted(sizes):
                if n == probe_n:
                    fn, work, detail = probes[dt]
                else:
                    fn, work, detail = make(n, dt)
                    est = work / timed_rate
                    if plan.budget_s is not None and est * 2 > plan.budget_s:
                        notes.append(f"{key} size {n} skipped: one call would take ~{fmt_s(est)} (at the rate "
                                     f"measured at size {timed_n}), over half the {plan.budget_s:g} s budget")
                        continue
                    if plan.budget_s is not None and n < max(sizes):  # the next size is estimated from this one
                        t = first_call_s(fn, clock, calls=2, cap_s=plan.budget_s / 4)
                        timed_n, timed_rate = n, work / max(t, 1e-12)
                lst.append(Benchmark(key, kind, dt, work, detail, fn))
            if not lst:  # every size too slow: the probe size stands in
                fn, work, detail = probes[dt]
                lst.append(Benchmark(key, kind, dt, work, detail, fn))
            by_dt[dt] = lst
        for dt in plan.dtypes:
            out += by_dt.get(dt, [])
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
    notes: list[str] = field(default_factory=list)   # emulated dtypes, sizes over the budget

    #: A benchmark whose samples spread more than this ((max - min) / median) gets a warning.
    SPREAD_WARN = 0.30

    @property
    def warnings(self) -> list[str]:
        """What makes this profile doubtful: a loaded machine, noisy benchmarks, a --quick smoke run."""
        out = []
        if self.plan.smoke:
            out.append("smoke profile (--quick): tiny sizes and few samples; the rates are not representative of "
                       "this device, use it to test the pipeline only")
        from .hygiene import loaded_message

        loaded = loaded_message(self.host.get("load_1min"), self.host.get("cpus"), "calibrate",
                                "rates may be low and noisy")
        if loaded:
            out.append(loaded)
        noisy = [m for m in self._best_all() if len(m.samples_s) >= 3 and m.spread > self.SPREAD_WARN]
        if noisy:
            out.append("noisy: " + ", ".join(f"{m.bench.key} spread {100 * m.spread:.0f}%" for m in noisy)
                       + f" (> {100 * self.SPREAD_WARN:.0f}%): another process competed for the device; re-run")
        return out

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

    def measured(self, key: str) -> Measurement:
        """:meth:`best` of a benchmark the profile cannot do without (memory, launch)."""
        m = self.best(key)
        if m is None:
            raise GraphroofError(f"calibration has no {key!r} measurement; re-run graphroof calibrate")
        return m

    @property
    def mem_bw_bytes_per_s(self) -> float:
        return self.measured("memory").rate

    @property
    def launch_overhead_s(self) -> float:
        return self.measured("launch").median_s

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
        smoke = " SMOKE PROFILE (--quick), not representative" if p.smoke else ""
        extra = [f"skipped: {'; '.join(self.skipped)}"] if self.skipped else []
        extra += self.notes + [f"WARNING: {w}" for w in self.warnings]
        d: dict[str, Any] = {
            "name": name,
            "display_name": (f"{h['model']} (measured, {h['threads']} threads)" if h["kind"] == "cpu"
                             else f"{h['model']} (measured)") + smoke,
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
                "memory": f"{stamp}; {self.measured('memory').bench.detail}, bytes read + written; capacity from "
                          "/proc/meminfo, on-chip cache = largest cache in sysfs",
                "efficiency": f"{stamp}; factors 1.0 because the peaks above are measured (achievable) rates; "
                              f"launch_overhead_s = {self.measured('launch').bench.detail}",
            },
            "notes": "; ".join([f"sample spread (max-min)/median: {spreads}", *extra]),
        }
        return d

    def _best_all(self) -> list[Measurement]:
        keys = dict.fromkeys(m.bench.key for m in self.measurements)
        return [self.measured(k) for k in keys]

    def to_yaml(self, name: str = "local") -> str:
        import yaml

        head = ("# graphroof hardware profile written by `graphroof calibrate`; use it with --hw THIS_FILE.\n"
                "# Rates are measured medians on this machine (see sources); edit freely.\n")
        if self.plan.smoke:
            head += "# SMOKE PROFILE from `calibrate --quick`: tiny sizes, not representative of this device.\n"
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
            out.append([m.bench.key + (" (emulated)" if m.bench.emulated else ""), m.bench.detail, fmt_time(m.median_s), fmt_rate(m.rate, unit),
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
    load = _load_1min()  # before we load the machine ourselves
    skipped: list[str] = []
    notes: list[str] = []
    if progress:
        progress("probing each dtype at a small size")
    benches = _benchmarks(kernels, plan, skipped, clock, notes)
    results = run_interleaved(benches, clock, plan, progress)
    _mark_emulated(results, plan, notes)
    if host is None:
        from .host_kernels import host_info

        host = host_info(device, threads)
        host.update(load_1min=load, cpus=os.cpu_count())
    return Calibration(device, plan, results, host, skipped, notes)


def _mark_emulated(results: list[Measurement], plan: Plan, notes: list[str]) -> None:
    """The probe can miss an emulated dtype (a noisy first call of fp32): check again on the measured medians,
    and mark a dtype whose best rate is more than ``emulated_factor`` x below fp32's."""
    from dataclasses import replace

    for kind in ("matrix", "vector"):
        best: dict[str, float] = {}
        for m in results:
            if m.bench.kind == kind:
                best[m.bench.dtype] = max(best.get(m.bench.dtype, 0.0), m.rate)
        ref = best.get("fp32")
        for m in results:
            dt = m.bench.dtype
            if (m.bench.kind == kind and dt != "fp32" and ref and not m.bench.emulated
                    and best[dt] * plan.emulated_factor < ref):
                m.bench = replace(m.bench, emulated=True, detail=m.bench.detail + " [emulated]")
                msg = (f"{kind}.{dt} is emulated ({ref / best[dt]:.0f}x slower than fp32 measured): do not expect "
                       "it to be faster than fp32 on this device")
                if msg not in notes:
                    notes.append(msg)


def _load_1min() -> float | None:
    from .hygiene import load_1min

    return load_1min()


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
    kw: dict[str, Any] = {k: v for k, v in over.items() if v is not None}  # Plan's fields, each its own type
    from dataclasses import replace

    return replace(base, **kw)
