"""Quantization what-ifs and the critical batch, on a single linear layer."""

from __future__ import annotations

import math

import pytest

from graphroof.counters import count
from graphroof.counters.common import io_cost
from graphroof.errors import InputError
from graphroof.graph import COST, OpGraph, Role, bind
from graphroof.hardware import load_hardware
from graphroof.llm import GraphSource, estimate
from graphroof.llm.critical import critical_batch, critical_table
from graphroof.llm.quant import Quant, requantize
from graphroof.roofline import compute_dtype, evaluate
from tests.conftest import T, W, node

D = 4096


def _linear_rule(n):
    x, w = n.inputs[0], n.inputs[1]
    return io_cost(n, matrix_flops=2 * x.shape[0] * w.shape[0] * w.shape[1])


RULES = {"my.linear": _linear_rule}


def linear_graph():
    g = OpGraph("one-linear")
    g.add_op(node("my.linear", [T("bf16", "batch", D), W("bf16", D, D)], [T("bf16", "batch", D)], name="fc",
                  scope="model.layers.0.mlp.down_proj"), ["x"], ["y"])
    return g


def _ops(g, batch, quant=Quant()):
    b = requantize(bind(g, {"batch": batch}), quant)
    count(b, rules=RULES)
    return [(op, b.get(op.name, COST)) for op in b.ops()]


def test_requantize_by_role():
    g = OpGraph("g")
    g.add_op(node("my.attn", [T("bf16", 2, 8), W("bf16", 8, 8), T("bf16", 2, 5, 8, role="kv_cache"),
                              T("int64", 2, 8)], [T("bf16", 2, 8)], name="a"))
    q = requantize(g, Quant.parse(weights="int4", activations="fp8", kv="fp8_e5m2"))
    op = q.node("a")
    assert [t.dtype for t in op.inputs] == ["fp8", "int4", "fp8_e5m2", "int64"]  # index tensors keep their type
    assert op.outputs[0].dtype == "fp8"
    assert op.inputs[1].nbytes == 8 * 8 // 2  # int4 packs two per byte: 64 * 4 / 8 = 32


def test_unknown_dtype_names_the_flag_and_the_choices():
    with pytest.raises(InputError, match=r"--weights 'int3': unknown dtype; use one of: fp32, bf16, .*int4"):
        Quant.parse(weights="int3")
    with pytest.raises(InputError, match=r"--kv 'int64'"):
        Quant.parse(kv="int64")
    assert Quant.parse(activations="bfloat16").activations == "bf16"


def test_compute_peak_follows_the_compute_dtype():
    v5e = load_hardware("tpu-v5e")
    [(op, c)] = _ops(linear_graph(), 8, Quant(weights="int8"))
    # int8 weights with bf16 activations: bf16 peak, int8 weight bytes (4096 * 4096 * 1)
    assert compute_dtype(op) == "bf16" and evaluate(c, v5e, compute_dtype(op)).peak_used == "matrix.bf16"
    assert c.weight_bytes == D * D
    [(op, c)] = _ops(linear_graph(), 8, Quant(weights="int8", activations="int8"))
    # int8 x int8: the int8 peak (393 TOPS on v5e)
    assert compute_dtype(op) == "int8" and evaluate(c, v5e, "int8").peak_used == "matrix.int8"


def test_critical_batch_solver():
    # compute 1 + 2B vs memory 11 + 1B: crosses at B = 10
    assert critical_batch((1, 2), [(11, 1), (0, 0)]) == pytest.approx(10)
    assert critical_batch((5, 1), [(1, 1)]) == 0.0          # compute-bound at any batch
    assert critical_batch((1, 1), [(2, 1)]) is None          # same growth: never


