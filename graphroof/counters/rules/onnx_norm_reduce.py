"""ONNX normalizations, softmax, reductions, pooling, resizing, CumSum and TopK (vector FLOPs, real bytes).

Per-element constants come from :mod:`graphroof.counters.formulas` (``NORM_FLOPS_PER_ELEMENT``,
``SOFTMAX_FLOPS_PER_ELEMENT``); reductions count one combine per input element beyond the first of each
output (``in - out``), plus the per-element extras each op states.
"""

from __future__ import annotations

import math

from ...graph import OpNode, Role
from ..common import io_cost
from ..cost import Cost
from ..formulas import NORM_FLOPS_PER_ELEMENT, SOFTMAX_FLOPS_PER_ELEMENT, prod
from ..registry import register_rule

__all__ = ["REDUCE_FLOPS"]


def _x(node: OpNode) -> int:
    return node.inputs[0].numel


def _norm(per_element: int):
    def rule(node: OpNode) -> Cost:
        return io_cost(node, vector_flops=per_element * _x(node))

    rule.__doc__ = f"{per_element} vector FLOPs per element of X."
    return rule


_NORMS = {
    ("onnx.LayerNormalization", "com.microsoft.LayerNormalization"): NORM_FLOPS_PER_ELEMENT["layer_norm"],
    ("onnx.RMSNormalization", "onnx.SimplifiedLayerNormalization",
     "com.microsoft.SimplifiedLayerNormalization"): NORM_FLOPS_PER_ELEMENT["rms_norm"],
    ("onnx.BatchNormalization",): NORM_FLOPS_PER_ELEMENT["batch_norm"],
    ("onnx.GroupNormalization", "com.microsoft.GroupNorm"): NORM_FLOPS_PER_ELEMENT["group_norm"],
    ("onnx.InstanceNormalization",): NORM_FLOPS_PER_ELEMENT["instance_norm"],
    # p=2 norm along an axis: square + add (2), divide (1)
    ("onnx.LpNormalization",): 3,
    # (x - mean) / std without scale and shift: layer norm minus its 2
    ("onnx.MeanVarianceNormalization",): NORM_FLOPS_PER_ELEMENT["layer_norm"] - 2,
    # softmax and log-softmax (log replaces the divide); Hardmax is an argmax and a one-hot write
    ("onnx.Softmax", "onnx.LogSoftmax"): SOFTMAX_FLOPS_PER_ELEMENT,
    ("com.microsoft.BiasSoftmax",): SOFTMAX_FLOPS_PER_ELEMENT + 1,
    ("onnx.Hardmax",): 1,
    # a running sum: one add per element
    ("onnx.CumSum",): 1,
}
for _keys, _k in _NORMS.items():
    register_rule(*_keys)(_norm(_k))


@register_rule("com.microsoft.SkipLayerNormalization", "com.microsoft.SkipSimplifiedLayerNormalization")
def skip_layer_norm(node: OpNode) -> Cost:
    """LayerNorm (7) or RMSNorm (4) of ``input + skip (+ bias)``: plus one add per element each.

    Inputs: (input, skip, gamma, beta, bias) for SkipLayerNormalization, (input, skip, gamma, bias) for the
    simplified form; the optional outputs (mean, inv_std_var, input_skip_bias_sum) are written when present.
    """
    simplified = node.op.endswith("SkipSimplifiedLayerNormalization")
    norm = NORM_FLOPS_PER_ELEMENT["rms_norm" if simplified else "layer_norm"]
    bias = node.input(3 if simplified else 4)
    return io_cost(node, vector_flops=(norm + 1 + (1 if bias is not None else 0)) * _x(node))


@register_rule("com.microsoft.EmbedLayerNormalization")
def embed_layer_norm(node: OpNode) -> Cost:
    """word + position (+ segment) embedding rows, summed, then LayerNorm: ``(n_tables - 1 + 7) * numel(out)``.

    Inputs (input_ids, segment_ids, word_emb, pos_emb, segment_emb, gamma, beta, mask, position_ids): each
    table is read only in the rows the ids select (``numel(output)`` elements, capped at the table).
    """
    out = node.outputs[0]
    tables = [node.input(i) for i in (2, 3, 4) if node.input(i) is not None]
    others = [node.input(i) for i in (0, 1, 5, 6, 7, 8)]
    c = io_cost(node, vector_flops=(len(tables) - 1 + NORM_FLOPS_PER_ELEMENT["layer_norm"]) * out.numel,
                inputs=others)
    rows = sum(min(t.nbytes, math.ceil(out.numel * t.itemsize_bits / 8)) for t in tables)
    key = "weight_bytes" if all(t.role in (Role.WEIGHT, Role.CONST) for t in tables) else "act_read_bytes"
    return c + Cost(**{key: rows})


