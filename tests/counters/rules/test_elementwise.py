"""Elementwise family (ATen and ONNX keys): activations, arithmetic, casts, fills, generators, on literals."""

from __future__ import annotations

import pytest

from graphroof.counters.cost import Cost
from graphroof.counters.registry import REGISTRY
from graphroof.counters.rules.elementwise import ACTIVATION_FLOPS_PER_ELEMENT
from tests.conftest import T, W, node
from tests.counters.rules._family import assert_frontends_agree, paired_members, run


def cost(n):
    return run(n)


def test_binary_broadcast_reads_each_operand_at_its_size():
    # [4, 8] + [8] -> [4, 8]: 32 adds; reads 32 + 8 elements, writes 32 (fp32)
    c = cost(node("aten.add", [T("fp32", 4, 8), T("fp32", 8)], [T("fp32", 4, 8)]))
    assert c.vector_flops == 32
    assert c.act_read_bytes == 160 and c.act_write_bytes == 128
    # a weight operand (RMSNorm's gamma multiply) is counted as weight bytes
    c = cost(node("aten.mul", [W("bf16", 8), T("bf16", 4, 8)], [T("bf16", 4, 8)]))
    assert c.weight_bytes == 16 and c.act_read_bytes == 64


def test_scalar_operand_and_alpha():
    c = cost(node("aten.mul", [T("fp32", 10)], [T("fp32", 10)], other=0.5))
    assert c.vector_flops == 10 and c.act_read_bytes == 40
    assert cost(node("aten.add", [T("fp32", 10), T("fp32", 10)], [T("fp32", 10)], alpha=2)).vector_flops == 20
    # elu's alpha is its negative-side scale, already in its 4 FLOPs per element (exp, subtract, multiply by
    # alpha, select): 4 * 10 = 40, not one more for alpha
    assert cost(node("aten.elu", [T("fp32", 10)], [T("fp32", 10)], alpha=0.5)).vector_flops == 40


def test_inplace_twins_registered():
    for op in ("aten.add_", "aten.mul_", "aten.relu_", "aten.silu_", "aten.clamp_", "aten.masked_fill_"):
        assert REGISTRY.lookup(op) is not None, op
    c = cost(node("aten.mul_", [T("fp16", 6), T("fp16", 6)], [T("fp16", 6)]))
    assert c.vector_flops == 6 and c.act_read_bytes == 24 and c.act_write_bytes == 12


@pytest.mark.parametrize("op, k", [("aten.relu", 1), ("aten.silu", 5), ("aten.sigmoid", 4), ("aten.tanh", 1),
                                   ("aten.exp", 1), ("aten.rsqrt", 1), ("aten.hardswish", 5), ("aten.mish", 5),
                                   ("aten.leaky_relu", 2), ("aten.where", 1), ("aten.addcmul", 2)])
def test_per_element_costs(op, k):
    assert cost(node(op, [T("fp32", 3, 5)], [T("fp32", 3, 5)])).vector_flops == 15 * k


def test_gelu_erf_and_tanh():
    x = T("fp32", 100)
    assert cost(node("aten.gelu", [x], [x])).vector_flops == 500
    assert cost(node("aten.gelu", [x], [x], approximate="tanh")).vector_flops == 900
    assert ACTIVATION_FLOPS_PER_ELEMENT["gelu_tanh"] == 9


def test_complex_multiply_is_six_real_flops():
    # rotary embeddings written with complex numbers: (a+bi)(c+di) = 4 multiplies + 2 adds
    z = T("complex64", 4, 16)
    assert cost(node("aten.mul", [z, z], [z])).vector_flops == 6 * 64
    assert cost(node("aten.add", [z, z], [z])).vector_flops == 2 * 64


def test_casts_copy_without_flops():
    c = cost(node("aten._to_copy", [T("fp32", 4, 8)], [T("bf16", 4, 8)], dtype="bf16"))
    assert c.flops == 0 and c.act_read_bytes == 128 and c.act_write_bytes == 64
    # copy_(dst, src): reads src, writes dst (a KV-cache slot here)
    c = cost(node("aten.copy_", [T("bf16", 2, 8, role="kv_cache"), T("bf16", 2, 8)], [T("bf16", 2, 8, role="kv_cache")]))
    assert c.act_read_bytes == 32 and c.kv_write_bytes == 32 and c.kv_read_bytes == 0


def test_fills_write_only_and_empty_is_free_of_traffic():
    c = cost(node("aten.ones_like", [T("fp32", 8)], [T("fp32", 8)]))
    assert c.act_read_bytes == 0 and c.act_write_bytes == 32
    c = cost(node("aten.arange", [], [T("int64", 10)]))
    assert c.vector_flops == 10 and c.act_write_bytes == 80
    c = cost(node("aten.empty", [], [T("fp32", 1000)]))
    assert c.bytes == 0 and c.flops == 0


