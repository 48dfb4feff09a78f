"""KV-cache semantics for a traced step: the cache write is one append, the attention reads the cache.

A model traced with a cache of ``past`` tokens concatenates the new keys / values to the cached ones
(``aten.cat`` / ``onnx.Concat`` of a KV-cache input and the new entries).  Counted as written, that op would
read the whole cache and write it again every step, which a serving engine (paged or static cache) never does.
:func:`mark_kv_cache` rewrites it as ``kv_cache.append``: read the new entries, write them into the cache
(KV-role write bytes) and nothing else.  The full cache it returns is then marked ``Role.KV_CACHE`` along the
data-movement ops down to the attention that reads it, so attention reads of the cache are KV-role bytes.
"""

from __future__ import annotations

from dataclasses import replace

from ..dtypes import is_float
from ..graph import IN_TENSORS, OpGraph, OpNode, Role, TensorSpec

__all__ = ["APPEND", "CONCAT_OPS", "mark_kv_cache", "kv_append_ops"]

APPEND = "kv_cache.append"
#: Op keys that append new entries to a cache input along the sequence axis.
CONCAT_OPS = ("aten.cat", "aten.concat", "aten.concatenate", "onnx.Concat")
#: Ops that only move (or alias) data: the cache keeps its KV role through them.
_MOVE_SUFFIXES = ("view", "reshape", "_unsafe_view", "transpose", "permute", "expand", "unsqueeze", "squeeze",
                  "clone", "contiguous", "alias", "slice", "_to_copy", "to", "repeat_interleave", "repeat",
                  "Transpose", "Reshape", "Unsqueeze", "Squeeze", "Expand", "Identity", "Cast", "Slice", "Tile")


def _is_move(op: str) -> bool:
    return op.split(".", 1)[-1] in _MOVE_SUFFIXES


def _as_kv(t: TensorSpec) -> TensorSpec:
    return t if t.role is Role.KV_CACHE else replace(t, role=Role.KV_CACHE)


def _append_node(op: OpNode) -> OpNode | None:
    """The ``kv_cache.append`` replacing *op*, or None when *op* does not append to a cache input."""
    if op.op not in CONCAT_OPS or len(op.outputs) != 1:
        return None
    ins = [t for t in op.inputs if t is not None]
    past = [t for t in ins if t.role is Role.KV_CACHE]
    new = [t for t in ins if t.role is not Role.KV_CACHE and is_float(t.dtype)]
    if len(past) != 1 or len(new) != 1:
        return None
    full = op.outputs[0]
    return OpNode(op.name, APPEND, (new[0],), (_as_kv(replace(full, shape=new[0].shape)),),
                  {"original_op": op.op, "cache": str(_as_kv(full))}, op.scope)


def mark_kv_cache(graph: OpGraph) -> OpGraph:
    """Rewrite cache appends and mark cache reads (see module docstring); returns a new graph.

    The graph is unchanged when no op concatenates onto a ``Role.KV_CACHE`` input.
    """
    g = graph.map_ops(lambda op: op)
    cache_of: dict[str, TensorSpec] = {}   # op name -> full-cache spec it outputs
    for name, data in g.nx.nodes(data=True):
        op = data["op"]
        new = _append_node(op) if op.op in CONCAT_OPS else None
        if new is not None:
            cache_of[name] = _as_kv(op.outputs[0])
            data["op"] = new
            continue
        if not cache_of:  # nothing appended yet: no op can read a cache
            continue
        preds = [p for p in g.nx.predecessors(name) if p in cache_of]
        if not preds:
            continue
        names = g.get(name, IN_TENSORS)
        if names:  # by tensor name: a query shaped like the cache (prefill, q_len == kv_len) is no cache read
            # get_edge_data, not g.nx.edges[...]: the cached edges view would tie the graph in a reference cycle
            cache_names = {g.nx.get_edge_data(p, name).get("tensor") for p in preds}
            ins = tuple(_as_kv(t) if t is not None and i < len(names) and names[i] in cache_names else t
                        for i, t in enumerate(op.inputs))
        else:
            specs = {(c.shape, c.dtype) for c in (cache_of[p] for p in preds)}
            ins = tuple(_as_kv(t) if t is not None and (t.shape, t.dtype) in specs else t for t in op.inputs)
        float_acts = [t for t in op.inputs if t is not None and is_float(t.dtype) and t.role is not Role.WEIGHT]
        if _is_move(op.op) and len(float_acts) == 1 and len(op.outputs) == 1:
            out = _as_kv(op.outputs[0])
            data["op"] = replace(op, inputs=ins, outputs=(out,))
            cache_of[name] = out
        else:
            data["op"] = replace(op, inputs=ins)
    if cache_of:
        g.meta["kv_cache"] = "appends rewritten as kv_cache.append; cache reads marked kv_cache"
    return g


def kv_append_ops(graph: OpGraph) -> list[OpNode]:
    return [op for op in graph.ops() if op.op == APPEND]
