"""Elementwise family: ``k`` vector FLOPs per output element, every input read once (broadcast operands at
their own size), every output written once.  One table registers the ATen and the ONNX key of each op.

``k`` is the number of elementary operations of the op's textbook formula; a transcendental (exp, log, erf,
tanh ...) counts 1, as on GPUs' special-function units (the convention of ``SOFTMAX_FLOPS_PER_ELEMENT``), and a
compare-and-select counts 1.  The activations, with the arithmetic per element:

* sigmoid ``1/(1+exp(-x))``: neg, exp, add, divide = 4; logsigmoid: + log = 5; silu ``x*sigmoid(x)`` = 5
* gelu ``0.5x(1+erf(x/sqrt2))``: divide, erf, add, multiply, multiply = 5; tanh form
  ``0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))``: x^3 (2), multiply, add, multiply, tanh, add, multiply, multiply = 9
* elu ``x if x>0 else alpha*(exp(x)-1)``: exp, subtract, multiply, select = 4 (10 elements: 40)
* selu ``scale*elu(x)``: elu (4) + the scale multiply = 5 (10 elements: 50)
* celu ``x if x>0 else alpha*(exp(x/alpha)-1)``: elu (4) + the divide x/alpha = 5 (10 elements: 50)
* hardsigmoid ``clip(alpha*x+beta, 0, 1)`` (torch: ``relu6(x+3)/6``): multiply/divide, add, min, max = 4
  (10 elements: 40); hardswish ``x*hardsigmoid(x)`` = 5
* clamp / Clip ``min(max(x, lo), hi)``: one compare-and-select per bound given (both bounds, 10 elements: 20;
  clamp_min / clamp_max: 1)
* softplus ``log(1+exp x)`` = 3; mish ``x*tanh(softplus x)`` = 5; softsign ``x/(1+|x|)`` = 3
* leaky_relu / prelu (compare, multiply) = 2; softshrink / ONNX Shrink (compare, add the bias) = 2

Casts and copies move data but compute nothing; fills write only; random generators and ranges compute one value
per element.  Rotary embeddings in eager code are plain ``mul`` / ``neg`` / ``cat`` / ``add`` and counted here.
"""

from __future__ import annotations

from ...graph import OpNode
from ..common import io_cost
from ..cost import Cost
from ..family import Row, aten, ms, onnx, register_family
from ..registry import Rule

__all__ = ["ACTIVATION_FLOPS_PER_ELEMENT", "ROWS", "clamp_bounds", "elementwise", "per_element"]

#: Elementary ops per element of each activation's formula (see the module docstring).
ACTIVATION_FLOPS_PER_ELEMENT = {
    "relu": 1, "relu6": 1, "hardtanh": 1, "threshold": 1,
    "leaky_relu": 2, "prelu": 2, "rrelu": 2,
    "sigmoid": 4, "logsigmoid": 5, "silu": 5, "gelu": 5, "gelu_tanh": 9,
    "softplus": 3, "mish": 5,
    "hardswish": 5, "hardsigmoid": 4,
    "softsign": 3, "tanhshrink": 2, "hardshrink": 2, "softshrink": 2,
    "glu": 5,                   # a * sigmoid(b), per output element
}


def elementwise(node: OpNode, k: float) -> Cost:
    """``k * numel(output 0)`` vector FLOPs; every input read and every output written once."""
    return io_cost(node, vector_flops=k * node.outputs[0].numel)


def per_element(k: int, complex_factor: int = 1, scaled_operand: bool = False) -> Rule:
    """The rule ``k`` FLOPs per output element (``* complex_factor`` on complex outputs; ``scaled_operand``:
    the op's ``alpha`` scales its second operand, add / sub, one more FLOP when it is not 1)."""
    def rule(node: OpNode) -> Cost:
        n = k
        if complex_factor != 1 and node.outputs[0].dtype.startswith("complex"):
            n *= complex_factor
        if scaled_operand and node.attrs.get("alpha", 1) not in (1, 1.0, None):  # a + alpha * b
            n += 1
        return elementwise(node, n)

    rule.__doc__ = f"{k} vector FLOP(s) per output element."
    return rule


def elu_flops(scaled_output: bool, scaled_input: bool) -> int:
    """The ELU family ``scale * (x > 0 ? x : alpha * (exp(input_scale * x) - 1))`` per element: select, exp,
    subtract 1, multiply by alpha (4), one multiply more for an output scale (SELU's 1.0507) and one for an input
    scale (CELU's ``x / alpha``).  ELU 4, SELU 5, CELU 5, in both frontends."""
    return 4 + int(scaled_output) + int(scaled_input)


