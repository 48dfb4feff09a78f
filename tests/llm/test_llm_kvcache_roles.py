"""mark_kv_cache gives the KV-cache role to the cache an attention reads, and only to it."""

from __future__ import annotations

from graphroof.counters import count
from graphroof.graph import COST, OpGraph, OpNode, Role, TensorSpec, bind
from graphroof.llm.kvcache import mark_kv_cache


def _prefill_attention() -> OpGraph:
    """q, k, v [1, 2, 4, 8] fp32; k and v appended to empty caches [1, 2, 0, 8], then SDPA(q, cache_k, cache_v).

    In prefill the query has exactly the cache's shape and dtype (q_len == kv_len), so only tensor names tell
    the query from the cache.
    """
    g = OpGraph("prefill")
    act = TensorSpec((1, 2, 4, 8), "fp32")
    past = TensorSpec((1, 2, 0, 8), "fp32", Role.KV_CACHE)
    for n in ("q", "k", "v"):
        g.add_op(OpNode(f"make_{n}", "aten.clone", (act,), (act,)), ["x"], [n])
    for n in ("k", "v"):
        g.add_op(OpNode(f"cat_{n}", "aten.cat", (past, act), (act,)), [f"past_{n}", n], [f"cache_{n}"])
    g.add_op(OpNode("sdpa", "aten.scaled_dot_product_attention", (act, act, act), (act,), {"is_causal": True}),
             ["q", "cache_k", "cache_v"], ["o"])
    return g


def test_query_shaped_like_the_cache_stays_an_activation():
    g = mark_kv_cache(bind(_prefill_attention(), {}))
    count(g, warn=False)
    sdpa = g.node("sdpa")
    assert [t.role for t in sdpa.inputs] == [Role.ACTIVATION, Role.KV_CACHE, Role.KV_CACHE]
    c = g.get("sdpa", COST)
    # K and V: 2 * (1 * 2 * 4 * 8) fp32 = 2 * 64 * 4 = 512 bytes read from the cache; Q: 64 * 4 = 256 activation
    assert c.kv_read_bytes == 512
    assert c.act_read_bytes == 256
    # each append writes its 64 new fp32 entries into the cache: 256 bytes
    assert g.get("cat_k", COST).kv_write_bytes == 256
