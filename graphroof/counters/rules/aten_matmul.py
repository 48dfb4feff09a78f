"""ATen matrix products: mm, bmm, matmul, linear, addmm / baddbmm, einsum, grouped (MoE) GEMMs.

Every output element of a product is a dot product over the contracted length ``k``, so a product costs
``FLOPS_PER_MAC * out_numel * k`` matrix FLOPs whatever its batch / broadcast layout.  Bias adds (``linear``
with a bias, ``addmm``) and ``alpha`` / ``beta`` scalings are vector FLOPs, one per output element each.
Bytes: every input read once, the output written once (unfused).
"""

from __future__ import annotations

from ...graph import OpNode, TensorSpec
from ..common import io_cost
from ..cost import FLOPS_PER_MAC, Cost
from ..registry import register_rule


def _out(node: OpNode) -> TensorSpec:
    return node.outputs[0]


def _scaled(node: OpNode, name: str) -> int:
    """1 when ``attrs[name]`` is a scale other than 1 (an extra multiply per output element)."""
    v = node.attrs.get(name, 1)
    return 0 if v in (1, 1.0, None) else 1


@register_rule("aten.mm", "aten.bmm", "aten.matmul", "aten.mv", "aten.dot", "aten.vdot", "aten.inner")
def product_cost(node: OpNode) -> Cost:
    """``a @ b``: ``2 * out_numel * a.shape[-1]``.  mm [m,k]x[k,n]: 2*m*n*k; matmul broadcasts batch dims."""
    a = node.inputs[0]
    k = a.shape[-1] if a.rank else 1
    return io_cost(node, matrix_flops=FLOPS_PER_MAC * _out(node).numel * k)


@register_rule("aten.linear")
def linear_cost(node: OpNode) -> Cost:
    """``x [..., k] @ W[n, k]^T + b``: ``2 * (numel(x)/k) * n * k`` matrix, ``numel(out)`` vector for the bias."""
    x, w = node.inputs[0], node.inputs[1]
    bias = node.input(2)
    out = _out(node)
    k = x.shape[-1] if x.rank else 1
    n = w.shape[0] if w.rank == 2 else 1
    rows = out.numel // n if n else 0
    return io_cost(node, matrix_flops=FLOPS_PER_MAC * rows * n * k,
                   vector_flops=out.numel if bias is not None else 0)


@register_rule("aten.addmm", "aten.baddbmm", "aten.addmv", "aten.addbmm", "aten.addr")
def add_product_cost(node: OpNode) -> Cost:
    """``beta * self + alpha * (m1 @ m2)``: the product, plus one add per output element (beta != 0).

    ``addbmm`` sums the batch of products into one [m, n] output, so its contraction length is ``b * k``;
    ``addr`` is an outer product (k = 1).
    """
    m1 = node.inputs[1]
    out = _out(node)
    if node.op == "aten.addr":
        k = 1
    elif node.op == "aten.addbmm":
        k = m1.shape[0] * m1.shape[-1]
    else:
        k = m1.shape[-1]
    beta = node.attrs.get("beta", 1)
    vector = (out.numel if beta not in (0, 0.0) else 0) * (1 + _scaled(node, "beta"))
    vector += out.numel * _scaled(node, "alpha")
    return io_cost(node, matrix_flops=FLOPS_PER_MAC * out.numel * k, vector_flops=vector)


@register_rule("aten._grouped_mm", "aten.grouped_mm", "transformers.grouped_mm_fallback")
def grouped_mm_cost(node: OpNode) -> Cost:
    """Grouped GEMM (MoE experts): each row of ``a`` is multiplied by the weight of its group only.

    ``a [S, K] x b [G, K, N] -> [S, N]`` (offsets split the S rows among the G groups): ``2 * S * N * K``;
    the whole ``b`` is read (every expert that receives a token is loaded).  ``[G, M, K] x [G, K, N]``:
    batched.  ``a [M, K] x b [K, N]`` with offsets splitting K: ``2 * M * N * K`` into ``[G, M, N]``.
    """
    a, b = node.inputs[0], node.inputs[1]
    out = _out(node)
    if a.rank == 2 and b.rank == 2:
        flops = FLOPS_PER_MAC * a.shape[0] * a.shape[1] * b.shape[1]
    else:
        flops = FLOPS_PER_MAC * out.numel * a.shape[-1]
    return io_cost(node, matrix_flops=flops)


# -- einsum -------------------------------------------------------------------------------------------

def _expand_ellipsis(term: str, rank: int, ell: str) -> str:
    """Replace ``...`` by the last dims of *ell* (broadcast dims align on the right)."""
    if "..." not in term:
        return term
    n = rank - (len(term) - 3)
    return term.replace("...", ell[len(ell) - n:] if n > 0 else "")


