"""Reduce family: reductions, scans, sorting and top-k (ATen and ONNX).

A reduction is ``per_in * numel(in) + per_out * numel(out)`` vector FLOPs (:func:`reduction_flops`):

* sum / prod / max / min / argmax / all / any: one combine per input element beyond the first of each output,
  ``numel(in) - numel(out)`` = (1, -1).
* mean: those adds plus one divide per output = ``numel(in)`` = (1, 0).
* var / std: mean (in), subtract (in), square (in), sum (in - out), divide (out) = ``4 * numel(in)``; std adds a
  root per output.  p=2 norm / ReduceL2: square (in), sum (in - out), root (out) = ``2 * numel(in)``.
  Sum of squares / L1: a square / abs per element, then the sums = (2, -1).  ReduceLogSum: sums + log = (1, 0).
* logsumexp / ReduceLogSumExp, computed stably as every kernel does (torch, onnxruntime): max-reduce (in - out),
  subtract (in), exp (in), sum-reduce (in - out), log (out), add the max back (out) = ``4 * numel(in)``, the
  same accounting as softmax.  10 elements reduced to 1: 9 + 10 + 10 + 9 + 1 + 1 = 40.
* cumsum / cumprod / cummax / CumSum / CumProd: one op per element (logcumsumexp: 3).
* sort: ``numel * ceil(log2 n)`` compares per sorted row of length n; top-k / kthvalue: one pass with a k-heap,
  ``numel * max(1, ceil(log2 k))`` compares.
* ``aten.max`` / ``aten.min`` with two tensor inputs are the elementwise maximum: one per output element.
"""

from __future__ import annotations

import math

from ...graph import OpNode
from ..common import io_cost, req
from ..cost import Cost
from ..family import Row, aten, onnx, register_family

__all__ = ["ROWS", "reduction_flops", "sort_flops", "topk_flops"]


def reduction_flops(in_numel: int, out_numel: int, per_in: int, per_out: int) -> int:
    return max(per_in * in_numel + per_out * out_numel, 0)


def sort_flops(numel: int, n: int) -> int:
    """``numel * ceil(log2 n)`` compares (at least 1 per element), n = the sorted dim's length."""
    return numel * max(1, math.ceil(math.log2(max(n, 2))))


def topk_flops(numel: int, k: int) -> int:
    """A size-k heap over each row: ``numel * max(1, ceil(log2 k))`` compares."""
    return numel * max(1, math.ceil(math.log2(max(k, 1))))


def reduce(per_in: int, per_out: int):
    """The rule of a reduction (input 0 -> output 0)."""
    def rule(node: OpNode) -> Cost:
        x, out = req(node, 0), node.outputs[0]
        if node.op in ("aten.max", "aten.min") and len([t for t in node.inputs if t is not None]) == 2:
            return io_cost(node, vector_flops=out.numel)  # max.other / min.other: elementwise
        return io_cost(node, vector_flops=reduction_flops(x.numel, out.numel, per_in, per_out))

    rule.__doc__ = f"{per_in} * numel(in) + ({per_out}) * numel(out) vector FLOPs."
    return rule


def aten_sort(node: OpNode) -> Cost:
    x = req(node, 0)
    n = x.dims[int(node.attrs.get("dim", -1)) % x.rank] if x.rank else 1
    return io_cost(node, vector_flops=sort_flops(x.numel, n))


def aten_topk(node: OpNode) -> Cost:
    """``attrs["k"]``."""
    return io_cost(node, vector_flops=topk_flops(req(node, 0).numel, int(node.attrs.get("k", 1))))


def onnx_topk(node: OpNode) -> Cost:
    """K is a run-time input: read it off the values output along ``axis``; writes values and indices."""
    x, vals = req(node, 0), node.outputs[0]
    axis = int(node.attrs.get("axis", -1)) % max(len(vals.shape), 1)
    k = vals.dims[axis] if vals.shape else 1
    return io_cost(node, vector_flops=topk_flops(x.numel, k))


COMBINE, MEAN = reduce(1, -1), reduce(1, 0)

ROWS = (
    #   member        ATen keys                                           ONNX keys                rule
    Row("sum",        aten("sum", "nansum"),                               onnx("ReduceSum"),        COMBINE),
    Row("prod",       aten("prod"),                                        onnx("ReduceProd"),       COMBINE),
    Row("amax",       aten("amax", "max"),                                 onnx("ReduceMax"),        COMBINE),
    Row("amin",       aten("amin", "min"),                                 onnx("ReduceMin"),        COMBINE),
    Row("argmax",     aten("argmax"),                                      onnx("ArgMax"),           COMBINE),
    Row("argmin",     aten("argmin"),                                      onnx("ArgMin"),           COMBINE),
    Row("combine",    aten("all", "any", "count_nonzero", "median", "nanmedian", "mode", "trace"), (), COMBINE),
    Row("aminmax",    aten("aminmax"),                                     (),                       reduce(2, -2)),
    Row("mean",       aten("mean", "nanmean"),                             onnx("ReduceMean"),       MEAN),
    Row("var",        aten("var", "var_mean"),                             (),                       reduce(4, 0)),
    Row("std",        aten("std", "std_mean"),                             (),                       reduce(4, 1)),
    Row("norm",       aten("norm", "linalg_vector_norm", "frobenius_norm"), onnx("ReduceL2"),        reduce(2, 0)),
    Row("sum_square", (),                                                  onnx("ReduceSumSquare", "ReduceL1"), reduce(2, -1)),
    Row("log_sum",    (),                                                  onnx("ReduceLogSum"),     MEAN),
    Row("logsumexp",  aten("logsumexp"),                                   onnx("ReduceLogSumExp"),  reduce(4, 0)),
    Row("cumsum",     aten("cumsum", inplace=True),                         onnx("CumSum"),           MEAN),
    # one multiply per element (exclusive / reverse: the same count)
    Row("cumprod",    aten("cumprod", inplace=True),                        onnx("CumProd"),          MEAN),
    Row("scan",       aten("cummax", "cummin", "histc", "bincount", "diff"), (),                      MEAN),
    Row("logcumsumexp", aten("logcumsumexp"),                              (),                       reduce(3, 0)),
    Row("sort",       aten("sort", "argsort", "msort", "sort_"),           (),                       aten_sort),
    Row("topk",       aten("topk", "kthvalue"),                            onnx("TopK"),             aten_topk,
        onnx_rule=onnx_topk),
)

register_family("reduce", ROWS)
