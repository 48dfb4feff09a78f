"""Scaled dot-product attention, whole: ``aten.scaled_dot_product_attention`` and every backend variant
(flash, flash for CPU, memory-efficient, cuDNN, math, overrideable).  torch's FlopCounterMode has no formula for
the CPU flash variant; these rules count every variant alike.

Shapes: ``q [..., Hq, L, E]``, ``k [..., Hkv, S, E]``, ``v [..., Hkv, S, Ev]`` (``Hkv < Hq``: grouped-query
attention; K and V are read at their own size).  FLOPs: :func:`~graphroof.counters.formulas.sdpa_flops` over
``prod(q.shape[:-2])`` (batch x query heads), plus one vector add per score when a mask is added.

Settings (:mod:`graphroof.counters.settings`):

* ``causal``: ``is_causal=True`` is torch's top-left aligned mask (``tril(ones(L, S))``); ``"kernel"`` counts the
  (query, key) pairs such a kernel computes (about half the square), ``"full"`` the whole square.  An explicit
  mask is counted as the full square unless the frontend marked it causal (``attrs["mask_causal"]``, e.g. the
  masks transformers builds for a causal LM prompt, aligned bottom-right as with a KV cache).
* ``attention``: ``"flash"`` reads Q, K, V (and the mask) once and writes the output (scores stay on chip);
  ``"naive"`` also writes the score matrix S and the probabilities P and reads both back: ``4 * B*H*L*S``
  elements in the query's dtype (the unfused math path materialises the whole square even when causal).
"""

from __future__ import annotations

from ...graph import OpNode
from ..common import io_cost
from ..cost import Cost
from ..formulas import attention_pairs, prod, sdpa_flops
from ..registry import register_rule
from ..settings import current

SDPA_KEYS = (
    "aten.scaled_dot_product_attention", "aten._scaled_dot_product_flash_attention",
    "aten._scaled_dot_product_flash_attention_for_cpu", "aten._scaled_dot_product_efficient_attention",
    "aten._scaled_dot_product_cudnn_attention", "aten._scaled_dot_product_attention_math",
    "aten._scaled_dot_product_fused_attention_overrideable", "aten._scaled_dot_product_attention_math_for_mps",
)


def attention_shape(node: OpNode) -> tuple[int, int, int, int, int]:
    """(batch_heads, q_len, kv_len, head_dim, v_head_dim) from q, k, v (inputs 0-2)."""
    q, k, v = node.inputs[0], node.inputs[1], node.inputs[2]
    return prod(q.shape[:-2]), q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]


def attention_mask(node: OpNode):
    """The explicit mask / bias tensor (input 3 in every variant that takes one), or None."""
    return node.input(3)


@register_rule(*SDPA_KEYS)
def sdpa_cost(node: OpNode) -> Cost:
    settings = current()
    bh, lq, lk, e, ev = attention_shape(node)
    mask = attention_mask(node)
    if node.attrs.get("is_causal"):
        causal, align = True, "top_left"
    elif mask is not None and node.attrs.get("mask_causal"):
        causal, align = True, str(node.attrs.get("mask_align", "bottom_right"))
    else:
        causal, align = False, "top_left"
    matrix, vector = sdpa_flops(bh, lq, lk, e, ev, causal=causal, causal_mode=settings.causal, align=align)
    if mask is not None:
        vector += bh * attention_pairs(lq, lk, causal, settings.causal, align)
    cost = io_cost(node, matrix_flops=matrix, vector_flops=vector)
    if settings.attention == "naive":
        scores = bh * lq * lk * node.inputs[0].itemsize_bits // 8
        cost = cost + Cost(act_read_bytes=2 * scores, act_write_bytes=2 * scores)
    return cost
