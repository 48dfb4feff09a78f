"""Softmax and normalisation layers (ATen), counted per element with the constants in
:mod:`graphroof.counters.formulas`.

* softmax / log_softmax (and ``_softmax``, ``_safe_softmax``): ``SOFTMAX_FLOPS_PER_ELEMENT`` (5) per element.
* layer_norm / rms_norm / group_norm / instance_norm / batch_norm: ``NORM_FLOPS_PER_ELEMENT[kind]`` per input
  element, which includes the affine scale (1) and shift (1); a norm without weight or bias drops them.
  batch_norm in eval mode uses the running statistics (normalize + affine: 4); in training it also computes
  the statistics (counted as a layer norm, 7).

Inputs are ``(x, weight, bias, ...)`` in every variant; running statistics are read like weights.
"""

from __future__ import annotations

from ...graph import OpNode
from ..common import io_cost
from ..cost import Cost
from ..formulas import NORM_FLOPS_PER_ELEMENT, SOFTMAX_FLOPS_PER_ELEMENT
from ..registry import register_rule


@register_rule("aten.softmax", "aten._softmax", "aten._safe_softmax", "aten.log_softmax", "aten._log_softmax",
               "aten.special_softmax", "aten.special_log_softmax", "aten.softmin")
def softmax_cost(node: OpNode) -> Cost:
    return io_cost(node, vector_flops=SOFTMAX_FLOPS_PER_ELEMENT * node.inputs[0].numel)


_KIND = {
    "layer_norm": "layer_norm", "native_layer_norm": "layer_norm",
    "rms_norm": "rms_norm", "_fused_rms_norm": "rms_norm",
    "group_norm": "group_norm", "native_group_norm": "group_norm",
    "instance_norm": "instance_norm",
    "batch_norm": "batch_norm", "native_batch_norm": "batch_norm", "_native_batch_norm_legit": "batch_norm",
    "_native_batch_norm_legit_no_training": "batch_norm", "_batch_norm_with_update": "batch_norm",
    "_batch_norm_no_update": "batch_norm", "cudnn_batch_norm": "batch_norm", "miopen_batch_norm": "batch_norm",
}


def norm_flops_per_element(node: OpNode) -> int:
    name = node.op.split(".", 1)[1]
    kind = _KIND[name]
    training = node.attrs.get("training", node.attrs.get("use_input_stats", False))
    if kind == "batch_norm" and (training or name in ("_native_batch_norm_legit", "_batch_norm_with_update")):
        kind = "layer_norm"  # statistics computed from the batch: mean, subtract, variance, normalize, affine
    per = NORM_FLOPS_PER_ELEMENT[kind]
    if node.input(1) is None:  # no scale
        per -= 1
    if kind != "rms_norm" and node.input(2) is None:  # no shift (rms_norm has none to drop)
        per -= 1
    return per


@register_rule(*(f"aten.{k}" for k in _KIND))
def norm_cost(node: OpNode) -> Cost:
    return io_cost(node, vector_flops=norm_flops_per_element(node) * node.inputs[0].numel)