# -- the defects the two frontends disagreed on, decided per the ops' formulas (10-element fp32 tensors) -------

X10 = T("fp32", 10)


@pytest.mark.parametrize("aten_op, onnx_op, flops", [
    ("aten.elu", "onnx.Elu", 40),                  # exp, subtract 1, multiply by alpha, select: 4 x 10
    ("aten.selu", "onnx.Selu", 50),                # elu (4) + the scale multiply: 5 x 10
    ("aten.celu", "onnx.Celu", 50),                # elu of x/alpha: divide + 4 = 5 x 10
    ("aten.hardsigmoid", "onnx.HardSigmoid", 40),  # multiply (or /6), add, min, max: 4 x 10
])
def test_activation_defects_decided(aten_op, onnx_op, flops):
    a = cost(node(aten_op, [X10], [X10]))
    o = cost(node(onnx_op, [X10], [X10]))
    assert a == o == Cost(vector_flops=flops, act_read_bytes=40, act_write_bytes=40)


def test_clamp_counts_one_compare_per_bound():
    # both bounds: min and max per element, 2 x 10 = 20, in ATen (scalar attrs) and ONNX (Clip's inputs 1, 2)
    a = cost(node("aten.clamp", [X10], [X10], min=0.0, max=6.0))
    o = cost(node("onnx.Clip", [X10, T("fp32"), T("fp32")], [X10]))
    assert a.vector_flops == o.vector_flops == 20
    # one bound: 10; ONNX Clip with only max (min input left empty); ATen clamp_min
    assert cost(node("aten.clamp_min", [X10], [X10], min=0.0)).vector_flops == 10
    assert cost(node("onnx.Clip", [X10, None, T("fp32")], [X10])).vector_flops == 10
    # ONNX Clip opset 6: bounds as attributes
    assert cost(node("onnx.Clip", [X10], [X10], min=0.0, max=1.0)).vector_flops == 20


def test_swish_is_silu_with_alpha():
    # x * sigmoid(alpha * x): neg, exp, add, divide (sigmoid, 4) + multiply by x (1) = 5 per element, as silu;
    # alpha = 1.702 (QuickGelu's) adds the multiply alpha * x: 6 x 10 = 60
    assert cost(node("onnx.Swish", [X10], [X10])) == cost(node("aten.silu", [X10], [X10]))
    assert cost(node("onnx.Swish", [X10], [X10], alpha=1.702)).vector_flops == 60


def test_swiglu_is_swish_times_value():
    # Y [2,16] = 32 elements: swish(A) 5 + multiply by B 1 = 6 -> 192; alpha != 1 adds alpha * a: 7 -> 224
    a = T("fp32", 2, 16)
    c = cost(node("onnx.SwiGLU", [a, a], [a]))
    assert c == Cost(vector_flops=192, act_read_bytes=2 * 128, act_write_bytes=128)
    assert cost(node("onnx.SwiGLU", [a, a], [a], alpha=1.702)).vector_flops == 224


def test_shrink_is_compare_and_bias_add():
    # ONNX Shrink (= torch softshrink): x - bias if x > lambd, x + bias if x < -lambd: compare + add = 2 x 10
    assert cost(node("onnx.Shrink", [X10], [X10], lambd=0.5, bias=0.5)).vector_flops == 20


# -- ONNX keys on literals ----------------------------------------------------------------------------------

def test_onnx_add_broadcast_reads_inputs_at_their_size():
    c = cost(node("onnx.Add", [T("fp32", 2, 3), T("fp32", 3)], [T("fp32", 2, 3)]))
    assert c == Cost(vector_flops=6, act_read_bytes=(6 + 3) * 4, act_write_bytes=6 * 4)


@pytest.mark.parametrize("op, attrs, per", [
    ("onnx.Sigmoid", {}, 4), ("onnx.Relu", {}, 1), ("onnx.Erf", {}, 1), ("onnx.Tanh", {}, 1), ("onnx.Sqrt", {}, 1),
    ("onnx.Gelu", {}, 5), ("onnx.Gelu", {"approximate": "tanh"}, 9), ("onnx.HardSwish", {}, 5),
    ("onnx.LeakyRelu", {}, 2), ("com.microsoft.QuickGelu", {}, 6), ("com.microsoft.BiasGelu", {}, 6),
])
def test_onnx_unary_per_element_table(op, attrs, per):
    c = cost(node(op, [X10], [X10], **attrs))
    assert c.vector_flops == per * 10
    assert c.act_read_bytes == 40 and c.act_write_bytes == 40


