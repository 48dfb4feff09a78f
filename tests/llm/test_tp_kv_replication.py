"""Tensor parallelism above the KV heads: each KV head replicated on tp / kv_heads devices (vLLM, SGLang and
TensorRT-LLM split GQA / MQA models this way), checked by hand on the toy decoder and on literal ops."""

from __future__ import annotations

import pytest

from graphroof.counters.cost import Cost
from graphroof.errors import InputError
from graphroof.graph import OpGraph, OpNode, Role, TensorSpec
from graphroof.llm import estimate
from graphroof.llm.memory import resident_weight_bytes
from graphroof.llm.quant import Quant
from graphroof.llm.tp import DEFAULT_PLAN, _split, shard, shard_cost
from tests.conftest import T, W, node
from tests.llm.toy import RULES, toy_params, toy_source

L, H, HEADS, KVH, I, V = 2, 64, 4, 2, 128, 100
D = H // HEADS            # 16
KVD = KVH * D             # 32


def _cfg(tp: int):
    src = toy_source(L, H, HEADS, KVH, I, V)
    return estimate(src, hw="a100", prompt=16, gen=8, batch=[2], rules=RULES, ideal=True, tp=tp).configs[0]


def test_tp4_over_2_kv_heads_by_hand():
    one, four = _cfg(1), _cfg(4)
    # parameters (toy_params): embed 6,400 + 2 layers x (norms 128 + q, o 8,192 + k, v 4,096 + MLP 24,576)
    # + final norm 64 + lm_head 6,400 = 86,848; bf16 = 173,696 bytes
    assert toy_params(L, H, HEADS, KVH, I, V) == 86_848 and one.weight_bytes == 173_696
    # TP 4: norms (2L + 1) H = 320 whole; k, v 2 x 2 x 32 x 64 = 8,192 split 2 ways (one KV head a device: 4,096);
    # the other 78,336 split 4 ways (19,584): 24,000 parameters, 48,000 bytes
    assert four.weight_bytes == 48_000
    # KV cache: a device holds one of the 2 KV heads, half the whole (as at TP 2), not a quarter
    assert four.kv_cache_bytes == one.kv_cache_bytes / 2 == _cfg(2).kv_cache_bytes
    c1, c4 = one.decode.analysis.totals.cost, four.decode.analysis.totals.cost
    # the decode step reads half the cache per device (its KV head) and appends half the new K / V
    assert c4.kv_read_bytes == c1.kv_read_bytes / 2 and c4.kv_write_bytes == c1.kv_write_bytes / 2
    # matrix FLOPs, batch 2, one token: k and v GEMMs 2 x 2 x 32 x 64 each per layer, 2 layers = 32,768 of the
    # 340,992, split 2 ways; the rest (q, o, MLP, lm_head, attention over the query heads) 4 ways:
    # (340,992 - 32,768) / 4 + 32,768 / 2 = 77,056 + 16,384 = 93,440
    assert c1.matrix_flops == 340_992 and c4.matrix_flops == 93_440


def test_resident_weights_of_replicated_kv_projections():
    params = [("model.layers.0.self_attn.q_proj", W("bf16", 64, 64)),
              ("model.layers.0.self_attn.k_proj", W("bf16", 16, 64)),
              ("model.layers.0.input_layernorm", W("bf16", 64))]
    plan = DEFAULT_PLAN.__class__(kv_heads=1)  # MQA
    # TP 4: q 8,192 bytes / 4 = 2,048; k (one KV head, 2,048 bytes) whole on every device; the norm whole (128)
    assert resident_weight_bytes(params, Quant(), 4, plan) == 2048 + 2048 + 128
    # without the KV heads known (or TP <= them) K splits like Q: 2,048 / 4 = 512
    assert resident_weight_bytes(params, Quant(), 4) == 2048 + 512 + 128


