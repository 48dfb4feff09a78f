"""Movement family (ATen and ONNX keys): views, copies, concatenation, gathers, scatters, embedding lookups."""

from __future__ import annotations

import pytest

from graphroof.counters.cost import Cost
from graphroof.counters.registry import REGISTRY
from graphroof.graph import Role
from tests.conftest import T, W, node
from tests.counters.rules._family import assert_frontends_agree, paired_members, run


def cost(n):
    return run(n)


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


def test_embedding_lookup_never_reads_more_than_the_table():
    # 1,000 ids from a [100, 8] fp32 table: the rows selected are 1,000 * 8 * 4 = 32,000 bytes but the table is
    # 100 * 8 * 4 = 3,200 bytes; repeated ids hit rows already read, at worst every row once: min = 3,200.
    # Indices 1,000 int64 = 8,000 bytes; output [1000, 8] fp32 = 32,000 bytes written.
    table, ids, out = W("fp32", 100, 8), T("int64", 1000), T("fp32", 1000, 8)
    a = cost(node("aten.embedding", [table, ids], [out]))
    o = cost(node("onnx.Gather", [table, ids], [out], axis=0))
    assert a == o == Cost(weight_bytes=3_200, act_read_bytes=8_000, act_write_bytes=32_000)
    # embedding_bag of the same ids into 10 bags: rows capped the same way; one add per gathered element
    c = cost(node("aten.embedding_bag", [table, ids, T("int64", 10)], [T("fp32", 10, 8), T("int64", 1000)]))
    assert c.weight_bytes == 3_200 and c.vector_flops == 8_000


# -- ONNX keys on literals ----------------------------------------------------------------------------------

def test_onnx_gather_slice_read_selected_part():
    # 6 rows of 8 fp32 = 192 bytes of the 3200-byte table
    c = cost(node("onnx.Gather", [W("fp32", 100, 8), T("int64", 2, 3)], [T("fp32", 2, 3, 8)], axis=0))
    assert c == Cost(weight_bytes=192, act_read_bytes=6 * 8, act_write_bytes=192)
    c = cost(node("onnx.Slice", [T("fp32", 10, 8), W("int64", 1), W("int64", 1), W("int64", 1)], [T("fp32", 3, 8)]))
    assert c == Cost(act_read_bytes=3 * 8 * 4, weight_bytes=3 * 8, act_write_bytes=3 * 8 * 4)
    # a slice of a KV cache reads only its part, as a KV-cache read
    kv = T("fp16", 1, 2, 100, 8, role=Role.KV_CACHE)
    n = node("onnx.Slice", [kv, W("int64", 1), W("int64", 1), W("int64", 1)], [T("fp16", 1, 2, 10, 8)])
    assert cost(n).kv_read_bytes == 160 * 2


def test_onnx_copies_and_free_views():
    x = T("fp32", 3, 4)
    assert cost(node("onnx.Transpose", [x], [T("fp32", 4, 3)], perm=[1, 0])) == Cost(act_read_bytes=48,
                                                                                      act_write_bytes=48)
    for op in ("onnx.Reshape", "onnx.Shape", "onnx.Identity", "onnx.Dropout", "onnx.Squeeze"):
        assert REGISTRY.is_free(op), op
    assert cost(node("onnx.Concat", [x, x], [T("fp32", 6, 4)], axis=0)) == Cost(act_read_bytes=96, act_write_bytes=96)
    c = cost(node("onnx.Pad", [T("int64", 2, 6), W("int64", 4)], [T("int64", 2, 8)]))
    assert c == Cost(act_read_bytes=96, weight_bytes=32, act_write_bytes=2 * 8 * 8)
    assert cost(node("onnx.Loop", [W("int64"), None, T("fp32", 4)], [T("fp32", 4)])) == Cost()


# -- ATen and ONNX keys of one row give the same Cost -------------------------------------------------------

def _all(*ins, out):
    return lambda key: node(key, list(ins), [out])


X = T("fp32", 4, 6)
_CASES = {
    "concat": _all(X, X, out=T("fp32", 8, 6)),
    "pad": _all(X, out=T("fp32", 6, 8)),
    "tile": _all(X, out=T("fp32", 8, 12)),
    "trilu": _all(X, out=X),
    "one_hot": _all(T("int64", 4), out=T("int64", 4, 10)),
    "nonzero": _all(X, out=T("int64", 12, 2)),
    "unique": _all(X, out=T("fp32", 10)),
    "masked_select": _all(X, T("bool", 4, 6), out=T("fp32", 7)),
    "pixel_shuffle": _all(T("fp32", 1, 8, 2, 2), out=T("fp32", 1, 2, 4, 4)),
    "pixel_unshuffle": _all(T("fp32", 1, 2, 4, 4), out=T("fp32", 1, 8, 2, 2)),
    "col2im": _all(T("fp32", 1, 12, 9), out=T("fp32", 1, 3, 4, 4)),
    "embedding": _all(W("fp32", 100, 8), T("int64", 1000), out=T("fp32", 1000, 8)),
    "gather": _all(X, T("int64", 4, 2), out=T("fp32", 4, 2)),
    "index": _all(T("fp32", 4096, 16, role="const"), T("int64", 32), out=T("fp32", 32, 16)),
}


@pytest.mark.parametrize("member", paired_members("movement"))
def test_aten_and_onnx_keys_agree(member):
    assert_frontends_agree("movement", member, _CASES)
