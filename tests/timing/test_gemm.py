"""GEMM model: tile and wave quantisation, split-K, L2 starvation, weight streaming at small M (hand cases)."""

from __future__ import annotations

import pytest

from graphroof.hardware import load_hardware
from graphroof.timing import KernelTiming, gemm_time, gemm_time_with

A100_FP16 = 312e12
A100_BW = 2.039e12


def _t(**kw) -> KernelTiming:
    base = dict(sm_count=108, gemm_tile=(128, 128), gemm_tile_m_min=128, gemm_split_k_min=256,
                gemm_matrix_efficiency=1.0, gemm_mem_bw_efficiency=1.0, gemm_latency_s=0.0)
    return KernelTiming(**{**base, **kw})


def test_wave_quantisation_4096_cube_on_108_sms():
    # 4096/128 * 4096/128 = 32 * 32 = 1024 tiles; ceil(1024 / 108) = 10 waves; utilisation 1024 / 1080.
    # one CTA: 2 * 128 * 128 * 4096 = 134,217,728 FLOP at one SM's share 312e12 / 108 = 2.8889e12 FLOP/s
    # -> 46.46 us per wave, 10 waves = 464.6 us.  Memory 3 * 4096^2 * 2 B = 100,663,296 B / 2.039e12 = 49.4 us.
    g = gemm_time_with(4096, 4096, 4096, timing=_t(), peak_flops_per_s=A100_FP16, mem_bw_bytes_per_s=A100_BW)
    assert (g.tiles, g.waves, g.split_k, g.tile) == (1024, 10, 1, (128, 128))
    assert g.wave_utilisation == pytest.approx(1024 / 1080)
    assert g.t_compute_s == pytest.approx(10 * 134_217_728 / (312e12 / 108))
    assert g.t_compute_s == pytest.approx(464.6e-6, rel=1e-3)
    assert g.t_memory_s == pytest.approx(100_663_296 / 2.039e12)
    assert g.regime == "compute" and g.t_s == g.t_compute_s
    # the useful-FLOP time is 1024/1080 of the quantised one
    assert g.flops / A100_FP16 == pytest.approx(g.t_compute_s * 1024 / 1080)


def test_one_more_tile_row_costs_a_wave():
    # M = 4096 + 1: 33 * 32 = 1056 tiles -> still 10 waves (1080 slots); M = 4096 + 129: 34 * 32 = 1088 -> 11
    t = _t()
    a = gemm_time_with(4097, 4096, 4096, timing=t, peak_flops_per_s=A100_FP16, mem_bw_bytes_per_s=A100_BW)
    b = gemm_time_with(4096 + 129, 4096, 4096, timing=t, peak_flops_per_s=A100_FP16, mem_bw_bytes_per_s=A100_BW)
    assert (a.tiles, a.waves, b.tiles, b.waves) == (1056, 10, 1088, 11)
    assert b.t_compute_s / a.t_compute_s == pytest.approx(1.1)


def test_m1_is_weight_streaming():
    # M = 1, N = 12288, K = 4096 (Llama-2-7B fused QKV, one decode token), tile heights 128, 64, 32, 16:
    # the 16-row tile: 1 * 96 = 96 tiles < 108 SMs, split = min(108 // 96, 4096 // 256) = 1, 1 wave,
    # 2 * 16 * 128 * 4096 = 16,777,216 FLOP / (312e12 * 0.75 / 108) = 7.74 us of compute.
    # bytes = (1 * 4096 + 1 * 12288) * 2 + 4096 * 12288 * 2 = 32,768 + 100,663,296 = 100,696,064
    # memory = 100,696,064 / (2.039e12 * 0.8) = 61.73 us; t = 61.73 + 4 us latency = 65.73 us
    t = _t(gemm_tile_m_min=16, gemm_matrix_efficiency=0.75, gemm_mem_bw_efficiency=0.8, gemm_latency_s=4e-6)
    g = gemm_time_with(1, 12288, 4096, timing=t, peak_flops_per_s=A100_FP16, mem_bw_bytes_per_s=A100_BW)
    assert g.tile == (16, 128) and g.tiles == 96 and g.waves == 1 and g.split_k == 1
    assert g.bytes == 100_696_064
    assert g.t_compute_s == pytest.approx(16_777_216 / (312e12 * 0.75 / 108))
    assert g.regime == "memory"
    assert g.t_s == pytest.approx(100_696_064 / (2.039e12 * 0.8) + 4e-6)
    assert g.t_s == pytest.approx(65.73e-6, rel=1e-3)
    # a FLOP-fraction model would say 2 * 12288 * 4096 / (312e12 * 0.75) = 0.43 us: 150x too fast
    assert g.t_s > 100 * g.flops / (312e12 * 0.75)


def test_split_k_fills_the_machine():
    # M = 128, N = 1536, K = 4096: 1 * 12 = 12 tiles; split = min(108 // 12, 4096 // 256) = 9 -> 108 CTAs, 1 wave,
    # each 2 * 128 * 128 * ceil(4096 / 9) = 2 * 16384 * 456 = 14,942,208 FLOP / 2.8889e12 = 5.17 us
    # fp32 partials: 2 (write + read) * 9 * 128 * 1536 * 4 B = 14,155,776 B on top of the operands
    g = gemm_time_with(128, 1536, 4096, timing=_t(), peak_flops_per_s=A100_FP16, mem_bw_bytes_per_s=A100_BW)
    assert (g.tiles, g.split_k, g.waves) == (12, 9, 1)
    assert g.t_compute_s == pytest.approx(14_942_208 / (312e12 / 108))
    operands = (128 * 4096 + 4096 * 1536 + 128 * 1536) * 2
    assert g.bytes == operands + 14_155_776
    # without split-K (floor = K) the same GEMM is one CTA per tile: 9x the compute time per wave
    g1 = gemm_time_with(128, 1536, 4096, timing=_t(gemm_split_k_min=4096), peak_flops_per_s=A100_FP16,
                        mem_bw_bytes_per_s=A100_BW)
    assert g1.split_k == 1 and g1.t_compute_s == pytest.approx(2 * 128 * 128 * 4096 / (312e12 / 108))


