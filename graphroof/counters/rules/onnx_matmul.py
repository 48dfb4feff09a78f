"""ONNX matrix ops: MatMul, Gemm, Einsum, Conv, ConvTranspose, LSTM / GRU / RNN and their quantized /
``com.microsoft`` forms.

FLOPs are ``FLOPS_PER_MAC`` per multiply-add on the matrix units; a bias add is one vector FLOP per output
element.  Bytes are the tensors' real sizes in their real dtypes (an int4 ``MatMulNBits`` weight is its packed
uint8 blob), read once and written once (unfused).
"""

from __future__ import annotations

import re

from ...errors import RuleError
from ...graph import OpNode, TensorSpec
from ..common import io_cost
from ..cost import FLOPS_PER_MAC, Cost
from ..formulas import broadcast_shape, conv_flops, matmul_flops, prod
from ..registry import register_rule

__all__ = ["matmul_dims", "einsum_flops"]


def _req(node: OpNode, i: int) -> TensorSpec:
    t = node.input(i)
    if t is None:
        raise RuleError(f"{node.op}: input {i} is missing")
    return t


def matmul_dims(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int, int, int]:
    """(batch, m, n, k) of numpy ``matmul(a, b)``; 1-D operands get the 1 numpy inserts."""
    if len(a) == 1:
        a = (1, *a)
    if len(b) == 1:
        b = (*b, 1)
    return prod(broadcast_shape(a[:-2], b[:-2])), a[-2], b[-1], a[-1]


def _mm(node: OpNode, ai: int, bi: int, trans_a: bool = False, trans_b: bool = False,
        bias_i: int | None = None) -> Cost:
    a, b = tuple(_req(node, ai).shape), tuple(_req(node, bi).shape)
    if trans_a and len(a) >= 2:
        a = (*a[:-2], a[-1], a[-2])
    if trans_b and len(b) >= 2:
        b = (*b[:-2], b[-1], b[-2])
    batch, m, n, k = matmul_dims(a, b)
    vec = node.outputs[0].numel if bias_i is not None and node.input(bias_i) is not None else 0
    return io_cost(node, matrix_flops=matmul_flops(m, n, k, batch), vector_flops=vec)


@register_rule("onnx.MatMul", "onnx.MatMulInteger", "com.microsoft.MatMulInteger16")
def matmul(node: OpNode) -> Cost:
    """[..., m, k] @ [..., k, n]: ``2 * batch * m * n * k``."""
    return _mm(node, 0, 1)


@register_rule("onnx.QLinearMatMul")
def qlinear_matmul(node: OpNode) -> Cost:
    """Inputs (a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): the int8 product of a and b."""
    return _mm(node, 0, 3)


@register_rule("com.microsoft.MatMulIntegerToFloat")
def matmul_integer_to_float(node: OpNode) -> Cost:
    """(A, B, a_scale, b_scale, a_zp, b_zp, bias): int8 product, scaled to float, optional bias add."""
    return _mm(node, 0, 1, bias_i=6)


@register_rule("com.microsoft.DynamicQuantizeMatMul")
def dynamic_quantize_matmul(node: OpNode) -> Cost:
    """(A float, B int8, b_scale, b_zp, bias): quantize A (5 FLOPs per element, as DynamicQuantizeLinear), int8 GEMM."""
    c = _mm(node, 0, 1, bias_i=4)
    return c + Cost(vector_flops=5 * _req(node, 0).numel)


@register_rule("com.microsoft.FusedMatMul")
def fused_matmul(node: OpNode) -> Cost:
    """MatMul with ``transA`` / ``transB`` (last two dims swapped) and a scalar ``alpha`` (folded, no FLOPs)."""
    return _mm(node, 0, 1, bool(node.attrs.get("transA", 0)), bool(node.attrs.get("transB", 0)))


