"""Fused attention ops: ONNX ``Attention`` (opset 23), ``com.microsoft`` Attention / MultiHeadAttention /
GroupQueryAttention, and RotaryEmbedding (both domains).

FLOPs are :func:`graphroof.counters.formulas.sdpa_flops` on the (query, key) pairs computed: ``Q K^T`` and
``P V`` on the matrix units, softmax + scaling on the vector units; causal ops count what a causal kernel
computes (``--causal full``: the whole square).  Bytes follow the attention byte model in
:mod:`graphroof.counters.settings`: ``flash`` reads Q, K, V, mask and past K/V once and writes O and present
K/V; ``naive`` adds the score matrix S and probabilities P written and read back (``4 * BH * q * kv``
elements).  Past K/V inputs are KV-cache reads and present K/V outputs KV-cache writes whatever their names.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ...graph import OpNode, Role, TensorSpec
from ..common import io_cost
from ..cost import FLOPS_PER_MAC, Cost
from ..formulas import SOFTMAX_FLOPS_PER_ELEMENT, attention_pairs
from ..registry import register_rule
from ..settings import current

__all__ = ["windowed_pairs", "attention_cost"]

#: Rotary embedding per rotated element: ``x * cos + rotate(x) * sin`` = 2 multiplies + 1 add.
ROTARY_FLOPS_PER_ELEMENT = 3


def windowed_pairs(q_len: int, kv_len: int, window: int) -> int:
    """Causal (bottom-right) pairs when each query sees at most *window* keys: ``sum min(p + 1, window)``.

    Query i (0-based) sits at position ``p = kv_len - q_len + i`` and sees ``min(p + 1, window)`` keys.
    """
    lo, hi = kv_len - q_len + 1, kv_len  # p + 1 over the queries
    lo = max(lo, 1)
    if hi < lo:
        return 0
    if hi <= window:
        return (lo + hi) * (hi - lo + 1) // 2
    if lo > window:
        return (hi - lo + 1) * window
    return (lo + window) * (window - lo + 1) // 2 + (hi - window) * window


def _kv(t: TensorSpec | None) -> TensorSpec | None:
    if t is None or t.shape == (0,):
        return None
    return t if t.role is Role.KV_CACHE else replace(t, role=Role.KV_CACHE)


def _present(node: OpNode, i: int) -> TensorSpec | None:
    t = node.outputs[i] if i < len(node.outputs) else None
    return None if t is None or t.shape == (0,) else t


def attention_cost(node: OpNode, *, bh: int, q_len: int, kv_len: int, head_dim: int, v_head_dim: int,
                   causal: bool, past: tuple[int, ...] = (), present: tuple[int, ...] = (), window: int = 0,
                   extra: Cost = Cost()) -> Cost:
    """Cost of a fused attention *node*; *past* / *present* are the input / output positions of the KV cache."""
    s = current()
    if causal and window and s.causal == "kernel":
        pairs = windowed_pairs(q_len, kv_len, window)
    else:
        pairs = attention_pairs(q_len, kv_len, causal, s.causal)
    matrix = FLOPS_PER_MAC * bh * pairs * (head_dim + v_head_dim)
    vector = (SOFTMAX_FLOPS_PER_ELEMENT + 1) * bh * pairs
    ins = [(_kv(t) if i in past else t) for i, t in enumerate(node.inputs)]
    outs = [(_kv(t) if i in present else t) for i, t in enumerate(node.outputs)]
    c = io_cost(node, matrix_flops=matrix, vector_flops=vector, inputs=ins, outputs=outs) + extra
    if s.attention == "naive":
        q = node.inputs[0]
        scores = math.ceil(bh * q_len * kv_len * q.itemsize_bits / 8)
        c = c + Cost(act_write_bytes=2 * scores, act_read_bytes=2 * scores)
    return c


def _seq(t: TensorSpec, axis_4d: int = 2, axis_3d: int = 1) -> int:
    return int(t.shape[axis_4d] if len(t.shape) == 4 else t.shape[axis_3d])


@register_rule("onnx.Attention")
def onnx_attention(node: OpNode) -> Cost:
    """(Q, K, V, attn_mask, past_key, past_value): Q [B, Hq, S, D] or [B, S, Hq*D] (``q_num_heads``);
    kv length = present_key's (past + new); ``is_causal`` is bottom-right aligned."""
    q, k, v = node.inputs[0], node.inputs[1], node.inputs[2]
    a = node.attrs
    if len(q.shape) == 4:
        b, hq, sq, d = q.shape
    else:
        b, sq, hidden = q.shape
        hq = int(a["q_num_heads"])
        d = hidden // hq
    dv = v.shape[3] if len(v.shape) == 4 else v.shape[2] // int(a.get("kv_num_heads") or a["q_num_heads"])
    pk = _present(node, 1)
    past = node.input(4)
    kv_len = pk.shape[2] if pk is not None else _seq(k) + (past.shape[2] if past is not None else 0)
    return attention_cost(node, bh=b * hq, q_len=sq, kv_len=kv_len, head_dim=d, v_head_dim=dv,
                          causal=bool(a.get("is_causal", 0)), past=(4, 5), present=(1, 2))