def test_split_states_and_attention_cost():
    # a k_proj GEMM at TP 4 over 2 KV heads: weight sharded K / V-only, output K / V-only, cost / 2
    state, info = _split("column", ((False, False, False, False), ("w", Role.WEIGHT, 2)), 1, 4, 2, True)
    assert state == (True, False, False, True) and info["divisor"] == 2
    # the attention: q sharded over 4, K from the cache (split 2 ways), V K / V-only: output over the query heads
    q_state, kv_state = (True, False, False, False), (True, False, False, True)
    state, info = _split(None, (q_state, ("kv",), kv_state), 1, 4, 2)
    assert state == (True, False, False, False)
    assert info["kv_split"] == 2 and info["kv_inputs"] == (1, 2) and "divisor" not in info
    # repeat_kv (K expanded to every query head) is over the query heads again: split 4 ways
    state, info = _split(None, (kv_state,), 1, 4, 2, grows=True)
    assert state == (True, False, False, False) and info is not None and "divisor" not in info
    # its per-device cost: q [2, 4 heads x 16] 256 bytes and o 256 bytes / 4; K, V 2 x 1,024 bytes / 2
    q, k, v, o = T("bf16", 2, 1, 64), T("bf16", 2, 16, 32), T("bf16", 2, 16, 32), T("bf16", 2, 1, 64)
    _, info = _split(None, (q_state, ("kv",), kv_state), 1, 4, 2)
    attn = node("toy.attn", [q, k, v], [o], tp_shard=info)
    full = Cost(matrix_flops=4096, act_read_bytes=q.nbytes + k.nbytes + v.nbytes, act_write_bytes=o.nbytes)
    c = shard_cost(attn, full)
    assert c.matrix_flops == 1024                                  # 4,096 / 4
    assert c.act_read_bytes == 256 / 4 + 2 * 2048 / 2              # q / 4 + K, V / 2 = 2,112
    assert c.act_write_bytes == 256 / 4


def test_fused_qkv_above_the_kv_heads_is_a_clear_error():
    g = OpGraph("fused")
    x, wq, y = T("bf16", 2, 1, 64), W("bf16", 96, 64), T("bf16", 2, 1, 96)
    g.add_op(OpNode("qkv", "aten.linear", (x, wq), (y,), {}, "model.layers.0.self_attn.qkv_proj"), ["in", None],
             ["qkv"])
    g.add_op(OpNode("o", "aten.linear", (T("bf16", 2, 1, 64), W("bf16", 64, 64)), (x,), {},
                    "model.layers.0.self_attn.o_proj"), ["qkv", None], ["o"])
    plan = DEFAULT_PLAN.__class__(kv_heads=1)
    with pytest.raises(InputError, match=r"--tp 2 exceeds the model's 1 KV heads, and its attention projects Q, K "
                                         r"and V in one linear \(qkv_proj\)"):
        shard(g, 2, plan)
    assert shard(g, 1, plan) is g  # TP 1: nothing to split


def test_cache_input_role():
    # a cache input with no producer is K / V-only when split fewer ways than the query heads
    state, info = _split(None, (("kv",), (False, False, False, False)), 1, 8, 1)
    assert state == (True, False, False, True) and info["divisor"] == 1
    assert TensorSpec((1,), "bf16", Role.KV_CACHE).role is Role.KV_CACHE


def test_smallest_tp_counts_replicated_kv_heads():
    from graphroof.hardware import HardwareProfile

    # a device below TP 2's 87,168 weight bytes (TP 2: norms 640 + the rest 173,056 / 2) but above TP 4's 48,000
    # plus its KV and activations: the smallest TP that fits is 4, KV heads replicated on 2 devices each
    hw = HardwareProfile(name="tiny", matrix_peak_flops_per_s={"bf16": 1e14}, vector_peak_flops_per_s={},
                         mem_bw_bytes_per_s=1e12, mem_capacity_bytes=80_000, interconnect_bw_bytes_per_s=1e11)
    src = toy_source(L, H, HEADS, KVH, I, V)
    m = estimate(src, hw=hw, prompt=16, gen=8, batch=[2], rules=RULES, ideal=True).configs[0].memory
    assert m.fits is False and m.min_tp == 4
    four = estimate(src, hw=hw, prompt=16, gen=8, batch=[2], rules=RULES, ideal=True, tp=4).configs[0]
    # TP 4: 48,000 weight bytes + KV of 2 sequences x 24 tokens (2 blocks of 16: 32 tokens) x 2 layers x K, V x
    # one KV head of 16 x 2 bytes = 8,192 + the activations: within 0.9 x 80,000 = 72,000
    assert four.memory.weight_bytes == 48_000 and four.memory.kv_reserved_bytes == 2 * 32 * 2 * 2 * 16 * 2
    assert four.fits is True


