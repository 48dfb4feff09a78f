"""Attention family: scaled dot-product attention, whole, in ATen (``aten.scaled_dot_product_attention`` and every
backend variant: flash, flash for CPU, memory-efficient, cuDNN, math, overrideable) and ONNX (``Attention``,
opset 23; ``com.microsoft`` Attention / MultiHeadAttention / GroupQueryAttention), and rotary embeddings.

FLOPs: :func:`~graphroof.counters.formulas.sdpa_flops` on the (query, key) pairs computed: ``Q K^T`` and ``P V``
on the matrix units, softmax + scaling on the vector units, plus one vector add per score when a mask / bias is
added to the scores (ATen ``attn_mask``, ONNX ``attn_mask``: ``softmax(Q K^T * scale + mask)``).  K and V are
read at their own size (``Hkv < Hq``: grouped-query attention).

These rules take the counting settings (:mod:`graphroof.counters.settings`) as their second argument:

* ``causal``: ``"kernel"`` counts the (query, key) pairs a causal kernel computes (about half the square),
  ``"full"`` the whole square.  torch's ``is_causal=True`` and ONNX ``is_causal`` without a KV cache are the
  top-left aligned mask ``tril(ones(L, S))``; with a cache (ONNX past_key) and the masks transformers builds
  for a causal LM prompt (``attrs["mask_causal"]``) the diagonal is aligned bottom-right.  An explicit mask is
  otherwise counted as the full square.
* ``attention``: ``"flash"`` reads Q, K, V (and the mask, past K/V) once and writes O (and present K/V): the
  scores stay on chip; ``"naive"`` also writes the score matrix S and the probabilities P and reads both back:
  ``4 * B*H*L*S`` elements in the query's dtype (the unfused math path materialises the whole square even when
  causal).  Past K/V inputs are KV-cache reads and present K/V outputs KV-cache writes whatever their names.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ...graph import OpNode, Role, TensorSpec
from ..common import io_cost, req
from ..cost import FLOPS_PER_MAC, Cost
from ..family import Row, aten, ms, onnx, register_family
from ..formulas import SOFTMAX_FLOPS_PER_ELEMENT, attention_pairs, prod, windowed_pairs
from ..settings import DEFAULT, CountSettings

__all__ = ["ROWS", "attention_cost"]

#: Rotary embedding per rotated element: ``x * cos + rotate(x) * sin`` = 2 multiplies + 1 add.
ROTARY_FLOPS_PER_ELEMENT = 3


SDPA_KEYS = aten(
    "scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_attention_math",
    "_scaled_dot_product_fused_attention_overrideable", "_scaled_dot_product_attention_math_for_mps",
)


def attention_shape(node: OpNode) -> tuple[int, int, int, int, int]:
    """(batch_heads, q_len, kv_len, head_dim, v_head_dim) from q, k, v (inputs 0-2)."""
    q, k, v = req(node, 0).dims, req(node, 1).dims, req(node, 2).dims
    return prod(q[:-2]), q[-2], k[-2], q[-1], v[-1]


def attention_mask(node: OpNode) -> TensorSpec | None:
    """The explicit mask / bias tensor (input 3 in every variant that takes one), or None."""
    return node.input(3)


def sdpa(node: OpNode, settings: CountSettings = DEFAULT) -> Cost:
    """ATen ``(q [..., Hq, L, E], k [..., Hkv, S, E], v [..., Hkv, S, Ev], attn_mask, ...)``."""
    bh, lq, lk, e, ev = attention_shape(node)
    mask = attention_mask(node)
    if node.attrs.get("is_causal"):
        causal, align = True, "top_left"
    elif mask is not None and node.attrs.get("mask_causal"):
        causal, align = True, str(node.attrs.get("mask_align", "bottom_right"))
    else:
        causal, align = False, "top_left"
    # attrs["window"]: a sliding-window layer (set by the LLM source from the config): each query sees at most
    # that many keys (counted when causal, under the kernel setting)
    return attention_cost(node, settings, bh=bh, q_len=lq, kv_len=lk, head_dim=e, v_head_dim=ev, causal=causal,
                          align=align, mask=mask is not None, window=int(node.attrs.get("window") or 0))


def _kv(t: TensorSpec | None) -> TensorSpec | None:
    if t is None or t.shape == (0,):
        return None
    return t if t.role is Role.KV_CACHE else replace(t, role=Role.KV_CACHE)


def _present(node: OpNode, i: int) -> TensorSpec | None:
    t = node.outputs[i] if i < len(node.outputs) else None
    return None if t is None or t.shape == (0,) else t


def attention_cost(node: OpNode, s: CountSettings, *, bh: int, q_len: int, kv_len: int, head_dim: int,
                   v_head_dim: int, causal: bool, past: tuple[int, ...] = (), present: tuple[int, ...] = (),
                   window: int = 0, extra: Cost | None = None, align: str = "bottom_right", mask: bool = False) -> Cost:
    """Cost of an attention *node* under settings *s*; *past* / *present* are the input / output positions of the
    KV cache; *align* places the causal diagonal (see :func:`~graphroof.counters.formulas.causal_pairs`);
    *mask*: a mask is added to the scores (one vector FLOP per score)."""
    if causal and window and s.causal == "kernel":
        pairs = windowed_pairs(q_len, kv_len, window)
    else:
        pairs = attention_pairs(q_len, kv_len, causal, s.causal, align)
    matrix = FLOPS_PER_MAC * bh * pairs * (head_dim + v_head_dim)
    vector = (SOFTMAX_FLOPS_PER_ELEMENT + 1 + (1 if mask else 0)) * bh * pairs
    ins = [(_kv(t) if i in past else t) for i, t in enumerate(node.inputs)]
    outs = [(_kv(t) if i in present else t) for i, t in enumerate(node.outputs)]
    c = io_cost(node, matrix_flops=matrix, vector_flops=vector, inputs=ins, outputs=outs) + (extra or Cost())
    if s.attention == "naive":
        q = req(node, 0)
        scores = math.ceil(bh * q_len * kv_len * q.itemsize_bits / 8)
        c = c + Cost(act_write_bytes=2 * scores, act_read_bytes=2 * scores)
    return c


def _seq(t: TensorSpec, axis_4d: int = 2, axis_3d: int = 1) -> int:
    return int(t.shape[axis_4d] if len(t.shape) == 4 else t.shape[axis_3d])


def onnx_attention(node: OpNode, settings: CountSettings = DEFAULT) -> Cost:
    """(Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen): Q [B, Hq, S, D] or [B, S, Hq*D]
    (``q_num_heads``); kv length = present_key's (past + new).  ``is_causal`` lets query i see keys
    ``j <= i + offset`` with offset = the cached keys: bottom-right aligned with a cache (past_key or
    nonpad_kv_seqlen), top-left (offset 0) without one, as the ONNX spec and reference implementation."""
    q, k, v = req(node, 0), req(node, 1), req(node, 2).dims
    a = node.attrs
    if q.rank == 4:
        b, hq, sq, d = q.dims
    else:
        b, sq, hidden = q.dims
        hq = int(a["q_num_heads"])
        d = hidden // hq
    dv = v[3] if len(v) == 4 else v[2] // int(a.get("kv_num_heads") or a["q_num_heads"])
    pk = _present(node, 1)
    past = node.input(4)
    kv_len = pk.dims[2] if pk is not None else _seq(k) + (past.dims[2] if past is not None else 0)
    cached = past is not None or node.input(6) is not None
    return attention_cost(node, settings, bh=b * hq, q_len=sq, kv_len=kv_len, head_dim=d, v_head_dim=dv,
                          causal=bool(a.get("is_causal", 0)), past=(4, 5), present=(1, 2),
                          align="bottom_right" if cached else "top_left", mask=node.input(3) is not None)


def ms_attention(node: OpNode, settings: CountSettings = DEFAULT) -> Cost:
    """(input [B,S,Hin], weights [Hin, Dq+Dk+Dv], bias, mask_index, past [2,B,N,P,H], ...): the packed QKV
    projection ``2*B*S*Hin*(Dq+Dk+Dv)`` (+ bias add), then attention; ``unidirectional`` = causal."""
    x, w = req(node, 0).dims, req(node, 1).dims
    n = int(node.attrs["num_heads"])
    sizes = tuple(node.attrs.get("qkv_hidden_sizes") or ()) or (w[1] // 3,) * 3
    b, s = x[0], x[1]
    tokens = b * s
    proj = Cost(matrix_flops=FLOPS_PER_MAC * tokens * x[-1] * w[1],
                vector_flops=tokens * w[1] if node.input(2) is not None else 0)
    present, past = _present(node, 1), node.input(4)
    kv_len = present.dims[3] if present is not None else s + (past.dims[3] if past is not None else 0)
    return attention_cost(node, settings, bh=b * n, q_len=s, kv_len=kv_len, head_dim=sizes[0] // n, v_head_dim=sizes[2] // n,
                          causal=bool(node.attrs.get("unidirectional", 0)), past=(4,), present=(1,), extra=proj)


def ms_multi_head_attention(node: OpNode, settings: CountSettings = DEFAULT) -> Cost:
    """(query, key, value, bias, key_padding_mask, attention_bias, past_key, past_value, ...): query
    [B,S,D] or packed QKV [B,S,N,3,H]; key [B,L,D], [B,N,L,H] or packed KV [B,L,N,2,H]; bias adds one FLOP
    per Q/K/V element; ``unidirectional`` = causal."""
    q, k, v = req(node, 0), node.input(1), node.input(2)
    n = int(node.attrs["num_heads"])
    b, s = q.dims[0], q.dims[1]
    d = q.dims[-1] if q.rank == 5 else q.dims[-1] // n
    dv = node.outputs[0].dims[-1] // n
    if k is None:
        new_kv = s
    else:
        new_kv = k.dims[2] if k.rank == 4 else k.dims[1]
    pk, past = _present(node, 1), node.input(6)
    kv_len = pk.dims[2] if pk is not None else new_kv + (past.dims[2] if past is not None else 0)
    bias = node.input(3)
    extra = Cost(vector_flops=sum(t.numel for t in (q, k, v) if t is not None)) if bias is not None else Cost()
    return attention_cost(node, settings, bh=b * n, q_len=s, kv_len=kv_len, head_dim=d, v_head_dim=dv,
                          causal=bool(node.attrs.get("unidirectional", 0)), past=(6, 7), present=(1, 2), extra=extra)


def _cache_rows(cache: TensorSpec | None, rows: int) -> TensorSpec | None:
    """The part of a cos / sin cache a rotary op reads: *rows* rows (capped at the cache)."""
    if cache is None:
        return None
    width = cache.dims[-1] if cache.shape else 1
    n = min(cache.numel, rows * width)
    return replace(cache, shape=(n,))


def ms_group_query_attention(node: OpNode, settings: CountSettings = DEFAULT) -> Cost:
    """(query, key, value, past_key, past_value, seqlens_k, total_sequence_length, cos_cache, sin_cache, ...):
    always causal, ``local_window_size`` limits the keys each query sees; kv length = past_key's + new tokens;
    ``do_rotary`` adds rotary on Q and K (3 FLOPs per rotated element, cos / sin rows read per token)."""
    q, out = req(node, 0), node.outputs[0]
    n, nkv = int(node.attrs["num_heads"]), int(node.attrs["kv_num_heads"])
    b, s = q.dims[0], q.dims[1]
    h = out.dims[-1] // n
    pk, past, key = _present(node, 1), node.input(3), node.input(1)
    new_kv = key.dims[1] if key is not None else s
    # past + new tokens (present_key's declared length is often the past buffer's: the real total is a run-time
    # input, total_sequence_length); with no past, present's length
    kv_len = new_kv + past.dims[2] if past is not None else (pk.dims[2] if pk is not None else new_kv)
    extra = Cost()
    cos = node.input(7)
    if node.attrs.get("do_rotary") and cos is not None:
        rot = 2 * cos.dims[-1]
        extra = Cost(vector_flops=ROTARY_FLOPS_PER_ELEMENT * b * s * (n + nkv) * rot)
        node = replace(node, inputs=tuple(_cache_rows(t, b * s) if i in (7, 8) else t
                                          for i, t in enumerate(node.inputs)))
    window = int(node.attrs.get("local_window_size", -1))
    return attention_cost(node, settings, bh=b * n, q_len=s, kv_len=kv_len, head_dim=h, v_head_dim=h, causal=True,
                          past=(3, 4), present=(1, 2), window=max(0, window), extra=extra)


def rotary_embedding(node: OpNode) -> Cost:
    """``x * cos + rotate(x) * sin`` on the first ``rotary_embedding_dim`` of each head (all of it when 0):
    3 FLOPs per rotated element; the cos / sin caches are read in the rows the positions select.

    ONNX: (X, cos_cache, sin_cache, position_ids); com.microsoft: (input, position_ids, cos_cache, sin_cache).
    X is [B, H, S, D] or [B, S, hidden] (``num_heads`` gives D).
    """
    x = req(node, 0)
    ms = node.op.startswith("com.microsoft")
    cos_i, sin_i = (2, 3) if ms else (1, 2)
    n_heads = int(node.attrs.get("num_heads", 0) or 0)
    xd = x.dims
    if len(xd) == 4:
        b, s, d = xd[0], xd[2], xd[3]
    else:
        b, s = xd[0], xd[1]
        cos = node.input(cos_i)
        d = xd[-1] // n_heads if n_heads else (2 * cos.dims[-1] if cos is not None else xd[-1])
    rot = int(node.attrs.get("rotary_embedding_dim", 0) or 0) or d
    rotated = x.numel * min(rot, d) // d
    node = replace(node, inputs=tuple(_cache_rows(t, b * s) if i in (cos_i, sin_i) else t
                                      for i, t in enumerate(node.inputs)))
    return io_cost(node, vector_flops=ROTARY_FLOPS_PER_ELEMENT * rotated)


def linear_attention(node: OpNode) -> Cost:
    """ONNX LinearAttention (query [B,T,Hq*dk], key [B,T,Hkv*dk], value [B,T,Hkv*dv], past_state [B,Hkv,dk,dv],
    decay, beta), counted as its recurrence, per token:

    * per KV head, the state update: rank-1 ``k (x) v`` added into S, ``2 dk dv`` (matrix); ``delta`` /
      ``gated_delta`` first read S^T k (``2 dk dv``, matrix) and form ``beta * (v - S^T k)`` (``2 dv``, vector);
      ``gated`` / ``gated_delta`` scale S by ``exp(g)`` (``dk dv``, vector) and take the exp of every decay value;
    * per query head, the read-out ``q^T S`` (``2 dk dv``, matrix) and its scaling (``dv``, vector).

    The states are KV-cache reads / writes (the recurrence's cache)."""
    q, v = node.inputs[0], node.inputs[2]
    assert q is not None and v is not None
    a = node.attrs
    hq, hkv = int(a["q_num_heads"]), int(a["kv_num_heads"])
    b, t = int(q.shape[0]), int(q.shape[1])
    dk, dv = int(q.shape[-1]) // hq, int(v.shape[-1]) // hkv
    rule = str(a.get("update_rule", "gated_delta"))
    delta, gated = "delta" in rule, rule.startswith("gated")
    upd_m = FLOPS_PER_MAC * dk * dv * (2 if delta else 1)
    upd_v = (2 * dv if delta else 0) + (dk * dv if gated else 0)
    decay = node.input(4)
    exps = decay.numel if gated and decay is not None else 0
    tokens = b * t
    matrix = tokens * (hkv * upd_m + hq * FLOPS_PER_MAC * dk * dv)
    vector = tokens * (hkv * upd_v + hq * dv) + exps
    ins = [(_kv(x) if i == 3 else x) for i, x in enumerate(node.inputs)]
    outs = [(_kv(x) if i == 1 else x) for i, x in enumerate(node.outputs)]
    return io_cost(node, matrix_flops=matrix, vector_flops=vector, inputs=ins, outputs=outs)


def latent_attention(node: OpNode, settings: CountSettings = DEFAULT) -> Cost:
    """``graphroof.mla_decode(q [B, H, S, R + r], latent [B, 1, P, R], rope [B, 1, P, r])``: multi-head latent
    attention with ``kv_b_proj`` absorbed (:mod:`graphroof.llm.mla`), as FlashMLA runs a decode step.  Scores over
    the latent + rope key (width ``R + r``) and the weighted sum of latents (width ``R``): ``2 * B*H * S*P *
    (2R + r)`` matrix FLOPs (S = 1 at decode: every query sees all P keys); the cache rows (latent and rope key,
    shared by all heads: one KV "head") are read once, the output ``[B, H, S, R]`` written once."""
    q, latent, rope = req(node, 0).dims, req(node, 1).dims, req(node, 2).dims
    bh, lq = prod(q[:-2]), q[-2]
    return attention_cost(node, settings, bh=bh, q_len=lq, kv_len=latent[-2],
                          head_dim=latent[-1] + rope[-1], v_head_dim=latent[-1], causal=False)


ROWS = (
    #   member        ATen keys   ONNX keys                                     rule
    Row("sdpa",       SDPA_KEYS,  onnx("Attention"),                            sdpa, onnx_rule=onnx_attention),
    Row("ms_attention", (),       ms("Attention"),                              ms_attention),
    Row("multi_head_attention", (), ms("MultiHeadAttention"),                   ms_multi_head_attention),
    Row("group_query_attention", (), ms("GroupQueryAttention"),                 ms_group_query_attention),
    Row("rotary",     (),         onnx("RotaryEmbedding") + ms("RotaryEmbedding"), rotary_embedding),
    Row("linear_attention", (),   onnx("LinearAttention"),                      linear_attention),
    Row("latent_attention", ("graphroof.mla_decode",), (),                      latent_attention),
)

register_family("attention", ROWS)