def test_onnx_cast_moves_bytes_in_real_dtypes():
    assert cost(node("onnx.Cast", [X10], [T("fp16", 10)], to=10)) == Cost(act_read_bytes=40, act_write_bytes=20)


def test_onnx_where_variadic_and_fast_gelu():
    c = cost(node("onnx.Where", [T("bool", 4), T("fp32", 4), T("fp32", 4)], [T("fp32", 4)]))
    assert c == Cost(vector_flops=4, act_read_bytes=4 + 16 + 16, act_write_bytes=16)
    five = T("fp32", 5)
    assert cost(node("onnx.Sum", [five, five, five], [five])).vector_flops == 2 * 5   # 3 inputs: 2 adds each
    assert cost(node("onnx.Mean", [five, five, five], [five])).vector_flops == 3 * 5  # 2 adds + a divide
    # FastGelu: the tanh gelu (9) + the bias add (1) per element
    assert cost(node("com.microsoft.FastGelu", [X10, W("fp32", 10)], [X10])).vector_flops == 100
    assert cost(node("onnx.Range", [T("int64"), T("int64"), T("int64")], [T("int64", 6)])) == Cost(
        vector_flops=6, act_read_bytes=24, act_write_bytes=48)


# -- ATen and ONNX keys of one row give the same Cost -------------------------------------------------------

def _unary(key):
    return node(key, [T("fp32", 2, 5)], [T("fp32", 2, 5)])


_CASES = {m: _unary for m in paired_members("elementwise")}
_CASES.update({
    # where(cond, x, y) in both
    "where": lambda key: node(key, [T("bool", 2, 5), T("fp32", 2, 5), T("fp32", 5)], [T("fp32", 2, 5)]),
    "add": lambda key: node(key, [T("fp32", 2, 5), T("fp32", 5)], [T("fp32", 2, 5)]),
    "gelu": lambda key: node(key, [T("fp32", 2, 5)], [T("fp32", 2, 5)], approximate="tanh"),
    # clamp with tensor bounds (ATen clamp.Tensor, ONNX Clip opset >= 11): inputs 1 and 2, read by both
    "clamp": lambda key: node(key, [T("fp32", 2, 5), W("fp32"), W("fp32")], [T("fp32", 2, 5)]),
    "cast": (node("aten._to_copy", [T("fp32", 2, 5)], [T("fp16", 2, 5)], dtype="fp16"),
             node("onnx.Cast", [T("fp32", 2, 5)], [T("fp16", 2, 5)], to=10)),
})


@pytest.mark.parametrize("member", paired_members("elementwise"))
def test_aten_and_onnx_keys_agree(member):
    assert_frontends_agree("elementwise", member, _CASES)


def test_selu_captured_as_elu_with_its_scale_counts_as_selu():
    # F.selu reaches the PyTorch frontend as aten.elu(alpha=1.6733, scale=1.0507, input_scale=1): the ELU
    # formula with the output scale, 4 + 1 = 5 per element, as ONNX Selu: 5 x 10 = 50
    a = cost(node("aten.elu", [X10], [X10], alpha=1.6732632423543772, scale=1.0507009873554805, input_scale=1))
    assert a == cost(node("onnx.Selu", [X10], [X10])) == Cost(vector_flops=50, act_read_bytes=40, act_write_bytes=40)
    # ELU itself (scale 1): 4 x 10; ONNX Selu with gamma 1 is an ELU: 4 x 10
    assert cost(node("aten.elu", [X10], [X10], alpha=1.0, scale=1, input_scale=1)).vector_flops == 40
    assert cost(node("onnx.Selu", [X10], [X10], gamma=1.0)).vector_flops == 40


def test_selu_end_to_end_both_frontends_agree(tmp_path):
    """torch.nn.functional.selu on a [4, 1024] fp32 tensor: 4,096 elements x 5 = 20,480 vector FLOPs, through the
    PyTorch frontend (was 16,384: the scale was ignored) and through ONNX Selu."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("graphroof.frontends.torch.export")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    import graphroof

    class Selu(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.selu(x)

    r = graphroof.analyze(Selu(), (torch.randn(4, 1024),), hw="h100")
    assert r.totals.cost.vector_flops == 20_480
    g = helper.make_graph([helper.make_node("Selu", ["x"], ["y"])], "selu",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 1024])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1024])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, tmp_path / "selu.onnx")
    r2 = graphroof.analyze(str(tmp_path / "selu.onnx"), hw="h100")
    assert r2.totals.cost.vector_flops == 20_480