def _profile(name: str, cap: float):
    from graphroof.hardware import HardwareProfile

    return HardwareProfile(name=name, matrix_peak_flops_per_s={"bf16": 1e14}, vector_peak_flops_per_s={},
                           mem_bw_bytes_per_s=1e12, mem_capacity_bytes=cap, interconnect_bw_bytes_per_s=1e11)


def test_memory_advice_compares_with_the_usable_memory():
    from graphroof.report import render

    src = toy_source(L, H, HEADS, KVH, I, V)
    # 80,000 bytes, 72,000 usable (0.9): TP 1 needs the 173,696 weight bytes and more
    r = estimate(src, hw=_profile("tiny", 80_000), prompt=16, gen=8, batch=[2], rules=RULES, ideal=True)
    text = render(r)
    assert "more than the 72.0 kB usable on tiny (0.9 of its 80.0 kB): --tp 4 fits" in text


def test_a_batch_whose_kv_fits_but_not_its_one_pass_prefill_is_told_to_chunk():
    from graphroof.report import render

    src = toy_source(L, H, HEADS, KVH, I, V)
    B, P, G = 8, 16, 8
    big = estimate(src, hw=_profile("big", 1e12), prompt=P, gen=G, batch=[B], rules=RULES, ideal=True).configs[0]
    m = big.memory
    # usable between weights + KV + one prompt's activations (act / B) and weights + KV + all B prompts' (act)
    need_one = m.weight_bytes + m.kv_reserved_bytes + m.activation_peak_bytes / B
    cap = (need_one + m.activation_peak_bytes / 2) / 0.9
    r = estimate(src, hw=_profile("mid", cap), prompt=P, gen=G, batch=[B], rules=RULES, ideal=True)
    c = r.configs[0]
    assert c.fits is False and c.memory.max_batch >= B
    assert (f"the {B} prompts prefilled in one pass do not: --max-batched-tokens {P} prefills one at a time"
            in render(r))
    chunked = estimate(src, hw=_profile("mid", cap), prompt=P, gen=G, batch=[B], rules=RULES, ideal=True,
                       max_batched_tokens=P).configs[0]
    assert chunked.fits is True
    # the next step says so with the figures of the chunked estimate, before a bigger TP (no more devices)
    item = r.next_steps[0]
    assert item["kind"] == "chunk" and item["change"] == f"--max-batched-tokens {P}"
    assert item["before"] == c.memory.total_bytes and item["after"] == chunked.memory.total_bytes
    assert item["ttft_s"] == pytest.approx(chunked.ttft_s) and item["tpot_s"] == pytest.approx(chunked.tpot_s)


def test_attention_group_per_device_above_the_kv_heads():
    from graphroof.timing.attention import attention_dims

    q, k, o = T("bf16", 2, 64, 1, 128), T("bf16", 2, 8, 2048, 128), T("bf16", 2, 64, 1, 128)
    # 64 query heads over 8 KV heads: a group of 8; at TP 16 a device has 64 / 16 = 4 query heads on its one KV head
    assert attention_dims(node("aten.scaled_dot_product_attention", [q, k, k], [o])).gqa_group == 8
    split = {"world_size": 16, "replicated_inputs": (), "replicated_outputs": (), "kv_split": 8, "kv_inputs": (1, 2)}
    assert attention_dims(node("aten.scaled_dot_product_attention", [q, k, k], [o], tp_shard=split)).gqa_group == 4
    # TP 8 (no replication): the group is the model's
    even = {"world_size": 8, "replicated_inputs": (), "replicated_outputs": ()}
    assert attention_dims(node("aten.scaled_dot_product_attention", [q, k, k], [o], tp_shard=even)).gqa_group == 8


def test_check_tp_lists_only_degrees_that_split_everything():
    from graphroof.llm.tp import check_tp

    # 32 heads, 8 KV heads, MLP 1,000 (= 8 x 125): 16 and 32 split the heads but not the MLP, so they are not offered
    with pytest.raises(InputError, match=r"--tp 3 does not divide the model's 32 attention heads; use one of: "
                                         r"1, 2, 4, 8$"):
        check_tp(3, 32, 8, 1000)
    with pytest.raises(InputError, match=r"--tp 16 does not divide the model's 1000 MLP intermediate size"):
        check_tp(16, 32, 8, 1000)
