"""Implicit-GEMM convolutions on a stream-K (persistent-GEMM) device run one CTA per tile
(graphroof.timing.conv: whole waves, a fill + drain per wave), checked against hand-derived numbers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from graphroof.hardware import load_hardware
from graphroof.hardware.params import KernelTiming
from graphroof.timing.conv import ConvShape, conv_time

# literal constants (not the shipped fit, which other work may refit): one 128 x 128 tile height, no efficiency
# derating, no L2 starvation, loads and math overlapped as max (no p-norm)
_T = KernelTiming(sm_count=132, gemm_tile=(128, 128), gemm_tile_m_min=128, gemm_split_k_min=4096,
                  gemm_overlap_exponent=None, gemm_matrix_efficiency=1.0, gemm_mem_bw_efficiency=1.0,
                  gemm_latency_s=4e-6, stream_latency_s=2e-6, gemm_stream_k=True)
H100 = load_hardware("h100-sxm")
HOPPER = replace(H100, timing=_T)
NO_STREAM_K = replace(H100, timing=replace(_T, gemm_stream_k=False))

# ResNet-50 layer3 3x3 conv at batch 128: 256 -> 256 channels at 14 x 14
# implicit GEMM: M = 128 * 196 = 25088, N = 256, K = 256 * 9 = 2304 (256 is a multiple of 8: no padding)
SHAPE = ConvShape(n=128, cin=256, cout=256, out_spatial=196, kernel=9, groups=1)
NBYTES = 1e6  # 1e6 B / 3.35e12 B/s = 0.30 us: the compute time dominates


def test_stream_k_device_conv_runs_whole_waves_with_fill_and_drain():
    c = conv_time(SHAPE, NBYTES, HOPPER, "fp16")
    # tiles = ceil(25088 / 128) * ceil(256 / 128) = 196 * 2 = 392 >= 132 SMs: no split-K
    # waves = ceil(392 / 132) = 3 (stream-K would count 392 / 132 = 2.97)
    # one CTA: 2 * 128 * 128 * 2304 = 75,497,472 FLOP at 989.4e12 / 132 = 7.4955e12 FLOP/s per SM = 10.0724 us
    # t_compute = 3 * 10.0724 us + 3 waves * stream_latency 2 us = 30.217 + 6 = 36.217 us
    # t = max(36.217 us, 0.30 us) + gemm_latency 4 us = 40.217 us
    assert c.path == "tensor_core"
    assert c.t_s == pytest.approx(40.217e-6, rel=1e-3)


def test_device_without_stream_k_keeps_the_gemm_model():
    c = conv_time(SHAPE, NBYTES, NO_STREAM_K, "fp16")
    # the GEMM fit already describes one-CTA-per-tile kernels: 3 whole waves, no per-wave term
    # t = 3 * 10.0724 us + 4 us = 34.217 us
    assert c.t_s == pytest.approx(34.217e-6, rel=1e-3)


def test_stream_k_gemm_itself_is_unchanged():
    # the GEMM (not a conv) on the stream-K profile still shares the last wave: 2 * 25088 * 256 * 2304 FLOP
    # = 29.595 GFLOP / 989.4e12 = 29.912 us; as a plain GEMM it reads the im2col A: 2 B * (25088 * 2304
    # + 2304 * 256 + 25088 * 256) = 129,630,208 B / 3.35e12 = 38.696 us; t = max + 4 us = 42.696 us
    from graphroof.timing import gemm_time

    g = gemm_time(25088, 256, 2304, HOPPER, "fp16")
    assert g.t_compute_s == pytest.approx(29.912e-6, rel=1e-3)
    assert g.t_s == pytest.approx(42.696e-6, rel=1e-3)
