"""DeepGEMM as its own GEMM kernel family (graphroof.timing.gemm, ``library="deepgemm"``): the tile choice of its
source, the per-tile epilogue, the plain-kernel fixed time, grouped GEMMs, and the node attribute that selects it.
Each number is derived by hand (arithmetic in the comments)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from graphroof.errors import InputError
from graphroof.hardware import load_hardware
from graphroof.hardware.params import KernelTiming
from graphroof.timing.gemm import deepgemm_blocks, gemm_time, gemm_time_with
from graphroof.timing.gemm_plan import gemm_plan
from graphroof.validate.kernels import matmul_graph, matmul_time_s


def test_block_choice_fills_the_sms_at_small_m():
    # M = 64 -> BLOCK_M 64.  N = 7168: BLOCK_N 48 -> ceil(7168 / 48) = 150 tiles = 2 waves on 132 SMs; every
    # BLOCK_N >= 56 is 1 wave, and 56 fills it most (ceil(7168 / 56) = 128 tiles; 64 -> 112, ..., 128 -> 56)
    assert deepgemm_blocks(64, 7168, 132) == (64, 56)
    # N = 2112: BLOCK_N 16 -> 2112 / 16 = 132 tiles, one full wave (a cuBLAS-like 128 would use 17 SMs)
    assert deepgemm_blocks(64, 2112, 132) == (64, 16)
    # M = 4096 -> BLOCK_M 128, 32 row tiles.  BLOCK_N 128: 32 x 56 = 1792 tiles = ceil(13.58) = 14 waves;
    # 120: 32 x 60 = 1920 = 15 waves; narrower is more waves: 128
    assert deepgemm_blocks(4096, 7168, 132) == (128, 128)
    # groups count in the tiles: 4 groups of M = 256 (2 row tiles each), N = 4096: BLOCK_N 128 -> 4 x 2 x 32 = 256
    # tiles = 2 waves, last 124; 120 -> 4 x 2 x 35 = 280 = 3 waves: 128
    assert deepgemm_blocks(256, 4096, 132, groups=4) == (128, 128)


def _toy() -> KernelTiming:
    """4 SMs, no L2 starvation, max overlap, full bandwidth, a 1 us plain-kernel floor (cuBLAS latency 9 us)."""
    return KernelTiming(sm_count=4, gemm_l2_bw_bytes_per_s=None, gemm_overlap_exponent=None,
                        gemm_matrix_efficiency=0.5, gemm_mem_bw_efficiency=1.0, gemm_latency_s=9e-6,
                        stream_latency_s=1e-6)


def test_deepgemm_time_by_hand():
    # M = N = 64, K = 128, fp8 in (1 B), bf16 out (2 B), 4 SMs.  Blocks: BLOCK_M 64; BLOCK_N 16 -> 4 tiles (one full
    # wave), 24 -> 3, 32 -> 2: BLOCK_N 16, 4 tiles, 1 wave.
    # main loop: 2 x 64 x 16 x 128 = 262,144 FLOPs at 4e12 / 4 SMs = 1e12 FLOP/s per SM (the ceiling itself, not
    #   x gemm_matrix_efficiency 0.5) = 0.262144 us
    # epilogue: 64 x 16 x 2 B = 2,048 B at 8.192e9 / 4 = 2.048e9 B/s per SM = 1 us  ->  t_compute = 1.262144 us
    # memory: A 64 x 128 + B 128 x 64 (1 B) + D 64 x 64 x 2 B = 8,192 + 8,192 + 8,192 = 24,576 B / 8.192e9 = 3 us
    # t = max(1.262144, 3) + stream_latency_s 1 us = 4 us
    g = gemm_time_with(64, 64, 128, timing=_toy(), peak_flops_per_s=8e12, mem_bw_bytes_per_s=8.192e9,
                       in_bytes=1.0, out_bytes=2.0, achievable_flops_per_s=4e12, library="deepgemm")
    assert g.tile == (64, 16) and g.tiles == 4 and g.waves == 1 and g.split_k == 1
    assert g.t_compute_s == pytest.approx(1.262144e-6, rel=1e-9)
    assert g.t_memory_s == pytest.approx(3e-6, rel=1e-9)
    assert g.t_latency_s == 1e-6
    assert g.t_s == pytest.approx(4e-6, rel=1e-9)


def test_grouped_deepgemm_reads_one_b_per_group():
    # 3 groups of the toy GEMM (M = N = 64, K = 128) on 4 SMs.  BLOCK_N 16: 3 x 4 = 12 tiles = 3 waves; 32 (and
    # 40 .. 56): 3 x 2 = 6 = 2 waves; 64 .. 128: 3 x 1 = 3 tiles = 1 wave, last wave 3 for all: the widest, 128.
    # main loop 2 x 64 x 128 x 128 = 2,097,152 FLOPs at 1e12 per SM = 2.097152 us (the overhang is computed);
    # epilogue: the stored tile 64 x min(128, 64) x 2 B = 8,192 B at 2.048e9 per SM = 4 us -> t_compute = 6.097152 us
    # bytes 3 x 24,576 = 73,728 (each group its own B) / 8.192e9 = 9 us; t = max(6.097152, 9) + 1 = 10 us
    g = gemm_time_with(64, 64, 128, timing=_toy(), peak_flops_per_s=8e12, mem_bw_bytes_per_s=8.192e9,
                       in_bytes=1.0, out_bytes=2.0, achievable_flops_per_s=4e12, batch=3, library="deepgemm")
    assert g.tile == (64, 128) and g.tiles == 3 and g.waves == 1
    assert g.bytes == 73_728
    assert g.t_compute_s == pytest.approx(6.097152e-6, rel=1e-9)
    assert g.t_s == pytest.approx(10e-6, rel=1e-9)


def test_no_sm_count_falls_back_and_unknown_library_is_refused():
    flat = replace(_toy(), sm_count=None)
    a = gemm_time_with(64, 64, 128, timing=flat, peak_flops_per_s=8e12, mem_bw_bytes_per_s=8.192e9,
                       library="deepgemm")
    b = gemm_time_with(64, 64, 128, timing=flat, peak_flops_per_s=8e12, mem_bw_bytes_per_s=8.192e9)
    assert a == b  # no SMs: no tiles to choose, the plain model
    with pytest.raises(InputError, match="library"):
        gemm_time_with(64, 64, 128, timing=_toy(), peak_flops_per_s=8e12, mem_bw_bytes_per_s=8.192e9,
                       library="cutlass9")


def test_node_attribute_selects_the_family_through_analyze():
    hw = load_hardware("h100-sxm")
    node = next(iter(matmul_graph(64, 7168, 2048, "fp8", "bf16", "deepgemm")))
    plan = gemm_plan(node, "fp8", hw)
    assert plan.library == "deepgemm" and plan.batch == 1
    # through analyze (the fused kernel node keeps the attribute): the DeepGEMM time, not cuBLAS's
    t_dg = matmul_time_s(hw, 64, 7168, 2048, "fp8", "bf16", "deepgemm")
    t_cu = matmul_time_s(hw, 64, 7168, 2048, "fp8", "bf16")
    assert t_dg == pytest.approx(gemm_time(64, 7168, 2048, hw, "fp8", out_dtype="bf16", library="deepgemm").t_s,
                                 rel=1e-9)
    # (the cuBLAS path prices D in the compute dtype and streams the rest of its bytes beside it: within 1%)
    assert t_cu == pytest.approx(gemm_time(64, 7168, 2048, hw, "fp8", out_dtype="bf16").t_s, rel=1e-2)
    # the fixed time alone: stream_latency_s 1.65 us instead of gemm_latency_s 4.71 us
    assert t_dg < t_cu
    # a grouped GEMM as aten.bmm: 4 groups of 256 rows, each with its own B
    t_g = matmul_time_s(hw, 256, 4096, 7168, "fp8", "bf16", "deepgemm", groups=4)
    g = gemm_time(256, 4096, 7168, hw, "fp8", out_dtype="bf16", batch=4, library="deepgemm")
    assert g.bytes == 4 * (256 * 7168 + 7168 * 4096 + 2 * 256 * 4096)
    assert t_g == pytest.approx(g.t_s, rel=1e-9)


def test_unknown_library_on_a_node_is_an_input_error():
    hw = load_hardware("h100-sxm")
    node = next(iter(matmul_graph(64, 64, 64, "fp8", "bf16", "nosuchlib")))
    with pytest.raises(InputError, match="gemm_library"):
        gemm_plan(node, "fp8", hw)


def test_vectorized_evaluator_leaves_deepgemm_to_the_scalar_model():
    import numpy as np

    from graphroof.timing.vectorized import kernel_times

    hw = load_hardware("h100-sxm")
    node = next(iter(matmul_graph(64, 7168, 2048, "fp8", "bf16", "deepgemm")))
    one = np.ones(1)
    cost = {k: 0.0 * one for k in ("weight_bytes", "act_read_bytes", "act_write_bytes", "kv_read_bytes",
                                    "kv_write_bytes", "vector_flops", "net_bytes")}
    cost["matrix_flops"] = 2.0 * 64 * 7168 * 2048 * one
    mnk = (np.array([64]), np.array([7168]), np.array([2048]))
    # None: the caller prices the kernel with the scalar model (the same gemm_kernel_time as analyze)
    assert kernel_times("gemm", ("aten.mm",), "fp8", cost, mnk, hw, node=node) is None
    plain = next(iter(matmul_graph(64, 7168, 2048, "fp8", "bf16")))
    assert kernel_times("gemm", ("aten.mm",), "fp8", cost, mnk, hw, node=plain) is not None
