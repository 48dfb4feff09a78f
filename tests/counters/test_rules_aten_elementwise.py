"""Elementwise, activation, cast, fill and generator rules."""

from __future__ import annotations

import pytest

from graphroof.counters.registry import REGISTRY
from graphroof.counters.rules.aten_elementwise import ACTIVATION_FLOPS_PER_ELEMENT
from tests.conftest import T, W, node


def cost(n):
    return REGISTRY.lookup(n.op)(n)


def test_binary_broadcast_reads_each_operand_at_its_size():
    # [4, 8] + [8] -> [4, 8]: 32 adds; reads 32 + 8 elements, writes 32 (fp32)
    c = cost(node("aten.add", [T("fp32", 4, 8), T("fp32", 8)], [T("fp32", 4, 8)]))
    assert c.vector_flops == 32
    assert c.act_read_bytes == 160 and c.act_write_bytes == 128
    # a weight operand (RMSNorm's gamma multiply) is counted as weight bytes
    c = cost(node("aten.mul", [W("bf16", 8), T("bf16", 4, 8)], [T("bf16", 4, 8)]))
    assert c.weight_bytes == 16 and c.act_read_bytes == 64


def test_scalar_operand_and_alpha():
    c = cost(node("aten.mul", [T("fp32", 10)], [T("fp32", 10)], other=0.5))
    assert c.vector_flops == 10 and c.act_read_bytes == 40
    assert cost(node("aten.add", [T("fp32", 10), T("fp32", 10)], [T("fp32", 10)], alpha=2)).vector_flops == 20
    # elu's alpha is its negative-side scale, already in its 3 FLOPs per element: 3 * 10 = 30, not 40
    assert cost(node("aten.elu", [T("fp32", 10)], [T("fp32", 10)], alpha=0.5)).vector_flops == 30


def test_inplace_twins_registered():
    for op in ("aten.add_", "aten.mul_", "aten.relu_", "aten.silu_", "aten.clamp_", "aten.masked_fill_"):
        assert REGISTRY.lookup(op) is not None, op
    c = cost(node("aten.mul_", [T("fp16", 6), T("fp16", 6)], [T("fp16", 6)]))
    assert c.vector_flops == 6 and c.act_read_bytes == 24 and c.act_write_bytes == 12


@pytest.mark.parametrize("op, k", [("aten.relu", 1), ("aten.silu", 5), ("aten.sigmoid", 4), ("aten.tanh", 1),
                                   ("aten.exp", 1), ("aten.rsqrt", 1), ("aten.hardswish", 5), ("aten.mish", 5),
                                   ("aten.leaky_relu", 2), ("aten.where", 1), ("aten.addcmul", 2)])
def test_per_element_costs(op, k):
    assert cost(node(op, [T("fp32", 3, 5)], [T("fp32", 3, 5)])).vector_flops == 15 * k


def test_gelu_erf_and_tanh():
    x = T("fp32", 100)
    assert cost(node("aten.gelu", [x], [x])).vector_flops == 500
    assert cost(node("aten.gelu", [x], [x], approximate="tanh")).vector_flops == 900
    assert ACTIVATION_FLOPS_PER_ELEMENT["gelu_tanh"] == 9


def test_complex_multiply_is_six_real_flops():
    # rotary embeddings written with complex numbers: (a+bi)(c+di) = 4 multiplies + 2 adds
    z = T("complex64", 4, 16)
    assert cost(node("aten.mul", [z, z], [z])).vector_flops == 6 * 64
    assert cost(node("aten.add", [z, z], [z])).vector_flops == 2 * 64


def test_casts_copy_without_flops():
    c = cost(node("aten._to_copy", [T("fp32", 4, 8)], [T("bf16", 4, 8)], dtype="bf16"))
    assert c.flops == 0 and c.act_read_bytes == 128 and c.act_write_bytes == 64
    # copy_(dst, src): reads src, writes dst (a KV-cache slot here)
    c = cost(node("aten.copy_", [T("bf16", 2, 8, role="kv_cache"), T("bf16", 2, 8)], [T("bf16", 2, 8, role="kv_cache")]))
    assert c.act_read_bytes == 32 and c.kv_write_bytes == 32 and c.kv_read_bytes == 0


def test_fills_write_only_and_empty_is_free_of_traffic():
    c = cost(node("aten.ones_like", [T("fp32", 8)], [T("fp32", 8)]))
    assert c.act_read_bytes == 0 and c.act_write_bytes == 32
    c = cost(node("aten.arange", [], [T("int64", 10)]))
    assert c.vector_flops == 10 and c.act_write_bytes == 80
    c = cost(node("aten.empty", [], [T("fp32", 1000)]))
    assert c.bytes == 0 and c.flops == 0
