"""Reductions, scans, sorting and top-k (ATen), counted per *input* element.

* sum / prod / amax / amin / argmax / all / any / count_nonzero ...: one op per input element.
* mean: the sum, plus one divide per output element.  var / std: mean, subtract, square, accumulate
  (4 per input element), std adds a square root per output.  norm (p = 2): square + accumulate (2 per
  element) and a root per output.  logsumexp: max, subtract, exp, accumulate (4) and a log per output.
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

_PER_ELEMENT = {
    "sum": 1, "nansum": 1, "prod": 1, "amax": 1, "amin": 1, "aminmax": 1, "argmax": 1, "argmin": 1, "all": 1,
    "any": 1, "count_nonzero": 1, "max": 1, "min": 1, "mean": 1, "nanmean": 1, "var": 4, "std": 4,
    "var_mean": 4, "std_mean": 4, "norm": 2, "linalg_vector_norm": 2, "frobenius_norm": 2, "logsumexp": 4,
    "cumsum": 1, "cumprod": 1, "cummax": 1, "cummin": 1, "logcumsumexp": 3, "histc": 1, "bincount": 1,
    "median": 1, "nanmedian": 1, "mode": 1, "diff": 1, "trace": 1,
}
_PER_OUTPUT = {"mean": 1, "nanmean": 1, "std": 1, "std_mean": 1, "norm": 1, "linalg_vector_norm": 1,
               "frobenius_norm": 1, "logsumexp": 1}


def _keys(names):
    out = []
    for n in names:
        out += [f"aten.{n}", f"aten.{n}_"] if n in ("cumsum", "cumprod") else [f"aten.{n}"]
    return out


@register_rule(*_keys(_PER_ELEMENT))
def reduce_cost(node: OpNode) -> Cost:
    name = node.op.split(".", 1)[1].rstrip("_")
    x = node.inputs[0]
    if name in ("max", "min") and len([t for t in node.inputs if t is not None]) == 2:
        return io_cost(node, vector_flops=node.outputs[0].numel)  # max.other / min.other: elementwise
    flops = _PER_ELEMENT[name] * x.numel + _PER_OUTPUT.get(name, 0) * node.outputs[0].numel
    return io_cost(node, vector_flops=flops)


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