def test_narrow_tiles_are_l2_starved_and_chosen_only_when_they_pay():
    # L2 ridge I_l2 = 312e12 / 4.875e12 = 64 FLOP/B.  A 128x128 fp16 tile loads (128 + 128) * 2 B per k step for
    # 2 * 128 * 128 FLOP: 64 FLOP/B -> full rate.  A 64x128 tile: 2 * 8192 / (192 * 2) = 42.67 FLOP/B -> 2/3 rate.
    t = _t(gemm_tile_m_min=64, gemm_l2_bw_bytes_per_s=312e12 / 64)
    # M = 4096: 64-row tiles = 2048 tiles, 19 waves of half-size CTAs at 2/3 rate = 19 * 0.5 * 1.5 = 14.25
    # full-tile waves > 10 waves of 128-row tiles: the 128 tile is run
    g = gemm_time_with(4096, 4096, 4096, timing=t, peak_flops_per_s=A100_FP16, mem_bw_bytes_per_s=A100_BW)
    assert g.tile == (128, 128) and g.waves == 10
    # M = 136, N = 7168, K = 8192: 128-row tiles: 2 * 56 = 112 tiles -> 2 waves of full CTAs (2.0);
    # 64-row tiles: 3 * 56 = 168 tiles -> 2 waves of half CTAs at 2/3 rate = 2 * 0.5 * 1.5 = 1.5: 64 rows win
    g = gemm_time_with(136, 7168, 8192, timing=t, peak_flops_per_s=A100_FP16, mem_bw_bytes_per_s=A100_BW)
    assert g.tile == (64, 128) and g.tiles == 168 and g.waves == 2
    full_cta = 2 * 128 * 128 * 8192 / (312e12 / 108)
    assert g.t_compute_s == pytest.approx(1.5 * full_cta)


def test_without_sm_count_no_quantisation():
    t = KernelTiming(sm_count=None, gemm_matrix_efficiency=0.5, gemm_mem_bw_efficiency=1.0, gemm_latency_s=0.0)
    g = gemm_time_with(4097, 4096, 4096, timing=t, peak_flops_per_s=100e12, mem_bw_bytes_per_s=1e12)
    assert g.t_compute_s == pytest.approx(2 * 4097 * 4096 * 4096 / 50e12)


def test_zero_and_bad_shapes():
    t = _t()
    assert gemm_time_with(0, 10, 10, timing=t, peak_flops_per_s=1e12, mem_bw_bytes_per_s=1e12).t_s == 0.0
    from graphroof.errors import InputError
    with pytest.raises(InputError, match="M must be"):
        gemm_time_with(-1, 10, 10, timing=t, peak_flops_per_s=1e12, mem_bw_bytes_per_s=1e12)


def test_gemm_time_on_a100_profile_fp32_uses_tf32_and_4_byte_operands():
    hw = load_hardware("a100")
    g = gemm_time(4096, 4096, 4096, hw, "fp32")
    assert g.peak_used == "matrix.tf32" and g.peak_flops_per_s == 156e12
    assert g.bytes == 3 * 4096 * 4096 * 4
    g2 = gemm_time(4096, 4096, 4096, hw, "fp32", matmul_precision="highest")
    assert g2.peak_used == "vector.fp32" and g2.t_s > 5 * g.t_s
    # the fitted profile: a big fp16 GEMM lands between 60% and 90% of the dense peak
    g3 = gemm_time(8192, 8192, 8192, hw, "fp16")
    assert 0.6 < g3.flops / g3.t_s / 312e12 < 0.9


def test_overlap_exponent_near_the_ridge():
    # p-norm overlap, p = 2: t_compute and t_memory 3 : 4 -> 5 (a 3-4-5 triangle) instead of max = 4.
    # Shape with a single 128x128 tile: M = 128, N = 128, K = 4096 on 1 SM at 1 TFLOP/s:
    # t_compute = 2 * 128 * 128 * 4096 / 1e12 = 134.2 us; memory bytes (128*4096 + 4096*128 + 128*128) * 2
    # = 2,129,920 B; bandwidth chosen so t_memory = 4/3 t_compute.
    tc = 2 * 128 * 128 * 4096 / 1e12
    bw = 2_129_920 / (tc * 4 / 3)
    t = _t(sm_count=1, gemm_split_k_min=4096, gemm_overlap_exponent=2.0)
    g = gemm_time_with(128, 128, 4096, timing=t, peak_flops_per_s=1e12, mem_bw_bytes_per_s=bw)
    assert g.t_compute_s == pytest.approx(tc) and g.t_memory_s == pytest.approx(tc * 4 / 3)
    assert g.t_s == pytest.approx(tc * 5 / 3)
    # far from the ridge the p-norm is the max: t_memory = 100 t_compute -> within 0.01%
    g2 = gemm_time_with(128, 128, 4096, timing=t, peak_flops_per_s=1e12, mem_bw_bytes_per_s=bw * 4 / 3 / 100)
    assert g2.t_s == pytest.approx(g2.t_memory_s, rel=1e-4)