@register_rule("onnx.Gemm", "com.microsoft.FusedGemm")
def gemm(node: OpNode) -> Cost:
    """``alpha * A' B' + beta * C``: ``2*M*N*K`` matrix FLOPs, plus ``M*N`` vector FLOPs when C is given."""
    c = _mm(node, 0, 1, bool(node.attrs.get("transA", 0)), bool(node.attrs.get("transB", 0)), bias_i=2)
    if node.op == "com.microsoft.FusedGemm" and node.attrs.get("activation"):
        c = c + Cost(vector_flops=node.outputs[0].numel)
    return c


@register_rule("com.microsoft.QGemm")
def qgemm(node: OpNode) -> Cost:
    """(A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp) with transA / transB: an int8 Gemm."""
    return _mm(node, 0, 3, bool(node.attrs.get("transA", 0)), bool(node.attrs.get("transB", 0)), bias_i=6)


@register_rule("com.microsoft.MatMulNBits", "com.microsoft.MatMulBnb4")
def matmul_nbits(node: OpNode) -> Cost:
    """A [..., K] @ dequant(B) with B packed to ``bits`` bits: ``2 * M * N * K`` (attrs K, N); bias adds ``M*N``.

    The weight bytes are B's real packed size (``N * ceil(K / block_size) * blob`` uint8) plus its scales and
    zero points, not ``K * N`` at the activation dtype.
    """
    a = _req(node, 0)
    k, n = int(node.attrs["K"]), int(node.attrs["N"])
    m = a.numel // k if k else 0
    bias = node.input(5) if node.op.endswith("MatMulNBits") else None
    return io_cost(node, matrix_flops=matmul_flops(m, n, k), vector_flops=m * n if bias is not None else 0)


def _conv(node: OpNode, xi: int, wi: int, bias_i: int | None, transposed: bool = False) -> Cost:
    x, w, y = _req(node, xi), _req(node, wi), node.outputs[0]
    kernel = prod(w.shape[2:])
    if transposed:  # each input pixel scatters a (Cout/groups x kernel) patch: W is [Cin, Cout/groups, k...]
        flops = conv_flops(x.numel, w.shape[1], kernel)
    else:  # each output pixel is a dot product over (Cin/groups x kernel): W is [Cout, Cin/groups, k...]
        flops = conv_flops(y.numel, w.shape[1], kernel)
    vec = y.numel if bias_i is not None and node.input(bias_i) is not None else 0
    return io_cost(node, matrix_flops=flops, vector_flops=vec)


@register_rule("onnx.Conv")
def conv(node: OpNode) -> Cost:
    """(X, W, B): ``2 * numel(Y) * Cin/groups * prod(kernel)``; bias ``numel(Y)``."""
    return _conv(node, 0, 1, 2)


@register_rule("com.microsoft.FusedConv")
def fused_conv(node: OpNode) -> Cost:
    """(X, W, B, Z): Conv, + Z (sum input) and the activation, one vector FLOP per output element each."""
    c = _conv(node, 0, 1, 2)
    y = node.outputs[0].numel
    extra = (y if node.input(3) is not None else 0) + (y if node.attrs.get("activation") else 0)
    return c + Cost(vector_flops=extra)


@register_rule("onnx.ConvTranspose")
def conv_transpose(node: OpNode) -> Cost:
    """(X, W, B), W [Cin, Cout/groups, k...]: ``2 * numel(X) * Cout/groups * prod(kernel)``; bias ``numel(Y)``."""
    return _conv(node, 0, 1, 2, transposed=True)


@register_rule("onnx.ConvInteger")
def conv_integer(node: OpNode) -> Cost:
    """(x, w, x_zp, w_zp): an int8 Conv."""
    return _conv(node, 0, 1, None)


@register_rule("onnx.QLinearConv")
def qlinear_conv(node: OpNode) -> Cost:
    """(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B): an int8 Conv with an int32 bias."""
    return _conv(node, 0, 3, 8)


_TERM = re.compile(r"\.\.\.|[A-Za-z]")


def _letters(term: str, rank: int) -> list[str]:
    """Index names of one operand; ``...`` expands to ``…k`` names aligned from the right."""
    toks = _TERM.findall(term)
    if "..." not in toks:
        return toks
    i = toks.index("...")
    n_ell = rank - (len(toks) - 1)
    return [*toks[:i], *(f"…{n_ell - j}" for j in range(n_ell)), *toks[i + 1:]]


