"""PyTorch's quantized ops (``quantized::*`` from torch.ao eager / FX-converted models) and the ATen
quantize / dequantize ops, as the torch dispatch capture records them.

The capture gives a packed-weight op its weight and bias as ordinary inputs: ``quantized.linear`` reads
``(x [..., k] uint8, weight [n, k] int8, bias [n] fp32 | None)``; ``quantized.conv{1,2,3}d`` read
``(x [N, Cin, *S], weight [Cout, Cin/groups, *kernel], bias)`` with ``stride`` / ``padding`` / ``dilation`` /
``groups`` / ``transposed`` attrs (a transposed weight is ``[Cin, Cout/groups, *kernel]``).

Counted as the ONNX QLinear ops are (:mod:`.onnx_matmul`): the int8 product's multiply-adds as matrix FLOPs
(2 per MAC), one vector FLOP per output element for the bias add, one more for a fused ReLU (``*_relu``);
requantisation of the int32 accumulator is part of the kernel's epilogue and not counted, as for QLinearConv.
Dynamic ops (``linear_dynamic``) quantize their float input first: 5 FLOPs per input element, as ONNX's
DynamicQuantizeLinear (min and max over x, then scale, round, shift).  Quantize: 3 FLOPs per element
(divide, round, add the zero point), dequantize: 2 (subtract the zero point, multiply), as the ONNX rules.
Binary ops (``add``, ``mul``): 1 per output element (+1 with ``_relu``); ``cat`` moves bytes only.
Bytes: every input read, the output written, at their recorded dtypes (int8 activations: 1 byte).
"""

from __future__ import annotations

from ...graph import OpNode
from ..common import io_cost, req
from ..cost import FLOPS_PER_MAC, Cost
from ..formulas import conv_flops, prod
from ..registry import register_rule

__all__ = ["quantized_linear_cost", "quantized_conv_cost", "quantize_cost", "dequantize_cost",
           "quantized_binary_cost", "quantized_unary_cost"]


def _relu(node: OpNode) -> int:
    return node.outputs[0].numel if "relu" in node.op.rsplit(".", 1)[1] else 0


@register_rule("quantized.linear", "quantized.linear_relu", "quantized.linear_dynamic",
               "quantized.linear_relu_dynamic", "quantized.linear_dynamic_fp16")
def quantized_linear_cost(node: OpNode) -> Cost:
    """``2 * rows * n * k`` matrix; ``numel(out)`` for the bias, ``numel(out)`` for a fused relu,
    ``5 * numel(x)`` to quantize a dynamic op's float input."""
    x, w = req(node, 0), req(node, 1)
    out = node.outputs[0]
    k = x.dims[-1] if x.rank else 1
    n = w.dims[0]
    rows = out.numel // n if n else 0
    vector = (out.numel if node.input(2) is not None else 0) + _relu(node)
    if "dynamic" in node.op:
        vector += 5 * x.numel
    return io_cost(node, matrix_flops=FLOPS_PER_MAC * rows * n * k, vector_flops=vector)


_CONVS = [f"quantized.{kind}{d}d{suffix}" for kind in ("conv", "conv_transpose") for d in (1, 2, 3)
          for suffix in ("", "_relu")]


@register_rule(*_CONVS)
def quantized_conv_cost(node: OpNode) -> Cost:
    """Forward: ``2 * numel(out) * (Cin/groups) * prod(kernel)``; transposed: ``2 * numel(x) * (Cout/groups) *
    prod(kernel)``; plus the bias add and a fused relu, one vector FLOP per output element each."""
    x, w = req(node, 0), req(node, 1)
    out = node.outputs[0]
    kernel = prod(w.dims[2:])
    if node.attrs.get("transposed") or "transpose" in node.op:
        flops = conv_flops(x.numel, w.dims[1], kernel)
    else:
        flops = conv_flops(out.numel, w.dims[1], kernel)
    vector = (out.numel if node.input(2) is not None else 0) + _relu(node)
    return io_cost(node, matrix_flops=flops, vector_flops=vector)


@register_rule("aten.quantize_per_tensor", "aten.quantize_per_channel", "aten.quantize_per_tensor_dynamic")
def quantize_cost(node: OpNode) -> Cost:
    """``round(x / scale) + zero_point``: 3 FLOPs per element."""
    return io_cost(node, vector_flops=3 * node.outputs[0].numel)


@register_rule("aten.dequantize")
def dequantize_cost(node: OpNode) -> Cost:
    """``(q - zero_point) * scale``: 2 FLOPs per element (of every output, for the list overload)."""
    return io_cost(node, vector_flops=2 * sum(o.numel for o in node.outputs))


@register_rule("quantized.add", "quantized.add_relu", "quantized.mul", "quantized.mul_relu",
               "quantized.add_scalar", "quantized.add_scalar_relu", "quantized.mul_scalar",
               "quantized.mul_scalar_relu", "quantized.add_out", "quantized.add_relu_out")
def quantized_binary_cost(node: OpNode) -> Cost:
    """One add / multiply per output element, one more for a fused relu."""
    out = node.outputs[0]
    return io_cost(node, vector_flops=out.numel + _relu(node))


_UNARY = {"quantized.hardswish": 5, "quantized.sigmoid": 4, "quantized.relu6": 1, "quantized.leaky_relu": 2,
          "quantized.cat": 0, "quantized.cat_relu": 1}


@register_rule(*_UNARY)
def quantized_unary_cost(node: OpNode) -> Cost:
    """Per output element: hardswish 5 (as the ATen rule), sigmoid 4, relu6 1, leaky relu 2; cat 0 (bytes only),
    cat_relu 1."""
    return io_cost(node, vector_flops=_UNARY[node.op] * node.outputs[0].numel)
