"""A hand-built Llama-like decoder as OpGraphs (prefill and decode step), with test-local rules.

Tensors are 3-D ``[batch, tokens, features]``; the KV cache of one layer is ``[batch, past, kv_dim]`` for K and
for V.  The rules are simple closed forms so tests can derive every figure by hand:

* ``toy.linear``: ``2 * tokens * out * in`` matrix FLOPs; reads x and W, writes y.
* ``toy.attn``: ``4 * batch * heads * q * kv * head_dim`` matrix FLOPs (full square: QK^T and PV), reads
  q, K, V, writes o (flash byte model).
* ``toy.embed``: reads the ``batch * tokens`` rows it gathers (not the whole table) and the ids, writes rows.
* ``toy.norm`` / ``toy.add`` / ``toy.mul``: 1 vector FLOP per output element; reads inputs, writes output.
"""

from __future__ import annotations

from graphroof.counters.common import io_cost, read_bytes, write_bytes
from graphroof.counters.cost import Cost
from graphroof.frontends.source import GraphSource, ModelSpec
from graphroof.graph import OpGraph, OpNode, Role, TensorSpec, resolve_dim


def _linear(node):
    x, w = node.inputs[0], node.inputs[1]
    tokens = x.numel // x.shape[-1]
    return io_cost(node, matrix_flops=2 * tokens * w.shape[0] * w.shape[1])


def _attn(node):
    q, k = node.inputs[0], node.inputs[1]
    a = node.attrs
    return io_cost(node, matrix_flops=4 * q.shape[0] * a["heads"] * q.shape[1] * k.shape[1] * a["head_dim"])


def _embed(node):
    ids, w = node.inputs
    rows = TensorSpec((ids.numel, w.shape[1]), w.dtype, Role.WEIGHT)
    r = read_bytes([ids, rows])
    return Cost(**r, **write_bytes(node.outputs))


def _elementwise(node):
    return io_cost(node, vector_flops=node.outputs[0].numel)


RULES = {"toy.linear": _linear, "toy.attn": _attn, "toy.embed": _embed, "toy.norm": _elementwise,
         "toy.add": _elementwise, "toy.mul": _elementwise}


def toy_graph(L=2, H=64, heads=4, kv_heads=2, I=128, V=100, dtype="bf16", decode=False, seq_len="seq"):
    """Prefill graph (dims batch, seq) or, with ``decode=True``, one decode step (dims batch, past)."""
    D = H // heads
    kvd = kv_heads * D
    S = 1 if decode else seq_len
    g = OpGraph("toy-llama", {"model": "toy-llama"})
    n = [0]

    def A(*shape):
        return TensorSpec(shape, dtype)

    def Wt(*shape):
        return TensorSpec(shape, dtype, Role.WEIGHT)

    def op(kind, ins, in_names, out, scope, **attrs):
        n[0] += 1
        name = f"op{n[0]}"
        g.add_op(OpNode(name, kind, tuple(ins), (out,), attrs, scope), in_names, [name])
        return name

    x = op("toy.embed", [TensorSpec(("batch", S), "int64"), Wt(V, H)], ["ids", None], A("batch", S, H),
           "model.embed_tokens")
    for i in range(L):
        s = f"model.layers.{i}"
        h = op("toy.norm", [A("batch", S, H), Wt(H)], [x, None], A("batch", S, H), f"{s}.input_layernorm")
        q = op("toy.linear", [A("batch", S, H), Wt(H, H)], [h, None], A("batch", S, H), f"{s}.self_attn.q_proj")
        k = op("toy.linear", [A("batch", S, H), Wt(kvd, H)], [h, None], A("batch", S, kvd), f"{s}.self_attn.k_proj")
        v = op("toy.linear", [A("batch", S, H), Wt(kvd, H)], [h, None], A("batch", S, kvd), f"{s}.self_attn.v_proj")
        past = "past" if decode else 0
        total = "past + 1" if decode else S
        kv_in = TensorSpec(("batch", past, kvd), dtype, Role.KV_CACHE)
        kc = op("aten.cat", [kv_in, A("batch", S, kvd)], [f"past_k{i}", k], A("batch", total, kvd), f"{s}.self_attn")
        vc = op("aten.cat", [kv_in, A("batch", S, kvd)], [f"past_v{i}", v], A("batch", total, kvd), f"{s}.self_attn")
        a = op("toy.attn", [A("batch", S, H), A("batch", total, kvd), A("batch", total, kvd)], [q, kc, vc],
               A("batch", S, H), f"{s}.self_attn", heads=heads, head_dim=D)
        o = op("toy.linear", [A("batch", S, H), Wt(H, H)], [a, None], A("batch", S, H), f"{s}.self_attn.o_proj")
        x = op("toy.add", [A("batch", S, H), A("batch", S, H)], [x, o], A("batch", S, H), s)
        h = op("toy.norm", [A("batch", S, H), Wt(H)], [x, None], A("batch", S, H), f"{s}.post_attention_layernorm")
        gt = op("toy.linear", [A("batch", S, H), Wt(I, H)], [h, None], A("batch", S, I), f"{s}.mlp.gate_proj")
        up = op("toy.linear", [A("batch", S, H), Wt(I, H)], [h, None], A("batch", S, I), f"{s}.mlp.up_proj")
        m = op("toy.mul", [A("batch", S, I), A("batch", S, I)], [gt, up], A("batch", S, I), f"{s}.mlp")
        d = op("toy.linear", [A("batch", S, I), Wt(H, I)], [m, None], A("batch", S, H), f"{s}.mlp.down_proj")
        x = op("toy.add", [A("batch", S, H), A("batch", S, H)], [x, d], A("batch", S, H), s)
    h = op("toy.norm", [A("batch", S, H), Wt(H)], [x, None], A("batch", S, H), "model.norm")
    op("toy.linear", [A("batch", S, H), Wt(V, H)], [h, None], A("batch", S, V), "lm_head")
    return g


def toy_source(L=2, H=64, heads=4, kv_heads=2, I=128, V=100, dtype="bf16", max_positions=4096, kv=True):
    spec = ModelSpec("toy-llama", L, H, heads, kv_heads, H // heads, I, V, max_positions, dtype)
    pre = toy_graph(L, H, heads, kv_heads, I, V, dtype)
    dec = toy_graph(L, H, heads, kv_heads, I, V, dtype, decode=True) if kv else None
    return GraphSource(pre, dec, spec)


def toy_params(L=2, H=64, heads=4, kv_heads=2, I=128, V=100):
    """Parameter count by hand: embed V*H + per layer (2 norms 2H + q,o 2H^2 + k,v 2*kvd*H + MLP 3*I*H)
    + final norm H + lm_head V*H."""
    kvd = kv_heads * (H // heads)
    return V * H + L * (2 * H + 2 * H * H + 2 * kvd * H + 3 * I * H) + H + V * H


def dim(d, **dims):
    return resolve_dim(d, dims)
