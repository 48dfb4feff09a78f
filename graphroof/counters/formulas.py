"""Pure arithmetic shared by every frontend's rules.  No graph types, no torch, no onnx.

Modelling constants live here, named, so reports and tests can cite them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from ..errors import RuleError
from .cost import FLOPS_PER_MAC

__all__ = [
    "NORM_FLOPS_PER_ELEMENT",
    "SOFTMAX_FLOPS_PER_ELEMENT",
    "attention_pairs",
    "broadcast_shape",
    "causal_pairs",
    "conv_flops",
    "einsum_flops",
    "indexed_read_bytes",
    "matmul_flops",
    "prod",
    "sdpa_flops",
    "windowed_pairs",
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


def indexed_read_bytes(selected_elems: int, itemsize_bits: int, table_nbytes: float) -> float:
    """Bytes a gather reads from its source: the selected elements, never more than the whole source.

    An embedding lookup of 1,000 ids from a [100, 8] fp32 table selects 1,000 * 8 * 4 = 32,000 bytes of rows,
    but the table holds only 100 * 8 * 4 = 3,200 bytes: repeated ids hit rows already read (at worst every row
    once), so the read is ``min(32,000, 3,200) = 3,200`` bytes.
    """
    return min(math.ceil(selected_elems * itemsize_bits / 8), table_nbytes)


_EINSUM_TOKEN = re.compile(r"\.\.\.|[A-Za-z]")


def _einsum_labels(term: str, rank: int) -> list[str]:
    """Index labels of one operand; ``...`` expands to ``…k`` labels aligned from the right."""
    toks = _EINSUM_TOKEN.findall(term)
    if "..." not in toks:
        return toks
    i = toks.index("...")
    n_ell = rank - (len(toks) - 1)
    return [*toks[:i], *(f"…{n_ell - j}" for j in range(n_ell)), *toks[i + 1:]]


def einsum_flops(equation: str, shapes: list[tuple[int, ...]]) -> tuple[int, int]:
    """(matrix_flops, vector_flops) of ``einsum(equation, *operands)``, contracted left to right, pairwise.

    Left to right is the order ``torch.einsum`` uses without opt_einsum and the one onnxruntime's Einsum uses; a
    path optimiser may choose another.  Each pairwise step that sums some label costs ``2 * prod(size of every
    label of the two operands)`` matrix FLOPs (one multiply-add per index tuple); a step summing nothing (outer /
    elementwise product) ``prod(...)`` vector multiplies; then only the labels still needed (by the output or a
    later operand) are kept.  One operand: the sums, ``prod(input labels) - prod(output labels)`` adds (the
    reduction convention).  ``"ij,jk,kl->il"`` on [8,16], [16,32], [32,4]: ij,jk->ik = 2*8*16*32 = 8,192, then
    ik,kl->il = 2*8*32*4 = 2,048: 10,240 matrix FLOPs.
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise RuleError(f"einsum {equation!r} names {len(terms)} operands but has {len(shapes)} inputs")
    size: dict[str, int] = {}
    counts: dict[str, int] = {}
    labels: list[list[str]] = []
    for term, shape in zip(terms, shapes):
        names = _einsum_labels(term, len(shape))
        if len(names) != len(shape):
            raise RuleError(f"einsum term {term!r} does not match an operand of rank {len(shape)}")
        labels.append(names)
        for nm, d in zip(names, shape):
            size[nm] = max(size.get(nm, 1), int(d))
            counts[nm] = counts.get(nm, 0) + 1
    if arrow:
        out = set(_EINSUM_TOKEN.findall(rhs)) - {"..."}
        if "..." in rhs:
            out |= {nm for nm in size if nm.startswith("…")}
    else:  # implicit output: labels used exactly once, and the ellipsis dims
        out = {nm for nm, c in counts.items() if c == 1 or nm.startswith("…")}

    def p(names: Iterable[str]) -> int:
        return prod(size[x] for x in names)

    if len(labels) == 1:
        contracted = set(labels[0]) - out
        return 0, (p(set(labels[0])) - p(out & set(labels[0]))) if contracted else 0
    matrix = vector = 0
    cur = list(dict.fromkeys(labels[0]))
    for i, nxt in enumerate(labels[1:], start=1):
        union = list(dict.fromkeys(cur + nxt))
        later = out.union(*labels[i + 1:])
        keep = [x for x in union if x in later]
        if len(keep) < len(union):
            matrix += FLOPS_PER_MAC * p(union)
        else:
            vector += p(union)
        cur = keep
    return matrix, vector