def _not_one(v: object) -> bool:
    return v is not None and v not in (1, 1.0)


def aten_elu(node: OpNode) -> Cost:
    """``aten.elu(x, alpha, scale, input_scale)`` (``F.selu`` is captured as ``aten.elu`` with SELU's scale)."""
    return elementwise(node, elu_flops(_not_one(node.attrs.get("scale")), _not_one(node.attrs.get("input_scale"))))


def selu(node: OpNode) -> Cost:
    """``aten.selu`` / ONNX ``Selu`` (output scale ``gamma``, 1.0507 by default)."""
    return elementwise(node, elu_flops(_not_one(node.attrs.get("gamma", 1.0507009873554805)), False))


def onnx_elu(node: OpNode) -> Cost:
    return elementwise(node, elu_flops(False, False))


def celu(node: OpNode) -> Cost:
    """CELU is ELU of ``x / alpha``: the input scale is always computed."""
    return elementwise(node, elu_flops(False, True))


def clamp_bounds(node: OpNode) -> int:
    """Bounds given to a clamp: tensor inputs 1 / 2 (ATen ``clamp.Tensor``, ONNX ``Clip`` opset >= 11) or the
    ``min`` / ``max`` attributes (ATen scalars, ONNX ``Clip`` opset < 11)."""
    inputs = sum(1 for i in (1, 2) if node.input(i) is not None)
    attrs = sum(1 for a in ("min", "max") if node.attrs.get(a) is not None)
    return inputs + attrs


def clamp(node: OpNode) -> Cost:
    """One compare-and-select per bound per element."""
    return elementwise(node, clamp_bounds(node))


def gelu(node: OpNode) -> Cost:
    """erf form (5) or ``approximate="tanh"`` (9), the same attribute in ATen and ONNX (opset 20)."""
    return elementwise(node, ACTIVATION_FLOPS_PER_ELEMENT["gelu_tanh" if node.attrs.get("approximate") == "tanh"
                                                          else "gelu"])


def swish(node: OpNode) -> Cost:
    """``x * sigmoid(alpha * x)``: sigmoid (4) + the multiply by x (1) = 5 (torch silu, alpha = 1), + 1 for the
    multiply by alpha when ONNX Swish's ``alpha`` is not 1."""
    scaled = node.attrs.get("alpha", 1) not in (1, 1.0, None)
    return elementwise(node, ACTIVATION_FLOPS_PER_ELEMENT["silu"] + (1 if scaled else 0))


def swiglu(node: OpNode) -> Cost:
    """ONNX SwiGLU(A, B) = ``Swish_alpha(A) * B``: the swish (5, + 1 when ``alpha`` is not 1) + the gate
    multiply (1) = 6 per output element (7 with alpha)."""
    return swish(node) + Cost(vector_flops=node.outputs[0].numel)


def fast_gelu(node: OpNode) -> Cost:
    """com.microsoft FastGelu(X, bias): the tanh Gelu (9) plus one for the optional bias add."""
    return elementwise(node, 9 + (1 if node.input(1) is not None else 0))


def variadic(node: OpNode) -> Cost:
    """ONNX Sum / Max / Min of n inputs combined pairwise: ``n - 1`` per output element."""
    return elementwise(node, max(sum(1 for t in node.inputs if t is not None) - 1, 0))


def mean(node: OpNode) -> Cost:
    """ONNX Mean of n inputs: ``n - 1`` adds and one divide = ``n`` per output element."""
    return elementwise(node, sum(1 for t in node.inputs if t is not None))


def copy(node: OpNode) -> Cost:
    """A copy or dtype cast: read the input, write the output (0 FLOPs)."""
    return io_cost(node, inputs=node.inputs[:1])


def copy_into(node: OpNode) -> Cost:
    """``dst.copy_(src)``: read src (input 1), write dst (a KV-cache slot when dst is one)."""
    return io_cost(node, inputs=node.inputs[1:2])


def fill(node: OpNode) -> Cost:
    """Writes its output; ``*_like`` / ``new_*`` / ``fill_`` take a tensor only for its shape: nothing read
    (``fill_`` with a tensor value reads that one element)."""
    return io_cost(node, inputs=node.inputs[1:2] if node.op in ("aten.fill", "aten.fill_") else [])


