"""ONNX rules on literal OpNodes (no onnx needed): formulas and the com.microsoft ops, by hand."""

from __future__ import annotations

from graphroof.counters import REGISTRY
from graphroof.counters.cost import Cost
from graphroof.counters.rules.onnx_attention import windowed_pairs
from graphroof.counters.rules.onnx_matmul import einsum_flops, matmul_dims
from graphroof.counters.settings import CountSettings, use
from graphroof.graph import Role
from tests.conftest import T, W, node


def run(n) -> Cost:
    return REGISTRY.lookup(n.op)(n)


def test_windowed_pairs_by_hand():
    # q=4 at the end of kv=10, window 3: every query sees 3 keys -> 12
    assert windowed_pairs(4, 10, 3) == 12
    # q = kv = 5, window 3: 1 + 2 + 3 + 3 + 3 = 12
    assert windowed_pairs(5, 5, 3) == 12
    # a window wider than the sequence is plain causal: 1 + 2 + 3 + 4 = 10
    assert windowed_pairs(4, 4, 100) == 10


def test_einsum_and_matmul_dims():
    assert matmul_dims((5,), (5, 3)) == (1, 1, 3, 5)             # vector @ matrix
    assert matmul_dims((2, 1, 4, 5), (3, 5, 6)) == (6, 4, 6, 5)  # broadcast batch 2 x 3
    assert einsum_flops("bhqd,bhkd->bhqk", [(1, 2, 4, 8), (1, 2, 6, 8)]) == (2 * 2 * 4 * 6 * 8, 0, False)
    assert einsum_flops("ii->i", [(4, 4)]) == (0, 0, False)      # diagonal: nothing summed
    assert einsum_flops("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]) == (2 * 2 * 120, 0, True)


def test_ms_attention_packed_qkv_causal():
    x, w, b = T("fp32", 1, 4, 16), W("fp32", 16, 48), W("fp32", 48)
    n = node("com.microsoft.Attention", [x, w, b], [T("fp32", 1, 4, 16)], num_heads=2, unidirectional=1)
    c = run(n)
    # projection 2*4*16*48 = 6144 (+ bias 4*48 = 192); attention BH=2, causal q=kv=4: 10 pairs, head 8:
    # 2*2*10*16 = 640 matrix, 6*2*10 = 120 vector
    assert (c.matrix_flops, c.vector_flops) == (6144 + 640, 192 + 120)
    assert c.weight_bytes == (16 * 48 + 48) * 4 and c.act_write_bytes == 64 * 4


def test_ms_attention_with_past_counts_kv():
    x, w = T("fp32", 1, 1, 16), W("fp32", 16, 48)
    past, present = T("fp32", 2, 1, 2, 7, 8), T("fp32", 2, 1, 2, 8, 8)
    n = node("com.microsoft.Attention", [x, w, None, None, past], [T("fp32", 1, 1, 16), present], num_heads=2,
             unidirectional=1)
    c = run(n)
    assert c.kv_read_bytes == 2 * 2 * 7 * 8 * 4 and c.kv_write_bytes == 2 * 2 * 8 * 8 * 4
    # decode: q=1, kv=8 -> 8 pairs per head; 2 heads: 2*2*8*16 = 512 + projection 2*16*48 = 1536
    assert c.matrix_flops == 512 + 1536


def test_gqa_sliding_window_and_rotary():
    q, k, v = T("fp32", 1, 4, 32), T("fp32", 1, 4, 16), T("fp32", 1, 4, 16)
    pk = pv = T("fp32", 1, 2, 6, 8)
    cos = sin = W("fp32", 64, 4)
    ins = [q, k, v, pk, pv, T("int32", 1), T("int32"), cos, sin]
    outs = [T("fp32", 1, 4, 32), T("fp32", 1, 2, 10, 8), T("fp32", 1, 2, 10, 8)]
    n = node("com.microsoft.GroupQueryAttention", ins, outs, num_heads=4, kv_num_heads=2, local_window_size=3,
             do_rotary=1)
    c = run(n)
    # kv = 6 + 4 = 10, window 3 -> 12 pairs; BH = 4: 2*4*12*16 = 1536
    assert c.matrix_flops == 1536
    # softmax 6*4*12 = 288; rotary on Q and K: 3 x 4 tokens x (4 + 2) heads x 8 = 576
    assert c.vector_flops == 288 + 576
    # cos / sin: only the 4 token rows of 4 fp32 are read, not the 64-row cache
    assert c.weight_bytes == 2 * 4 * 4 * 4
    with use(CountSettings(causal="full")):
        assert run(n).matrix_flops == 2 * 4 * 40 * 16  # the whole 4 x 10 square


def test_onnx_rotary_partial_dim_and_3d_attention():
    x = T("fp32", 1, 2, 4, 8)
    n = node("onnx.RotaryEmbedding", [x, W("fp32", 16, 2), W("fp32", 16, 2), T("int64", 1, 4)], [x],
             rotary_embedding_dim=4)
    c = run(n)
    assert c.vector_flops == 3 * 64 * 4 // 8            # half of each head rotated
    assert c.weight_bytes == 2 * 4 * 2 * 4              # 4 position rows of 2 fp32, cos and sin
    q, kv = T("fp16", 1, 4, 16), T("fp16", 1, 6, 16)
    n = node("onnx.Attention", [q, kv, kv], [T("fp16", 1, 4, 16)], q_num_heads=2, kv_num_heads=2)
    c = run(n)
    assert c.matrix_flops == 2 * 2 * 24 * 16 and c.act_read_bytes == (64 + 96 + 96) * 2


def test_embed_layer_norm_reads_rows():
    ids = T("int32", 2, 3)
    n = node("com.microsoft.EmbedLayerNormalization",
             [ids, ids, W("fp32", 1000, 8), W("fp32", 512, 8), W("fp32", 2, 8), W("fp32", 8), W("fp32", 8)],
             [T("fp32", 2, 3, 8), T("int32", 2)])
    c = run(n)
    # 3 tables summed (2 adds) + LayerNorm (7) on 48 elements; rows: 48 fp32 from each of word and position,
    # and the whole 16-element segment table (smaller than 48)
    assert c.vector_flops == 9 * 48
    assert c.weight_bytes == 48 * 4 * 2 + 16 * 4 + 2 * 8 * 4
    assert c.act_read_bytes == 2 * 6 * 4 and c.act_write_bytes == 48 * 4 + 8


def test_gather_block_quantized_and_kv_partial_read():
    data = W("uint8", 1000, 32)          # 64 int4 codes per row packed in 32 bytes
    n = node("com.microsoft.GatherBlockQuantized", [data, T("int64", 1, 3), W("fp16", 1000, 2)],
             [T("fp16", 1, 3, 64)], bits=4, block_size=32)
    c = run(n)
    # 192 outputs: 96 bytes of codes, 192/32 = 6 fp16 scales = 12 bytes; dequant 2 per output
    assert c.weight_bytes == 96 + 12 and c.vector_flops == 2 * 192
    kv = T("fp16", 1, 2, 100, 8, role=Role.KV_CACHE)
    n = node("onnx.Slice", [kv, W("int64", 1), W("int64", 1), W("int64", 1)], [T("fp16", 1, 2, 10, 8)])
    assert run(n).kv_read_bytes == 160 * 2


def test_fused_matmul_and_qgemm():
    n = node("com.microsoft.FusedMatMul", [T("fp32", 2, 4, 3), T("fp32", 2, 4, 5)], [T("fp32", 2, 3, 5)], transA=1)
    assert run(n).matrix_flops == 2 * 2 * 3 * 5 * 4
    a, s, z = T("uint8", 3, 4), W("fp32"), W("uint8")
    n = node("com.microsoft.QGemm", [a, s, z, W("int8", 5, 4), s, z, W("int32", 5)], [T("fp32", 3, 5)], transB=1)
    c = run(n)
    assert c.matrix_flops == 2 * 3 * 5 * 4 and c.vector_flops == 15
