"""Issue 27 (D3): profile warns on a loaded machine, reports run-to-run spread and warns when its thread count
differs from the calibration profile's; calibrate estimates a size's time from the measured smaller size."""

from __future__ import annotations

import dataclasses

import pytest

from graphroof.api import count_graph
from graphroof.graph import OpGraph
from graphroof.hardware import load_hardware
from graphroof.measure import hygiene
from graphroof.measure.calibrate import Plan, calibrate
from graphroof.measure.match import MatchResult
from graphroof.measure.run import Measured, MeasuredComparison
from graphroof.report import render
from tests.conftest import node
from tests.measure.test_calibrate import HOST, FakeClock, FakeKernels


def _comparison(hw, **measured):
    g = OpGraph("toy")
    g.add_op(node("table.op", name="A", scope="L1", flops=1e9, bytes=1e6, kind="matrix", compute_dtype="bf16"))
    a = count_graph(g, hw, depth=1)
    run = MatchResult(node_time_s={"A": 15e-6}, how={"A": "name"}, node_events={}, unmatched_nodes=[],
                      unmatched_events=[])
    return MeasuredComparison(a, Measured("fake runtime", [run], **measured))


def test_spread_min_median_max_and_noisy_warning(round_hw):
    c = _comparison(round_hw, wall_s=[50e-6, 40e-6, 60e-6])
    s = c.summary
    assert (s["measured_wall_min_s"], s["measured_wall_s"], s["measured_wall_max_s"]) == (40e-6, 50e-6, 60e-6)
    assert s["measured_wall_spread"] == pytest.approx(0.4)   # (60 - 40) / 50
    assert s["n_wall_runs"] == 3
    assert len(s["warnings"]) == 1 and s["warnings"][0].startswith("noisy: the forward pass took 40")
    assert "spread 40% > 30%" in s["warnings"][0]
    text = render(c, "terminal")
    assert "run to run (3 forward passes, no profiler): min 40" in text and "spread (max - min) / median 40%" in text
    assert "WARNING: noisy: the forward pass" in text
    assert c.to_dict()["summary"]["measured_wall_spread"] == pytest.approx(0.4)


def test_quiet_machine_and_steady_runs_give_no_warning(round_hw):
    c = _comparison(round_hw, wall_s=[50e-6, 51e-6, 52e-6], load_1min=0.5, cpus=2, threads=2)
    assert c.summary["warnings"] == []                       # spread 2 / 51 = 4%; load 0.5 <= 0.75 x 2


def test_loaded_machine_warns(round_hw):
    c = _comparison(round_hw, wall_s=[50e-6] * 3, load_1min=3.2, cpus=2)   # 3.2 > 0.75 x 2 = 1.5
    (w,) = c.summary["warnings"]
    assert w.startswith("the machine was loaded when profile started (1-min load average 3.20 on 2 CPUs)")
    assert "overhead-bound" in w and "re-run on an idle machine" in w


@pytest.fixture
def calibrated_hw():
    """A profile as `graphroof calibrate` writes it, measured with HOST's 2 threads."""
    clk = FakeClock()
    plan = Plan(gemm_sizes=(4, 8), fma_bytes=(4096,), copy_bytes=10**6, dtypes=("fp32",), warmup=1, repeats=3,
                min_sample_s=0.0)
    return calibrate("cpu", plan, clock=clk, kernels=FakeKernels(clk), host=HOST).profile("fake")


def test_calibrated_threads_read_from_the_profile(calibrated_hw):
    assert HOST["threads"] == 2 and hygiene.calibrated_threads(calibrated_hw) == 2
    assert hygiene.calibrated_threads(load_hardware("a100")) is None      # not written by calibrate


def test_thread_count_other_than_the_profiles_warns(calibrated_hw):
    c = _comparison(calibrated_hw, wall_s=[50e-6] * 3, threads=4)
    (w,) = c.summary["warnings"]
    assert c.summary["threads"] == 4 and c.summary["profile_threads"] == 2
    assert "this run used 4 CPU threads but --hw fake was calibrated with 2" in w and "--threads 2" in w
    assert _comparison(calibrated_hw, wall_s=[50e-6] * 3, threads=2).summary["warnings"] == []


def test_cli_profile_warns_on_a_loaded_machine(monkeypatch, capsys, tmp_path):
    pytest.importorskip("torch")
    from graphroof.cli import main

    monkeypatch.setattr(hygiene, "load_1min", lambda: 64.0)
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    rc = main(["profile", "tests.measure.test_measure_model:tiny_net", "--input", "2x3x16x16", "--peak-flops",
               "100G", "--mem-bw", "10GB/s", "--runs", "2", "--warmup", "1", "-f", "json", "-o",
               str(tmp_path / "p.json")])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "graphroof: warning: the machine was loaded when profile started (1-min load average 64.00 on 2 CPUs)" in err


class GrowingKernels(FakeKernels):
    """GEMM rate grows with size: 1 GFLOP/s at n = 128, 10 GFLOP/s from n = 512 on."""

    def __init__(self, clock):
        super().__init__(clock)
        self.calls: dict[int, int] = {}

    def gemm(self, n, dtype):
        t = 2.0 * n**3 / (1e9 if n < 512 else 1e10)

        def fn():
            self.calls[n] = self.calls.get(n, 0) + 1
            self.clock.t += t
        return fn, 2.0 * n**3, f"mm {n}"


def test_skip_estimate_uses_the_measured_smaller_size():
    clk = FakeClock()
    kern = GrowingKernels(clk)
    plan = Plan(gemm_sizes=(128, 512, 1024), fma_bytes=(4096,), copy_bytes=10**6, dtypes=("fp32",), warmup=1,
                repeats=3, min_sample_s=0.0, budget_s=2.0, probe_gemm=128)
    cal = calibrate("cpu", plan, clock=clk, kernels=kern, host=HOST)
    # probe 128: 2 * 128**3 = 4.19 MFLOP at 1 GFLOP/s.  512: 268 MFLOP / 1 GFLOP/s = 0.27 s <= 1 s: kept, timed at
    # 10 GFLOP/s.  1024: 2.15 GFLOP / 10 GFLOP/s = 0.21 s <= 1 s: kept (from the probe's rate: 2.15 s > 1 s, skipped)
    assert not any("skipped" in n for n in cal.notes)
    assert {m.bench.detail for m in cal.measurements if m.bench.key == "matrix.fp32"} == {"mm 128", "mm 512", "mm 1024"}
    assert cal.peaks("matrix")["fp32"] == pytest.approx(1e10)


def test_skip_note_names_the_size_the_estimate_came_from():
    clk = FakeClock()
    plan = Plan(gemm_sizes=(128, 512, 4096), fma_bytes=(4096,), copy_bytes=10**6, dtypes=("fp32",), warmup=1,
                repeats=3, min_sample_s=0.0, budget_s=2.0, probe_gemm=128)
    cal = calibrate("cpu", plan, clock=clk, kernels=GrowingKernels(clk), host=HOST)
    # 4096: 2 * 4096**3 = 137 GFLOP / 10 GFLOP/s (measured at 512) = 13.7 s > 1 s
    (note,) = [n for n in cal.notes if "skipped" in n]
    assert note.startswith("matrix.fp32 size 4096 skipped: one call would take ~14 s (at the rate measured at size 512)")


def test_measured_defaults_keep_old_constructors_working():
    m = Measured("rt", [], wall_s=[1.0])
    assert dataclasses.asdict(m)["threads"] is None and m.load_1min is None
