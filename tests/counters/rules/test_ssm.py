"""State-space scan rules (graphroof's own keys) on literals, against hand arithmetic."""

from __future__ import annotations

from graphroof.graph import Role
from tests.conftest import T, W, node
from tests.counters.rules._family import run


def KV(dtype, *shape):
    return T(dtype, *shape, role=Role.KV_CACHE)


def test_selective_scan_mamba1_streamed():
    # batch 2, d_inner 8, length 5, d_state 4; dt bias + softplus, D skip, z gate; the last state returned (fp32)
    x, dt, z = T("bf16", 2, 8, 5), T("bf16", 2, 8, 5), T("bf16", 2, 8, 5)
    a, d, bias = W("fp32", 8, 4), W("fp32", 8), W("fp32", 8)
    bm, cm = T("bf16", 2, 4, 5), T("bf16", 2, 4, 5)
    n = node("graphroof.selective_scan", [x, dt, a, bm, cm, d, z, bias], [T("bf16", 2, 8, 5), T("fp32", 2, 8, 4)],
             dt_softplus=True, return_state=True)
    c = run(n)
    # state elements over the sequence: 2 * 5 tokens * 8 channels * 4 = 320, 7 FLOPs each = 2240
    # per dt element (80): bias 1 + softplus 3 = 4 -> 320; per x element (80): dt*x 1 + skip 2 + gate 6 = 9 -> 720
    assert c.vector_flops == 2240 + 320 + 720 and c.matrix_flops == 0
    # every input read once: x, dt, z 80 * 2 B each, B and C 40 * 2 B each = 640 B; A 128 + D 32 + bias 32 = 192 B
    assert c.act_read_bytes == 640 and c.weight_bytes == 192
    # y written once (160 B); the state [2, 8, 4] fp32 written once into the cache (256 B), no [T, D, N] tensor
    assert c.act_write_bytes == 160 and c.kv_write_bytes == 256 and c.kv_read_bytes == 0


def test_selective_scan_without_state_or_extras():
    x, dt, a, bm, cm = T("fp32", 1, 4, 3), T("fp32", 1, 4, 3), T("fp32", 4, 2), T("fp32", 1, 2, 3), T("fp32", 1, 2, 3)
    n = node("graphroof.selective_scan", [x, dt, a, bm, cm, None, None, None], [T("fp32", 1, 4, 3), T("fp32", 0)],
             dt_softplus=False, return_state=False)
    c = run(n)
    # 3 tokens * 4 channels * 2 states * 7 = 168; per x element dt*x only: 12
    assert c.vector_flops == 168 + 12
    assert c.kv_write_bytes == 0 and c.act_write_bytes == 48


def test_state_update_reads_and_writes_the_state_once():
    # one decode token, batch 2, d_inner 8, d_state 4 (Mamba-1 layout): state [2, 8, 4] fp32 from the cache
    state = KV("fp32", 2, 8, 4)
    x, dt, z = T("bf16", 2, 8), T("bf16", 2, 8), T("bf16", 2, 8)
    n = node("graphroof.selective_state_update",
             [state, x, dt, W("fp32", 8, 4), T("bf16", 2, 4), T("bf16", 2, 4), W("fp32", 8), z, W("fp32", 8)],
             [T("bf16", 2, 8), T("fp32", 2, 8, 4)], dt_softplus=True)
    c = run(n)
    # 64 state elements * 7 = 448; dt (16) * 4 = 64; x (16) * 9 = 144
    assert c.vector_flops == 448 + 64 + 144
    # state read and written once: 2 * 8 * 4 * 4 B = 256 B each way
    assert c.kv_read_bytes == 256 and c.kv_write_bytes == 256
    # x, dt, z 32 B each, B and C 16 B each = 128 B; A 128 + D 32 + bias 32 = 192 B; y 32 B
    assert c.act_read_bytes == 128 and c.weight_bytes == 192 and c.act_write_bytes == 32


def test_causal_conv1d_update():
    # batch 2, 8 channels, kernel 4, one new column; bias, silu
    x, st = T("bf16", 2, 8, 1), KV("bf16", 2, 8, 4)
    n = node("graphroof.causal_conv1d_update", [x, st, W("bf16", 8, 4), W("bf16", 8)],
             [T("bf16", 2, 8, 1), T("bf16", 2, 8, 4)], activation="silu")
    c = run(n)
    # 16 outputs * (4 taps * 2 + bias 1 + silu 5) = 224 vector FLOPs (one column per channel: no GEMM)
    assert c.matrix_flops == 0 and c.vector_flops == 16 * (8 + 1 + 5)
    # conv state read and written back: 2 * 8 * 4 * 2 B = 128 B each way; weight 64 + bias 16 B
    assert c.kv_read_bytes == 128 and c.kv_write_bytes == 128 and c.weight_bytes == 80
    assert c.act_read_bytes == 32 and c.act_write_bytes == 32


def test_ssd_chunk_scan_mamba2():
    # batch 1, length 6, 2 heads of dim 4, 1 group, state 3, chunk 4 -> padded length 8, 2 chunks
    x, dt = T("bf16", 1, 6, 2, 4), T("bf16", 1, 6, 2)
    bm, cm = T("bf16", 1, 6, 1, 3), T("bf16", 1, 6, 1, 3)
    n = node("graphroof.ssd_chunk_scan", [x, dt, W("fp32", 2), bm, cm, W("fp32", 2), W("fp32", 2), None],
             [T("bf16", 1, 6, 2, 4), T("fp32", 1, 2, 4, 3)], chunk_size=4, dt_softplus=True, return_state=True)
    c = run(n)
    # matrix: 2 * 8 * (Q G N 4*1*3 + Q H P 4*2*4 + 2 H P N 2*2*4*3) = 16 * (12 + 32 + 48) = 1472
    assert c.matrix_flops == 1472
    # vector: 8 * (10 H 20 + 3 Q H 24 + 5 H P 40 + H N 6) + state passing 2 * 2 chunks * 2 * 4 * 3 = 720 + 96
    assert c.vector_flops == 816
    # final state [1, 2, 4, 3] fp32 = 96 B into the cache
    assert c.kv_write_bytes == 96
