"""PyTorch's CUTLASS grouped GEMM (``torch._grouped_mm`` on sm90 / sm100; kernel family ``torch_grouped``,
graphroof.timing.moe): its tile by device and rows per expert, each expert's M tiles rounded up to its 2 x 1
thread-block cluster, whole waves of a static persistent schedule; checked by hand against GroupMM.cu's dispatch
and CUTLASS's ``PersistentTileSchedulerSm90Group``."""

from __future__ import annotations

import math

import numpy as np
import pytest

import graphroof
from graphroof.fuse.runtimes import get_runtime
from graphroof.hardware import load_hardware
from graphroof.timing import gemm_time
from graphroof.timing.gemm_plan import gemm_plan
from graphroof.timing.moe import TORCH_GROUPED_CLUSTER_M, group_m_tiles, torch_grouped_tile
from graphroof.validate.kernels import grouped_mm_graph


def test_tile_by_device_and_shape():
    # GroupMM.cu dispatch_bf16_grouped_kernel_on_tile_size: sm10x 64 x 128; sm9x "small" (M per group <= 128 or
    # N <= 128) 64 x 128, else 128 x 256
    assert torch_grouped_tile(9, 24576 / 64, 2816) == (128, 256)   # DeepSeek-V2-Lite gate_up, 4096 tokens: 384 rows
    assert torch_grouped_tile(9, 6144 / 64, 2816) == (64, 128)     # 1024 tokens: 96 rows per expert
    assert torch_grouped_tile(9, 4096, 128) == (64, 128)           # N = 128
    assert torch_grouped_tile(10, 4096, 4096) == (64, 128)         # sm100: one tile
    assert TORCH_GROUPED_CLUSTER_M == 2


def test_cluster_rounds_each_expert_up_to_pairs_of_tiles():
    # 24,576 rows split evenly over 64 experts: 384 rows, ceil(384 / 128) = 3 tiles, rounded up to 4 (pairs of 2)
    assert group_m_tiles(24576, 64, 128, 2, spread=False) == 64 * 4
    # without the cluster: 3 each
    assert group_m_tiles(24576, 64, 128, 1, spread=False) == 64 * 3
    # 2 rows over 2 experts (Mixtral decode): one 64-row tile each, rounded to 2
    assert group_m_tiles(2, 2, 64, 2, spread=False) == 4
    # with the routing spread, in units of 2 x 128 = 256 rows: mu = 4096 / 8 = 512, sigma = sqrt(512) = 22.63,
    # w = 2 * 22.63 / 256 = 0.17678; per expert max(1, 0.82322 * ceil(2) + 0.17678 * (2 + 0.5)) = 2.08839 units,
    # ceil(8 * 2.08839) = ceil(16.707) = 17 units = 34 tiles
    assert group_m_tiles(4096, 8, 128, 2) == 34
    # cluster 1 and spread as before (test_moe_tiles)
    assert group_m_tiles(65536, 128, 128) == 535
    assert list(group_m_tiles(np.array([24576.0]), np.array([64.0]), 128, 2, spread=False)) == [256.0]


def test_whole_waves_no_split_k_by_hand():
    hw = load_hardware("h100-sxm")
    t = hw.timing
    # DeepSeek-V2-Lite gate_up at 4096 tokens x top-6: 24,576 rows over 64 experts (384 each, evenly), N 2816, K 2048
    g = gemm_time(24576, 2816, 2048, hw, "bf16", groups=64.0, library="torch_grouped", tile=(128, 256),
                  cluster_m=2, balanced=True)
    # tiles = 64 experts x 4 (3 rounded to the pair) x ceil(2816 / 256) = 11 -> 2,816; waves = ceil(2816 / 132) = 22
    assert (g.tile, g.tiles, g.waves, g.split_k) == ((128, 256), 2816, 22, 1)
    # t_compute = 22 waves x 2 x 128 x 256 x 2048 FLOPs / (794.5e12 x 0.902 / 132 x starve), starve = min(1,
    # 2 x 128 x 256 / (384 x 2 bytes) / (989.4e12 / 20.6e12)) = min(1, 85.33 / 48.03) = 1
    assert t.gemm_achievable_flops_per_s["bf16"] == 7.945e14 and t.gemm_matrix_efficiency == 0.902
    rate_sm = 7.945e14 * 0.902 / 132
    assert g.t_compute_s == pytest.approx(22 * 2 * 128 * 256 * 2048 / rate_sm, rel=1e-12)
    # loads hidden under the math: max, not the profile's p-norm; two kernels' fixed time
    assert g.t_s == pytest.approx(max(g.t_compute_s, g.t_memory_s) + t.gemm_latency_s + t.stream_latency_s,
                                  rel=1e-12)
    # the cuBLAS model of the same rows (stream-K, best tile height, no cluster) is faster: fewer, fractional waves
    assert gemm_time(24576, 2816, 2048, hw, "bf16", groups=64.0, balanced=True).t_compute_s < g.t_compute_s


