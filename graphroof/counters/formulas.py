"""Pure arithmetic shared by every frontend's rules.  No graph types, no torch, no onnx.

Modelling constants live here, named, so reports and tests can cite them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from .cost import FLOPS_PER_MAC

__all__ = [
    "SOFTMAX_FLOPS_PER_ELEMENT", "NORM_FLOPS_PER_ELEMENT", "prod", "matmul_flops", "conv_flops",
    "causal_pairs", "attention_pairs", "sdpa_flops", "broadcast_shape",
]

#: Softmax per element: max-reduce, subtract, exp, sum-reduce, divide = 5 vector FLOPs (a stated model;
#: exp counted as one FLOP as on GPUs' special-function units).
SOFTMAX_FLOPS_PER_ELEMENT = 5
#: LayerNorm per element: mean (1), subtract (1), square+sum for variance (2), normalize (1), scale+shift (2)
#: = 7 vector FLOPs; RMSNorm drops the mean, subtract and shift: square+sum (2), normalize (1), scale (1) = 4.
NORM_FLOPS_PER_ELEMENT = {"layer_norm": 7, "rms_norm": 4, "batch_norm": 4, "group_norm": 7, "instance_norm": 7}


def prod(xs: Iterable[int]) -> int:
    return math.prod(int(x) for x in xs)


def matmul_flops(m: int, n: int, k: int, batch: int = 1) -> int:
    """[batch, m, k] @ [batch, k, n]: ``2 * batch * m * n * k``."""
    return FLOPS_PER_MAC * batch * m * n * k


def conv_flops(out_elems: int, in_channels_per_group: int, kernel_elems: int) -> int:
    """Each output element is a dot product of ``cin/groups * prod(kernel)`` terms.

    ``out_elems = N * Cout * prod(out_spatial)``; FLOPs = ``2 * out_elems * (Cin/groups) * prod(kernel)``.
    Transposed convs use the same formula on their *input* elements (each input pixel scatters a kernel).
    """
    return FLOPS_PER_MAC * out_elems * in_channels_per_group * kernel_elems


def causal_pairs(q_len: int, kv_len: int, align: str = "bottom_right") -> int:
    """(query, key) pairs a causal kernel computes.

    ``bottom_right`` (KV-cache convention, as flash-attn): query i (0-based) sees keys ``0 .. kv_len-q_len+i``,
    so pairs = ``q_len*(kv_len-q_len) + q_len*(q_len+1)/2`` (for q_len <= kv_len).
    ``top_left`` (torch SDPA ``is_causal`` mask ``tril(ones(L, S))``): query i sees keys ``0 .. min(i, S-1)``.
    """
    if align == "bottom_right":
        q = min(q_len, kv_len)  # with q_len > kv_len the first rows see no key and are skipped
        return q * (kv_len - q) + q * (q + 1) // 2
    m = min(q_len, kv_len)
    return m * (m + 1) // 2 + max(0, q_len - kv_len) * kv_len


def attention_pairs(q_len: int, kv_len: int, causal: bool, causal_mode: str = "kernel",
                    align: str = "bottom_right") -> int:
    """Score entries computed per (batch, head).

    ``causal_mode="kernel"`` counts what a causal kernel does (about half the square);
    ``"full"`` counts the full ``q_len * kv_len`` square, as FlopCounterMode and most calculators do.
    """
    if not causal or causal_mode == "full":
        return q_len * kv_len
    return causal_pairs(q_len, kv_len, align)


def sdpa_flops(batch_heads: int, q_len: int, kv_len: int, head_dim: int, v_head_dim: int | None = None,
               *, causal: bool = False, causal_mode: str = "kernel", align: str = "bottom_right") -> tuple[int, int]:
    """(matrix_flops, vector_flops) of softmax(Q K^T * scale) V.

    matrix: ``2 * BH * pairs * d`` (Q K^T) + ``2 * BH * pairs * dv`` (P V);
    vector: softmax ``SOFTMAX_FLOPS_PER_ELEMENT * BH * pairs`` + scaling ``BH * pairs``.
    """
    dv = head_dim if v_head_dim is None else v_head_dim
    pairs = attention_pairs(q_len, kv_len, causal, causal_mode, align)
    matrix = FLOPS_PER_MAC * batch_heads * pairs * (head_dim + dv)
    vector = (SOFTMAX_FLOPS_PER_ELEMENT + 1) * batch_heads * pairs
    return matrix, vector


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """Numpy broadcasting of int shapes."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        big = [d for d in dims if d != 1]
        out.append(max(big) if big else 1)
    return tuple(out)
