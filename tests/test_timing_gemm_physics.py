"""GEMM physics: the achievable-matmul ceiling (MAMF), weight-only dequantising GEMMs, MoE grouped GEMMs.
Each formula is checked against hand-derived numbers (arithmetic in the comments)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from graphroof.hardware import load_hardware
from graphroof.timing import gemm_time, gemm_time_with
from graphroof.timing.moe import experts_in_step, per_expert_latency_s
from graphroof.timing.precision import gemm_ceiling
from graphroof.timing.quantgemm import scale_bytes, weight_only_bits


def _flat(hw, **kw):
    """The profile with no tiles (no SM count), unit efficiencies, no latency, max overlap: hand-checkable."""
    t = replace(hw.timing, sm_count=None, gemm_matrix_efficiency=1.0, gemm_mem_bw_efficiency=1.0,
                gemm_latency_s=0.0, gemm_overlap_exponent=None, **kw)
    return replace(hw, timing=t)


def test_ceiling_comes_from_the_mamf_table():
    hw = load_hardware("h100-sxm")
    assert gemm_ceiling(hw, 1978.9e12, "matrix.fp8") == (1402.6e12, "achievable.fp8")  # MAMF L376
    assert gemm_ceiling(hw, 989.4e12, "matrix.fp16") == (794.5e12, "achievable.bf16")  # fp16 runs at bf16's rate
    # TF32 has no row: its peak x the device's bf16 achievable / peak = 494.7 x 794.5 / 989.4 = 397.25 TFLOP/s
    c, how = gemm_ceiling(hw, 494.7e12, "matrix.tf32")
    assert c == pytest.approx(397.25e12, rel=1e-4) and how == "peak x bf16 achievable/peak"
    # no table: the peak (the efficiency is then a fraction of the peak, as before)
    bare = replace(hw, timing=replace(hw.timing, gemm_achievable_flops_per_s={}))
    assert gemm_ceiling(bare, 989.4e12, "matrix.bf16") == (989.4e12, "peak")


def test_large_gemm_runs_at_achievable_times_efficiency():
    hw = _flat(load_hardware("h100-sxm"))
    # 4096^3 bf16: 2 * 4096^3 = 137.44e9 FLOPs at 794.5e12 x 1.0 = 172.99 us; bytes 3 * 4096^2 * 2 = 100.7 MB at
    # 3.35 TB/s = 30.05 us: compute-bound, t = 172.99 us
    g = gemm_time(4096, 4096, 4096, hw, "bf16")
    assert g.t_s == pytest.approx(2 * 4096 ** 3 / 794.5e12, rel=1e-9)
    # fp8: 137.44e9 / 1402.6e12 = 97.99 us (not the 1978.9e12 peak's 69.45 us)
    assert gemm_time(4096, 4096, 4096, hw, "fp8").t_s == pytest.approx(2 * 4096 ** 3 / 1402.6e12, rel=1e-9)


def test_weight_only_int4_bytes_and_dequant():
    hw = _flat(load_hardware("h100-sxm"), gemm_dequant_flops_per_mac=8.0)
    # M=1, N=K=4096, int4 group 128: packed 4096*4096/2 = 8,388,608 B; scale+zero 4 B per 128 weights =
    # 4 * 4096 * 4096 / 128 = 524,288 B; A = C = 4096 * 2 = 8,192 B: 8,929,280 B at 3.35e12 B/s = 2.66546 us.
    # compute: MMA 2 * 4096^2 / 794.5e12 = 0.04223 us + dequant 8 * 4096^2 / 133.8e12 (vector fp16) = 1.00311 us
    g = gemm_time(1, 4096, 4096, hw, "bf16", weight_dtype="int4", quant_group=128)
    assert g.bytes == 8_929_280
    assert g.t_compute_s == pytest.approx(2 * 4096 ** 2 / 794.5e12 + 8 * 4096 ** 2 / 133.8e12, rel=1e-9)
    assert g.t_s == pytest.approx(8_929_280 / 3.35e12, rel=1e-9) and g.regime == "memory"
    # M=64: dequant 8 * 64 * 4096^2 / 133.8e12 = 64.20 us + MMA 2.703 us = 66.90 us > memory
    # (8,388,608 + 524,288 + 64 * 4096 * 2 * 2 = 9,961,472 B -> 2.974 us): the dequant dominates
    g64 = gemm_time(64, 4096, 4096, hw, "bf16", weight_dtype="int4", quant_group=128)
    assert g64.t_s == pytest.approx(64 * (2 * 4096 ** 2 / 794.5e12 + 8 * 4096 ** 2 / 133.8e12), rel=1e-9)
    # int4 at batch 1 is not 4x bf16: bf16 reads 33,570,816 B (10.021 us), int4 8,929,280 B -> 3.76x
    bf16 = gemm_time(1, 4096, 4096, hw, "bf16")
    assert bf16.t_s / g.t_s == pytest.approx(33_570_816 / 8_929_280, rel=1e-9)


def test_weight_only_scales_and_bits():
    assert scale_bytes(4096, 4096, 4, 32) == 4 * 4096 * 4096 / 32  # group 32: 1 bit per weight (+25% on int4)
    assert scale_bytes(4096, 11008, 8) == 2 * 4096  # int8: one bf16 scale per output channel
    assert weight_only_bits("int4", "bf16") == 4 and weight_only_bits("int8", "fp16") == 8
    assert weight_only_bits("fp8", "bf16") == 8
    assert weight_only_bits("bf16", "bf16") is None and weight_only_bits("int8", "int8") is None
    assert weight_only_bits(None, "bf16") is None


def test_grouped_gemm_tiles_each_expert():
    t = replace(load_hardware("h100-sxm").timing, gemm_tile=(128, 128), gemm_tile_m_min=16, gemm_tile_policy="cover_m")
    kw = dict(timing=t, peak_flops_per_s=989.4e12, mem_bw_bytes_per_s=3.35e12)
    # (cover_m: the smallest tile height covering one group's rows)
    # 64 rows over 8 experts = 8 rows each (spread sqrt(8) = 2.83, w = 2 * 2.83 / 16 = 0.354): per expert
    # max(1, 0.646 * ceil(8 / 16) + 0.354 * (0.5 + 0.5)) = 1 tile -> 8 tiles (one GEMM: 1 tile of 64)
    assert gemm_time_with(64, 128, 1024, groups=8, **kw).tiles == 8
    assert gemm_time_with(64, 128, 1024, **kw).tiles == 1
    # 4096 rows over 8 experts: 512 each (spread 22.6, w = 45.25 / 128 = 0.354): per expert 0.646 * 4 + 0.354 *
    # (4 + 0.5) = 4.177 tiles of 128 (the last one partly empty) -> ceil(33.41) = 34 tiles (one GEMM's 32)
    assert gemm_time_with(4096, 128, 1024, groups=8, **kw).tiles == 34
    assert gemm_time_with(4096, 128, 1024, **kw).tiles == 32


def test_experts_read_back_from_counted_bytes():
    # one expert's weight 4096 x 14336 bf16 = 117,440,512 B; 2.5 experts' bytes counted -> 2.5 visited
    assert experts_in_step(2.5 * 117_440_512, 117_440_512, 8) == 2.5
    assert experts_in_step(0.0, 117_440_512, 8) == 1.0 and experts_in_step(1e12, 117_440_512, 8) == 8.0
    t = load_hardware("h100-sxm").timing
    # a loop over experts: (V - 1) extra GEMM latencies; grouped: none
    assert per_expert_latency_s(4.0, t, grouped=False) == pytest.approx(3 * t.gemm_latency_s)
    assert per_expert_latency_s(4.0, t, grouped=True) == 0.0


def test_stream_k_removes_wave_quantisation():
    t = replace(load_hardware("h100-sxm").timing, sm_count=132, gemm_tile=(128, 128), gemm_tile_m_min=128,
                gemm_tile_policy="best", gemm_l2_bw_bytes_per_s=None, gemm_matrix_efficiency=1.0,
                gemm_latency_s=0.0, gemm_overlap_exponent=None)
    kw = dict(peak_flops_per_s=1e15, mem_bw_bytes_per_s=1e18, achievable_flops_per_s=1e15)
    # a CTA tile of 128 x 128 x 4096 is 134.2 MFLOP at 1e15 / 132 per SM = 17.72 us
    cta = 2 * 128 * 128 * 4096 / (1e15 / 132)
    # 257 x 16896: ceil(257 / 128) = 3 x 132 = 396 tiles = 3 whole waves either way
    a = gemm_time_with(257, 16896, 4096, timing=replace(t, gemm_stream_k=False), **kw)
    assert a.t_compute_s == pytest.approx(3 * cta, rel=1e-12)
    # 129 x 17024: 2 x 133 = 266 tiles: ceil -> 3 waves; stream-K -> 266 / 132 = 2.01515 waves
    b = gemm_time_with(129, 16896 + 128, 4096, timing=replace(t, gemm_stream_k=True), **kw)
    assert b.t_compute_s == pytest.approx(266 / 132 * cta, rel=1e-12)
    c = gemm_time_with(129, 16896 + 128, 4096, timing=replace(t, gemm_stream_k=False), **kw)
    assert c.t_compute_s == pytest.approx(3 * cta, rel=1e-12)


def test_split_k_partials_stay_in_l2_when_they_fit():
    t = replace(load_hardware("h100-sxm").timing, gemm_tile=(128, 128), gemm_tile_m_min=128, gemm_split_k_min=1024,
                gemm_tile_policy="best")
    kw = dict(timing=t, peak_flops_per_s=989.4e12, mem_bw_bytes_per_s=3.35e12)
    # 128 x 4096 x 4096: 32 tiles, split min(132 // 32, 4096 // 1024) = 4; partials 4 x 128 x 4096 x 4 B = 8.4 MB
    # (< 50 MB of L2: on chip) -> bytes = A 1,048,576 + B 33,554,432 + C 1,048,576 = 35,651,584
    on = gemm_time_with(128, 4096, 4096, l2_bytes=50e6, **kw)
    assert on.split_k == 4 and on.bytes == 35_651_584
    # without an L2 (or partials larger than it): written and read back, + 2 x 8,388,608 B
    off = gemm_time_with(128, 4096, 4096, **kw)
    assert off.bytes == 35_651_584 + 2 * 8_388_608


def test_tile_dequant_converts_each_weight_once_per_m_tile():
    from graphroof.timing.quantgemm import dequant_rows, dequant_time

    hw = load_hardware("h100-sxm")
    t = hw.timing
    tm = t.gemm_tile[0]
    # fused_dequant (tinygemm, gpt-fast): one conversion per row, 300 rows -> 300
    assert dequant_rows(300, "fused_dequant", t) == 300
    # tile_dequant (Marlin, TensorRT-LLM): once per M tile the weight tile is loaded for: ceil(300 / tm)
    assert float(dequant_rows(300, "tile_dequant", t)) == -(-300 // tm)
    # at one row both variants convert every weight once: the same time
    a, b = dequant_time(1, 4096, 4096, t, hw, "fused_dequant"), dequant_time(1, 4096, 4096, t, hw, "tile_dequant")
    assert float(a) == pytest.approx(float(b), rel=1e-12)
    # and the time is c * rows * N K / the half-precision vector peak (133.8 TFLOP/s on H100)
    want = t.gemm_dequant_flops_per_mac * (-(-300 // tm)) * 4096 * 4096 / 133.8e12
    assert float(dequant_time(300, 4096, 4096, t, hw, "tile_dequant")) == pytest.approx(want, rel=1e-12)


def test_fp8_weights_run_fp8_gemms_only_where_the_engine_and_device_have_them():
    from graphroof.fuse import get_runtime
    from graphroof.graph import OpNode, Role, TensorSpec
    from graphroof.timing.gemm_plan import gemm_plan

    x = TensorSpec((16, 4096), "bf16", Role.ACTIVATION)
    w = TensorSpec((4096, 4096), "fp8_e4m3", Role.WEIGHT)
    node = OpNode("mm", "aten.mm", inputs=(x, w), outputs=(TensorSpec((16, 4096), "bf16", Role.ACTIVATION),))
    h100, a100 = load_hardware("h100-sxm"), load_hardware("a100-80gb-sxm")
    # vLLM on H100: per-token activation quantisation, an fp8 x fp8 GEMM at the fp8 rate, no dequant
    p = gemm_plan(node, "bf16", h100, get_runtime("serving"))
    assert p.dtype == "fp8" and p.bits is None
    # A100 has no fp8 tensor cores: a weight-only 8-bit GEMM (dequantised to bf16)
    p = gemm_plan(node, "bf16", a100, get_runtime("serving"))
    assert p.dtype == "bf16" and p.bits == 8
    # an engine without fp8 GEMMs (torch.compile): weight-only on H100 too
    p = gemm_plan(node, "bf16", h100, get_runtime("compiled"))
    assert p.bits == 8
