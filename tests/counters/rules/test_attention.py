"""Scaled dot-product attention rules: causal counting, alignment, GQA, masks, byte models, variants."""

from __future__ import annotations

import pytest

from graphroof.counters.formulas import windowed_pairs
from tests.conftest import T, W, node
from tests.counters.rules._family import assert_frontends_agree, paired_members, run

# B=1, H=2, L=S=4, E=8 in fp16
Q, K, V, O = T("fp16", 1, 2, 4, 8), T("fp16", 1, 2, 4, 8), T("fp16", 1, 2, 4, 8), T("fp16", 1, 2, 4, 8)


def cost(n, **settings):
    return run(n, **settings)


def test_non_causal_square():
    c = cost(node("aten.scaled_dot_product_attention", [Q, K, V, None], [O], is_causal=False))
    # pairs = 4*4 = 16 per head; QK^T 2*BH*pairs*E + PV 2*BH*pairs*Ev = 2*2*16*8 * 2 = 1024
    assert c.matrix_flops == 1024
    assert c.vector_flops == 192          # (softmax 5 + scale 1) * 2 * 16
    # flash: read q, k, v (3 * 64 elements), write o (64), fp16
    assert c.act_read_bytes == 384 and c.act_write_bytes == 128


def test_causal_kernel_is_about_half_and_full_is_the_square():
    n = node("aten.scaled_dot_product_attention", [Q, K, V, None], [O], is_causal=True)
    c = cost(n)
    # causal pairs: 4*5/2 = 10 per head -> 2*2*10*(8+8) = 640
    assert c.matrix_flops == 640 and c.vector_flops == 120
    assert cost(n, causal="full").matrix_flops == 1024


def test_is_causal_is_top_left_aligned_when_q_shorter():
    # L=2 queries, S=4 keys, torch is_causal: tril(ones(2, 4)) -> 1 + 2 = 3 pairs (top-left)
    q, o = T("fp16", 1, 1, 2, 8), T("fp16", 1, 1, 2, 8)
    k = T("fp16", 1, 1, 4, 8)
    c = cost(node("aten.scaled_dot_product_attention", [q, k, k, None], [o], is_causal=True))
    assert c.matrix_flops == 2 * 3 * 16   # 96
    # a causal mask from a KV-cache model is bottom-right: query i sees 4-2+i+1 keys -> 3 + 4 = 7 pairs
    m = T("bool", 1, 1, 2, 4)
    c = cost(node("aten.scaled_dot_product_attention", [q, k, k, m], [o], is_causal=False, mask_causal=True,
                  mask_align="bottom_right"))
    assert c.matrix_flops == 2 * 7 * 16   # 224
    assert c.vector_flops == 6 * 7 + 7    # softmax + scale, plus one mask add per pair


def test_explicit_mask_without_hint_is_full_square_and_read():
    m = T("bool", 1, 1, 4, 4)
    c = cost(node("aten.scaled_dot_product_attention", [Q, K, V, m], [O], is_causal=False))
    assert c.matrix_flops == 1024
    assert c.vector_flops == 192 + 32     # + a mask add per score: 2 heads * 16
    assert c.act_read_bytes == 384 + 16   # the bool mask, 16 bytes


def test_gqa_reads_kv_at_their_size():
    # 4 query heads sharing 2 KV heads
    q, o = T("bf16", 1, 4, 4, 8), T("bf16", 1, 4, 4, 8)
    kv = T("bf16", 1, 2, 4, 8)
    c = cost(node("aten.scaled_dot_product_attention", [q, kv, kv, None], [o], enable_gqa=True))
    assert c.matrix_flops == 2 * 4 * 16 * 16   # BH = 4 query heads: 2048
    assert c.act_read_bytes == (128 + 64 + 64) * 2


def test_naive_byte_model_writes_and_reads_scores():
    n = node("aten.scaled_dot_product_attention", [Q, K, V, None], [O], is_causal=True)
    flash, naive = cost(n), cost(n, attention="naive")
    scores = 2 * 4 * 4 * 2                # B*H*L*S fp16 = 64 B, the full square even when causal
    assert naive.act_write_bytes - flash.act_write_bytes == 2 * scores   # S and P written
    assert naive.act_read_bytes - flash.act_read_bytes == 2 * scores     # and read back
    assert naive.flops == flash.flops


