"""The smallest tile height (``gemm_tile_m_min``): the A100's is cuBLAS's smallest Ampere tensor-core tile, 32 rows
(``sm80_xmma_gemm_..._tilesize32x32x64_warpsize2x2x1_tensor16x8x16``: 2 warps along M, each one 16-row
``mma.m16n8k16``), so a GEMM whose M just overflows a 128-row tile row pays 32-row quantisation, not 16-row (hand
cases)."""

from __future__ import annotations

import numpy as np
import pytest

from graphroof.hardware import load_hardware
from graphroof.timing import KernelTiming, gemm_time, gemm_time_with
from graphroof.timing.gemm import _tile_heights

A100_FP16 = 312e12
A100_BW = 2.039e12
SM_RATE = A100_FP16 / 108  # one SM's share at efficiency 1: 2.8889e12 FLOP/s


def _t(m_min: int) -> KernelTiming:
    return KernelTiming(sm_count=108, gemm_tile=(128, 128), gemm_tile_m_min=m_min, gemm_split_k_min=256,
                        gemm_matrix_efficiency=1.0, gemm_mem_bw_efficiency=1.0, gemm_latency_s=0.0)


def test_a100_profile_tile_heights_stop_at_32():
    t = load_hardware("a100-80gb-sxm").timing
    assert t.gemm_tile_m_min == 32
    assert _tile_heights(t) == [128, 64, 32]
    assert _tile_heights(_t(16)) == [128, 64, 32, 16]


def test_m136_qkv_on_108_sms_32_row_floor():
    # Llama-2-7B fused QKV at 136 tokens: M = 136, N = 12288 (96 column tiles of 128), K = 4096.
    #   tm 128: 2 * 96 = 192 tiles, 2 waves x 2*128*128*4096 = 134,217,728 FLOP / 2.8889e12 = 2 x 46.46 = 92.92 us
    #   tm  64: 3 * 96 = 288 tiles, 3 waves x 67,108,864 FLOP -> 3 x 23.23 = 69.69 us
    #   tm  32: 5 * 96 = 480 tiles, ceil(480 / 108) = 5 waves x 33,554,432 FLOP -> 5 x 11.615 = 58.07 us  (least)
    # with a 16-row tile: 9 * 96 = 864 tiles = 8 full waves x 16,777,216 FLOP -> 8 x 5.807 = 46.46 us
    g32 = gemm_time_with(136, 12288, 4096, timing=_t(32), peak_flops_per_s=A100_FP16, mem_bw_bytes_per_s=A100_BW)
    assert (g32.tile, g32.tiles, g32.waves, g32.split_k) == ((32, 128), 480, 5, 1)
    assert g32.t_compute_s == pytest.approx(5 * 33_554_432 / SM_RATE)
    assert g32.t_compute_s == pytest.approx(58.07e-6, rel=1e-3)
    g16 = gemm_time_with(136, 12288, 4096, timing=_t(16), peak_flops_per_s=A100_FP16, mem_bw_bytes_per_s=A100_BW)
    assert (g16.tile, g16.tiles, g16.waves) == ((16, 128), 864, 8)
    assert g16.t_compute_s == pytest.approx(46.46e-6, rel=1e-3)
    # bytes (136 * 4096 + 136 * 12288) * 2 + 4096 * 12288 * 2 = 105,119,744 -> 51.55 us: the 16-row floor made
    # this GEMM memory-bound (max of the two, no overlap exponent), the 32-row one leaves it compute-bound
    assert g32.bytes == 105_119_744
    assert g32.t_s == pytest.approx(g32.t_compute_s) and g32.regime == "compute"
    assert g16.t_s == pytest.approx(105_119_744 / A100_BW) and g16.regime == "memory"


