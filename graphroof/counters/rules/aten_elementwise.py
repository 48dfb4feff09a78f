"""Elementwise ATen ops by family, registered through one factory: ``k`` vector FLOPs per output element,
every input read once (broadcast operands at their own size), the output written once.

Each op is registered with its in-place twin (``aten.add`` and ``aten.add_``).  Transcendentals (exp, tanh,
erf ...) count 1 FLOP, as on GPUs' special-function units (the convention of ``SOFTMAX_FLOPS_PER_ELEMENT``).
Activations are the sum of the elementary ops of their usual formula (table below).  Casts, fills and random
generators move data but compute nothing (random generators: 1 per element); rotary embeddings are plain
``mul`` / ``neg`` / ``cat`` / ``add`` and are counted by these rules.
"""

from __future__ import annotations

from ...graph import OpNode
from ..common import io_cost
from ..cost import Cost
from ..registry import register_rule

#: Elementary ops per element of each activation's formula.
ACTIVATION_FLOPS_PER_ELEMENT = {
    "relu": 1, "relu6": 1, "hardtanh": 1, "threshold": 1,
    "leaky_relu": 2,            # compare, multiply
    "prelu": 2, "rrelu": 2,
    "sigmoid": 4,               # 1 / (1 + exp(-x)): neg, exp, add, divide
    "logsigmoid": 5,            # sigmoid + log
    "silu": 5,                  # x * sigmoid(x)
    "gelu": 5,                  # x * 0.5 * (1 + erf(x / sqrt 2)): divide, erf, add, multiply, multiply
    "gelu_tanh": 9,             # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): x^3 (2), mul, add, mul, tanh, add, mul, mul
    "softplus": 3,              # log(1 + exp(x))
    "mish": 5,                  # x * tanh(softplus(x))
    "elu": 3, "celu": 3, "selu": 4,
    "hardswish": 5,             # x * relu6(x + 3) / 6: add, clamp (2), multiply, divide
    "hardsigmoid": 3,           # relu6(x + 3) / 6
    "softsign": 3, "tanhshrink": 2, "hardshrink": 2, "softshrink": 2,
    "glu": 5,                   # a * sigmoid(b), per output element
}

UNARY = (
    "abs", "neg", "reciprocal", "sqrt", "rsqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin",
    "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc",
    "erfinv", "sign", "sgn", "signbit", "floor", "ceil", "round", "trunc", "frac", "square", "logical_not",
    "bitwise_not", "isnan", "isinf", "isfinite", "isposinf", "isneginf", "nan_to_num", "clamp", "clamp_min",
    "clamp_max", "clip", "lgamma", "digamma", "i0", "sinc", "deg2rad", "rad2deg", "logit", "angle", "conj_physical",
    "positive", "heaviside",
)
BINARY = (
    "add", "sub", "rsub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow", "float_power",
    "maximum", "minimum", "fmax", "fmin", "eq", "ne", "lt", "le", "gt", "ge", "greater", "less",
    "greater_equal", "less_equal", "not_equal", "logical_and", "logical_or", "logical_xor", "bitwise_and",
    "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "__and__", "__or__", "__xor__",
    "__lshift__", "__rshift__", "__iand__", "__ior__", "__ixor__", "atan2", "arctan2", "hypot", "copysign",
    "xlogy", "where", "masked_fill", "isclose", "polar", "complex", "ldexp", "nextafter", "logaddexp", "logaddexp2",
)
TERNARY = ("addcmul", "addcdiv", "lerp")   # a + v * b * c, a + v * b / c, a + w * (b - a): 2 ops per element


def _elementwise_rule(per_element: int, complex_factor: int = 1, scaled_operand: bool = False):
    def rule(node: OpNode) -> Cost:
        out = node.outputs[0]
        k = per_element
        if complex_factor != 1 and out.dtype.startswith("complex"):
            k *= complex_factor
        if scaled_operand and node.attrs.get("alpha", 1) not in (1, 1.0, None):  # add / sub: a + alpha * b
            k += 1
        return io_cost(node, vector_flops=k * out.numel)
    return rule


def register_elementwise(names, per_element: int, complex_factor: int = 1, inplace: bool = True,
                         scaled_operand: bool = False) -> None:
    """Register ``aten.<name>`` (and ``aten.<name>_``) as ``per_element`` vector FLOPs per output element.

    ``scaled_operand``: the op's ``alpha`` scales its second operand (add / sub), one more FLOP when != 1."""
    rule = _elementwise_rule(per_element, complex_factor, scaled_operand)
    for n in names:
        keys = [f"aten.{n}"] + ([f"aten.{n}_"] if inplace and not n.startswith("__") else [])
        register_rule(*keys)(rule)


