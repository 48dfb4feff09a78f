"""benchmarks/fit_kernel_model.py's GEMM fit prices each row set under the runtime schedule it ran with (the Vidur
rows: sarathi-serve's cuBLAS 12.1, ``waves``; our 2026 measure_gemm.csv rows: PyTorch 2.11's, ``stream_k``)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from graphroof.hardware import load_hardware
from graphroof.timing import KernelTiming, gemm_time_with
from graphroof.timing.precision import gemm_ceiling

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import fit_kernel_model as fit  # noqa: E402 - benchmarks/ is a folder of scripts, not a package

GRID = [((256, 128), 16, 1024, 48, "best")]          # the h100-sxm profile's discrete constants (L2 ridge 48)
SHAPES = [(1, 8192, 8192), (64, 4096, 4096), (544, 8192, 8192), (640, 8192, 2048), (2048, 28672, 4096),
          (4096, 4096, 14336)]


def _times(hw, schedule, eff=0.95, bw=0.87, lat=4.6e-6, p=2.0):
    peak = hw.matrix_peak_flops_per_s["fp16"]
    t = KernelTiming(sm_count=132, gemm_tile=(256, 128), gemm_tile_m_min=16, gemm_split_k_min=1024,
                     gemm_l2_bw_bytes_per_s=float(f"{peak / 48:.3g}"), gemm_overlap_exponent=p,
                     gemm_matrix_efficiency=eff, gemm_mem_bw_efficiency=bw, gemm_latency_s=lat, gemm_stream_k=True)
    ceiling = gemm_ceiling(hw, peak, "matrix.fp16")[0]
    return [gemm_time_with(m, n, k, timing=t, peak_flops_per_s=peak, mem_bw_bytes_per_s=hw.mem_bw_bytes_per_s,
                           achievable_flops_per_s=ceiling, l2_bytes=hw.onchip_cache_bytes, schedule=schedule).t_s
            for m, n, k in SHAPES]


def test_each_set_is_fitted_under_its_own_schedule():
    hw = load_hardware("h100-sxm")
    # "measured": the model's own times at known constants, whole waves + p-norm for the Vidur-like rows,
    # stream-K + max(compute, memory) for the 2026-like rows
    vidur = [SimpleNamespace(kernels={"g": SimpleNamespace(gemm=s)}, measured_s={"g": t})
             for s, t in zip(SHAPES, _times(hw, "waves"))]
    ours = [(s, t, "fp16") for s, t in zip(SHAPES, _times(hw, "stream_k"))]
    got, loss = fit.fit_gemm(vidur, hw, 132, ours, ("waves", "stream_k"), GRID)
    assert loss < 1e-4                                # the constants come back exactly
    assert got["gemm_overlap_exponent"] == 2.0 and got["gemm_split_k_min"] == 1024
    assert got["gemm_matrix_efficiency"] == pytest.approx(0.95, abs=0.01)
    assert got["gemm_mem_bw_efficiency"] == pytest.approx(0.87, abs=0.01)
    assert got["gemm_latency_s"] == pytest.approx(4.6e-6, rel=0.02)
    # one schedule for both sets (the fit before the split) cannot reproduce them
    _, one = fit.fit_gemm(vidur, hw, 132, ours, ("auto", "auto"), GRID)
    assert one > 0.01                                  # mean |log error| ~5%
    assert fit.SCHEDULES == ("waves", "stream_k")
