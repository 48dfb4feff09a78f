"""ONNX elementwise ops (one family): FLOPs = ``per_element * numel(output)`` on the vector units.

Bytes are every input at its own (un-broadcast) size plus the output.  ``per_element`` is a stated model of
each op (a transcendental such as exp, erf or tanh counts as 1, as on GPUs' special-function units):

* 1: arithmetic, comparisons, logic, rounding, Abs / Neg / Sign, Relu, exp / log / sqrt / erf / tanh / trig;
* composites, as their textbook formulas: Sigmoid ``1/(1+exp(-x))`` = 4 (neg, exp, add, div);
  Gelu ``0.5x(1+erf(x/sqrt2))`` = 5, its tanh form ``0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))`` = 9;
  HardSigmoid ``clip(a*x+b)`` = 4; HardSwish = HardSigmoid * x = 5; Softplus ``log(1+exp x)`` = 3;
  Softsign ``x/(1+|x|)`` = 3; Mish ``x*tanh(softplus x)`` = 5; LeakyRelu / PRelu (mul, select) = 2;
  Elu (exp, sub, mul, select) = 4; Selu / Celu = 5; Clip (max, min) = 2;
* conversions move data but compute nothing: Cast / CastLike = 0;
* quantization: DequantizeLinear ``(x - zp) * scale`` = 2, QuantizeLinear ``saturate(round(x / s) + zp)`` = 3,
  DynamicQuantizeLinear = 5 (min and max over x, then quantize);
* variadic Sum / Max / Min: ``n - 1`` per element for n inputs; Mean: ``n`` (adds, then a divide).
"""

from __future__ import annotations

from ...graph import OpNode
from ..common import io_cost
from ..cost import Cost
from ..registry import register_rule

__all__ = ["FLOPS_PER_ELEMENT", "elementwise"]

_ONE = (
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
    "And", "Or", "Xor", "Not", "Neg", "Abs", "Reciprocal", "Sqrt", "Exp", "Log", "Erf", "Tanh", "Relu",
    "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Floor", "Ceil",
    "Round", "Sign", "IsNaN", "IsInf", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot",
    "Where", "ThresholdedRelu", "Shrink",
)

#: ONNX op type -> vector FLOPs per output element (see the module docstring for each formula).
FLOPS_PER_ELEMENT: dict[str, int] = {
    **dict.fromkeys(_ONE, 1),
    "Sigmoid": 4, "HardSigmoid": 4, "HardSwish": 5, "Softplus": 3, "Softsign": 3, "Mish": 5,
    "LeakyRelu": 2, "PRelu": 2, "Elu": 4, "Selu": 5, "Celu": 5, "Clip": 2,
    "Cast": 0, "CastLike": 0,
    "DequantizeLinear": 2, "QuantizeLinear": 3, "DynamicQuantizeLinear": 5,
}

#: ``com.microsoft`` elementwise ops: FastGelu / Gelu as above; BiasGelu = bias add + Gelu;
#: QuickGelu ``x * sigmoid(1.702 x)`` = mul + 4 + mul = 6; BiasAdd ``X + bias + skip`` = 2.
MS_FLOPS_PER_ELEMENT: dict[str, int] = {
    "Gelu": 5, "BiasGelu": 6, "QuickGelu": 6, "BiasAdd": 2,
    "QuantizeLinear": 3, "DequantizeLinear": 2,
}


def elementwise(node: OpNode, per_element: int) -> Cost:
    """``per_element * numel(output 0)`` vector FLOPs; every input and output read / written once."""
    return io_cost(node, vector_flops=per_element * node.outputs[0].numel)


def _make(per_element: int):
    def rule(node: OpNode) -> Cost:
        return elementwise(node, per_element)

    rule.__doc__ = f"{per_element} vector FLOP(s) per output element."
    return rule


for _op, _k in FLOPS_PER_ELEMENT.items():
    register_rule(f"onnx.{_op}")(_make(_k))
for _op, _k in MS_FLOPS_PER_ELEMENT.items():
    register_rule(f"com.microsoft.{_op}")(_make(_k))


@register_rule("onnx.Gelu")
def gelu(node: OpNode) -> Cost:
    """Gelu (opset 20): 5 per element (erf form), 9 with ``approximate="tanh"``."""
    return elementwise(node, 9 if node.attrs.get("approximate", "none") == "tanh" else 5)


@register_rule("com.microsoft.FastGelu")
def fast_gelu(node: OpNode) -> Cost:
    """FastGelu(X, bias): the tanh Gelu (9 per element) plus one for the optional bias add."""
    return elementwise(node, 9 + (1 if node.input(1) is not None else 0))


@register_rule("onnx.Sum", "onnx.Max", "onnx.Min")
def variadic(node: OpNode) -> Cost:
    """n inputs combined pairwise: ``n - 1`` per output element."""
    n = sum(1 for t in node.inputs if t is not None)
    return elementwise(node, max(n - 1, 0))


@register_rule("onnx.Mean")
def mean(node: OpNode) -> Cost:
    """n inputs: ``n - 1`` adds and one divide per output element = ``n``."""
    return elementwise(node, sum(1 for t in node.inputs if t is not None))
