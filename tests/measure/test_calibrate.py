"""calibrate: timing logic with a fake clock and fake kernels; one tiny real CPU run that must not touch CUDA."""

from __future__ import annotations

import pytest

from graphroof.cli import main
from graphroof.hardware import load_hardware, profile_from_dict
from graphroof.measure.calibrate import (
    Benchmark,
    Plan,
    autorange,
    calibrate,
    compare_rows,
    run_benchmark,
    run_interleaved,
    time_samples,
)


class FakeClock:
    """Time only moves when a fake kernel says so."""

    def __init__(self):
        self.t = 0.0
        self.syncs = 0

    def now(self) -> float:
        return self.t

    def sync(self) -> None:
        self.syncs += 1


def scripted(clock: FakeClock, durations):
    """A kernel whose k-th call takes durations[k] seconds of fake time."""
    it = iter(durations)

    def fn():
        clock.t += next(it)
    return fn


def test_time_samples_skips_warmup_and_divides_by_inner():
    clk = FakeClock()
    # 2 warm-up calls (100 s each, must not count), then 3 samples of 2 calls: (1+3)/2, (2+2)/2, (5+1)/2
    fn = scripted(clk, [100, 100, 1, 3, 2, 2, 5, 1])
    assert time_samples(fn, clk, warmup=2, repeats=3, inner=2) == [2.0, 2.0, 3.0]
    assert clk.syncs >= 3  # a barrier around every sample


def test_median_ignores_one_slow_outlier():
    clk = FakeClock()
    b = Benchmark("matrix.fp32", "matrix", "fp32", work=1000.0, detail="x",
                  fn=scripted(clk, [0.5] + [1.0, 1.0, 9.0, 1.0, 1.0]))
    plan = Plan(warmup=0, repeats=5, min_sample_s=0.1)
    # autorange consumes the first call (0.5 s >= 0.1 s -> inner 1); samples 1, 1, 9, 1, 1 -> median 1 s
    m = run_benchmark(b, clk, plan)
    assert m.inner == 1
    assert m.samples_s == [1.0, 1.0, 9.0, 1.0, 1.0]
    assert m.median_s == 1.0
    assert m.rate == 1000.0          # 1000 FLOP / 1 s
    assert m.spread == 8.0           # (9 - 1) / 1


def test_interleaved_samples_spread_a_slow_spell():
    # two benchmarks, 3 samples each; a "slow spell" makes the 3rd and 4th sample taken (in time order) 10x slower
    clk = FakeClock()
    taken = []

    def kernel(name):
        def fn():
            taken.append(name)
            n = len(taken)
            clk.t += 10.0 if n in (3, 4) else 1.0  # calls 1-2: autorange of a and b; 3-8: samples
        return fn

    plan = Plan(warmup=0, repeats=3, min_sample_s=0.5)
    a, b = (Benchmark(k, "vector", "fp32", 1.0, k, kernel(k)) for k in ("a", "b"))
    ms = run_interleaved([a, b], clk, plan)
    assert taken == ["a", "b", "a", "b", "a", "b", "a", "b"]      # round-robin after the autorange calls
    assert [m.samples_s for m in ms] == [[10.0, 1.0, 1.0], [10.0, 1.0, 1.0]]
    # (back to back, a's samples would be calls 2-4: 1, 10, 10 -> median 10)
    assert [m.median_s for m in ms] == [1.0, 1.0]


def test_autorange_picks_calls_per_sample():
    clk = FakeClock()
    fn = scripted(clk, [0.001] * 10)
    assert autorange(fn, clk, min_sample_s=0.02) == 20  # ceil(0.02 / 0.001)
    assert autorange(scripted(clk, [0.5]), clk, min_sample_s=0.02) == 1