#: Reduction op -> (FLOPs per input element, FLOPs per output element): sum/max/min/prod/arg*: in - out;
#: mean: in - out adds + out divides = in; sum of squares, L1: a square / abs per element, then the sums;
#: L2: + a sqrt per output; log-sum-exp: exp per element, sums, log per output; log-sum: sums + log.
REDUCE_FLOPS: dict[str, tuple[int, int]] = {
    "ReduceSum": (1, -1), "ReduceMax": (1, -1), "ReduceMin": (1, -1), "ReduceProd": (1, -1),
    "ArgMax": (1, -1), "ArgMin": (1, -1), "ReduceMean": (1, 0), "ReduceSumSquare": (2, -1), "ReduceL1": (2, -1),
    "ReduceL2": (2, 0), "ReduceLogSumExp": (2, 0), "ReduceLogSum": (1, 0),
}


def _reduce(per_in: int, per_out: int):
    def rule(node: OpNode) -> Cost:
        return io_cost(node, vector_flops=max(per_in * _x(node) + per_out * node.outputs[0].numel, 0))

    rule.__doc__ = f"{per_in} * numel(in) + ({per_out}) * numel(out) vector FLOPs."
    return rule


for _op, (_a, _b) in REDUCE_FLOPS.items():
    register_rule(f"onnx.{_op}")(_reduce(_a, _b))


def _kernel(node: OpNode) -> int:
    return prod(node.attrs.get("kernel_shape", ()) or (1,))


@register_rule("onnx.MaxPool")
def max_pool(node: OpNode) -> Cost:
    """``numel(Y) * (prod(kernel) - 1)`` comparisons; the optional Indices output is written too."""
    return io_cost(node, vector_flops=node.outputs[0].numel * (_kernel(node) - 1))


@register_rule("onnx.AveragePool")
def average_pool(node: OpNode) -> Cost:
    """``numel(Y) * prod(kernel)``: ``k - 1`` adds and a divide per output."""
    return io_cost(node, vector_flops=node.outputs[0].numel * _kernel(node))


@register_rule("onnx.LpPool")
def lp_pool(node: OpNode) -> Cost:
    """``numel(Y) * 2 * prod(kernel)``: a power and an add per window element, the root per output."""
    return io_cost(node, vector_flops=node.outputs[0].numel * 2 * _kernel(node))


@register_rule("onnx.GlobalAveragePool")
def global_average_pool(node: OpNode) -> Cost:
    """``numel(X)``: ``in - out`` adds and ``out`` divides."""
    return io_cost(node, vector_flops=_x(node))


@register_rule("onnx.GlobalMaxPool")
def global_max_pool(node: OpNode) -> Cost:
    """``numel(X) - numel(Y)`` comparisons."""
    return io_cost(node, vector_flops=_x(node) - node.outputs[0].numel)


@register_rule("onnx.GlobalLpPool")
def global_lp_pool(node: OpNode) -> Cost:
    """``2 * numel(X)``: power and add per element (the root per output rounds it up)."""
    return io_cost(node, vector_flops=2 * _x(node))


@register_rule("onnx.Resize", "onnx.Upsample")
def resize(node: OpNode) -> Cost:
    """Per output element: nearest 0; linear ``2 * 2^r - 1`` (2^r taps, each a multiply, summed); cubic
    ``2 * 4^r - 1``; r = number of axes whose size changes.  Reads X (and the small roi / scales / sizes)."""
    x, y = node.inputs[0], node.outputs[0]
    r = sum(1 for a, b in zip(x.shape, y.shape) if a != b)
    mode = str(node.attrs.get("mode", "nearest"))
    taps = {"linear": 2, "bilinear": 2, "cubic": 4}.get(mode, 1) ** r
    per = 2 * taps - 1 if taps > 1 else 0
    return io_cost(node, vector_flops=per * y.numel)


@register_rule("onnx.TopK")
def topk(node: OpNode) -> Cost:
    """A size-k heap over each row: ``numel(X) * ceil(log2(max(k, 2)))`` comparisons; writes values and indices."""
    x, vals = node.inputs[0], node.outputs[0]
    axis = int(node.attrs.get("axis", -1)) % max(len(vals.shape), 1)
    k = vals.shape[axis] if vals.shape else 1
    return io_cost(node, vector_flops=x.numel * math.ceil(math.log2(max(k, 2))))
