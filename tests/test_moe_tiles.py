"""MoE grouped GEMM tiles (graphroof.timing.moe.group_m_tiles): each expert's rows spread around the mean, so its last
tile is partly empty on average; the per-op and vectorised GEMM models count the same tiles."""

from __future__ import annotations

import math

import numpy as np

from graphroof.hardware import load_hardware
from graphroof.timing import gemm_time
from graphroof.timing.moe import group_m_tiles


def test_group_m_tiles_by_hand():
    # Qwen3-30B-A3B prefill of 8192 tokens, top-8: 65,536 rows over 128 experts, mu = 512, sigma = sqrt(512) = 22.63
    # tm = 128: w = min(1, 2 * 22.63 / 128) = 0.35355; per expert = 0.64645 * ceil(4) + 0.35355 * (4 + 0.5)
    # = 4.17678; tiles = ceil(128 * 4.17678) = ceil(534.63) = 535 (a tile count of 512 with the mean alone)
    assert group_m_tiles(65536, 128, 128) == 535
    # tm = 16 at a decode step of 256 sequences x top-8 = 2048 rows over 128 experts: mu = 16, sigma = 4,
    # w = min(1, 8 / 16) = 0.5: per expert = 0.5 * 1 + 0.5 * (1 + 0.5) = 1.25 -> 160 tiles (not 128)
    assert group_m_tiles(2048, 128, 16) == 160
    # Mixtral decode of one token, top-2: 2 rows over 2 experts: mu = 1, w = 2 / 16: per expert
    # max(1, 0.875 * 1 + 0.125 * (0.0625 + 0.5)) = max(1, 0.9453) = 1 -> 2 tiles: every visited expert has one
    assert group_m_tiles(2, 2, 16) == 2
    # one group: plain ceil(m / tm), whatever the spread
    assert group_m_tiles(1000, 1, 128) == math.ceil(1000 / 128) == 8
    # arrays alike
    assert list(group_m_tiles(np.array([65536.0, 2.0]), np.array([128.0, 2.0]), 128)) == [535.0, 2.0]


def test_plain_numbers_and_arrays_count_the_same_tiles():
    # plain numbers take a numpy-free path (the tile search calls it for every tile height of every GEMM): the
    # same operations in the same order, so the same tile count as the array path, spread or not, clustered or not
    ms = [0, 1, 2, 7.5, 100, 513, 2048, 65536, 99999]
    gs = [0.5, 1, 2, 8, 37.5, 128, 256]
    for tm in (16, 64, 128, 256):
        for cluster in (1, 2):
            for spread in (True, False):
                arr = group_m_tiles(np.array([float(m) for m in ms for _ in gs]), np.array([float(g) for _ in ms
                                    for g in gs]), tm, cluster, spread)
                one = [group_m_tiles(m, g, tm, cluster, spread) for m in ms for g in gs]
                assert all(type(v) is int for v in one)
                assert one == [int(v) for v in arr]


def test_grouped_gemm_pays_the_spread_tiles():
    hw = load_hardware("h100-sxm")
    # 65,536 rows over 128 experts, N = 1536, K = 2048 fp8: the grouped GEMM has at least the tiles of 128
    # independently tiled experts with 512 rows each, and never fewer than the rows' own dense GEMM
    g = gemm_time(65536, 1536, 2048, hw, "fp8", groups=128.0)
    tm, tn = g.tile
    assert g.tiles == group_m_tiles(65536, 128.0, tm) * math.ceil(1536 / tn)
    assert g.tiles > 128 * math.ceil(512 / tm) * math.ceil(1536 / tn)
    dense = gemm_time(65536, 1536, 2048, hw, "fp8")
    assert g.t_s >= dense.t_s