@register_rule("com.microsoft.Attention")
def ms_attention(node: OpNode) -> Cost:
    """(input [B,S,Hin], weights [Hin, Dq+Dk+Dv], bias, mask_index, past [2,B,N,P,H], ...): the packed QKV
    projection ``2*B*S*Hin*(Dq+Dk+Dv)`` (+ bias add), then attention; ``unidirectional`` = causal."""
    x, w = node.inputs[0], node.inputs[1]
    n = int(node.attrs["num_heads"])
    sizes = tuple(node.attrs.get("qkv_hidden_sizes") or ()) or (w.shape[1] // 3,) * 3
    b, s = x.shape[0], x.shape[1]
    tokens = b * s
    proj = Cost(matrix_flops=FLOPS_PER_MAC * tokens * x.shape[-1] * w.shape[1],
                vector_flops=tokens * w.shape[1] if node.input(2) is not None else 0)
    present, past = _present(node, 1), node.input(4)
    kv_len = present.shape[3] if present is not None else s + (past.shape[3] if past is not None else 0)
    return attention_cost(node, bh=b * n, q_len=s, kv_len=kv_len, head_dim=sizes[0] // n, v_head_dim=sizes[2] // n,
                          causal=bool(node.attrs.get("unidirectional", 0)), past=(4,), present=(1,), extra=proj)


@register_rule("com.microsoft.MultiHeadAttention")
def ms_multi_head_attention(node: OpNode) -> Cost:
    """(query, key, value, bias, key_padding_mask, attention_bias, past_key, past_value, ...): query
    [B,S,D] or packed QKV [B,S,N,3,H]; key [B,L,D], [B,N,L,H] or packed KV [B,L,N,2,H]; bias adds one FLOP
    per Q/K/V element; ``unidirectional`` = causal."""
    q, k, v = node.inputs[0], node.input(1), node.input(2)
    n = int(node.attrs["num_heads"])
    b, s = q.shape[0], q.shape[1]
    d = q.shape[-1] if len(q.shape) == 5 else q.shape[-1] // n
    dv = node.outputs[0].shape[-1] // n
    if k is None:
        new_kv = s
    else:
        new_kv = k.shape[2] if len(k.shape) == 4 else k.shape[1]
    pk, past = _present(node, 1), node.input(6)
    kv_len = pk.shape[2] if pk is not None else new_kv + (past.shape[2] if past is not None else 0)
    bias = node.input(3)
    extra = Cost(vector_flops=sum(t.numel for t in (q, k, v) if t is not None)) if bias is not None else Cost()
    return attention_cost(node, bh=b * n, q_len=s, kv_len=kv_len, head_dim=d, v_head_dim=dv,
                          causal=bool(node.attrs.get("unidirectional", 0)), past=(6, 7), present=(1, 2), extra=extra)


def _cache_rows(cache: TensorSpec | None, rows: int) -> TensorSpec | None:
    """The part of a cos / sin cache a rotary op reads: *rows* rows (capped at the cache)."""
    if cache is None:
        return None
    width = cache.shape[-1] if cache.shape else 1
    n = min(cache.numel, rows * width)
    return replace(cache, shape=(n,))


@register_rule("com.microsoft.GroupQueryAttention")
def ms_group_query_attention(node: OpNode) -> Cost:
    """(query, key, value, past_key, past_value, seqlens_k, total_sequence_length, cos_cache, sin_cache, ...):
    always causal, ``local_window_size`` limits the keys each query sees; kv length = past_key's + new tokens;
    ``do_rotary`` adds rotary on Q and K (3 FLOPs per rotated element, cos / sin rows read per token)."""
    q, out = node.inputs[0], node.outputs[0]
    n, nkv = int(node.attrs["num_heads"]), int(node.attrs["kv_num_heads"])
    b, s = q.shape[0], q.shape[1]
    h = out.shape[-1] // n
    pk, past, key = _present(node, 1), node.input(3), node.input(1)
    new_kv = key.shape[1] if key is not None else s
    # past + new tokens (present_key's declared length is often the past buffer's: the real total is a run-time
    # input, total_sequence_length); with no past, present's length
    kv_len = new_kv + past.shape[2] if past is not None else (pk.shape[2] if pk is not None else new_kv)
    extra = Cost()
    cos, sin = node.input(7), node.input(8)
    if node.attrs.get("do_rotary") and cos is not None:
        rot = 2 * cos.shape[-1]
        extra = Cost(vector_flops=ROTARY_FLOPS_PER_ELEMENT * b * s * (n + nkv) * rot)
        node = replace(node, inputs=tuple(_cache_rows(t, b * s) if i in (7, 8) else t
                                          for i, t in enumerate(node.inputs)))
    window = int(node.attrs.get("local_window_size", -1))
    return attention_cost(node, bh=b * n, q_len=s, kv_len=kv_len, head_dim=h, v_head_dim=h, causal=True,
                          past=(3, 4), present=(1, 2), window=window if window > 0 else 0, extra=extra)


@register_rule("onnx.RotaryEmbedding", "com.microsoft.RotaryEmbedding")
def rotary_embedding(node: OpNode) -> Cost:
    """``x * cos + rotate(x) * sin`` on the first ``rotary_embedding_dim`` of each head (all of it when 0):
    3 FLOPs per rotated element; the cos / sin caches are read in the rows the positions select.

    ONNX: (X, cos_cache, sin_cache, position_ids); com.microsoft: (input, position_ids, cos_cache, sin_cache).
    X is [B, H, S, D] or [B, S, hidden] (``num_heads`` gives D).
    """
    x = node.inputs[0]
    ms = node.op.startswith("com.microsoft")
    cos_i, sin_i = (2, 3) if ms else (1, 2)
    n_heads = int(node.attrs.get("num_heads", 0) or 0)
    if len(x.shape) == 4:
        b, s, d = x.shape[0], x.shape[2], x.shape[3]
    else:
        b, s = x.shape[0], x.shape[1]
        cos = node.input(cos_i)
        d = x.shape[-1] // n_heads if n_heads else (2 * cos.shape[-1] if cos is not None else x.shape[-1])
    rot = int(node.attrs.get("rotary_embedding_dim", 0) or 0) or d
    rotated = x.numel * min(rot, d) // d
    node = replace(node, inputs=tuple(_cache_rows(t, b * s) if i in (cos_i, sin_i) else t
                                      for i, t in enumerate(node.inputs)))
    return io_cost(node, vector_flops=ROTARY_FLOPS_PER_ELEMENT * rotated)
