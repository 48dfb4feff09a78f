"""Reductions, scans, sort and top-k."""

from __future__ import annotations

import pytest

from graphroof.counters.cost import Cost
from tests.conftest import T, W, node
from tests.counters.rules._family import assert_frontends_agree, paired_members, run


def cost(n):
    return run(n)


X = T("fp32", 4, 8)   # 32 elements


def test_sum_mean_var():
    # 4 rows of 8: 7 adds each = 28; mean adds a divide per row = 32
    assert cost(node("aten.sum", [X], [T("fp32", 4)], dim=(1,))).vector_flops == 28
    assert cost(node("aten.mean", [X], [T("fp32", 4, 1)], dim=(-1,))).vector_flops == 32
    assert cost(node("aten.var", [X], [T("fp32", 4)])).vector_flops == 128                # 4 * 32
    assert cost(node("aten.std", [X], [T("fp32", 4)])).vector_flops == 132                # + 4 roots
    c = cost(node("aten.amax", [X], [T("fp32", 4)]))
    assert c.vector_flops == 28 and c.act_read_bytes == 128 and c.act_write_bytes == 16


def test_max_reduction_vs_elementwise_maximum():
    assert cost(node("aten.max", [X], [T("fp32", 4), T("int64", 4)], dim=1)).vector_flops == 28
    # max.other(a, b): 32 elementwise compares
    assert cost(node("aten.max", [X, X], [X])).vector_flops == 32


def test_scan_sort_topk():
    assert cost(node("aten.cumsum", [X], [X], dim=1)).vector_flops == 32
    # sort rows of 8: 32 * ceil(log2 8) = 96
    assert cost(node("aten.sort", [X], [X, T("int64", 4, 8)], dim=-1)).vector_flops == 96
    # top-2 of each row: one pass, 32 * max(1, log2 2) = 32; top-4: 32 * 2 = 64
    assert cost(node("aten.topk", [X], [T("fp32", 4, 2), T("int64", 4, 2)], k=2)).vector_flops == 32
    assert cost(node("aten.topk", [X], [T("fp32", 4, 4), T("int64", 4, 4)], k=4)).vector_flops == 64


def test_logsumexp_decided():
    # stable log-sum-exp over 10 elements to 1: max (9) + subtract (10) + exp (10) + sum (9) + log (1) + add the
    # max back (1) = 40 = 4 x 10, in ATen and ONNX alike (ONNX's old 2 x 10 = 20 skipped the max pass)
    x, y = T("fp32", 10), T("fp32", 1)
    a = cost(node("aten.logsumexp", [x], [y], dim=[0]))
    o = cost(node("onnx.ReduceLogSumExp", [x], [y], keepdims=1))
    assert a == o == Cost(vector_flops=40, act_read_bytes=40, act_write_bytes=4)


# -- ONNX keys on literals ----------------------------------------------------------------------------------

@pytest.mark.parametrize("op, flops", [
    ("onnx.ReduceSum", 24 - 4), ("onnx.ReduceMax", 24 - 4), ("onnx.ReduceMean", 24), ("onnx.ReduceL2", 2 * 24),
    ("onnx.ReduceSumSquare", 2 * 24 - 4), ("onnx.ReduceLogSumExp", 4 * 24),
])
def test_onnx_reductions(op, flops):
    # X [4,6] reduced over axis 1 -> 4 outputs; the axes input is a constant
    c = cost(node(op, [T("fp32", 4, 6), W("int64", 1)], [T("fp32", 4)], keepdims=0))
    assert c.vector_flops == flops
    assert c.act_write_bytes == 16 and c.weight_bytes == 8


def test_onnx_argmax_cumsum_topk():
    c = cost(node("onnx.ArgMax", [T("fp32", 4, 6)], [T("int64", 4)], axis=1, keepdims=0))
    assert c == Cost(vector_flops=20, act_read_bytes=96, act_write_bytes=4 * 8)  # int64 indices
    assert cost(node("onnx.CumSum", [T("fp32", 10), W("int64")], [T("fp32", 10)])).vector_flops == 10
    # CumProd X [3,5]: one multiply per element = 15 (exclusive: the same count); reads 60 + the int64 axis 8 bytes
    c = cost(node("onnx.CumProd", [T("fp32", 3, 5), W("int64")], [T("fp32", 3, 5)], exclusive=1))
    assert c == Cost(vector_flops=15, act_read_bytes=60, weight_bytes=8, act_write_bytes=60)
    c = cost(node("onnx.TopK", [T("fp32", 4, 16), W("int64", 1)], [T("fp32", 4, 4), T("int64", 4, 4)], axis=-1))
    assert c.vector_flops == 64 * 2  # 64 elements x ceil(log2 4)
    assert c.act_write_bytes == 16 * 4 + 16 * 8  # values fp32 [4,4] + indices int64 [4,4]


# -- ATen and ONNX keys of one row give the same Cost -------------------------------------------------------

def _reduce(key):
    return node(key, [X], [T("fp32", 4)], dim=[1], keepdim=False, axis=1, keepdims=0)


_CASES = {m: _reduce for m in paired_members("reduce")}
_CASES["cumsum"] = lambda key: node(key, [X], [X], dim=1)
_CASES["cumprod"] = lambda key: node(key, [X], [X], dim=1)
# top-4 of rows of 8: ATen reads k from its attribute, ONNX from the values output (K is an input tensor, given
# here as a 0-element placeholder so that only the formula is compared)
_CASES["topk"] = (node("aten.topk", [X], [T("fp32", 4, 4), T("int64", 4, 4)], k=4, dim=-1),
                  node("onnx.TopK", [X, W("int64", 0)], [T("fp32", 4, 4), T("int64", 4, 4)], axis=-1))


@pytest.mark.parametrize("member", paired_members("reduce"))
def test_aten_and_onnx_keys_agree(member):
    assert_frontends_agree("reduce", member, _CASES)
