"""Vision round 2 (issue 23): activations from L2 in back-to-back engines, the Paddle predictor's per-call host
time, the A10's SGEMM rate and the CNN stem's conv + bn + relu fused under TensorRT.  Arithmetic by hand in the
comments."""

from __future__ import annotations

from dataclasses import replace

import pytest

from graphroof.counters.cost import Cost
from graphroof.fuse import get_runtime
from graphroof.hardware import load_hardware
from graphroof.hardware.params import KernelTiming
from graphroof.timing.gemm import gemm_time_with
from graphroof.timing.l2 import L2_SHARE, fits_l2, l2_bytes_of, l2_read_cost
from graphroof.timing.precision import gemm_ceiling, matmul_peak


def test_fits_l2_is_half_the_l2():
    # 96 MB L2 (L40S): half = 48 MB; 48e6 fits, 48e6 + 1 does not; no L2: never
    assert L2_SHARE == 0.5
    assert fits_l2(48e6, 96e6)
    assert not fits_l2(48e6 + 1, 96e6)
    assert not fits_l2(1e3, None) and not fits_l2(0.0, 96e6)


def test_l2_read_cost_drops_only_activation_reads():
    # weights 4.7 MB + activations read 1.57 MB + written 6.3 MB = 12.57 MB <= 48 MB: reads from L2
    c = Cost(matrix_flops=1e9, weight_bytes=4.7e6, act_read_bytes=1.57e6, act_write_bytes=6.3e6)
    on = l2_read_cost(c, 96e6)
    assert on.act_read_bytes == 0.0 and on.act_write_bytes == 6.3e6 and on.weight_bytes == 4.7e6
    assert on.bytes == pytest.approx(11.0e6)  # 4.7 + 6.3
    # a 6 MB L2 (A10): half = 3 MB < 12.57 MB: unchanged
    assert l2_read_cost(c, 6e6) is c


def test_l2_partitions_halve_the_a30_l2():
    # A30 (GA100): 24 MB in two partitions, each caching for its own SMs: 24 / 2 = 12 MB; L40S: one, 96 MB
    assert l2_bytes_of(load_hardware("a30-24gb-pcie")) == pytest.approx(12e6)
    assert l2_bytes_of(load_hardware("l40s-48gb-pcie")) == pytest.approx(96e6)


def test_gemm_reads_a_from_l2():
    # M 1024, N 3072, K 768, fp16, no tile model (sm_count None): bytes = (M K + M N) 2 + K N 2
    #   = (786,432 + 3,145,728) 2 + 2,359,296 2 = 7,864,320 + 4,718,592 = 12,582,912 B;
    # A from L2: less M K 2 = 1,572,864 -> 11,010,048 B; memory time at 1e12 B/s x 0.8 = 13.76 us
    t = KernelTiming(sm_count=None, gemm_mem_bw_efficiency=0.8, gemm_overlap_exponent=None)
    kw = {"timing": t, "peak_flops_per_s": 1e15, "mem_bw_bytes_per_s": 1e12}
    dram = gemm_time_with(1024, 3072, 768, **kw)
    l2 = gemm_time_with(1024, 3072, 768, act_in_l2=True, **kw)
    assert dram.bytes == 12_582_912 and l2.bytes == 11_010_048
    assert l2.t_memory_s == pytest.approx(11_010_048 / 0.8e12)


def test_tensorrt_presets_say_l2_and_paddle_call_time():
    assert get_runtime("tensorrt").l2_activations and get_runtime("paddle-tensorrt").l2_activations
    assert get_runtime("tensorrt").call_overhead_s == 0.0
    # fitted: A30 fp16 ResNet-50 batch 1, 0.83 ms measured - 0.44 ms of kernels = 0.39 ms
    assert get_runtime("paddle-tensorrt").call_overhead_s == pytest.approx(3.9e-4)
    assert "A30" in get_runtime("paddle-tensorrt").sources["call_overhead_s"]
    assert not get_runtime("pytorch-eager").l2_activations


def test_a10_sgemm_rate():
    # FP32 math (highest): the vector fp32 peak 31.2 TFLOP/s, ceiling the fitted 12.1 TFLOP/s = 0.388 x 31.2
    hw = load_hardware("a10-24gb-pcie")
    peak, key = matmul_peak(hw, "fp32", "highest")
    assert (peak, key) == (31.2e12, "vector.fp32")
    assert gemm_ceiling(hw, peak, key) == (12.1e12, "achievable.fp32")
    # TF32 keeps the tensor ratio: 62.5 x 79 / 125 = 39.5 TFLOP/s
    p2, k2 = matmul_peak(hw, "fp32", "high")
    assert gemm_ceiling(hw, p2, k2)[0] == pytest.approx(39.5e12)


def test_paddle_call_time_adds_once_per_call():
    # the call's host time is the first kernel's host stage: the device waits for it once, so the step grows by
    # (almost exactly) 390 us over the same kernels under the tensorrt preset
    from graphroof import analyze

    rt = get_runtime("paddle-tensorrt")
    a = analyze("resnet-50", hw="a30-24gb-pcie", runtime=rt, batch=1, dtype="fp16")
    b = analyze("resnet-50", hw="a30-24gb-pcie", runtime=replace(rt, call_overhead_s=0.0), batch=1, dtype="fp16")
    assert a.totals.time_realistic_s - b.totals.time_realistic_s == pytest.approx(3.9e-4, rel=0.02)


def test_resnet_stem_relu_fused_into_conv1_under_tensorrt():
    # conv1 + bn1 (folded) + relu: one kernel of 3 ops; maxpool its own; no relu kernel left
    from graphroof import analyze

    ks = analyze("resnet-50", hw="a30-24gb-pcie", runtime="tensorrt", batch=1, dtype="fp16").to_dict()["kernels"]
    names = [k["name"] for k in ks]
    assert not any(n.startswith("relu") for n in names)
    stem = next(k for k in ks if k["name"].startswith("conv2d+"))
    assert stem["name"] == "conv2d+2"
