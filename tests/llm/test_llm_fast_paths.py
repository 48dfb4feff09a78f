"""The per-graph pipeline's fast paths (issue 16) give exactly what the plain paths give.

* counting shares one rule run among ops of equal signature (the repeated decoder blocks): every op's cost
  equals the cost of running its rule on it (``count(memo=False)``), types included;
* the TP per-device costs shared among equal ops equal :func:`shard_cost` op by op;
* graphs built in bulk (:func:`fill_digraph`, :meth:`OpGraph.add_ops`, ``map_ops``) equal the graphs built one
  node / edge at a time through networkx's public API: node order, successor and predecessor order, attrs;
* a dropped intermediate graph is freed at once (no reference cycle waiting for the cyclic collector).
"""

from __future__ import annotations

import gc
import weakref

import networkx as nx
import pytest

from graphroof.counters.count import _freeze, count, signature
from graphroof.graph import COST, OP, OpGraph, OpNode, Role, TensorSpec, fill_digraph
from graphroof.llm.kvcache import mark_kv_cache
from graphroof.llm.tp import scale_costs, shard, shard_cost

LLAMA = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=64, intermediate_size=128,
             num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, vocab_size=100,
             max_position_embeddings=512, torch_dtype="bfloat16")


@pytest.fixture(scope="module")
def tiny_llama():
    pytest.importorskip("graphroof.frontends.torch.export", reason="needs the PyTorch frontend")
    pytest.importorskip("transformers")
    from graphroof.frontends.hf.source import HFSource

    src = HFSource(LLAMA, name="tiny-llama-3-blocks")
    return {"prefill": src.prefill_graph(2, 16), "decode": src.decode_graph(2, 16)}


def _costs(g: OpGraph) -> list[tuple[str, str]]:
    # repr: the values and their types (an int 0 and a float 0.0 differ in the JSON report)
    return [(n, repr(d[COST])) for n, d in g.nx.nodes(data=True)]


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_memoized_counting_equals_one_rule_run_per_op(tiny_llama, phase):
    g = shard(mark_kv_cache(tiny_llama[phase]), 2)
    fast, slow = g.map_ops(lambda op: op), g.map_ops(lambda op: op)
    s_fast = count(fast, warn=False)
    s_slow = count(slow, warn=False, memo=False)
    assert _costs(fast) == _costs(slow)
    assert s_fast.as_dict() == s_slow.as_dict()
    # the test exercises sharing: three identical blocks, so far fewer signatures than ops
    sigs = {signature(op) for op in fast.ops()}
    assert None not in sigs and len(sigs) < 0.6 * len(fast)
    # per-device costs: shared among equal ops, equal to shard_cost op by op
    expected = [(op.name, repr(shard_cost(op, fast.get(op.name, COST)))) for op in fast.ops()]
    scale_costs(fast)
    assert _costs(fast) == expected
    assert sum(1 for op in fast.ops() if op.attrs.get("tp_shard")) > 0


def test_signature_ignores_name_and_scope_but_not_types():
    t = TensorSpec((2, 8), "bf16")
    a = OpNode("a", "aten.add", (t, t), (t,), {"alpha": 1}, "model.layers.0.mlp")
    b = OpNode("b", "aten.add", (t, t), (t,), {"alpha": 1}, "model.layers.1.mlp")
    assert signature(a) == signature(b)
    for alpha in (1.0, True, "1", (1,), [1], None):
        assert signature(OpNode("c", "aten.add", (t, t), (t,), {"alpha": alpha})) != signature(a), alpha
    assert _freeze({"d": {"k": [1, 2]}}) != _freeze({"d": {"k": (1, 2)}})
    assert signature(OpNode("d", "aten.add", (t, t), (t,), {"x": object.__new__(_Unhashable)})) is None


class _Unhashable:
    __hash__ = None


