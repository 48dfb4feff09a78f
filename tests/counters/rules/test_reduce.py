"""Reductions, scans, sort and top-k."""

from __future__ import annotations

from graphroof.counters.registry import REGISTRY
from tests.conftest import T, node


def cost(n):
    return REGISTRY.lookup(n.op)(n)


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