def einsum_flops(equation: str, shapes: list[tuple[int, ...]]) -> tuple[int, int]:
    """(matrix, vector) FLOPs of ``torch.einsum(equation, *operands)`` contracted left to right.

    A pairwise step that sums over some label costs ``2 * prod(sizes of every label involved)`` matrix FLOPs;
    a step without a summed label (outer / elementwise product) costs ``prod(...)`` vector multiplies; a single
    operand that sums some labels costs one add per input element.
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum {equation!r} names {len(terms)} operands, got {len(shapes)}")
    pool = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"  # ellipsis dims; einsum labels are lower case or these
    ell_rank = max((len(s) - (len(t) - 3) for t, s in zip(terms, shapes) if "..." in t), default=0)
    ell = pool[len(pool) - ell_rank:] if ell_rank else ""
    terms = [_expand_ellipsis(t, len(s), ell) for t, s in zip(terms, shapes)]
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts: dict[str, int] = {}
        for t in terms:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    size: dict[str, int] = {}
    for t, s in zip(terms, shapes):
        if len(t) != len(s):
            raise ValueError(f"einsum term {t!r} does not match an operand of rank {len(s)}")
        for c, d in zip(t, s):
            size[c] = max(size.get(c, 1), int(d))

    def prod(labels: str) -> int:
        p = 1
        for c in labels:
            p *= size[c]
        return p

    matrix = vector = 0
    cur = terms[0]
    if len(terms) == 1:
        return 0, (prod(cur) if set(cur) - set(out) else 0)
    for i, nxt in enumerate(terms[1:], start=1):
        union = "".join(dict.fromkeys(cur + nxt))
        later = set(out).union(*terms[i + 1:])
        keep = "".join(c for c in union if c in later)
        if len(keep) < len(union):
            matrix += FLOPS_PER_MAC * prod(union)
        else:
            vector += prod(union)
        cur = keep
    return matrix, vector


@register_rule("aten.einsum")
def einsum_cost(node: OpNode) -> Cost:
    """``attrs["equation"]``; operands are the node's inputs (see :func:`einsum_flops`)."""
    shapes = [tuple(t.shape) for t in node.inputs if t is not None]
    matrix, vector = einsum_flops(str(node.attrs["equation"]), shapes)
    return io_cost(node, matrix_flops=matrix, vector_flops=vector)


# -- recurrent layers ---------------------------------------------------------------------------------------

#: Per-hidden-unit vector FLOPs of one cell step, by gate count (the ONNX rules' constants: LSTM 18, GRU 13,
#: plain RNN 1 for its activation).
_CELL_FLOPS = {4: 18, 3: 13, 1: 1}


def _rnn_steps(node: OpNode) -> int:
    """Time steps x batch rows: ``input [T, B, I]`` (``[B, T, I]`` when batch_first), or packed ``[sum T_b, I]``."""
    x = node.inputs[0]
    if "batch_first" not in node.attrs:  # the packed-sequence overload: one row per (step, sequence)
        return x.shape[0]
    return x.shape[0] * x.shape[1] if x.rank == 3 else x.shape[0]


def _cell_cost(w_ih, w_hh, steps: int, biases: bool) -> tuple[int, int]:
    gh, i = w_ih.shape[0], w_ih.shape[1]
    h = w_hh.shape[1]
    gates = max(1, gh // h) if h else 1
    matrix = steps * FLOPS_PER_MAC * gh * (i + h)
    vector = steps * ((2 * gh if biases else 0) + _CELL_FLOPS.get(gates, 1) * h)
    return matrix, vector


@register_rule("aten.lstm", "aten.gru", "aten.rnn_tanh", "aten.rnn_relu")
def recurrent_cost(node: OpNode) -> Cost:
    """Per step, batch row, layer and direction: the gate products ``2 * G*H * (I + H)``, the two bias adds
    ``2 * G*H`` and the cell's per-unit math (LSTM 18, GRU 13, RNN 1 per hidden unit).  Parameters are the
    trailing ``n_params`` inputs, ``(w_ih, w_hh[, b_ih, b_hh])`` per layer and direction."""
    a = node.attrs
    n_params = int(a.get("n_params", 0))
    params = list(node.inputs[len(node.inputs) - n_params:]) if n_params else []
    groups = int(a.get("num_layers", 1)) * (2 if a.get("bidirectional") else 1)
    per = n_params // groups if groups else 0
    steps = _rnn_steps(node)
    matrix = vector = 0
    for g in range(groups):
        w_ih, w_hh = params[g * per], params[g * per + 1]
        m, v = _cell_cost(w_ih, w_hh, steps, bool(a.get("has_biases", True)))
        matrix, vector = matrix + m, vector + v
    return io_cost(node, matrix_flops=matrix, vector_flops=vector)


@register_rule("aten.mkldnn_rnn_layer")
def mkldnn_rnn_layer_cost(node: OpNode) -> Cost:
    """One layer, one direction of the CPU (oneDNN) RNN: ``(input, w_ih, w_hh, b_ih, b_hh, hx, cx)``."""
    m, v = _cell_cost(node.inputs[1], node.inputs[2], _rnn_steps(node), bool(node.attrs.get("has_biases", True)))
    return io_cost(node, matrix_flops=m, vector_flops=v)