def generator(node: OpNode) -> Cost:
    """Ranges and random numbers: one vector FLOP per output element; reads only a probability input."""
    reads = node.inputs[:1] if node.op in ("aten.bernoulli", "aten.multinomial", "aten.poisson") else []
    return io_cost(node, inputs=reads, vector_flops=sum(t.numel for t in node.outputs))


def alloc(node: OpNode) -> Cost:
    """Allocation without initialisation: no bytes move, no FLOPs."""
    return Cost()


ONE = per_element(1)

#: (member, ATen name, ONNX op) of the one-FLOP ops both frontends have.
_ONE_PAIRS = (
    ("pow", "pow", "Pow"), ("remainder", "remainder", "Mod"), ("eq", "eq", "Equal"), ("lt", "lt", "Less"),
    ("le", "le", "LessOrEqual"), ("gt", "gt", "Greater"), ("ge", "ge", "GreaterOrEqual"),
    ("logical_and", "logical_and", "And"), ("logical_or", "logical_or", "Or"),
    ("logical_xor", "logical_xor", "Xor"), ("logical_not", "logical_not", "Not"), ("neg", "neg", "Neg"),
    ("abs", "abs", "Abs"), ("reciprocal", "reciprocal", "Reciprocal"), ("sqrt", "sqrt", "Sqrt"),
    ("exp", "exp", "Exp"), ("log", "log", "Log"), ("erf", "erf", "Erf"), ("tanh", "tanh", "Tanh"),
    ("relu", "relu", "Relu"), ("sin", "sin", "Sin"), ("cos", "cos", "Cos"), ("tan", "tan", "Tan"),
    ("asin", "asin", "Asin"), ("acos", "acos", "Acos"), ("atan", "atan", "Atan"), ("sinh", "sinh", "Sinh"),
    ("cosh", "cosh", "Cosh"), ("asinh", "asinh", "Asinh"), ("acosh", "acosh", "Acosh"),
    ("atanh", "atanh", "Atanh"), ("floor", "floor", "Floor"), ("ceil", "ceil", "Ceil"),
    ("round", "round", "Round"), ("sign", "sign", "Sign"), ("isnan", "isnan", "IsNaN"),
    ("isinf", "isinf", "IsInf"), ("bitwise_and", "bitwise_and", "BitwiseAnd"),
    ("bitwise_or", "bitwise_or", "BitwiseOr"), ("bitwise_xor", "bitwise_xor", "BitwiseXor"),
    ("bitwise_not", "bitwise_not", "BitwiseNot"), ("where", "where", "Where"),
    ("threshold", "threshold", "ThresholdedRelu"),
)
#: One-FLOP ops only ATen names.
_ATEN_ONE = (
    "exp2", "expm1", "log2", "log10", "log1p", "rsqrt", "erfc", "erfinv", "sgn", "signbit", "trunc", "frac",
    "square", "isfinite", "isposinf", "isneginf", "nan_to_num", "lgamma", "digamma", "i0", "sinc", "deg2rad",
    "rad2deg", "logit", "angle", "conj_physical", "positive", "heaviside",
    "floor_divide", "fmod", "float_power", "maximum", "minimum", "fmax", "fmin", "ne", "greater", "less",
    "greater_equal", "less_equal", "not_equal", "__and__", "__or__", "__xor__", "__iand__", "__ior__", "__ixor__",
    "atan2", "arctan2", "hypot", "copysign", "xlogy", "masked_fill", "isclose", "polar", "complex", "ldexp",
    "nextafter", "logaddexp", "logaddexp2",
)
#: Activations only ATen names (with their k from ACTIVATION_FLOPS_PER_ELEMENT).
_ATEN_ACTIVATIONS = ("relu6", "hardtanh", "rrelu", "logsigmoid", "tanhshrink", "hardshrink", "glu")
#: (member, ATen name, ONNX op) of the activations both frontends have.
_ACTIVATION_PAIRS = (
    ("sigmoid", "sigmoid", "Sigmoid"), ("hardsigmoid", "hardsigmoid", "HardSigmoid"),
    ("hardswish", "hardswish", "HardSwish"), ("softplus", "softplus", "Softplus"),
    ("softsign", "softsign", "Softsign"), ("mish", "mish", "Mish"), ("leaky_relu", "leaky_relu", "LeakyRelu"),
    ("prelu", "prelu", "PRelu"), ("softshrink", "softshrink", "Shrink"),
)