register_elementwise(UNARY, 1)
register_elementwise(("add", "sub", "rsub"), 1, complex_factor=2, scaled_operand=True)
register_elementwise(("mul",), 1, complex_factor=6)                 # (a+bi)(c+di): 4 multiplies, 2 adds
register_elementwise(("div", "true_divide"), 1, complex_factor=11)  # conj multiply (6), |d|^2 (3), 2 divides
register_elementwise([b for b in BINARY if b not in ("add", "sub", "rsub", "mul", "div", "true_divide")], 1)
register_elementwise(TERNARY, 2)
for _name, _k in ACTIVATION_FLOPS_PER_ELEMENT.items():
    if _name not in ("gelu", "gelu_tanh"):
        register_elementwise((_name,), _k)


@register_rule("aten.gelu", "aten.gelu_")
def gelu_cost(node: OpNode) -> Cost:
    """erf form (default) or ``approximate="tanh"``; see :data:`ACTIVATION_FLOPS_PER_ELEMENT`."""
    k = ACTIVATION_FLOPS_PER_ELEMENT["gelu_tanh" if node.attrs.get("approximate") == "tanh" else "gelu"]
    return io_cost(node, vector_flops=k * node.outputs[0].numel)


# -- casts, copies, fills, generators -------------------------------------------------------------------

@register_rule("aten._to_copy", "aten.clone", "aten.lift_fresh_copy", "aten._to_dense", "aten.to_dense",
               "aten.to_padded_tensor", "aten.resolve_conj", "aten.resolve_neg", "aten.expand_copy",
               "aten.permute_copy", "aten.transpose_copy", "aten.view_copy", "aten.t_copy", "aten.unsqueeze_copy",
               "aten.squeeze_copy", "aten.slice_copy", "aten.select_copy", "aten._reshape_copy", "aten.alias_copy")
def copy_cost(node: OpNode) -> Cost:
    """A copy or dtype cast: read the input, write the output (0 FLOPs)."""
    return io_cost(node, inputs=node.inputs[:1])


@register_rule("aten.copy_", "aten.copy")
def copy_into_cost(node: OpNode) -> Cost:
    """``dst.copy_(src)``: read src (input 1), write dst (a KV-cache slot when dst is one)."""
    return io_cost(node, inputs=node.inputs[1:2])


_FILLS = ("zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "new_full",
          "fill", "fill_", "zero_", "zero", "scalar_tensor", "eye", "tril_indices", "triu_indices",
          "_efficientzerotensor")


@register_rule(*(f"aten.{n}" for n in _FILLS))
def fill_cost(node: OpNode) -> Cost:
    """Writes its output; ``*_like`` / ``new_*`` / ``fill_`` take a tensor only for its shape: nothing read
    (``fill_`` with a tensor value reads that one element)."""
    return io_cost(node, inputs=node.inputs[1:2] if node.op in ("aten.fill", "aten.fill_") else [])


@register_rule("aten.arange", "aten.linspace", "aten.logspace", "aten.rand", "aten.randn", "aten.rand_like",
               "aten.randn_like", "aten.randint", "aten.randint_like", "aten.randperm", "aten.normal",
               "aten.normal_", "aten.uniform", "aten.uniform_", "aten.bernoulli", "aten.bernoulli_",
               "aten.exponential_", "aten.random_", "aten.multinomial", "aten.poisson")
def generator_cost(node: OpNode) -> Cost:
    """Ranges and random numbers: one vector FLOP per output element; reads only a probability input."""
    reads = node.inputs[:1] if node.op in ("aten.bernoulli", "aten.multinomial", "aten.poisson") else []
    return io_cost(node, inputs=reads, vector_flops=sum(t.numel for t in node.outputs))


@register_rule("aten.empty", "aten.empty_like", "aten.new_empty", "aten.empty_strided", "aten.new_empty_strided",
               "aten.empty_permuted", "aten.resize_")
def alloc_cost(node: OpNode) -> Cost:  # noqa: ARG001 - allocation writes nothing
    """Allocation without initialisation: no bytes move, no FLOPs."""
    return Cost()
