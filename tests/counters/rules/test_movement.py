"""Views, maybe-copies, concatenation, gathers, scatters and embedding lookups."""

from __future__ import annotations

from graphroof.counters.registry import REGISTRY
from tests.conftest import T, W, node


def cost(n):
    return REGISTRY.lookup(n.op)(n)


def test_views_are_free():
    for op in ("aten.view", "aten.transpose", "aten.permute", "aten.expand", "aten.slice", "aten.unsqueeze",
               "aten.split", "aten.t", "aten._unsafe_view", "aten.select", "aten.alias", "aten.detach"):
        assert REGISTRY.is_free(op), op


def test_reshape_contiguous_to_free_only_when_aliasing():
    x, y = T("fp16", 4, 8), T("fp16", 8, 4)
    for op in ("aten.reshape", "aten.contiguous", "aten.to", "aten.flatten"):
        assert cost(node(op, [x], [y], alias=True)).bytes == 0, op
        c = cost(node(op, [x], [y]))
        assert c.act_read_bytes == 64 and c.act_write_bytes == 64 and c.flops == 0, op


def test_dropout_eval_free_training_counts():
    x = T("fp32", 10)
    assert cost(node("aten.dropout", [x], [x], p=0.1, train=False)).bytes == 0
    c = cost(node("aten.dropout", [x], [x], p=0.1, train=True))
    assert c.vector_flops == 30 and c.act_read_bytes == 40


def test_cat_reads_all_pieces():
    c = cost(node("aten.cat", [T("bf16", 2, 3), T("bf16", 2, 5)], [T("bf16", 2, 8)], dim=1))
    assert c.act_read_bytes == 32 and c.act_write_bytes == 32 and c.flops == 0


def test_embedding_reads_only_looked_up_rows():
    # table [32000, 4096] fp16 = 262 MB; 7 tokens read 7 rows: 7 * 4096 * 2 = 57344 B
    c = cost(node("aten.embedding", [W("fp16", 32000, 4096), T("int64", 1, 7)], [T("fp16", 1, 7, 4096)]))
    assert c.weight_bytes == 57344
    assert c.act_read_bytes == 56 and c.act_write_bytes == 57344


def test_index_and_gather_read_selected_elements():
    # cos cache [4096, 128] (a constant) indexed by 16 positions: 16 * 128 elements read
    c = cost(node("aten.index", [T("fp32", 4096, 128, role="const"), T("int64", 16)], [T("fp32", 16, 128)]))
    assert c.weight_bytes == 16 * 128 * 4 and c.act_read_bytes == 128
    c = cost(node("aten.gather", [T("fp32", 10, 100), T("int64", 10, 3)], [T("fp32", 10, 3)], dim=1))
    assert c.act_read_bytes == 30 * 4 + 30 * 8 and c.act_write_bytes == 120


def test_scatter_inplace_writes_only_updates_in_self_role():
    # static KV cache [1, 8, 1024, 64] bf16 updated in place at 16 positions: index_copy_(self, 2, idx, src)
    cache = T("bf16", 1, 8, 1024, 64, role="kv_cache")
    src, idx = T("bf16", 1, 8, 16, 64), T("int64", 16)
    c = cost(node("aten.index_copy_", [cache, idx, src], [cache], dim=2))
    assert c.kv_write_bytes == 8 * 16 * 64 * 2          # 16384 B, not the whole cache
    assert c.kv_read_bytes == 0 and c.act_read_bytes == 16384 + 128
    # out of place: copies self too
    c = cost(node("aten.index_copy", [cache, idx, src], [T("bf16", 1, 8, 1024, 64)], dim=2))
    assert c.kv_read_bytes == 8 * 1024 * 64 * 2


def test_scatter_add_accumulates():
    self_t, idx, src = T("fp32", 10), T("int64", 4), T("fp32", 4)
    c = cost(node("aten.scatter_add_", [self_t, idx, src], [self_t], dim=0))
    assert c.vector_flops == 4
    assert c.act_write_bytes == 16 and c.act_read_bytes == 32 + 16 + 16   # idx, src, and the 4 targets
    c = cost(node("aten.index_put_", [self_t, idx, src], [self_t], accumulate=False))
    assert c.vector_flops == 0 and c.act_write_bytes == 16
    # index_fill_(self [4, 6], dim 1, index of 2): two columns of 4 = 8 elements written
    c = cost(node("aten.index_fill_", [T("fp32", 4, 6), T("int64", 2)], [T("fp32", 4, 6)], dim=1, value=0.0))
    assert c.act_write_bytes == 32