def test_linear_critical_batch_on_tpu_v5e_exact_bytes():
    """[B, 4096] x [4096, 4096] bf16 on TPU v5e (197 TFLOP/s bf16, 819 GB/s).

    FLOPs 2 B D^2; bytes 2 B D (x) + 2 D^2 (W) + 2 B D (y).  Compute-bound when 2 B D^2 / P >= (4 B D + 2 D^2) / BW,
    i.e. B >= D P / (D BW - 2 P) = 4096 * 197e12 / (4096 * 819e9 - 394e12) = 272.55 -> 273,
    against the B << D approximation P / BW = 240.5.
    """
    v5e = load_hardware("tpu-v5e")
    P, BW = v5e.matrix_peak_flops_per_s["bf16"], v5e.mem_bw_bytes_per_s
    assert (P, BW) == (197e12, 819e9)
    expected = D * P / (D * BW - 2 * P)
    assert expected == pytest.approx(272.548, abs=1e-3)
    g = linear_graph()
    [row] = critical_table(_ops(g, 1), _ops(g, 2), 1, 2, v5e, lambda op: op.scope)
    assert row["critical_batch_exact"] == pytest.approx(expected, rel=1e-9)
    assert row["critical_batch"] == 273
    # the roofline agrees on either side of it
    for b, bound in ((272, "memory"), (273, "compute")):
        [(op, c)] = _ops(g, b)
        assert evaluate(c, v5e, "bf16").bound == bound

    # int8 weights, bf16 activations: bytes 4 B D + D^2, same bf16 peak -> B* = D P / (2 (D BW - 2 P)) = 136.27
    [row8] = critical_table(_ops(g, 1, Quant(weights="int8")), _ops(g, 2, Quant(weights="int8")), 1, 2, v5e,
                            lambda op: op.scope)
    assert row8["critical_batch_exact"] == pytest.approx(expected / 2, rel=1e-9)
    assert row8["critical_batch"] == math.ceil(expected / 2) == 137


def test_critical_batch_through_estimate():
    """The same figure from the public API (decode step = the linear layer over one token per sequence)."""
    src = GraphSource(linear_graph(), linear_graph())
    r = estimate(src, hw="tpu-v5e", prompt=4, gen=3, batch=[1], rules=RULES, ideal=True)
    [row] = r.configs[0].critical
    assert row["name"] == "model.layers.*.mlp" and row["critical_batch"] == 273
    r8 = estimate(src, hw="tpu-v5e", prompt=4, gen=3, batch=[1], rules=RULES, ideal=True, weights="int8",
                  activations="bf16")
    assert r8.configs[0].critical[0]["critical_batch"] == 137
    assert r8.quant.weights == "int8" and r8.configs[0].weight_bytes == D * D


def test_attention_over_a_cache_never_turns_compute_bound(round_hw):
    def attn(batch):
        kv = T("bf16", batch, 101, 512, role="kv_cache")
        return node("my.attn", [T("bf16", batch, 1, 512), kv, kv], [T("bf16", batch, 1, 512)], name="attn")

    def cost(n):
        q, k, _ = n.inputs
        # 4 * B * keys * 512 FLOPs, K and V read: bytes and FLOPs both grow with B
        return io_cost(n, matrix_flops=4 * q.shape[0] * k.shape[1] * 512)

    [row] = critical_table([(attn(1), cost(attn(1)))], [(attn(2), cost(attn(2)))], 1, 2, round_hw, lambda o: "a")
    assert row["critical_batch"] is None and row["reason"].startswith("never")
    assert Role.KV_CACHE.value == "kv_cache"


def test_critical_rows_are_named_as_the_decode_table():
    """Blocks that do different work keep their own table rows (graphroof.layers.fold_key): the critical batch of
    each is under that row's name, not under a folded name the table does not show."""
    g = OpGraph("two-blocks")
    g.add_op(node("my.linear", [T("bf16", "batch", D), W("bf16", D, D)], [T("bf16", "batch", D)], name="fc0",
                  scope="model.layers.0.mlp.down_proj"), ["x"], ["y"])
    g.add_op(node("my.linear", [T("bf16", "batch", D), W("bf16", D, 2 * D)], [T("bf16", "batch", 2 * D)],
                  name="fc1", scope="model.layers.1.mlp.down_proj"), ["y"], ["z"])
    r = estimate(GraphSource(g, g), hw="tpu-v5e", prompt=4, gen=3, batch=[1], rules=RULES, ideal=True)
    c = r.configs[0]
    table = {row["name"] for row in c.layer_rows("decode")}
    assert table == {"model.layers.0.mlp", "model.layers.1.mlp"}          # different work: not folded
    assert {row["name"] for row in c.critical} == table