@pytest.mark.parametrize("op, extra_inputs", [
    ("aten._scaled_dot_product_flash_attention_for_cpu", [None]),
    ("aten._scaled_dot_product_flash_attention", []),
    ("aten._scaled_dot_product_efficient_attention", [None]),
    ("aten._scaled_dot_product_cudnn_attention", [None]),
    ("aten._scaled_dot_product_attention_math", [None]),
])
def test_backend_variants_count_like_sdpa(op, extra_inputs):
    # the CPU flash variant is the one torch's FlopCounterMode has no formula for
    lse = T("fp32", 1, 2, 4)
    c = cost(node(op, [Q, K, V, *extra_inputs], [O, lse], is_causal=True))
    assert c.matrix_flops == 640
    assert c.act_write_bytes == 128 + 32  # output + logsumexp (8 fp32)


# -- ONNX keys on literals ----------------------------------------------------------------------------------


def test_windowed_pairs_by_hand():
    # q=4 at the end of kv=10, window 3: every query sees 3 keys -> 12
    assert windowed_pairs(4, 10, 3) == 12
    # q = kv = 5, window 3: 1 + 2 + 3 + 3 + 3 = 12
    assert windowed_pairs(5, 5, 3) == 12
    # a window wider than the sequence is plain causal: 1 + 2 + 3 + 4 = 10
    assert windowed_pairs(4, 4, 100) == 10


def test_ms_attention_packed_qkv_causal():
    x, w, b = T("fp32", 1, 4, 16), W("fp32", 16, 48), W("fp32", 48)
    n = node("com.microsoft.Attention", [x, w, b], [T("fp32", 1, 4, 16)], num_heads=2, unidirectional=1)
    c = cost(n)
    # projection 2*4*16*48 = 6144 (+ bias 4*48 = 192); attention BH=2, causal q=kv=4: 10 pairs, head 8:
    # 2*2*10*16 = 640 matrix, 6*2*10 = 120 vector
    assert (c.matrix_flops, c.vector_flops) == (6144 + 640, 192 + 120)
    assert c.weight_bytes == (16 * 48 + 48) * 4 and c.act_write_bytes == 64 * 4


def test_ms_attention_with_past_counts_kv():
    x, w = T("fp32", 1, 1, 16), W("fp32", 16, 48)
    past, present = T("fp32", 2, 1, 2, 7, 8), T("fp32", 2, 1, 2, 8, 8)
    n = node("com.microsoft.Attention", [x, w, None, None, past], [T("fp32", 1, 1, 16), present], num_heads=2,
             unidirectional=1)
    c = cost(n)
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
    c = cost(n)
    # kv = 6 + 4 = 10, window 3 -> 12 pairs; BH = 4: 2*4*12*16 = 1536
    assert c.matrix_flops == 1536
    # softmax 6*4*12 = 288; rotary on Q and K: 3 x 4 tokens x (4 + 2) heads x 8 = 576
    assert c.vector_flops == 288 + 576
    # cos / sin: only the 4 token rows of 4 fp32 are read, not the 64-row cache
    assert c.weight_bytes == 2 * 4 * 4 * 4
    assert cost(n, causal="full").matrix_flops == 2 * 4 * 40 * 16  # the whole 4 x 10 square


def test_onnx_rotary_partial_dim_and_3d_attention():
    x = T("fp32", 1, 2, 4, 8)
    n = node("onnx.RotaryEmbedding", [x, W("fp32", 16, 2), W("fp32", 16, 2), T("int64", 1, 4)], [x],
             rotary_embedding_dim=4)
    c = cost(n)
    assert c.vector_flops == 3 * 64 * 4 // 8            # half of each head rotated
    assert c.weight_bytes == 2 * 4 * 2 * 4              # 4 position rows of 2 fp32, cos and sin
    q, kv = T("fp16", 1, 4, 16), T("fp16", 1, 6, 16)
    n = node("onnx.Attention", [q, kv, kv], [T("fp16", 1, 4, 16)], q_num_heads=2, kv_num_heads=2)
    c = cost(n)
    assert c.matrix_flops == 2 * 2 * 24 * 16 and c.act_read_bytes == (64 + 96 + 96) * 2


def test_onnx_attention_opset23_no_cache_and_top_left_causal():
    q, kv = T("fp32", 1, 2, 4, 8), T("fp32", 1, 2, 6, 8)
    c = cost(node("onnx.Attention", [q, kv, kv], [q]))
    # BH = 2, pairs = 4 * 6 = 24: matrix 2 * 2 * 24 * (8 + 8) = 1536; vector (5 + 1) * 2 * 24 = 288
    assert (c.matrix_flops, c.vector_flops) == (1536, 288)
    assert c.act_read_bytes == (64 + 96 + 96) * 4 and c.act_write_bytes == 64 * 4
    # ONNX spec: query i sees keys j <= i + past length; no past_key -> top-left, so with q = 2, kv = 6 query 0
    # sees key 0 and query 1 keys 0..1: 1 + 2 = 3 pairs (bottom-right would be 5 + 6 = 11); BH = 1
    q1, kv1 = T("fp32", 1, 1, 2, 8), T("fp32", 1, 1, 6, 8)
    c = cost(node("onnx.Attention", [q1, kv1, kv1], [q1], is_causal=1))
    assert (c.matrix_flops, c.vector_flops) == (2 * 1 * 3 * 16, 6 * 1 * 3)


