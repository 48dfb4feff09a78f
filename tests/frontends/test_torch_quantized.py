"""Quantized PyTorch modules (torch.ao eager and FX-converted) under the dispatch capture, and the int8 rules of
graphroof/counters/rules/quantized_torch.py checked on hand-built nodes."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import graphroof
import graphroof.counters.rules.quantized_torch as qr  # registers the rules (until rules/__init__ imports it)
from graphroof.frontends.torch.export import load_module
from graphroof.graph import OpNode, Role, TensorSpec

tq = pytest.importorskip("torch.ao.quantization")
if "fbgemm" not in torch.backends.quantized.supported_engines:
    pytest.skip("no fbgemm quantized engine in this torch build", allow_module_level=True)


class QModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = tq.QuantStub()
        self.fc = nn.Linear(8, 16)
        self.conv = nn.Conv2d(3, 4, 3)
        self.relu = nn.ReLU()
        self.dq = tq.DeQuantStub()

    def forward(self, x, y):
        return self.dq(self.fc(self.q(x))), self.dq(self.relu(self.conv(self.q(y))))


def _eager_quantized() -> nn.Module:
    torch.manual_seed(0)
    m = QModel().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.qconfig = tq.get_default_qconfig("fbgemm")
        tq.prepare(m, inplace=True)
        m(torch.randn(4, 8), torch.randn(1, 3, 8, 8))
        tq.convert(m, inplace=True)
    return m


def test_eager_quantized_model_int8_costs():
    g = load_module(_eager_quantized(), [(4, 8), (1, 3, 8, 8)])
    assert g.meta["capture"] == "dispatch (fake tensors)"
    lin = [n for n in g.ops() if n.op == "quantized.linear"][0]
    assert [(t.shape, t.dtype, t.role) for t in lin.inputs] == [
        ((4, 8), "uint8", Role.ACTIVATION), ((16, 8), "int8", Role.WEIGHT), ((16,), "fp32", Role.WEIGHT)]
    conv = [n for n in g.ops() if n.op == "quantized.conv2d"][0]
    assert conv.outputs[0].shape == (1, 4, 6, 6) and conv.outputs[0].dtype == "uint8"
    assert [n for n in g.ops() if n.op == "aten.relu"][0].outputs[0].dtype == "uint8"
    a = graphroof.analyze(g, hw="a100")
    c = a.totals.cost
    assert not a.summary.unknown
    # linear 2*4*16*8 = 1,024; conv 2 * (4*6*6 = 144 outputs) * 3 * 9 = 7,776
    assert c.matrix_flops == 1024 + 7776
    # weights: int8 128 + fp32 bias 16*4 = 192; int8 4*3*3*3 = 108 + bias 16 = 124
    assert c.weight_bytes == 192 + 124
    # quantize 3/elt (32 + 192 elts), dequantize 2/elt (64 + 144), biases 64 + 144, relu 144
    assert c.vector_flops == 3 * 224 + 2 * 208 + 208 + 144


def _node(op, inputs, outputs, **attrs):
    return OpNode("n", op, tuple(inputs), tuple(outputs), attrs)


def test_quantized_linear_rule_by_hand():
    x, w, b = TensorSpec((3, 10), "uint8"), TensorSpec((6, 10), "int8", Role.WEIGHT), TensorSpec((6,), "fp32", Role.WEIGHT)
    out = TensorSpec((3, 6), "uint8")
    c = qr.quantized_linear_cost(_node("quantized.linear_relu", [x, w, b], [out]))
    # 2*3*6*10 = 360; bias 18 + relu 18; bytes: x 30 + out 18, weight 60 + 24
    assert (c.matrix_flops, c.vector_flops) == (360, 36)
    assert (c.act_read_bytes, c.act_write_bytes, c.weight_bytes) == (30, 18, 84)
    xf = TensorSpec((3, 10), "fp32")
    c = qr.quantized_linear_cost(_node("quantized.linear_dynamic", [xf, w, None], [TensorSpec((3, 6), "fp32")]))
    # no bias; quantizing the float input: 5 * 30
    assert (c.matrix_flops, c.vector_flops) == (360, 150)


def test_quantized_conv_rule_by_hand():
    x = TensorSpec((1, 4, 5, 5), "uint8")
    w = TensorSpec((6, 2, 3, 3), "int8", Role.WEIGHT)                     # groups 2: Cin/groups = 2
    out = TensorSpec((1, 6, 3, 3), "uint8")
    c = qr.quantized_conv_cost(_node("quantized.conv2d", [x, w, None], [out], groups=2, transposed=False))
    assert (c.matrix_flops, c.vector_flops) == (2 * 54 * 2 * 9, 0)      # 54 outputs * 18 MACs
    wt = TensorSpec((4, 3, 3, 3), "int8", Role.WEIGHT)                    # transposed: [Cin, Cout/groups, k, k]
    outt = TensorSpec((1, 3, 11, 11), "uint8")
    c = qr.quantized_conv_cost(_node("quantized.conv_transpose2d", [x, wt, None], [outt], transposed=True))
    assert c.matrix_flops == 2 * 100 * 3 * 9                              # 100 input elements scatter 27 MACs


def test_quantized_elementwise_rules_by_hand():
    a = TensorSpec((2, 8), "uint8")
    c = qr.quantized_binary_cost(_node("quantized.add_relu", [a, a], [a]))
    assert c.vector_flops == 32 and c.act_read_bytes == 32 and c.act_write_bytes == 16
    c = qr.quantized_unary_cost(_node("quantized.cat", [a, a], [TensorSpec((4, 8), "uint8")]))
    assert c.vector_flops == 0 and c.act_write_bytes == 32
    c = qr.quantize_cost(_node("aten.quantize_per_tensor", [TensorSpec((2, 8))], [a]))
    assert c.vector_flops == 48 and c.act_read_bytes == 64 and c.act_write_bytes == 16


def test_fx_quantized_model():
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(144, 10)).eval()
    ex = (torch.randn(1, 3, 8, 8),)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = prepare_fx(m, get_default_qconfig_mapping("fbgemm"), ex)
        p(*ex)
        q = convert_fx(p)
    g = load_module(q, [(1, 3, 8, 8)])
    assert [n.op for n in g.ops() if n.op.startswith("quantized.")] == ["quantized.conv2d_relu", "quantized.linear"]
    a = graphroof.analyze(g, hw="a100")
    # conv+relu fused: 2 * 144 outputs * 27 = 7,776; linear 2 * 10 * 144 = 2,880
    assert a.totals.cost.matrix_flops == 7776 + 2880 and not a.summary.unknown
    # int8 weights 108 + 1,440 and fp32 biases (4 + 10) * 4
    assert a.totals.cost.weight_bytes == 108 + 1440 + 56
