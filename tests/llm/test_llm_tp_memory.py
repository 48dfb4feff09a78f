"""Tensor parallelism (collectives, per-device costs) and memory fit, on the hand-built toy decoder."""

from __future__ import annotations

import pytest

from graphroof.counters.cost import Cost
from graphroof.counters.rules.comm import all_gather_cost, all_reduce_cost
from graphroof.errors import InputError
from graphroof.graph import OpGraph, Role
from graphroof.hardware import HardwareProfile
from graphroof.llm import estimate
from graphroof.llm.memory import activation_peak_bytes, max_batch, resident_weight_bytes
from graphroof.llm.quant import Quant
from graphroof.llm.tp import check_tp, shard_cost
from graphroof.report import render
from tests.conftest import T, W, node
from tests.llm.toy import RULES, toy_params, toy_source

L, H, HEADS, KVH, I, V = 2, 64, 4, 2, 128, 100
KVD = KVH * (H // HEADS)  # 32


def test_all_reduce_and_all_gather_rules():
    ar = all_reduce_cost(node("comm.all_reduce", [T("bf16", 4, 1, 64)], [T("bf16", 4, 1, 64)], world_size=4))
    # 256 elements, 512 bytes: ring all-reduce sends 2 * (4-1)/4 * 512 = 768 bytes; adds 3/4 * 256 = 192
    assert ar.net_bytes == 768 and ar.vector_flops == 192
    assert ar.act_read_bytes == 512 and ar.act_write_bytes == 512
    ag = all_gather_cost(node("comm.all_gather", [T("bf16", 4, 1, 50)], [T("bf16", 4, 1, 100)], world_size=2))
    # gathers 4 * 100 * 2 = 800 bytes from 2 shards: sends (2-1)/2 * 800 = 400
    assert ag.net_bytes == 400 and ag.act_read_bytes == 400 and ag.act_write_bytes == 800


def test_shard_cost_column_and_row_linear():
    x, w, y = T("bf16", 2, 8, 64), W("bf16", 128, 64), T("bf16", 2, 8, 128)
    full = Cost(matrix_flops=2 * 16 * 128 * 64, weight_bytes=w.nbytes, act_read_bytes=x.nbytes,
                act_write_bytes=y.nbytes)
    col = node("my.linear", [x, w], [y],
               tp_shard={"world_size": 2, "replicated_inputs": (0,), "replicated_outputs": ()})
    c = shard_cost(col, full)
    # FLOPs 262144 / 2; weight 16384 / 2; input x replicated: 2048 in full; output sharded 4096 / 2
    assert (c.matrix_flops, c.weight_bytes, c.act_read_bytes, c.act_write_bytes) == (131072, 8192, 2048, 2048)
    row = node("my.linear", [y, W("bf16", 64, 128)], [x],
               tp_shard={"world_size": 2, "replicated_inputs": (), "replicated_outputs": (0,)})
    full_r = Cost(matrix_flops=262144, weight_bytes=16384, act_read_bytes=4096, act_write_bytes=2048)
    r = shard_cost(row, full_r)
    # input sharded 4096 / 2, partial-sum output written in full (2048)
    assert (r.matrix_flops, r.weight_bytes, r.act_read_bytes, r.act_write_bytes) == (131072, 8192, 2048, 2048)


def test_check_tp_names_the_constraint():
    check_tp(2, 4, 2, 128)
    # 4 heads, 2 KV heads: 1 and 2 split both; 4 splits the heads and replicates each KV head on 2 devices
    check_tp(4, 4, 2, 128)
    with pytest.raises(InputError, match=r"--tp 3 does not divide the model's 4 attention heads; use one of: 1, 2, 4$"):
        check_tp(3, 4, 2, 128)
    # 12 heads, 4 KV heads: 6 divides the heads, but neither divides the KV heads nor is a multiple of them
    with pytest.raises(InputError, match=r"--tp 6 neither divides the model's 4 KV heads nor is a multiple of them "
                                         r"\(above the KV heads each is replicated on tp / 4 devices\); "
                                         r"use one of: 1, 2, 4, 12$"):
        check_tp(6, 12, 4, 768)
    # MQA (1 KV head): any degree that divides the heads
    check_tp(8, 8, 1, 64)
    with pytest.raises(InputError, match=">= 1"):
        check_tp(0)


def _run(**kw):
    opts = dict(hw="a100", prompt=16, gen=8, batch=[2], rules=RULES, ideal=True)
    opts.update(kw)
    return estimate(toy_source(L, H, HEADS, KVH, I, V), **opts)


def test_tp2_halves_weight_bytes_and_adds_collective_rows():
    one, two = _run(tp=1).configs[0], _run(tp=2).configs[0]
    norms = (2 * L + 1) * H  # replicated norm weights (elements)
    # resident weights: everything but the norms split in two; bf16 = 2 bytes
    assert one.weight_bytes == 2 * toy_params(L, H, HEADS, KVH, I, V)
    assert two.weight_bytes == (one.weight_bytes - 2 * norms) / 2 + 2 * norms
    # weight bytes read per decode step, per device: same split
    w1 = one.decode.analysis.totals.cost.weight_bytes
    w2 = two.decode.analysis.totals.cost.weight_bytes
    assert w2 == pytest.approx((w1 - 2 * norms) / 2 + 2 * norms)
    # KV heads split: half the KV cache per device
    assert two.kv_cache_bytes == one.kv_cache_bytes / 2
    rows = {r["name"]: r for r in two.layer_rows("decode")}
    for name in ("model.embed_tokens_all_reduce", "model.layers.*.self_attn_all_reduce",
                 "model.layers.*.mlp_all_reduce", "lm_head_all_gather"):
        assert rows[name]["bound"] == "network"
    B = 2
    # decode step all-reduce of [B, 1, H] bf16 = 2 * 64 * 2 = 256 bytes; ring with N = 2 sends 2 * 1/2 * 256 = 256;
    # two of them folded (one per layer): 512 bytes at 300 GB/s (A100 NVLink per direction)
    r = rows["model.layers.*.mlp_all_reduce"]
    assert r["repeat"] == L and r["net_bytes"] == L * 2 * B * H
    assert r["t_network_s"] == pytest.approx(L * 2 * B * H / 300e9)
    # lm_head all-gather of [B, 1, V] logits: (N-1)/N * 2 * 100 * 2 = 200 bytes
    assert rows["lm_head_all_gather"]["net_bytes"] == B * V
    t = two.decode.analysis.totals
    assert t.cost.net_bytes == (2 * L + 1) * 2 * B * H + B * V
    assert t.t_network_s == pytest.approx(t.cost.net_bytes / 300e9)
    assert "all_reduce" not in " ".join(r["name"] for r in one.layer_rows("decode"))


def test_tp_needs_an_interconnect():
    hw = HardwareProfile(name="lonely", matrix_peak_flops_per_s={"bf16": 1e14}, vector_peak_flops_per_s={},
                         mem_bw_bytes_per_s=1e12, mem_capacity_bytes=1e9)
    with pytest.raises(InputError, match="no interconnect"):
        _run(hw=hw, tp=2)
    with pytest.raises(InputError, match="--tp 3 does not divide"):
        _run(tp=3)


def test_activation_liveness_by_hand():
    g = OpGraph("chain")
    g.add_op(node("x.a", [T("bf16", 10)], [T("int8", 1000)], name="a"), ["in"], ["a"])
    g.add_op(node("x.b", [T("int8", 1000)], [T("int8", 10)], name="b"), ["a"], ["b"])
    g.add_op(node("x.c", [T("int8", 1000), T("int8", 10)], [T("int8", 500)], name="c"), ["a", "b"], ["c"])
    g.add_op(node("x.d", [T("int8", 500)], [T("int8", 20, role="kv_cache")], name="d"), ["c"], ["d"])
    # a (1000) lives until c; b (10) until c; c (500) until d; d's output is KV cache (not counted):
    # live at c = 1000 + 10 + 500 = 1510
    assert activation_peak_bytes(g) == 1510


def test_max_batch():
    assert max_batch(100, 30, 7) == 10   # 30 + 10 * 7 = 100
    assert max_batch(100, 101, 1) == 0


def test_resident_weights_follow_dtype_and_split():
    params = [("model.layers.0.mlp.up_proj", W("bf16", 128, 64)), ("model.layers.0.input_layernorm", W("bf16", 64)),
              ("model.layers.0.mlp.down_proj", W("bf16", 64, 128)), ("model.layers.0.mlp.down_proj", W("bf16", 64))]
    # bf16: 16384 + 128 + 16384 + 128 = 33024
    assert resident_weight_bytes(params, Quant()) == 33024
    # int4 weights: every float parameter at half a byte: 8192 elements -> 4096 bytes per matrix, 64 -> 32 per
    # vector: 4096 * 2 + 32 * 2 = 8256
    assert resident_weight_bytes(params, Quant(weights="int4")) == 8256
    # TP 2: up / down matrices halved, the norm and the row-parallel bias (rank 1) whole
    assert resident_weight_bytes(params, Quant(), tp=2) == 8192 + 128 + 8192 + 128


def test_memory_fit_max_batch_and_smallest_tp():
    P, G = 16, 8
    kv_per_token = 2 * L * KVD * 2   # K and V, per layer, bf16: 256 bytes
    weights = 2 * toy_params(L, H, HEADS, KVH, I, V)
    base = _run(batch=[2]).configs[0]
    assert base.kv_cache_bytes == 2 * (P + G) * kv_per_token
    assert base.memory.weight_bytes == weights and base.fits is True
    act = base.memory.activation_peak_bytes
    assert act > 0
    # a device just too small for TP 1 but large enough for two devices' halves
    cap = weights * 0.9
    hw = HardwareProfile(name="small", matrix_peak_flops_per_s={"bf16": 1e14}, vector_peak_flops_per_s={},
                         mem_bw_bytes_per_s=1e12, mem_capacity_bytes=cap, interconnect_bw_bytes_per_s=1e11)
    small = _run(hw=hw).configs[0]
    assert small.fits is False and small.memory.max_batch == 0 and small.memory.min_tp == 2
    text = render(_run(hw=hw))
    assert "does not fit; smallest TP that fits: --tp 2" in text
    # max concurrent sequences at a capacity whose usable 90% leaves room for exactly 5 sequences: a sequence
    # of 16 + 8 = 24 tokens holds 2 blocks of 16 tokens = 32 tokens of KV (32 * 256 = 8192 bytes); one prefill
    # chunk (one sequence's 16-token prompt) keeps act / 2 of the batch-2 prefill's activations live
    kv_seq = 32 * kv_per_token
    cap5 = (weights + act / 2 + 5.5 * kv_seq) / 0.9
    hw2 = HardwareProfile(name="fit5", matrix_peak_flops_per_s={"bf16": 1e14}, vector_peak_flops_per_s={},
                          mem_bw_bytes_per_s=1e12, mem_capacity_bytes=cap5)
    m = _run(hw=hw2).configs[0].memory
    assert m.max_batch == 5 and m.usable_bytes == pytest.approx(0.9 * cap5)
    assert m.kv_cache_bytes == 2 * 24 * kv_per_token and m.kv_reserved_bytes == 2 * kv_seq
    # one figure per configuration, whatever batch the table shows
    assert {c.memory.max_batch for c in _run(hw=hw2, batch=[1, 2, 4]).configs} == {5}
    # all of the memory and 8-token blocks: 24 tokens = 3 blocks exactly (24 * 256 = 6144 bytes per sequence)
    m8 = _run(hw=hw2, gpu_mem_util=1.0, kv_block=8).configs[0].memory
    assert m8.max_batch == int((cap5 - weights - act / 2) // (24 * kv_per_token))


def test_serving_memory_knobs_are_checked_before_tracing():
    for kw, msg in (({"gpu_mem_util": 1.5}, "--gpu-mem-util"), ({"kv_block": 0}, "--kv-block"),
                    ({"max_batched_tokens": 0}, "--max-batched-tokens")):
        with pytest.raises(InputError, match=msg):
            _run(**kw)


def test_chunked_prefill_caps_the_activation_peak():
    full = _run(batch=[4]).configs[0].memory
    # a 4 x 16 = 64-token prompt batch in chunks of 16 tokens keeps a quarter of the activations live
    chunked = _run(batch=[4], max_batched_tokens=16).configs[0].memory
    assert chunked.activation_peak_bytes == pytest.approx(full.activation_peak_bytes / 4)


def test_kv_roles_in_decode():
    c = _run(batch=[2]).configs[0]
    t = c.decode.analysis.totals.cost
    P, G, B = 16, 8, 2
    # mean past over the 7 steps = 16 + 3 = 19 -> attention reads K and V of 20 tokens per layer:
    # L * 2 * B * 20 * 32 * 2 bytes = 10240; appends write one token: L * 2 * B * 32 * 2 = 512
    assert t.kv_read_bytes == pytest.approx(L * 2 * B * 20 * KVD * 2)
    assert t.kv_write_bytes == L * 2 * B * KVD * 2
    assert sum(1 for op in c.decode.analysis.graph.ops() if op.op == "kv_cache.append") == 2 * L
    assert all(op.outputs[0].role is Role.KV_CACHE for op in c.decode.analysis.graph.ops()
               if op.op == "kv_cache.append")
    assert P + G - 2 == c.decode.context[1]


def test_fused_moe_experts_split_like_an_mlp():
    """A fused experts module (grouped GEMMs over [E, ...] weights): the up GEMM reads the replicated tokens and
    writes its shard, the down GEMM writes partial sums, and one all-reduce follows the module."""
    from graphroof.llm.tp import shard

    g = OpGraph("moe")
    s = "model.layers.0.mlp.experts"
    g.add_op(node("my.gmm", [T("bf16", 4, 64), W("bf16", 8, 256, 64)], [T("bf16", 4, 256)], name="up", scope=s),
             ["x"], ["h"])
    g.add_op(node("my.gmm", [T("bf16", 4, 256), W("bf16", 8, 64, 256)], [T("bf16", 4, 64)], name="down", scope=s),
             ["h"], ["y"])
    g.add_op(node("my.add", [T("bf16", 4, 64), T("bf16", 4, 64)], [T("bf16", 4, 64)], name="res",
                  scope="model.layers.0"), ["x", "y"], ["z"])
    t = shard(g, 2)
    assert t.node("up").attrs["tp_shard"] == {"world_size": 2, "replicated_inputs": (0,), "replicated_outputs": ()}
    assert t.node("down").attrs["tp_shard"] == {"world_size": 2, "replicated_inputs": (), "replicated_outputs": (0,)}
    assert [op.name for op in t.ops()] == ["up", "down", "down__all_reduce", "res"]
    assert t.node("down__all_reduce").scope == "model.layers.0.mlp_all_reduce"
    assert "tp_shard" not in t.node("res").attrs
    assert list(t.nx.predecessors("res")) == ["down__all_reduce"]
