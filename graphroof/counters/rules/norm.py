"""Norm family: softmax and the normalisation layers (ATen and ONNX), per element of the input with the constants
of :mod:`graphroof.counters.formulas`.

* softmax / log_softmax: ``SOFTMAX_FLOPS_PER_ELEMENT`` (5: max-reduce, subtract, exp, sum-reduce, divide).
* layer / rms / group / instance / batch norm: ``NORM_FLOPS_PER_ELEMENT[kind]`` per input element, which includes
  the affine scale (1) and shift (1); a norm given no scale or no shift drops that FLOP (an ONNX
  LayerNormalization without B: 7 - 1 = 6, as ``aten.layer_norm`` without bias).  A batch norm in inference uses
  the running statistics (normalize + affine: 4); in training (ATen ``training`` / ``use_input_stats``, ONNX
  ``training_mode``) it computes them too (counted as a layer norm, 7).

Inputs are ``(x, scale, shift, ...)`` in both frontends; running statistics are read like weights.
"""

from __future__ import annotations

import math

from ...graph import OpNode, Role
from ..common import io_cost, req
from ..cost import Cost
from ..family import Row, aten, ms, onnx, register_family
from ..formulas import NORM_FLOPS_PER_ELEMENT, SOFTMAX_FLOPS_PER_ELEMENT

__all__ = ["ROWS", "norm_flops_per_element"]

_TRAINING_BATCH_NORM = ("aten._native_batch_norm_legit", "aten._batch_norm_with_update")


def norm_flops_per_element(kind: str, *, scale: bool = True, shift: bool = True, training: bool = False) -> int:
    """Per-element FLOPs of a norm of *kind*; see the module docstring."""
    if kind == "batch_norm" and training:
        kind = "layer_norm"  # statistics computed from the batch: mean, subtract, variance, normalize, affine
    per = NORM_FLOPS_PER_ELEMENT[kind]
    if not scale:
        per -= 1
    if kind != "rms_norm" and not shift:  # rms_norm has no shift to drop
        per -= 1
    return per


def per_input_element(k: int):
    """The rule ``k`` vector FLOPs per element of input 0."""
    def rule(node: OpNode) -> Cost:
        return io_cost(node, vector_flops=k * req(node, 0).numel)

    rule.__doc__ = f"{k} vector FLOPs per element of the input."
    return rule


def norm(kind: str):
    """The rule of a norm of *kind*: inputs (x, scale, shift, ...)."""
    def rule(node: OpNode) -> Cost:
        a = node.attrs
        training = bool(a.get("training", a.get("use_input_stats", a.get("training_mode", False))))
        per = norm_flops_per_element(kind, scale=node.input(1) is not None, shift=node.input(2) is not None,
                                     training=training or node.op in _TRAINING_BATCH_NORM)
        return io_cost(node, vector_flops=per * req(node, 0).numel)

    rule.__doc__ = f"NORM_FLOPS_PER_ELEMENT[{kind!r}] per element of x, less a missing scale or shift."
    return rule


def skip_layer_norm(node: OpNode) -> Cost:
    """com.microsoft LayerNorm (7) or RMSNorm (4) of ``input + skip (+ bias)``: plus one add per element each.

    Inputs: (input, skip, gamma, beta, bias) for SkipLayerNormalization, (input, skip, gamma, bias) for the
    simplified form; the optional outputs (mean, inv_std_var, input_skip_bias_sum) are written when present.
    """
    simplified = node.op.endswith("SkipSimplifiedLayerNormalization")
    per = NORM_FLOPS_PER_ELEMENT["rms_norm" if simplified else "layer_norm"]
    bias = node.input(3 if simplified else 4)
    return io_cost(node, vector_flops=(per + 1 + (1 if bias is not None else 0)) * req(node, 0).numel)