class FakeKernels:
    """GEMM of size n takes gemm_s[n] seconds; FMA 1 ms per call; copy 2 ms; tiny op 1 us.  fp16 unsupported."""

    def __init__(self, clock: FakeClock):
        self.clock = clock
        self.gemm_s = {4: 1e-3, 8: 2e-3}

    def _fn(self, dt_s: float):
        def fn():
            self.clock.t += dt_s
        return fn

    def gemm(self, n, dtype):
        if dtype == "fp16":
            raise RuntimeError('"addmm_impl_cpu_" not implemented for \'Half\'')
        scale = 2.0 if dtype == "fp64" else 1.0  # fp64 twice as slow
        return self._fn(self.gemm_s[n] * scale), 2.0 * n**3, f"mm {n}"

    def fma(self, nbytes, dtype):
        if dtype == "fp16":
            raise RuntimeError("no fp16")
        return self._fn(1e-3), 2.0 * (nbytes // 4), f"fma {nbytes}"

    def copy(self, nbytes):
        return self._fn(2e-3), 2.0 * nbytes, f"copy {nbytes}"

    def tiny(self):
        return self._fn(1e-6), 1.0, "tiny"


HOST = {"model": "Fake CPU 9000", "vendor": "Fake", "kind": "cpu", "torch": "0.0", "threads": 2,
        "date": "2000-01-01", "hostname": "h", "capacity_bytes": 8e9, "cache_bytes": 32e6}


@pytest.fixture
def fake_cal():
    clk = FakeClock()
    plan = Plan(gemm_sizes=(4, 8), fma_bytes=(4096,), copy_bytes=10**6, dtypes=("fp64", "fp32", "fp16"),
                warmup=1, repeats=3, min_sample_s=0.0)
    return calibrate("cpu", plan, clock=clk, kernels=FakeKernels(clk), host=HOST)


def test_calibrate_rates_from_fake_kernels(fake_cal):
    peaks = fake_cal.peaks("matrix")
    # n=4: 2*4**3 = 128 FLOP in 1 ms = 128e3 FLOP/s; n=8: 2*8**3 = 1024 FLOP in 2 ms = 512e3 FLOP/s -> best 512e3
    assert peaks["fp32"] == pytest.approx(512e3)
    assert peaks["fp64"] == pytest.approx(256e3)            # 1024 FLOP in 4 ms
    assert "fp16" not in peaks
    # FMA: 4096 B / 4 B = 1024 elements * 2 FLOP = 2048 FLOP in 1 ms = 2.048e6 FLOP/s
    assert fake_cal.peaks("vector")["fp32"] == pytest.approx(2.048e6)
    # copy: 2 * 1e6 B (read + write) in 2 ms = 1e9 B/s
    assert fake_cal.mem_bw_bytes_per_s == pytest.approx(1e9)
    assert fake_cal.launch_overhead_s == pytest.approx(1e-6)
    assert any(s.startswith("matrix.fp16") for s in fake_cal.skipped)
    assert any(s.startswith("vector.fp16") for s in fake_cal.skipped)


def test_profile_dict_is_a_valid_profile(fake_cal, tmp_path):
    d = fake_cal.profile_dict("mybox")
    prof = profile_from_dict(d, tmp_path / "mybox.yaml")
    assert prof.kind == "cpu"
    assert prof.matrix_peak_flops_per_s == {"fp64": 256e3, "fp32": 512e3}
    assert prof.mem_bw_bytes_per_s == 1e9
    assert prof.launch_overhead_s == 1e-6
    assert prof.matrix_efficiency == 1.0
    src = prof.sources["matrix_peak_flops_per_s"]
    assert "measured by graphroof calibrate on 2000-01-01" in src and "Fake CPU 9000" in src
    assert "threads 2" in src and "median of 3 repeats" in src
    assert "skipped: matrix.fp16" in prof.notes
    # the YAML text round-trips through load_hardware
    path = tmp_path / "mybox.yaml"
    path.write_text(fake_cal.to_yaml("mybox"))
    loaded = load_hardware(str(path))
    assert loaded.matrix_peak_flops_per_s == prof.matrix_peak_flops_per_s
    assert loaded.vector_peak_flops_per_s["fp32"] == pytest.approx(2.048e6)


def test_compare_rows(fake_cal, round_hw):
    rows = {r[0]: r for r in compare_rows(fake_cal, round_hw)}
    # measured 512e3 FLOP/s vs round_hw's 50e12 fp32 matrix peak: 512e3 / 50e12 = 1.024e-08
    assert rows["matrix.fp32"][3] == "1.02e-08"
    assert rows["matrix.bf16"][1] == "-" and rows["matrix.bf16"][3] == "-"
    assert rows["memory bandwidth"][3] == "0.001"  # 1e9 / 1e12


def test_cpu_run_never_touches_cuda(monkeypatch):
    import torch

    def boom(*a, **k):
        raise AssertionError("a CPU calibration called a CUDA API")

    for name in ("is_available", "synchronize", "device_count", "get_device_properties", "get_device_name", "init"):
        monkeypatch.setattr(torch.cuda, name, boom)
    plan = Plan(gemm_sizes=(32,), fma_bytes=(4096,), copy_bytes=10**5, dtypes=("fp32",), warmup=1, repeats=2,
                min_sample_s=0.0005)
    cal = calibrate("cpu", plan)
    assert cal.peaks("matrix")["fp32"] > 0 and cal.mem_bw_bytes_per_s > 0
    assert cal.host["kind"] == "cpu"


def test_cli_cuda_without_cuda_is_a_clear_error(capsys, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    out = tmp_path / "gpu.yaml"
    assert main(["calibrate", "--device", "cuda", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("graphroof: error: no CUDA device") and "--device cpu" in err
    assert not out.exists()


def test_cli_bad_output_suffix(capsys, tmp_path):
    assert main(["calibrate", "--quick", "-o", str(tmp_path / "x.txt")]) == 1
    assert "ending in .yaml" in capsys.readouterr().err
    assert not (tmp_path / "x.txt").exists()


def test_cli_quick_writes_a_loadable_profile(capsys, tmp_path):
    out = tmp_path / "dev.yaml"
    assert main(["-q", "calibrate", "--quick", "--dtypes", "fp32", "--gemm-sizes", "64", "-o", str(out),
                 "--compare", "a100"]) == 0
    text = capsys.readouterr().out
    assert "measured vs NVIDIA A100" in text and "matrix.fp32" in text
    prof = load_hardware(str(out))
    assert prof.name == "dev" and prof.kind == "cpu"
    assert set(prof.matrix_peak_flops_per_s) == {"fp32"}


# -- time budget, emulated dtypes, warnings (issue 14) -------------------------------------------------

class SlowKernels(FakeKernels):
    """GEMM: fp32 at 1 GFLOP/s, bf16 at 10 MFLOP/s (100x slower: emulated), fp64 at 0.5 GFLOP/s; FMA as FakeKernels."""

    RATE = {"fp32": 1e9, "fp64": 0.5e9, "bf16": 1e7}

    def __init__(self, clock):
        super().__init__(clock)
        self.calls: dict[tuple, int] = {}

    def gemm(self, n, dtype):
        t = 2.0 * n**3 / self.RATE[dtype]
        key = (n, dtype)

        def fn():
            self.calls[key] = self.calls.get(key, 0) + 1
            self.clock.t += t
        return fn, 2.0 * n**3, f"mm {n}"

    def fma(self, nbytes, dtype):
        return self._fn(1e-4 if dtype != "bf16" else 1e-3), 2.0 * (nbytes // 4), f"fma {nbytes}"


def test_emulated_dtype_is_measured_briefly_at_the_probe_size():
    clk = FakeClock()
    kern = SlowKernels(clk)
    plan = Plan(gemm_sizes=(256, 1024), fma_bytes=(4096,), copy_bytes=10**6, dtypes=("fp32", "bf16"), warmup=1,
                repeats=5, min_sample_s=0.0, budget_s=2.0, probe_gemm=256)
    cal = calibrate("cpu", plan, clock=clk, kernels=kern, host=HOST)
    # probe at 256: fp32 2*256**3 = 33.6 MFLOP at 1 GFLOP/s = 33.6 ms; bf16 at 10 MFLOP/s = 3.36 s: 100x slower (> 8x)
    bf16 = [m for m in cal.measurements if m.bench.key == "matrix.bf16"]
    assert len(bf16) == 1 and bf16[0].bench.emulated and bf16[0].bench.detail == "mm 256 [emulated]"
    assert (1024, "bf16") not in kern.calls                      # the 1024 size (344 s a call) never ran
    assert cal.peaks("matrix")["bf16"] == pytest.approx(1e7)
    assert any(n.startswith("matrix.bf16 is emulated (100x slower") for n in cal.notes)
    assert "matrix.bf16 (emulated)" in [r[0] for r in cal.rows()]
    # vector bf16: 1 ms vs 0.1 ms per call is 10x slower: emulated too
    assert any(n.startswith("vector.bf16 is emulated (10x") for n in cal.notes)
    # fp32 at 1024 is 2.15 GFLOP = 2.15 s a call > half the 2 s budget: skipped with a note, 256 kept
    assert (1024, "fp32") not in kern.calls
    assert any(n.startswith("matrix.fp32 size 1024 skipped") for n in cal.notes)
    assert "matrix.bf16 is emulated" in cal.profile_dict("x")["notes"]


def test_budget_cuts_the_samples_of_a_slow_benchmark():
    clk = FakeClock()
    # a 1 s kernel with a 3.5 s budget: 1 warm-up + 1 autorange call = 2 s spent, 1.5 s left -> 1 sample (not 7)
    b = Benchmark("matrix.fp32", "matrix", "fp32", 1.0, "slow", scripted(clk, [1.0] * 20))
    fast = Benchmark("vector.fp32", "vector", "fp32", 1.0, "fast", scripted(clk, [0.01] * 20))
    plan = Plan(warmup=1, repeats=7, min_sample_s=0.0, budget_s=3.5)
    msgs = []
    slow_m, fast_m = run_interleaved([b, fast], clk, plan, progress=msgs.append)
    assert len(slow_m.samples_s) == 1
    assert len(fast_m.samples_s) == 7          # 0.02 s spent, 7 * 0.01 s fits
    assert msgs[0] == "2 benchmarks, at most ~3.5 s each: done in < 7.0 s"
    assert msgs[-1] == "sampling round-robin (7 rounds): ETA ~1.1 s"   # 1 * 1 s + 7 * 0.01 s = 1.07 s
    # no budget: every benchmark gets all its samples
    clk2 = FakeClock()
    b2 = Benchmark("m", "matrix", "fp32", 1.0, "slow", scripted(clk2, [1.0] * 20))
    (m2,) = run_interleaved([b2], clk2, Plan(warmup=1, repeats=7, min_sample_s=0.0, budget_s=None))
    assert len(m2.samples_s) == 7


def _cal_with(host_extra, samples, plan=None):
    from graphroof.measure.calibrate import Calibration, Measurement

    b = Benchmark("matrix.fp32", "matrix", "fp32", 1.0, "x", lambda: None)
    mem = Benchmark("memory", "memory", "fp32", 1.0, "copy", lambda: None)
    launch = Benchmark("launch", "launch", "fp32", 1.0, "tiny", lambda: None)
    ms = [Measurement(b, samples, 1), Measurement(mem, [1.0, 1.0, 1.0], 1), Measurement(launch, [1e-6] * 3, 1)]
    return Calibration("cpu", plan or Plan(dtypes=("fp32",)), ms, {**HOST, **host_extra})


def test_warnings_loaded_machine_noisy_and_smoke():
    quiet = _cal_with({"load_1min": 0.4, "cpus": 2}, [1.0, 1.1, 1.2])   # spread (1.2 - 1.0) / 1.1 = 18%
    assert quiet.warnings == []
    loaded = _cal_with({"load_1min": 3.2, "cpus": 2}, [1.0, 1.1, 1.2])  # 3.2 > 0.75 * 2
    assert len(loaded.warnings) == 1 and "1-min load average 3.20 on 2 CPUs" in loaded.warnings[0]
    noisy = _cal_with({"load_1min": 0.1, "cpus": 2}, [1.0, 1.5, 2.0])   # (2 - 1) / 1.5 = 67% > 30%
    assert noisy.warnings == ["noisy: matrix.fp32 spread 67% (> 30%): another process competed for the device; re-run"]
    assert "WARNING: noisy: matrix.fp32 spread 67%" in noisy.profile_dict("x")["notes"]
    smoke = _cal_with({}, [1.0, 1.0, 1.0], Plan.quick())
    assert smoke.warnings[0].startswith("smoke profile (--quick)")
    d = smoke.profile_dict("x")
    assert d["display_name"].endswith("SMOKE PROFILE (--quick), not representative")
    assert "# SMOKE PROFILE from `calibrate --quick`" in smoke.to_yaml("x")


def test_cli_quick_is_quick_and_marked_as_smoke(capsys, tmp_path):
    import time

    import torch  # noqa: F401  (imported before the clock starts: the import is not calibrate's time)

    out = tmp_path / "q.yaml"
    t0 = time.perf_counter()
    assert main(["-q", "calibrate", "--quick", "-o", str(out)]) == 0
    elapsed = time.perf_counter() - t0
    assert elapsed < 10.0, elapsed    # ~1 s on an idle 2-core CPU; generous for a loaded CI machine
    cap = capsys.readouterr()
    assert "graphroof: warning: smoke profile" in cap.err
    assert "SMOKE PROFILE" in load_hardware(str(out)).display_name


def test_calibrate_help_has_no_rst_markup(capsys):
    with pytest.raises(SystemExit):
        main(["calibrate", "--help"])
    text = capsys.readouterr().out
    assert "``" not in text and ":class:" not in text and ":func:" not in text
    assert "2 * n**3 FLOPs" in text


def test_emulated_dtype_missed_by_the_probe_is_marked_from_the_medians():
    from graphroof.measure.calibrate import Calibration, Measurement, _mark_emulated

    fp32 = Benchmark("matrix.fp32", "matrix", "fp32", 1e9, "mm", lambda: None)
    bf16 = Benchmark("matrix.bf16", "matrix", "bf16", 1e9, "mm", lambda: None)
    fp64 = Benchmark("matrix.fp64", "matrix", "fp64", 1e9, "mm", lambda: None)
    # fp32 1e9 FLOP in 20 ms = 50 GFLOP/s; bf16 in 1 s = 1 GFLOP/s (50x slower: emulated); fp64 in 40 ms (2x: native)
    ms = [Measurement(fp32, [0.02] * 3, 1), Measurement(bf16, [1.0] * 3, 1), Measurement(fp64, [0.04] * 3, 1)]
    notes: list[str] = []
    _mark_emulated(ms, Plan(), notes)
    assert [m.bench.emulated for m in ms] == [False, True, False]
    assert notes == ["matrix.bf16 is emulated (50x slower than fp32 measured): do not expect it to be faster than "
                     "fp32 on this device"]
    assert ms[1].bench.detail == "mm [emulated]"
    rows = Calibration("cpu", Plan(), ms, HOST).rows()
    assert [r[0] for r in rows] == ["matrix.fp32", "matrix.bf16 (emulated)", "matrix.fp64"]
