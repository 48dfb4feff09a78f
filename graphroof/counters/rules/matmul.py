"""Matmul family: mm / bmm / matmul / linear / addmm and ONNX MatMul / Gemm / FusedMatMul, grouped (MoE) GEMMs,
einsum.  (Quantized products live in :mod:`.quant`, convolutions in :mod:`.conv`.)

Every output element of a product is a dot product over the contracted length ``k``: ``FLOPS_PER_MAC * m * n * k``
matrix FLOPs per batch (:func:`~graphroof.counters.formulas.matmul_flops`).  ``beta * C + alpha * (A @ B)``
(ATen addmm, ONNX Gemm) adds one vector FLOP per output element for the add (when ``beta != 0`` and C is given)
and one for each of ``alpha`` / ``beta`` that is not 1 (:func:`gemm_vector_flops`).  Bytes: every input read
once, the output written once (unfused).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...graph import OpNode
from ..common import io_cost, read_bytes, req
from ..cost import FLOPS_PER_MAC, Cost
from ..family import Row, aten, ms, onnx, register_family
from ..formulas import broadcast_shape, einsum_flops, matmul_flops, prod

__all__ = ["GROUPED_OPS", "ROWS", "expected_experts", "experts_visited", "gemm_vector_flops", "matmul_dims", "onnx_product"]


def matmul_dims(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int, int, int]:
    """(batch, m, n, k) of numpy ``matmul(a, b)``; 1-D operands get the 1 numpy inserts."""
    if len(a) == 1:
        a = (1, *a)
    if len(b) == 1:
        b = (*b, 1)
    return prod(broadcast_shape(a[:-2], b[:-2])), a[-2], b[-1], a[-1]


def gemm_vector_flops(out_numel: int, has_c: bool, alpha: float | None = 1, beta: float | None = 1) -> int:
    """``beta * C + alpha * P``: one add per output element when C is added (given, ``beta != 0``), one more
    multiply when ``beta != 1``, and one when ``alpha != 1``."""
    def scaled(v: float | None) -> int:
        return 0 if v in (1, 1.0, None) else 1

    add = has_c and beta not in (0, 0.0)
    return out_numel * ((1 + scaled(beta)) if add else 0) + out_numel * scaled(alpha)


def onnx_product(node: OpNode, ai: int, bi: int, trans_a: bool = False, trans_b: bool = False,
                 bias_i: int | None = None) -> Cost:
    """``A' @ B'`` of inputs *ai*, *bi* (last two dims swapped when transposed), a bias add when input *bias_i*
    is given."""
    a, b = req(node, ai).dims, req(node, bi).dims
    if trans_a and len(a) >= 2:
        a = (*a[:-2], a[-1], a[-2])
    if trans_b and len(b) >= 2:
        b = (*b[:-2], b[-1], b[-2])
    batch, m, n, k = matmul_dims(a, b)
    has_c = bias_i is not None and node.input(bias_i) is not None
    return io_cost(node, matrix_flops=matmul_flops(m, n, k, batch),
                   vector_flops=gemm_vector_flops(node.outputs[0].numel, has_c))


def expected_experts(experts: int, top_k: int, tokens: int) -> float:
    """``E * (1 - (1 - k/E)^T)``: expected distinct experts visited by *tokens* tokens routed uniformly to
    *top_k* distinct experts each out of *experts* (uniform routing: one token misses a given expert with probability ``1 - k/E``, all T miss it with
    ``(1 - k/E)^T``; see :mod:`graphroof.frontends.moe`)."""
    if experts < 1 or top_k < 1 or tokens < 0:
        raise ValueError(f"expected_experts: need E >= 1, k >= 1, T >= 0; got E={experts}, k={top_k}, T={tokens}")
    k = min(top_k, experts)
    return experts * (1.0 - (1.0 - k / experts) ** tokens)


def experts_visited(attrs: Mapping[str, Any]) -> float | None:
    """Experts a grouped GEMM's step visits from the node's routing facts, or None when it has none.

    The ``moe_experts_touched`` override wins (capped at ``E``); otherwise :func:`expected_experts`.
    """
    e = attrs.get("moe_experts")
    if not e:
        return None
    override = attrs.get("moe_experts_touched")
    if override is not None:
        return min(float(override), float(e))
    k, t = attrs.get("moe_top_k"), attrs.get("moe_tokens")
    if not k or t is None:
        return None
    return expected_experts(int(e), int(k), int(t))


# -- adapters ----------------------------------------------------------------------------------------------

def product(node: OpNode) -> Cost:
    """ATen ``a @ b``: ``2 * out_numel * a.shape[-1]`` (mm [m,k]x[k,n]: 2*m*n*k; matmul broadcasts batch dims;
    ``inner`` contracts the last dims of both)."""
    a = req(node, 0)
    k = a.dims[-1] if a.rank else 1
    return io_cost(node, matrix_flops=FLOPS_PER_MAC * node.outputs[0].numel * k)


def onnx_matmul(node: OpNode) -> Cost:
    """ONNX MatMul [..., m, k] @ [..., k, n]: ``2 * batch * m * n * k``."""
    return onnx_product(node, 0, 1)


def linear(node: OpNode) -> Cost:
    """``x [..., k] @ W[n, k]^T + b``: ``2 * (numel(x)/k) * n * k`` matrix, ``numel(out)`` vector for the bias."""
    x, w = req(node, 0), req(node, 1)
    out = node.outputs[0]
    k = x.dims[-1] if x.rank else 1
    n = w.dims[0] if w.rank == 2 else 1
    rows = out.numel // n if n else 0
    return io_cost(node, matrix_flops=FLOPS_PER_MAC * rows * n * k,
                   vector_flops=gemm_vector_flops(out.numel, node.input(2) is not None))


def addmm(node: OpNode) -> Cost:
    """ATen ``beta * self + alpha * (m1 @ m2)`` (inputs self, m1, m2).  ``addbmm`` sums the batch of products
    into one [m, n] output (contraction ``b * k``); ``addr`` is an outer product (k = 1)."""
    m1, out = req(node, 1), node.outputs[0]
    if node.op == "aten.addr":
        k = 1
    elif node.op == "aten.addbmm":
        k = m1.dims[0] * m1.dims[-1]
    else:
        k = m1.dims[-1]
    vector = gemm_vector_flops(out.numel, True, node.attrs.get("alpha", 1), node.attrs.get("beta", 1))
    return io_cost(node, matrix_flops=FLOPS_PER_MAC * out.numel * k, vector_flops=vector)


def gemm(node: OpNode) -> Cost:
    """ONNX ``alpha * A' B' + beta * C`` (inputs A, B, C; transA / transB); FusedGemm adds its activation."""
    a = node.attrs
    ta, tb = bool(a.get("transA", 0)), bool(a.get("transB", 0))
    c = onnx_product(node, 0, 1, ta, tb)
    out = node.outputs[0].numel
    vector = gemm_vector_flops(out, node.input(2) is not None, a.get("alpha", 1), a.get("beta", 1))
    if node.op == "com.microsoft.FusedGemm" and a.get("activation"):
        vector += out
    return c + Cost(vector_flops=vector)


def fused_matmul(node: OpNode) -> Cost:
    """com.microsoft FusedMatMul: MatMul with ``transA`` / ``transB`` and a scalar ``alpha`` (folded, no FLOPs)."""
    return onnx_product(node, 0, 1, bool(node.attrs.get("transA", 0)), bool(node.attrs.get("transB", 0)))


def grouped_mm(node: OpNode) -> Cost:
    """Grouped GEMM (MoE experts): each row of ``a`` is multiplied by the weight of its group only.

    ``a [S, K] x b [G, K, N] -> [S, N]`` (offsets split the S rows among the G groups): ``2 * S * N * K``
    (the FLOPs of the rows routed, whatever the routing).  Weight bytes: a grouped kernel loads only the groups
    that receive rows.  When the node carries routing facts (:func:`graphroof.frontends.moe.mark_moe_routing`:
    ``moe_experts`` E, ``moe_top_k`` k, ``moe_tokens`` T, or a ``moe_experts_touched`` override), ``b`` is read
    for the expected ``E * (1 - (1 - k/E)^T)`` distinct experts visited, i.e. ``nbytes(b) * visited / E``;
    without them the whole ``b`` is read (every expert assumed visited).  ``[G, M, K] x [G, K, N]``: batched.
    ``a [M, K] x b [K, N]`` with offsets splitting K: ``2 * M * N * K`` into ``[G, M, N]``.
    """
    a, b = req(node, 0), req(node, 1)
    if a.rank == 2 and b.rank == 2:
        flops = FLOPS_PER_MAC * a.dims[0] * a.dims[1] * b.dims[1]
    else:
        flops = FLOPS_PER_MAC * node.outputs[0].numel * a.dims[-1]
    visited = experts_visited(node.attrs) if b.rank == 3 else None
    if visited is None:
        return io_cost(node, matrix_flops=flops)
    frac = min(1.0, visited / b.dims[0])
    rest = io_cost(node, matrix_flops=flops, inputs=[t for i, t in enumerate(node.inputs) if i != 1])
    part = read_bytes([b])
    return rest + Cost(weight_bytes=part["weight_bytes"] * frac, act_read_bytes=part["act_read_bytes"] * frac,
                       kv_read_bytes=part["kv_read_bytes"] * frac)


def einsum(node: OpNode) -> Cost:
    """``attrs["equation"]`` (the same in ATen and ONNX); operands are the inputs.  See
    :func:`~graphroof.counters.formulas.einsum_flops` (contracted left to right, pairwise)."""
    shapes = [t.dims for t in node.inputs if t is not None]
    matrix, vector = einsum_flops(str(node.attrs["equation"]), shapes)
    return io_cost(node, matrix_flops=matrix, vector_flops=vector)


def det(node: OpNode) -> Cost:
    """Determinant of X [..., n, n] by LU elimination, per matrix: step j (of n - 1) divides the ``n - j`` entries
    below the pivot (vector) and updates the ``(n - j)^2`` trailing block (a multiply-add each, matrix), then the
    ``n - 1`` multiplies of the diagonal product.  Matrix ``2 * sum (n-j)^2 = 2 * (n-1) n (2n-1) / 6`` (~ 2n^3/3),
    vector ``n (n-1) / 2 + n - 1``."""
    x = req(node, 0)
    n = int(x.shape[-1])
    batch = prod(int(d) for d in x.shape[:-2])
    matrix = FLOPS_PER_MAC * (n - 1) * n * (2 * n - 1) // 6
    vector = n * (n - 1) // 2 + max(n - 1, 0)
    return io_cost(node, matrix_flops=batch * matrix, vector_flops=batch * vector)


#: grouped GEMM ops over 3-D expert weights (MoE experts): PyTorch's grouped_mm and transformers' fallback loop
GROUPED_OPS = aten("_grouped_mm", "grouped_mm") + ("transformers.grouped_mm_fallback",)

ROWS = (
    #   member        ATen keys                                                 ONNX keys
    Row("matmul",     aten("mm", "bmm", "matmul", "mv", "dot", "vdot", "inner"), onnx("MatMul"),
        product, onnx_rule=onnx_matmul),
    Row("linear",     aten("linear"),                                            (),  linear),
    Row("gemm",       aten("addmm", "baddbmm", "addmv", "addbmm", "addr"),       onnx("Gemm") + ms("FusedGemm"),
        addmm, onnx_rule=gemm),
    Row("fused_matmul", (),                                                      ms("FusedMatMul"), fused_matmul),
    Row("grouped_mm", GROUPED_OPS,                                              (),  grouped_mm),
    Row("einsum",     aten("einsum"),                                            onnx("Einsum"), einsum),
    Row("det",        aten("linalg_det", "_linalg_det", "det"),                  onnx("Det"),    det),
)

register_family("matmul", ROWS)