def _plan(hw: str, rows: int = 4096):
    g = grouped_mm_graph(64, rows, 2048, 2816, "bf16", top_k=6, experts_touched=64)
    node = next(n for n in g.ops() if n.op == "aten._grouped_mm")
    return gemm_plan(node, "bf16", load_hardware(hw), get_runtime("compiled"))


def test_plan_picks_the_family_where_pytorch_runs_it():
    assert _plan("h100").library == "torch_grouped" and _plan("h100").arch == 9
    assert _plan("b200").library == "torch_grouped" and _plan("b200").arch == 10
    assert _plan("a100").library == "cublas"                  # sm80: the loop of mm (GroupedMMUtils.h)
    assert _plan("h100").balanced                              # the benchmark graph splits its rows evenly


def test_analyze_prices_the_family_through_the_kernel_graph():
    # the same grouped GEMM through graphroof.analyze equals gemm_time with the family's tile (M per expert over all
    # 64 experts = 24576 / 64 = 384 > 128 and N = 2816 > 128: 128 x 256 on sm90) plus the bytes the count has beyond
    # the GEMM's (the 64 int32 offsets, 256 B: 256 / (3.35e12 x 0.886) = 8.6e-14 s, a relative 1.6e-7)
    g = grouped_mm_graph(64, 24576, 2048, 2816, "bf16", top_k=6, experts_touched=64)
    ks = graphroof.analyze(g, hw="h100", runtime="compiled").to_dict()["kernels"]
    t = float(ks[0]["time_realistic_s"] - ks[0].get("t_launch_s", 0.0))
    ref = gemm_time(24576, 2816, 2048, load_hardware("h100"), "bf16", groups=64.0, library="torch_grouped",
                    tile=(128, 256), cluster_m=2, balanced=True)
    assert t == pytest.approx(ref.t_s + 256 / (3.35e12 * 0.886), rel=1e-9)
    assert math.ceil(2816 / 256) == 11


def test_per_sm_stream_limit_by_hand():
    # the H200 (4.8 TB/s HBM3e) and the H100 share the per-SM rate fitted on the H100's rows: 21 GB/s per SM
    hw = load_hardware("h200-sxm")
    t = hw.timing
    assert t.torch_grouped_sm_bw_bytes_per_s == 2.1e10 and t.sm_count == 132 and t.gemm_mem_bw_efficiency == 0.886
    # Mixtral gate+up, 16 rows split evenly over the 8 experts (2 each): 64 x 128 tiles, each expert's one tile
    # rounded to the 2 x 1 cluster: 8 x 2 x ceil(28672 / 128) = 3,584 tiles, all 132 SMs hold tiles
    w8 = 8 * 4096 * 28672 * 2.0  # the 8 experts' weights (the count's weight bytes: gemm_time's B is one matrix)
    g = gemm_time(16, 28672, 4096, hw, "bf16", groups=8.0, library="torch_grouped", tile=(64, 128), cluster_m=2,
                  balanced=True, weight_bytes=w8)
    assert g.tiles == 3584
    # bytes: A 16 x 4096 x 2 = 131,072 + C 16 x 28672 x 2 = 917,504 + B 8 x 4096 x 28672 x 2 = 1,879,048,192
    nbytes = 131072 + 917504 + 1879048192
    assert g.bytes == nbytes
    # the SMs' limit, 132 x 21e9 = 2.772e12 B/s, is below the HBM's 4.8e12 x 0.886 = 4.2528e12: 678.2 us, not 442.1
    assert g.t_memory_s == pytest.approx(nbytes / (132 * 2.1e10), rel=1e-12)
    assert g.t_memory_s == pytest.approx(678.24e-6, rel=1e-4)
    # fewer tiles than SMs: one 1-row group into N = 1280, 1 x 2 (cluster) x 10 = 20 tiles on 20 SMs,
    # 20 x 21e9 = 4.2e11 B/s: (4096 x 2 + 1280 x 2 + 4096 x 1280 x 2) B = 10,496,512 B / 4.2e11 = 24.99 us
    small = gemm_time(1, 1280, 4096, hw, "bf16", library="torch_grouped", tile=(64, 128), cluster_m=2)
    assert small.tiles == 20 and small.t_memory_s == pytest.approx(10496512 / 4.2e11, rel=1e-12)
    # a profile without the constant (the A100's: no such kernel on sm80) keeps the HBM term alone
    from dataclasses import replace

    bare = replace(hw, timing=replace(t, torch_grouped_sm_bw_bytes_per_s=None))
    g0 = gemm_time(16, 28672, 4096, bare, "bf16", groups=8.0, library="torch_grouped", tile=(64, 128), cluster_m=2,
                   balanced=True, weight_bytes=w8)
    assert g0.t_memory_s == pytest.approx(nbytes / (4.8e12 * 0.886), rel=1e-12)
