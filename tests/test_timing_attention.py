"""Flash-attention kernel time (graphroof.timing.attention): per-pair matmul + exponential work, per-row fill,
K/V per KV head or per query head; and the vectorised model equals the per-op one for the new GEMM / attention
branches (weight-only, MoE grouped, GQA) under the runtime's kernel choices."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from graphroof.counters.cost import Cost
from graphroof.fuse.runtimes import get_runtime
from graphroof.graph import OpNode, Role, TensorSpec
from graphroof.hardware import load_hardware
from graphroof.roofline import evaluate
from graphroof.timing.attention import AttentionDims, attention_dims, attention_time
from graphroof.timing.vectorized import kernel_times

FIELDS = ("matrix_flops", "vector_flops", "weight_bytes", "act_read_bytes", "act_write_bytes", "kv_read_bytes",
          "kv_write_bytes", "net_bytes")


def _hw():
    hw = load_hardware("h100-sxm")
    t = replace(hw.timing, attn_matrix_efficiency=1.0, attn_exp_per_s=4e12, attn_fill_keys=100.0,
                gemm_latency_s=0.0, gemm_overlap_exponent=None, gemm_mem_bw_efficiency=1.0,
                l2_read_bw_bytes_per_s=None)
    return replace(hw, timing=t)


def _cost(**kw):
    c = {f: 0.0 for f in FIELDS}
    c.update(kw)
    return c


def test_prefill_pairs_exponentials_and_fill():
    hw = _hw()
    # 32 heads x causal 1024 tokens: pairs = 32 * 1024 * 1025 / 2 = 16,793,600; matrix FLOPs 2 (128 + 128) per pair
    # rows = O bytes / (128 * 2) = 32 * 1024 = 32,768; t_pair = 512 / 794.5e12 + 1 / 4e12 = 0.89443 ps
    # t = (16,793,600 + 32,768 * 100) * 0.89443e-12 = 17.952 us (memory 4 x 8.4 MB at 3.35 TB/s = 10 us: hidden)
    pairs, rows = 32 * 1024 * 1025 / 2, 32 * 1024
    c = _cost(matrix_flops=512 * pairs, act_read_bytes=3 * rows * 128 * 2, act_write_bytes=rows * 128 * 2)
    t = attention_time(c, AttentionDims(128, 128, 4, 2.0), hw, "bf16")
    assert t == pytest.approx((pairs + rows * 100) * (512 / 794.5e12 + 1 / 4e12), rel=1e-9)
    # head dim 64: half the matmul per pair, the same exponential: (256 / 794.5e12 + 0.25e-12) -> a lower rate
    c64 = _cost(matrix_flops=256 * pairs, act_write_bytes=rows * 64 * 2)
    t64 = attention_time(c64, AttentionDims(64, 64, 1, 2.0), hw, "bf16")
    assert (256 * pairs / t64) / (512 * pairs / t) == pytest.approx(
        (512 / 794.5e12 + 0.25e-12) / 2 / (256 / 794.5e12 + 0.25e-12), rel=1e-9)


def test_decode_reads_kv_once_per_kv_head_or_per_query_head():
    hw = _hw()
    # batch 8, 32 query heads over 8 KV heads (group 4), context 2048, dim 128: K + V = 2 * 8 * 8 * 2048 * 128 * 2
    # = 67,108,864 B; Q and O 8 * 32 * 128 * 2 = 65,536 B each
    kv, qo = 67_108_864.0, 65_536.0
    c = _cost(matrix_flops=512 * 8 * 32 * 2048, act_read_bytes=qo, act_write_bytes=qo, kv_read_bytes=kv)
    dims = AttentionDims(128, 128, 4, 2.0)
    shared = attention_time(c, dims, hw, "bf16", gqa_shared_kv=True)
    per_q = attention_time(c, dims, hw, "bf16", gqa_shared_kv=False)
    assert shared == pytest.approx((2 * qo + kv) / 3.35e12, rel=1e-9)      # 20.072 us
    assert per_q == pytest.approx((2 * qo + 4 * kv) / 3.35e12, rel=1e-9)   # 80.169 us


def test_per_query_head_kv_rereads_come_from_l2():
    # the same decode kernel reading K/V once per query head (group 4) on a device with an L2 read bandwidth of
    # 10.1e12 B/s: DRAM moves K/V once, (2 qo + kv) / 3.35e12 = 67,239,936 / 3.35e12 = 20.072 us; the L2 delivers
    # it 4 times, (2 qo + 4 kv) / 10.1e12 = 268,566,528 / 10.1e12 = 26.591 us: the L2 sets the time
    hw = _hw()
    # (conversions at 1e13 / s: 524,288 pairs * 256 elements = 13.4 us, below the L2 term; at 4e12 they would bind)
    hw = replace(hw, timing=replace(hw.timing, l2_read_bw_bytes_per_s=10.1e12, attn_exp_per_s=1e13))
    kv, qo = 67_108_864.0, 65_536.0
    c = _cost(matrix_flops=512 * 8 * 32 * 2048, act_read_bytes=qo, act_write_bytes=qo, kv_read_bytes=kv)
    dims = AttentionDims(128, 128, 4, 2.0)
    per_q = attention_time(c, dims, hw, "bf16", gqa_shared_kv=False)
    assert per_q == pytest.approx(268_566_528 / 10.1e12, rel=1e-9)
    assert per_q == pytest.approx(26.591e-6, rel=1e-4)
    # a group of 1 (or a shared-K/V kernel) reads K/V once: the L2 term never binds
    assert attention_time(c, dims, hw, "bf16", gqa_shared_kv=True) == pytest.approx(67_239_936 / 3.35e12, rel=1e-9)
    # a fast L2 (40e12 B/s: 268,566,528 / 40e12 = 6.7 us < 20.07 us): DRAM's single read sets the time
    fast = replace(hw, timing=replace(hw.timing, l2_read_bw_bytes_per_s=40e12))
    assert attention_time(c, dims, fast, "bf16", gqa_shared_kv=False) == pytest.approx(67_239_936 / 3.35e12,
                                                                                        rel=1e-9)


def test_attention_dims_from_the_node():
    q = TensorSpec((2, 32, 16, 128), "bf16")
    k = TensorSpec((2, 8, 512, 128), "bf16", Role.KV_CACHE)
    node = OpNode("a", "aten.scaled_dot_product_attention", inputs=(q, k, k), outputs=(q,))
    assert attention_dims(node) == AttentionDims(128, 128, 4, 2.0)
    assert attention_dims(OpNode("x", "kernel.attention")) == AttentionDims()


def _node(kind, keys, inputs, mnk=None, dtype="bf16"):
    return OpNode("k", f"kernel.{kind}", inputs=inputs, attrs={"kernel_kind": kind, "op_keys": keys,
                                                             "gemm_mnk": mnk, "compute_dtype": dtype})


@pytest.mark.parametrize("variant", ["default", "older kernels"])
def test_vectorised_equals_per_op_for_the_new_branches(variant):
    runtime = None if variant == "default" else replace(
        get_runtime("serving"), weight_only_gemm="dequant_then_gemm", moe_grouped_gemm=False, gqa_shared_kv=False)
    hw = load_hardware("h100-sxm")
    rng = np.random.default_rng(7)
    m = rng.choice([1, 3, 16, 100, 2048], 40)
    n, k = np.full(40, 4096), np.full(40, 14336)
    x = TensorSpec((1, 14336), "bf16")
    cases = [
        # weight-only int4 (packed bytes counted) and int8
        (_node("gemm", ("aten.mm",), (x, TensorSpec((14336, 4096), "int4", Role.WEIGHT))), k * n * 0.5),
        (_node("gemm", ("aten.mm",), (x, TensorSpec((14336, 4096), "int8", Role.WEIGHT))), k * n * 1.0),
        # MoE grouped GEMM over 8 experts: 1 ... 8 experts' bytes counted
        (_node("gemm", ("aten._grouped_mm",), (x, TensorSpec((8, 14336, 4096), "bf16", Role.WEIGHT))),
         k * n * 2.0 * rng.uniform(1, 8, 40)),
    ]
    for node, wb in cases:
        cost = _cost(matrix_flops=2.0 * m * n * k, weight_bytes=wb, act_read_bytes=m * k * 2.0,
                     act_write_bytes=m * n * 2.0 + 64)
        cost = {f: np.asarray(v, dtype=float) * np.ones(40) for f, v in cost.items()}
        vec = kernel_times("gemm", node.attrs["op_keys"], "bf16", cost, (m, n, k), hw, runtime, node=node)
        for i in range(40):
            nd = replace(node, attrs={**node.attrs, "gemm_mnk": (int(m[i]), int(n[i]), int(k[i]))})
            b = evaluate(Cost(**{f: float(cost[f][i]) for f in FIELDS}), hw, "bf16", node=nd, runtime=runtime)
            assert vec[i] == pytest.approx(b.t_realistic_s - b.t_launch_s, rel=1e-12), (node.inputs[1], i)
    # attention with a GQA group of 4
    q, kk = TensorSpec((1, 32, 1, 128), "bf16"), TensorSpec((1, 8, 64, 128), "bf16", Role.KV_CACHE)
    node = _node("attention", ("aten.scaled_dot_product_attention",), (q, kk, kk))
    ctx = rng.integers(1, 8192, 40).astype(float)
    bsz = rng.integers(1, 64, 40).astype(float)
    cost = _cost(matrix_flops=512 * bsz * 32 * ctx, vector_flops=5 * bsz * 32 * ctx,
                 act_read_bytes=bsz * 32 * 256, act_write_bytes=bsz * 32 * 256,
                 kv_read_bytes=bsz * 8 * ctx * 512, kv_write_bytes=bsz * 8 * 512)
    cost = {f: np.asarray(v, dtype=float) * np.ones(40) for f, v in cost.items()}
    vec = kernel_times("attention", node.attrs["op_keys"], "bf16", cost, None, hw, runtime, node=node)
    for i in range(40):
        b = evaluate(Cost(**{f: float(cost[f][i]) for f in FIELDS}), hw, "bf16", node=node, runtime=runtime)
        assert vec[i] == pytest.approx(b.t_realistic_s - b.t_launch_s, rel=1e-12)


def test_materialised_scores_get_no_flash_fill():
    hw = _hw()
    # naive byte model: O (32,768 rows x 128 x 2 B = 8.4 MB) plus S and P written and read back, each the full
    # 32 x 1024 x 1024 square x 2 B = 67.1 MB: >= 2 elements written per pair -> no per-row fill, compute =
    # 16,793,600 pairs x 0.89443 ps = 15.0 us; memory (8.4 MB + 4 x 67.1 MB) / 3.35e12 = 82.6 us: memory-bound
    pairs, rows, square = 32 * 1024 * 1025 / 2, 32 * 1024, 32 * 1024 * 1024 * 2.0
    c = _cost(matrix_flops=512 * pairs, act_write_bytes=rows * 256 + 2 * square, act_read_bytes=2 * square)
    t = attention_time(c, AttentionDims(128, 128, 1, 2.0), hw, "bf16")
    assert t == pytest.approx(max(pairs * (512 / 794.5e12 + 1 / 4e12), (rows * 256 + 4 * square) / 3.35e12), rel=1e-9)


def test_per_query_head_decode_dot_products_run_on_cuda_cores():
    # 64 query heads over 8 KV heads (group 8), batch 1, context 4096, d = dv = 128, fp8 K/V (1 byte):
    # K + V = 2 * 8 * 4096 * 128 = 8,388,608 B; pairs = 64 * 4096 = 262,144; Q and O 64 * 128 * 2 = 16,384 B each,
    # rows = 16,384 / (128 * 2) = 64.  Query rows per K/V byte = 262,144 * 256 / (8 * 8,388,608) = 1 < 8: one
    # query row per thread block, no MMA: t_pair = 512 / 66.9e12 (H100 fp32 peak) + 1 / 4e12 = 7.9032 ps,
    # t_compute = (262,144 + 64 * 100) * 7.9032e-12 = 2.1223 us; memory (K/V read 8 times from DRAM, no L2
    # term) = (2 * 16,384 + 8 * 8,388,608) / 3.35e12 = 20.042 us; p = 3: (2.1223^3 + 20.042^3)^(1/3) = 20.065 us
    hw = _hw()
    hw = replace(hw, timing=replace(hw.timing, gemm_overlap_exponent=3.0))
    kv, qo, pairs = 8_388_608.0, 16_384.0, 262_144.0
    c = _cost(matrix_flops=512 * pairs, act_read_bytes=qo, act_write_bytes=qo, kv_read_bytes=kv)
    dims = AttentionDims(128, 128, 8, 2.0)
    tc = (pairs + 64 * 100) * (512 / 66.9e12 + 1 / 4e12)
    tm = (2 * qo + 8 * kv) / 3.35e12
    per_q = attention_time(c, dims, hw, "bf16", gqa_shared_kv=False)
    assert tc == pytest.approx(2.1223e-6, rel=1e-4) and tm == pytest.approx(20.042e-6, rel=1e-4)
    assert per_q == pytest.approx((tc ** 3 + tm ** 3) ** (1 / 3), rel=1e-9)
    # the shared-K/V kernel (all 8 query heads of a KV head in one block: MMA rows) runs on the tensor cores:
    # t_pair = 512 / 794.5e12 + 0.25e-12, and reads K/V once
    shared = attention_time(c, dims, hw, "bf16", gqa_shared_kv=True)
    tc_s = (pairs + 64 * 100) * (512 / 794.5e12 + 1 / 4e12)
    assert shared == pytest.approx((tc_s ** 3 + ((2 * qo + kv) / 3.35e12) ** 3) ** (1 / 3), rel=1e-9)
    # a prefill (2048 query rows per sequence: 1024 rows per K/V byte at fp16) keeps the tensor cores per head too
    pre = _cost(matrix_flops=512 * 64 * 2048 * 2049 / 2, act_read_bytes=qo * 2048, act_write_bytes=qo * 2048,
                kv_read_bytes=2 * 8 * 2048 * 128 * 2.0)
    rows_p, pairs_p = 64 * 2048, 64 * 2048 * 2049 / 2
    tc_p = (pairs_p + rows_p * 100) * (512 / 794.5e12 + 1 / 4e12)
    tm_p = (2 * qo * 2048 + 8 * 2 * 8 * 2048 * 128 * 2.0) / 3.35e12
    assert attention_time(pre, dims, hw, "bf16", gqa_shared_kv=False) == pytest.approx(
        (tc_p ** 3 + tm_p ** 3) ** (1 / 3), rel=1e-9)


def test_masked_mha_decode_is_bounded_by_converting_each_kv_element():
    hw = load_hardware("h100-sxm")
    hw = replace(hw, timing=replace(hw.timing, gemm_latency_s=0.0, gemm_overlap_exponent=None, attn_exp_per_s=4e12,
                                    gemm_mem_bw_efficiency=1.0, l2_read_bw_bytes_per_s=6.0e12))
    # batch 8, 64 query heads over 8 KV heads (group 8), context 4096, dim 128, fp8 K/V (1 B per element):
    # pairs = 8 * 64 * 4096 = 2,097,152; K + V = 2 * 8 * 8 * 4096 * 128 * 1 = 67,108,864 B
    pairs, kv, qo = 8 * 64 * 4096, 67_108_864.0, 8 * 64 * 128 * 2.0
    c = _cost(matrix_flops=512 * pairs, act_read_bytes=qo, act_write_bytes=qo, kv_read_bytes=kv)
    dims = AttentionDims(128, 128, 8, 2.0)
    # K/V once per query head (masked MHA): memory = max((qo + kv) / 3.35e12, (qo + 8 kv) / 6.0e12) = 89.53 us;
    # CUDA-core math 2,097,152 * (512 / 67e12 + 1 / 4e12) ~ 16.5 us; the conversions of 2,097,152 * (128 + 128)
    # = 536,870,912 K/V elements at 4e12 / s = 134.22 us bound the kernel
    t = attention_time(c, dims, hw, "bf16", gqa_shared_kv=False)
    assert t == pytest.approx(pairs * 256 / 4e12, rel=1e-9)
    assert pairs * 256 / 4e12 == pytest.approx(134.2177e-6, rel=1e-6)
    # a kernel reading K/V once per KV head (native GQA) does one conversion per element loaded: no such bound
    shared = attention_time(c, dims, hw, "bf16", gqa_shared_kv=True)
    assert shared < 0.5 * t
