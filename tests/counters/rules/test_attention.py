"""Scaled dot-product attention rules: causal counting, alignment, GQA, masks, byte models, variants."""

from __future__ import annotations

import pytest

from tests.counters.rules._family import run
from tests.conftest import T, node

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