ROWS = (
    #   member          ATen keys                                   ONNX keys                  rule
    Row("add",          aten("add", inplace=True),                  onnx("Add"),               per_element(1, 2, True)),
    Row("sub",          aten("sub", "rsub", inplace=True),          onnx("Sub"),               per_element(1, 2, True)),
    Row("mul",          aten("mul", inplace=True),                  onnx("Mul"),               per_element(1, 6)),
    # complex divide: conjugate multiply (6), |d|^2 (3), 2 divides = 11
    Row("div",          aten("div", "true_divide", inplace=True),   onnx("Div"),               per_element(1, 11)),
    *(Row(m, aten(a, inplace=True), onnx(o), ONE) for m, a, o in _ONE_PAIRS),
    *(Row(a, aten(a, inplace=True), (), ONE) for a in _ATEN_ONE),
    Row("bitshift",     aten("bitwise_left_shift", "bitwise_right_shift", inplace=True) + aten("__lshift__", "__rshift__"),
        onnx("BitShift"), ONE),
    # a + v * b * c, a + v * b / c, a + w * (b - a): 2 per element
    Row("ternary",      aten("addcmul", "addcdiv", "lerp", inplace=True), (),                  per_element(2)),
    Row("clamp",        aten("clamp", "clamp_min", "clamp_max", "clip", inplace=True), onnx("Clip"), clamp),
    *(Row(m, aten(a, inplace=True), onnx(o), per_element(ACTIVATION_FLOPS_PER_ELEMENT[a]))
      for m, a, o in _ACTIVATION_PAIRS),
    *(Row(a, aten(a, inplace=True), (), per_element(ACTIVATION_FLOPS_PER_ELEMENT[a])) for a in _ATEN_ACTIVATIONS),
    # the ELU family: one formula (elu_flops), each frontend's attributes read by its adapter
    Row("elu",          aten("elu", inplace=True),                  onnx("Elu"),               aten_elu, onnx_rule=onnx_elu),
    Row("selu",         aten("selu", inplace=True),                 onnx("Selu"),              selu),
    Row("celu",         aten("celu", inplace=True),                 onnx("Celu"),              celu),
    Row("gelu",         aten("gelu", inplace=True),                 onnx("Gelu") + ms("Gelu"), gelu),
    Row("silu",         aten("silu", inplace=True),                 onnx("Swish"),             swish),
    Row("swiglu",       (),                                         onnx("SwiGLU"),            swiglu),
    Row("fast_gelu",    (),                                         ms("FastGelu"),            fast_gelu),
    # bias add + gelu = 6; QuickGelu x * sigmoid(1.702 x): multiply + 4 + multiply = 6; BiasAdd X + bias + skip = 2
    Row("bias_gelu",    (),                                         ms("BiasGelu", "QuickGelu"), per_element(6)),
    Row("bias_add",     (),                                         ms("BiasAdd"),             per_element(2)),
    Row("variadic",     (),                                         onnx("Sum", "Max", "Min"), variadic),
    Row("mean",         (),                                         onnx("Mean"),              mean),
    Row("cast",         aten("_to_copy"),                           onnx("Cast"),              copy,
        onnx_rule=per_element(0)),
    Row("cast_like",    (),                                         onnx("CastLike"),          per_element(0)),
    Row("copy",         aten("clone", "lift_fresh_copy", "_to_dense", "to_dense", "to_padded_tensor", "resolve_conj",
                             "resolve_neg", "expand_copy", "permute_copy", "transpose_copy", "view_copy", "t_copy",
                             "unsqueeze_copy", "squeeze_copy", "slice_copy", "select_copy", "_reshape_copy",
                             "alias_copy"), (), copy),
    Row("copy_into",    aten("copy_", "copy"),                      (),                        copy_into),
    Row("fill",         aten("zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "new_zeros", "new_ones",
                             "new_full", "fill", "fill_", "zero_", "zero", "scalar_tensor", "eye", "tril_indices",
                             "triu_indices", "_efficientzerotensor"), (), fill),
    Row("generator",    aten("arange", "linspace", "logspace", "rand", "randn", "rand_like", "randn_like", "randint",
                             "randint_like", "randperm", "normal", "normal_", "uniform", "uniform_", "bernoulli",
                             "bernoulli_", "exponential_", "random_", "multinomial", "poisson"), (), generator),
    # ONNX Range: start + i * delta as a running add, one FLOP per element; reads its three scalars
    Row("range",        (),                                         onnx("Range"),             ONE),
    Row("alloc",        aten("empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided",
                             "empty_permuted", "resize_"), (), alloc),
)

register_family("elementwise", ROWS)
