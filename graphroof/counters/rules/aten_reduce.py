"""Reductions, scans, sorting and top-k (ATen), in the same terms as the ONNX rules.

* sum / prod / amax / amin / argmax / all / any / count_nonzero: ``n - 1`` ops per output reducing n
  elements, so ``numel(in) - numel(out)``.
* mean: those adds plus one divide per output = ``numel(in)``.  var / std: mean (in), subtract (in), square
  (in), sum (in - out), divide (out) = ``4 * numel(in)``; std adds a root per output.  norm (p = 2): square
  (in), sum (in - out), root (out) = ``2 * numel(in)``.  logsumexp: max, subtract, exp, sum, log, add back =
  ``4 * numel(in)``.
* cumsum / cumprod / cummax / logcumsumexp: one op per element (logcumsumexp: 3).
* sort / argsort / msort: ``n * ceil(log2 n)`` compares per sorted row of length n; topk / kthvalue: one pass
  with a k-heap, ``numel * max(1, ceil(log2 k))`` compares.
* ``aten.max`` / ``aten.min`` also name the elementwise binary maximum (two tensor inputs), counted as such.
"""

from __future__ import annotations

import math

from ...graph import OpNode
from ..common import io_cost
from ..cost import Cost
from ..registry import register_rule

#: op -> (FLOPs per input element, FLOPs per output element)
_REDUCE = {
    "sum": (1, -1), "nansum": (1, -1), "prod": (1, -1), "amax": (1, -1), "amin": (1, -1), "aminmax": (2, -2),
    "argmax": (1, -1), "argmin": (1, -1), "all": (1, -1), "any": (1, -1), "count_nonzero": (1, -1),
    "max": (1, -1), "min": (1, -1), "median": (1, -1), "nanmedian": (1, -1), "mode": (1, -1),
    "mean": (1, 0), "nanmean": (1, 0), "var": (4, 0), "std": (4, 1), "var_mean": (4, 0), "std_mean": (4, 1),
    "norm": (2, 0), "linalg_vector_norm": (2, 0), "frobenius_norm": (2, 0), "logsumexp": (4, 0),
    "cumsum": (1, 0), "cumprod": (1, 0), "cummax": (1, 0), "cummin": (1, 0), "logcumsumexp": (3, 0),
    "histc": (1, 0), "bincount": (1, 0), "diff": (1, 0), "trace": (1, -1),
}


def _keys(names):
    out = []
    for n in names:
        out += [f"aten.{n}", f"aten.{n}_"] if n in ("cumsum", "cumprod") else [f"aten.{n}"]
    return out


@register_rule(*_keys(_REDUCE))
def reduce_cost(node: OpNode) -> Cost:
    name = node.op.split(".", 1)[1].rstrip("_")
    x, out = node.inputs[0], node.outputs[0]
    if name in ("max", "min") and len([t for t in node.inputs if t is not None]) == 2:
        return io_cost(node, vector_flops=out.numel)  # max.other / min.other: elementwise
    per_in, per_out = _REDUCE[name]
    return io_cost(node, vector_flops=max(per_in * x.numel + per_out * out.numel, 0))


def _dim_len(node: OpNode) -> int:
    x = node.inputs[0]
    if not x.rank:
        return 1
    dim = int(node.attrs.get("dim", -1))
    return x.shape[dim % x.rank]


@register_rule("aten.sort", "aten.argsort", "aten.msort", "aten.sort_")
def sort_cost(node: OpNode) -> Cost:
    """``numel * ceil(log2 n)`` compares, n = the sorted dim's length."""
    n = _dim_len(node)
    return io_cost(node, vector_flops=node.inputs[0].numel * max(1, math.ceil(math.log2(max(n, 2)))))


@register_rule("aten.topk", "aten.kthvalue")
def topk_cost(node: OpNode) -> Cost:
    """One pass over the input keeping a k-heap: ``numel * max(1, ceil(log2 k))`` compares."""
    k = int(node.attrs.get("k", 1))
    return io_cost(node, vector_flops=node.inputs[0].numel * max(1, math.ceil(math.log2(max(k, 1)))))