def embed_layer_norm(node: OpNode) -> Cost:
    """word + position (+ segment) embedding rows, summed, then LayerNorm: ``(n_tables - 1 + 7) * numel(out)``.

    Inputs (input_ids, segment_ids, word_emb, pos_emb, segment_emb, gamma, beta, mask, position_ids): each
    table is read only in the rows the ids select (``numel(output)`` elements, capped at the table).
    """
    out = node.outputs[0]
    tables = [t for t in (node.input(i) for i in (2, 3, 4)) if t is not None]
    others = [node.input(i) for i in (0, 1, 5, 6, 7, 8)]
    c = io_cost(node, vector_flops=(len(tables) - 1 + NORM_FLOPS_PER_ELEMENT["layer_norm"]) * out.numel,
                inputs=others)
    rows = sum(min(t.nbytes, math.ceil(out.numel * t.itemsize_bits / 8)) for t in tables)
    if all(t.role in (Role.WEIGHT, Role.CONST) for t in tables):
        return c + Cost(weight_bytes=rows)
    return c + Cost(act_read_bytes=rows)


SOFTMAX = per_input_element(SOFTMAX_FLOPS_PER_ELEMENT)


def lrn(node: OpNode) -> Cost:
    """ONNX LRN ``y = x / (bias + alpha / size * square_sum) ** beta``, square_sum over ``size`` neighbouring
    channels: per element square (1) + window sum (size - 1 adds) + alpha/size scale (1) + bias add (1) + pow (1)
    + divide (1) = ``size + 4``."""
    size = int(node.attrs["size"])
    x = node.inputs[0]
    assert x is not None
    return io_cost(node, vector_flops=(size + 4) * x.numel)

ROWS = (
    #   member          ATen keys                                                    ONNX keys            rule
    Row("softmax",      aten("softmax", "_softmax", "_safe_softmax", "special_softmax", "softmin"),
        onnx("Softmax"), SOFTMAX),
    # log replaces the divide: the same count
    Row("log_softmax",  aten("log_softmax", "_log_softmax", "special_log_softmax"), onnx("LogSoftmax"), SOFTMAX),
    Row("bias_softmax", (),                                  ms("BiasSoftmax"),  per_input_element(SOFTMAX_FLOPS_PER_ELEMENT + 1)),
    Row("layer_norm",   aten("layer_norm", "native_layer_norm"),
        onnx("LayerNormalization") + ms("LayerNormalization"), norm("layer_norm")),
    Row("rms_norm",     aten("rms_norm", "_fused_rms_norm"),
        onnx("RMSNormalization", "SimplifiedLayerNormalization") + ms("SimplifiedLayerNormalization"),
        norm("rms_norm")),
    Row("group_norm",   aten("group_norm", "native_group_norm"), onnx("GroupNormalization") + ms("GroupNorm"),
        norm("group_norm")),
    Row("instance_norm", aten("instance_norm"),              onnx("InstanceNormalization"), norm("instance_norm")),
    Row("batch_norm",   aten("batch_norm", "native_batch_norm", "_native_batch_norm_legit_no_training",
                             "_batch_norm_no_update", "cudnn_batch_norm", "miopen_batch_norm"),
        onnx("BatchNormalization"), norm("batch_norm")),
    # the overloads that always compute the batch statistics (training)
    Row("batch_norm_training", aten(*(k.split(".")[1] for k in _TRAINING_BATCH_NORM)), (), norm("batch_norm")),
    # p=2 norm along an axis: square + add (2), divide (1)
    Row("lp_norm",      (),                                  onnx("LpNormalization"), per_input_element(3)),
    # (x - mean) / std without scale and shift: layer norm minus its 2
    Row("mean_variance_norm", (), onnx("MeanVarianceNormalization"),
        per_input_element(NORM_FLOPS_PER_ELEMENT["layer_norm"] - 2)),
    # an argmax and a one-hot write
    Row("lrn",          (),                                  onnx("LRN"),         lrn),
    Row("hardmax",      (),                                  onnx("Hardmax"),     per_input_element(1)),
    Row("skip_layer_norm", (), ms("SkipLayerNormalization", "SkipSimplifiedLayerNormalization"), skip_layer_norm),
    Row("embed_layer_norm", (), ms("EmbedLayerNormalization"), embed_layer_norm),
)

register_family("norm", ROWS)