def test_floor_changes_nothing_once_m_fills_the_machine():
    # M = N = K = 4096: tm 64: 64 * 32 = 2048 tiles, ceil(2048 / 108) = 19 waves x 67,108,864 FLOP = 441.4 us;
    # tm 32: 4096 tiles, 38 waves x 33,554,432; tm 16: 8192 tiles, 76 waves x 16,777,216: the same 441.4 us
    # (tm 128: 10 waves x 134,217,728 = 464.6 us), so the floor does not move large GEMMs
    a = gemm_time_with(4096, 4096, 4096, timing=_t(32), peak_flops_per_s=A100_FP16, mem_bw_bytes_per_s=A100_BW)
    b = gemm_time_with(4096, 4096, 4096, timing=_t(16), peak_flops_per_s=A100_FP16, mem_bw_bytes_per_s=A100_BW)
    assert a.t_s == pytest.approx(b.t_s)
    assert a.t_s == pytest.approx(19 * 67_108_864 / SM_RATE)
    assert a.t_s == pytest.approx(441.4e-6, rel=1e-3)


def test_weight_only_kernels_keep_16_row_tiles():
    # tinygemm (int4mm.cu, kMTileSize = 16) tiles M in one 16-row MMA, below cuBLAS's 32-row floor
    assert _tile_heights(_t(32), weight_only=True) == [128, 64, 32, 16]
    assert _tile_heights(_t(128), weight_only=True) == [128, 64, 32, 16]
    assert _tile_heights(_t(8), weight_only=True) == [128, 64, 32, 16, 8]  # a finer profile floor stays
    # M = 1, N = 12288, K = 4096 with the dequant fused: the 16-row tile, 96 tiles < 108 SMs,
    # split = min(108 // 96, 4096 // 256) = 1, one wave of 2 * 16 * 128 * 4096 = 16,777,216 FLOP -> 5.807 us
    # (the cuBLAS floor's 32-row tile: 33,554,432 FLOP -> 11.615 us)
    w = gemm_time_with(1, 12288, 4096, timing=_t(32), peak_flops_per_s=A100_FP16, mem_bw_bytes_per_s=A100_BW,
                       weight_bytes=12288 * 4096 / 2, weight_only=True)
    c = gemm_time_with(1, 12288, 4096, timing=_t(32), peak_flops_per_s=A100_FP16, mem_bw_bytes_per_s=A100_BW,
                       weight_bytes=12288 * 4096 / 2)
    assert (w.tile, w.tiles, w.waves, w.split_k) == ((16, 128), 96, 1, 1)
    assert w.t_compute_s == pytest.approx(16_777_216 / SM_RATE) == pytest.approx(5.807e-6, rel=1e-3)
    assert c.tile == (32, 128) and c.t_compute_s == pytest.approx(11.615e-6, rel=1e-3)


def test_gemm_time_int4_uses_the_weight_only_floor():
    hw = load_hardware("a100-80gb-sxm")
    assert gemm_time(1, 12288, 4096, hw, "bf16", weight_dtype="int4").tile[0] == 16
    assert gemm_time(1, 12288, 4096, hw, "bf16").tile[0] == 32


def test_vectorized_weight_only_matches_scalar():
    # the vectorised model takes the same floors: weight-only fused dequant 16 rows, dequant-then-GEMM (a plain
    # cuBLAS GEMM after a dequant kernel) and dense GEMMs the profile's 32
    from graphroof.timing.gemm_plan import GemmPlan
    from graphroof.timing.vectorized import gemm_times

    hw = load_hardware("a100-80gb-sxm")
    m, n, k = np.array([1, 17, 136]), np.array([12288, 4096, 12288]), np.array([4096, 11008, 4096])
    vt, _ = gemm_times(m, n, k, hw, "bf16", None, GemmPlan("bf16", bits=4, group=128))
    for i in range(3):
        g = gemm_time(int(m[i]), int(n[i]), int(k[i]), hw, "bf16", weight_dtype="int4", quant_group=128)
        assert vt[i] == pytest.approx(g.t_s, rel=1e-9)
    vd, _ = gemm_times(m, n, k, hw, "bf16", None, GemmPlan("bf16"))
    for i in range(3):
        assert vd[i] == pytest.approx(gemm_time(int(m[i]), int(n[i]), int(k[i]), hw, "bf16").t_s, rel=1e-9)
