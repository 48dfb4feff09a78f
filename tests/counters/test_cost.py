from __future__ import annotations

import math

import pytest

from graphroof import FLOPS_PER_MAC, Cost
from graphroof.counters import formulas as f
from graphroof.counters.common import io_cost
from tests.conftest import T, W, node


def test_cost_adds_fieldwise_and_sums():
    a = Cost(matrix_flops=1, vector_flops=2, weight_bytes=3, act_read_bytes=4, act_write_bytes=5,
             kv_read_bytes=6, kv_write_bytes=7, net_bytes=8)
    b = Cost(matrix_flops=10, estimated=True)
    c = a + b
    assert c == Cost(11, 2, 3, 4, 5, 6, 7, 8, True)
    assert sum([a, b]) == c
    assert c.flops == 13 and c.bytes == 3 + 4 + 5 + 6 + 7  # net bytes are not memory bytes
    assert a.scale(2) == Cost(2, 4, 6, 8, 10, 12, 14, 16)


def test_cost_rejects_negative_and_intensity_edges():
    with pytest.raises(ValueError):
        Cost(matrix_flops=-1)
    assert Cost(matrix_flops=10).intensity == math.inf
    assert Cost().intensity == 0.0
    assert Cost(matrix_flops=10, act_read_bytes=4).intensity == 2.5


def test_formulas_by_hand():
    assert FLOPS_PER_MAC == 2
    assert f.matmul_flops(4, 5, 6) == 240            # 2 * 4 * 5 * 6
    assert f.matmul_flops(4, 5, 6, batch=3) == 720   # 3 * 240
    # conv: N=1, Cout=8, 4x4 out = 128 outputs; Cin/groups = 3; 3x3 kernel = 9 -> 2 * 128 * 3 * 9 = 6912
    assert f.conv_flops(128, 3, 9) == 6912
    # causal, q = kv = 4: 1 + 2 + 3 + 4 = 10 pairs; decode q=1 kv=5: 5 pairs
    assert f.causal_pairs(4, 4) == 10 and f.causal_pairs(1, 5) == 5
    # bottom-right q=2, kv=5: row0 sees 4 keys, row1 sees 5 = 9 ; top-left q=2 kv=5: 1 + 2 = 3
    assert f.causal_pairs(2, 5) == 9 and f.causal_pairs(2, 5, "top_left") == 3
    assert f.attention_pairs(4, 4, causal=True, causal_mode="full") == 16
    # sdpa b*h = 2, q = kv = 4, d = 8, not causal: matrix 2*2*16*(8+8) = 1024; vector (5+1)*2*16 = 192
    assert f.sdpa_flops(2, 4, 4, 8) == (1024, 192)
    assert f.broadcast_shape((4, 1, 3), (5, 1)) == (4, 5, 3)


def test_io_cost_splits_bytes_by_role():
    n = node("x", [T("bf16", 2, 3), W("int8", 10), T("fp16", 4, role="kv_cache"), None],
             [T("fp32", 2), T("fp16", 1, role="kv_cache")])
    # act read 2*3*2 = 12; weight 10*1 = 10; kv read 4*2 = 8; act write 2*4 = 8; kv write 1*2 = 2
    assert io_cost(n, matrix_flops=5) == Cost(matrix_flops=5, weight_bytes=10, act_read_bytes=12,
                                              act_write_bytes=8, kv_read_bytes=8, kv_write_bytes=2)


def test_subbyte_packing():
    assert W("int4", 3, 5).nbytes == 8   # ceil(15 * 4 / 8) = ceil(7.5) = 8