def einsum_flops(equation: str, shapes: list[tuple[int, ...]]) -> tuple[int, int, bool]:
    """(matrix_flops, vector_flops, estimated) of ``einsum(equation, *operands)``.

    Two operands: with a contracted index, ``2 * prod(every index size)`` (one multiply-add per index tuple);
    without one (outer / elementwise product), ``prod(every index size)`` multiplies.  One operand: the sums,
    ``prod(input indices) - prod(output indices)`` adds.  Three or more: ``2 * (n - 1) * prod(all)``, estimated
    (the real cost depends on the contraction order).
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise RuleError(f"Einsum {equation!r} names {len(terms)} operands but has {len(shapes)} inputs")
    sizes: dict[str, int] = {}
    counts: dict[str, int] = {}
    for term, shape in zip(terms, shapes):
        names = _letters(term, len(shape))
        if len(names) != len(shape):
            raise RuleError(f"Einsum term {term!r} does not match an input of rank {len(shape)}")
        for nm, d in zip(names, shape):
            sizes[nm] = max(sizes.get(nm, 1), int(d))
            counts[nm] = counts.get(nm, 0) + 1
    if arrow:
        out_rank = len([x for x in sizes if x.startswith("…")]) if "..." in rhs else 0
        out = set(_letters(rhs, len(_TERM.findall(rhs)) - ("..." in rhs) + out_rank))
    else:  # implicit output: indices used exactly once, and the ellipsis dims
        out = {nm for nm, c in counts.items() if c == 1 or nm.startswith("…")}
    every = prod(sizes.values())
    contracted = set(sizes) - out
    if len(shapes) == 1:
        return 0, (every - prod(sizes[x] for x in out)) if contracted else 0, False
    if len(shapes) == 2:
        return (FLOPS_PER_MAC * every, 0, False) if contracted else (0, every, False)
    return FLOPS_PER_MAC * (len(shapes) - 1) * every, 0, True


@register_rule("onnx.Einsum")
def einsum(node: OpNode) -> Cost:
    """See :func:`einsum_flops`; bytes are the operands and the result."""
    mat, vec, est = einsum_flops(str(node.attrs["equation"]), [tuple(t.shape) for t in node.inputs if t is not None])
    return io_cost(node, matrix_flops=mat, vector_flops=vec, estimated=est)


#: Recurrent cells: (gates G, vector FLOPs per hidden unit per step).  LSTM: 3 sigmoid gates (4 each) + 2 tanh
#: (1 each) + ``c = f*c + i*g`` (3) + ``h = o*tanh(c)`` (1) = 18; GRU: 2 sigmoid gates (8) + tanh (1) +
#: ``r * (R h)`` (1) + ``h = (1-z)*n + z*h`` (3) = 13; RNN: the activation (1).
RNN_CELLS: dict[str, tuple[int, int]] = {"LSTM": (4, 18), "GRU": (3, 13), "RNN": (1, 1)}


@register_rule("onnx.LSTM", "onnx.GRU", "onnx.RNN")
def recurrent(node: OpNode) -> Cost:
    """(X, W [D, G*H, I], R [D, G*H, H], B, ...): per step, batch row and direction the gate products
    ``2 * G*H * (I + H)``, the two bias adds ``2 * G*H`` when B is given, and the cell's per-unit math."""
    x, w = _req(node, 0), _req(node, 1)
    gates, per_unit = RNN_CELLS[node.op.split(".")[-1]]
    seq, batch = (x.shape[1], x.shape[0]) if node.attrs.get("layout", 0) else (x.shape[0], x.shape[1])
    d, gh, i = w.shape
    h = gh // gates
    steps = seq * batch * d
    bias = 2 * gh if node.input(3) is not None else 0
    return io_cost(node, matrix_flops=steps * FLOPS_PER_MAC * gh * (i + h), vector_flops=steps * (bias + per_unit * h))
