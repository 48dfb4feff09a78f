"""What a rule computes with: ``TensorSpec.dims`` (a bound shape as ints, an :class:`UnboundDimError` naming the
first symbolic dim) and ``req`` (a required input, a :class:`RuleError` when it is absent).  A rule given a
symbolic shape stops with the dim's name instead of doing arithmetic on a string."""

from __future__ import annotations

import pytest

from graphroof.counters import count
from graphroof.counters.common import ReadBytes, WriteBytes, read_bytes, req, write_bytes
from graphroof.counters.rules.attention import attention_shape
from graphroof.counters.rules.matmul import einsum, grouped_mm
from graphroof.errors import RuleError, UnboundDimError
from graphroof.graph import OpGraph, Role
from tests.conftest import T, W, node


def test_dims_of_a_bound_shape_are_its_ints():
    assert T("bf16", 2, 3, 4).dims == (2, 3, 4)
    assert T("fp32").dims == ()


def test_dims_of_a_symbolic_shape_name_the_first_unbound_dim():
    with pytest.raises(UnboundDimError) as e:
        _ = T("bf16", 2, "seq", "past + 1").dims
    assert e.value.dim == "seq"


def test_req_returns_the_input_or_says_which_is_missing():
    x = T("bf16", 4, 8)
    n = node("aten.linear", [x, None])
    assert req(n, 0) is x
    with pytest.raises(RuleError, match=r"aten.linear: input 1 is missing"):
        req(n, 1)
    with pytest.raises(RuleError, match=r"input 5 is missing"):
        req(n, 5)


def test_attention_shape_refuses_a_symbolic_query_length():
    q, kv = T("bf16", 2, 4, "L", 8), T("bf16", 2, 4, 16, 8)
    assert attention_shape(node("aten.scaled_dot_product_attention", [T("bf16", 2, 4, 5, 8), kv, kv])) == \
        (8, 5, 16, 8, 8)
    with pytest.raises(UnboundDimError) as e:
        attention_shape(node("aten.scaled_dot_product_attention", [q, kv, kv]))
    assert e.value.dim == "L"


def test_einsum_refuses_a_symbolic_operand():
    with pytest.raises(UnboundDimError):
        einsum(node("aten.einsum", [T("fp32", "n", 3), T("fp32", 3, 4)], [T("fp32", 5, 4)], equation="ij,jk->ik"))


def test_count_keeps_the_unbound_dim_error_of_a_rule():
    g = OpGraph()
    g.add_op(node("aten.linear", [T("bf16", 4, "k"), W("bf16", 8, "k")], [T("bf16", 4, 8)], name="fc"))
    with pytest.raises(UnboundDimError) as e:
        count(g)
    assert e.value.dim == "k"


def test_read_and_write_buckets_are_typed_and_complete():
    r: ReadBytes = read_bytes([T("bf16", 4), W("int8", 8), T("fp16", 2, role=Role.KV_CACHE), None])
    w: WriteBytes = write_bytes([T("fp32", 4), T("bf16", 3, role=Role.KV_CACHE)])
    assert r == {"weight_bytes": 8, "act_read_bytes": 8, "kv_read_bytes": 4}
    assert w == {"act_write_bytes": 16, "kv_write_bytes": 6}


def test_grouped_gemm_reads_the_visited_experts_share_of_the_weights():
    a, b, out = T("bf16", 64, 32), W("bf16", 8, 32, 16), T("bf16", 64, 16)
    full = grouped_mm(node("aten._grouped_mm", [a, b], [out]))
    part = grouped_mm(node("aten._grouped_mm", [a, b], [out], moe_experts=8, moe_experts_touched=2))
    assert full.weight_bytes == b.nbytes and part.weight_bytes == b.nbytes * 2 / 8
    assert part.matrix_flops == full.matrix_flops == 2 * 64 * 16 * 32
    assert part.act_read_bytes == full.act_read_bytes == a.nbytes
