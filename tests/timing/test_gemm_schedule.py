"""The runtime's GEMM schedule (preset ``[kernels] gemm_schedule``, graphroof.timing.gemm.schedule_of): whole waves
(``waves``), persistent stream-K with loads hidden under the math (``stream_k``), or the profile's (``auto``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from graphroof.errors import InputError
from graphroof.fuse.preset_file import preset_fields
from graphroof.fuse.runtimes import get_runtime
from graphroof.hardware import load_hardware
from graphroof.hardware.params import KernelTiming
from graphroof.timing.gemm import gemm_time, gemm_time_with, schedule_of
from graphroof.timing.gemm_plan import GemmPlan
from graphroof.timing.vectorized import gemm_times

# 4 SMs, one 128 x 128 tile height (128 only), no split-K, full efficiency, no latency, p = 2
T = KernelTiming(sm_count=4, gemm_tile=(128, 128), gemm_tile_m_min=128, gemm_split_k_min=1 << 20,
                 gemm_overlap_exponent=2.0, gemm_matrix_efficiency=1.0, gemm_mem_bw_efficiency=1.0,
                 gemm_latency_s=0.0, gemm_stream_k=True)


def _t(schedule: str, timing: KernelTiming = T) -> float:
    # M 640, N 128, K 1024, fp16; peak 1e12 FLOP/s, 1e10 B/s
    return gemm_time_with(640, 128, 1024, timing=timing, peak_flops_per_s=1e12, mem_bw_bytes_per_s=1e10,
                          schedule=schedule).t_s


def test_schedule_of():
    assert schedule_of(T, "auto") == (True, 2.0)
    assert schedule_of(T, "waves") == (False, 2.0)
    assert schedule_of(T, "stream_k") == (True, None)          # max(t_compute, t_memory)
    no_sk = replace(T, gemm_stream_k=False)
    assert schedule_of(no_sk, "stream_k") == (False, 2.0)      # a device without stream-K kernels: the profile's
    with pytest.raises(InputError):
        schedule_of(T, "splitk")


def test_schedule_times_hand_derived():
    # tiles = ceil(640 / 128) * ceil(128 / 128) = 5 on 4 SMs, no split (K 1024 < split floor)
    # one CTA: 2 * 128 * 128 * 1024 = 33,554,432 FLOP at 1e12 / 4 = 2.5e11 FLOP/s per SM -> 134.217728 us
    # stream-K: 5 / 4 = 1.25 waves -> 167.77216 us; whole waves: 2 -> 268.435456 us
    # memory: A 640*1024*2 = 1,310,720 + B 1024*128*2 = 262,144 + C 640*128*2 = 163,840 = 1,736,704 B
    #         at 1e10 B/s -> 173.6704 us
    # auto (stream-K, p = 2): sqrt(167.77216^2 + 173.6704^2) = 241.47237 us
    # waves (p = 2):          sqrt(268.435456^2 + 173.6704^2) = 319.71707 us
    # stream_k (max):         max(167.77216, 173.6704) = 173.6704 us
    assert _t("auto") == pytest.approx(241.47237e-6, rel=1e-6)
    assert _t("waves") == pytest.approx(319.71707e-6, rel=1e-6)
    assert _t("stream_k") == pytest.approx(173.6704e-6, rel=1e-6)
    # DeepGEMM keeps its own schedule whatever the runtime says
    dg = {s: gemm_time_with(640, 128, 1024, timing=T, peak_flops_per_s=1e12, mem_bw_bytes_per_s=1e10,
                            library="deepgemm", schedule=s).t_s for s in ("auto", "waves", "stream_k")}
    assert dg["auto"] == dg["waves"] == dg["stream_k"]


def test_vectorized_matches_scalar():
    hw = load_hardware("h100-sxm")
    m, n, k = np.array([256, 544, 2048]), np.array([8192, 8192, 4096]), np.array([8192, 4096, 14336])
    for s in ("auto", "waves", "stream_k"):
        vt, _ = gemm_times(m, n, k, hw, "fp16", None, GemmPlan("fp16", schedule=s))
        for i in range(3):
            g = gemm_time(int(m[i]), int(n[i]), int(k[i]), hw, "fp16", schedule=s)
            assert vt[i] == pytest.approx(g.t_s, rel=1e-9)


def test_preset_key():
    assert preset_fields({"name": "x", "kernels": {"gemm_schedule": "waves"}})["gemm_schedule"] == "waves"
    with pytest.raises(InputError):
        preset_fields({"name": "x", "kernels": {"gemm_schedule": "split_k"}})
    assert get_runtime("sarathi-serve").gemm_schedule == "waves"  # Vidur's cuBLAS 12.1 (PyTorch 2.2 cu121)
    for name in ("serving", "vllm", "sglang"):                    # today's engines: torch >= 2.8, CUDA >= 12.8
        assert get_runtime(name).gemm_schedule == "stream_k", name
    assert get_runtime("compiled").gemm_schedule == "stream_k"   # PyTorch 2.11 cu130 (cuBLAS 13)