def test_user_rules_are_run_on_every_op():
    """A user's rule may read the op's name or scope: it is never shared between ops."""
    t = TensorSpec((4,), "fp32")
    g = OpGraph()
    for i in range(3):
        g.add_op(OpNode(f"n{i}", "user.op", (t,), (t,), {}, f"blocks.{i}"), [f"t{i}"], [f"t{i + 1}"])
    from graphroof.counters.cost import Cost

    seen = []

    def rule(node):
        seen.append(node.name)
        return Cost(vector_flops=1 + int(node.scope.rsplit(".", 1)[1]))

    count(g, rules={"user.op": rule}, warn=False)
    assert seen == ["n0", "n1", "n2"]
    assert [g.get(f"n{i}", COST).vector_flops for i in range(3)] == [1, 2, 3]


def _adjacency(g: nx.DiGraph):
    return ([(n, list(d.items())) for n, d in g.nodes(data=True)],
            [(n, list(g.succ[n].items())) for n in g], [(n, list(g.pred[n].items())) for n in g])


def test_fill_digraph_equals_the_public_api():
    nodes = [("a", {"x": 1}), ("b", {}), ("c", {"y": 2}), ("a", {"z": 3})]   # "a" again: attrs updated
    edges = [("b", "c", {"t": "1"}), ("a", "c", {"t": "2"}), ("a", "b", {"t": "3"}), ("b", "c", {"u": "4"}),
             ("c", "d", {"t": "5"})]                                        # a repeated edge, a new endpoint
    ref = nx.DiGraph()
    ref.add_nodes_from((n, dict(d)) for n, d in nodes)
    ref.add_edges_from((u, v, dict(d)) for u, v, d in edges)
    fast = nx.DiGraph()
    fill_digraph(fast, [(n, dict(d)) for n, d in nodes], [(u, v, dict(d)) for u, v, d in edges])
    assert _adjacency(fast) == _adjacency(ref)
    assert fast.succ["b"]["c"] is fast.pred["c"]["b"]  # one attr dict per edge, as networkx keeps it


def _chain() -> list[tuple[OpNode, list, list]]:
    t = TensorSpec((2, 4), "fp32")
    w = TensorSpec((4, 4), "fp32", Role.WEIGHT)
    return [(OpNode("x", "aten.relu", (t,), (t,)), ["in"], ["h0"]),
            (OpNode("mm", "aten.mm", (t, w), (t,)), ["h0", "w"], ["h1"]),
            (OpNode("add", "aten.add", (t, t), (t,)), ["h1", "h0"], ["h2"]),
            (OpNode("sq", "aten.mul", (t, t), (t,)), ["h2", "h2"], ["h3"])]   # two inputs from one producer


def test_add_ops_and_map_ops_equal_one_add_op_at_a_time():
    ref = OpGraph("m")
    for node, ins, outs in _chain():
        ref.add_op(node, ins, outs)
        ref.set(node.name, COST, node.name)
    bulk = OpGraph("m")
    bulk.add_ops((node, ins, outs, {COST: node.name}) for node, ins, outs in _chain())
    assert _adjacency(bulk.nx) == _adjacency(ref.nx)
    assert bulk._producer == ref._producer
    with pytest.raises(ValueError, match="duplicate op name"):
        bulk.add_ops([(_chain()[0][0], [], [], {})])
    # map_ops: the public-API copy it replaces (cost attrs dropped, tensors kept, edge dicts copied)
    copy = ref.map_ops(lambda op: op)
    expect = nx.DiGraph()
    expect.add_nodes_from((n, {k: d[k] for k in (OP, "in_tensors", "out_tensors")}) for n, d in ref.nx.nodes(data=True))
    expect.add_edges_from(ref.nx.edges(data=True))
    assert _adjacency(copy.nx) == _adjacency(expect)
    assert copy.nx.succ["mm"]["add"] is not ref.nx.succ["mm"]["add"]


def test_dropped_intermediate_graphs_are_freed_without_the_collector(tiny_llama):
    was = gc.isenabled()
    gc.disable()
    try:
        marked = mark_kv_cache(tiny_llama["decode"])
        ref = weakref.ref(marked.nx)
        sharded = shard(marked, 2)
        copy = sharded.map_ops(lambda op: op)
        del marked
        assert ref() is None       # freed by reference counting: shard and map_ops left no cycle behind
        assert len(copy) == len(sharded)
    finally:
        if was:
            gc.enable()