def test_onnx_attention_mask_is_added_to_the_scores():
    # softmax(Q K^T * scale + mask): one add per score, 2 heads x 4 x 6 = 48 more vector FLOPs than without
    q, kv, mask = T("fp32", 1, 2, 4, 8), T("fp32", 1, 2, 6, 8), T("fp32", 1, 1, 4, 6)
    c = cost(node("onnx.Attention", [q, kv, kv, mask], [q]))
    assert c.vector_flops == 288 + 48 and c.act_read_bytes == (64 + 96 + 96 + 24) * 4


def test_ms_multi_head_attention_and_rotary():
    # com.microsoft RotaryEmbedding (input, position_ids, cos, sin): head dim 2 * 4 = 8 from the cache, all
    # rotated: 3 FLOPs x 64 elements; cos / sin: 4 rows of 4 fp32 each
    x = T("fp32", 1, 4, 16)
    c = cost(node("com.microsoft.RotaryEmbedding", [x, T("int64", 1, 4), W("fp32", 32, 4), W("fp32", 32, 4)], [x]))
    assert c.vector_flops == 3 * 64 and c.weight_bytes == 2 * 4 * 4 * 4
    kv = T("fp32", 1, 6, 16)
    c = cost(node("com.microsoft.MultiHeadAttention", [x, kv, kv], [x], num_heads=2, unidirectional=0))
    assert c.matrix_flops == 1536  # BH = 2, head 8, pairs 4 * 6 = 24: 2 * 2 * 24 * 16


# -- ATen and ONNX keys of one row give the same Cost -------------------------------------------------------
# q [1, 2, 4, 8], k / v [1, 2, 6, 8] (and a [1, 1, 4, 6] mask): every SDPA variant and ONNX Attention (opset 23)

_Q, _KV, _MASK = T("fp32", 1, 2, 4, 8), T("fp32", 1, 2, 6, 8), T("fp32", 1, 1, 4, 6)
_CASES = {"sdpa": lambda key: node(key, [_Q, _KV, _KV], [_Q])}
_VARIANTS = {
    "plain": _CASES,
    "mask": {"sdpa": lambda key: node(key, [_Q, _KV, _KV, _MASK], [_Q])},
    "causal": {"sdpa": lambda key: node(key, [_Q, _KV, _KV], [_Q], is_causal=True)},
}


@pytest.mark.parametrize("member", paired_members("attention"))
@pytest.mark.parametrize("variant", list(_VARIANTS))
@pytest.mark.parametrize("settings", [{}, {"attention": "naive"}, {"causal": "full"}])
def test_aten_and_onnx_keys_agree(member, variant, settings):
    assert_frontends_agree("attention", member, _VARIANTS[variant], **settings)


def test_linear_attention_recurrence():
    # B=1, T=2, Hq=Hkv=2, dk=dv=4.  linear: per KV head update 2*4*4 = 32, per query head read-out 32 (matrix)
    # + scale 4 (vector); 2 tokens: matrix 2 * (2*32 + 2*32) = 256, vector 2 * 2*4 = 16
    q = T("fp32", 1, 2, 8)
    st = T("fp32", 1, 2, 4, 4)
    c = cost(node("onnx.LinearAttention", [q, q, q, st], [q, st], q_num_heads=2, kv_num_heads=2,
                  update_rule="linear"))
    assert (c.matrix_flops, c.vector_flops) == (256, 16)
    # past and present state are the recurrence's cache: 32 values = 128 bytes each way
    assert c.kv_read_bytes == 128 and c.kv_write_bytes == 128 and c.act_read_bytes == 3 * 64
    # gated_delta with per-head decay and beta [1,2,2]: per KV head matrix S^T k 32 + update 32 = 64, vector
    # exp(g) * S 16 + (v - S^T k) 4 + beta * 4 = 24; per query head 32 / 4; exps of the 4 decay values:
    # matrix 2 * (2*64 + 2*32) = 384, vector 2 * (2*24 + 2*4) + 4 = 116
    g = T("fp32", 1, 2, 2)
    c = cost(node("onnx.LinearAttention", [q, q, q, st, g, g], [q, st], q_num_heads=2, kv_num_heads=2))
    assert (c.matrix_flops, c.vector_flops) == (384, 116)
