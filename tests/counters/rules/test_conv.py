"""Convolution, pooling and interpolation rules against hand arithmetic."""

from __future__ import annotations

import pytest

from graphroof.counters.cost import Cost
from tests.conftest import T, W, node
from tests.counters.rules._family import assert_frontends_agree, paired_members, run


def cost(n):
    return run(n)


def test_conv2d_with_bias():
    # x [1,3,8,8], w [4,3,3,3], pad 1 -> out [1,4,8,8] = 256 outputs
    n = node("aten.conv2d", [T("fp32", 1, 3, 8, 8), W("fp32", 4, 3, 3, 3), W("fp32", 4)], [T("fp32", 1, 4, 8, 8)])
    c = cost(n)
    assert c.matrix_flops == 13824        # 2 * 256 * 3 * 9 = 13824
    assert c.vector_flops == 256          # bias
    assert c.weight_bytes == (108 + 4) * 4
    assert c.act_read_bytes == 192 * 4 and c.act_write_bytes == 256 * 4


def test_grouped_and_depthwise_conv():
    # groups=2: w [8, 2, 3, 3] (Cin/groups = 2), out [1, 8, 6, 6] = 288
    n = node("aten.convolution", [T("fp32", 1, 4, 8, 8), W("fp32", 8, 2, 3, 3), None], [T("fp32", 1, 8, 6, 6)],
             groups=2, transposed=False)
    assert cost(n).matrix_flops == 10368  # 2 * 288 * 2 * 9
    # depthwise: w [4, 1, 3, 3], out [1, 4, 8, 8] = 256
    n = node("aten.conv2d", [T("fp32", 1, 4, 8, 8), W("fp32", 4, 1, 3, 3), None], [T("fp32", 1, 4, 8, 8)], groups=4)
    c = cost(n)
    assert c.matrix_flops == 4608 and c.vector_flops == 0   # 2 * 256 * 1 * 9


def test_conv1d_and_conv3d():
    n = node("aten.conv1d", [T("fp32", 2, 4, 10), W("fp32", 6, 4, 3), None], [T("fp32", 2, 6, 8)])
    assert cost(n).matrix_flops == 2304   # 2 * (2*6*8 = 96) * 4 * 3
    n = node("aten.conv3d", [T("fp32", 1, 2, 4, 4, 4), W("fp32", 3, 2, 2, 2, 2), None], [T("fp32", 1, 3, 3, 3, 3)])
    assert cost(n).matrix_flops == 2592   # 2 * 81 * 2 * 8


def test_transposed_conv_scatters_each_input():
    # x [1,4,5,5] -> w [4, 3, 3, 3] (Cin, Cout/groups, k, k), stride 2 -> out [1,3,11,11]
    n = node("aten.conv_transpose2d", [T("fp32", 1, 4, 5, 5), W("fp32", 4, 3, 3, 3), W("fp32", 3)],
             [T("fp32", 1, 3, 11, 11)])
    c = cost(n)
    assert c.matrix_flops == 5400         # 2 * 100 inputs * 3 * 9
    assert c.vector_flops == 363          # bias over 3*11*11 outputs
    n = node("aten.convolution", [T("fp32", 1, 4, 5, 5), W("fp32", 4, 3, 3, 3), None], [T("fp32", 1, 3, 11, 11)],
             transposed=True)
    assert cost(n).matrix_flops == 5400


def test_pooling():
    # max 2x2 over [1,8,16,16] -> [1,8,8,8]: 512 outputs * 3 compares (a max of 4 needs 3)
    n = node("aten.max_pool2d", [T("fp32", 1, 8, 16, 16)], [T("fp32", 1, 8, 8, 8)], kernel_size=(2, 2))
    assert cost(n).vector_flops == 1536
    # average 3x3: 8 adds and a divide per output
    n = node("aten.avg_pool2d", [T("fp32", 1, 8, 16, 16)], [T("fp32", 1, 8, 8, 8)], kernel_size=(3, 3))
    assert cost(n).vector_flops == 512 * 9
    n = node("aten.max_pool1d", [T("fp32", 1, 2, 8)], [T("fp32", 1, 2, 4)], kernel_size=(2,))
    assert cost(n).vector_flops == 8      # 8 outputs * 1
    # adaptive average to 1x1: 255 adds + 1 divide per channel = 2048 for 8 channels of 256
    n = node("aten.adaptive_avg_pool2d", [T("fp32", 1, 8, 16, 16)], [T("fp32", 1, 8, 1, 1)])
    assert cost(n).vector_flops == 2048
    n = node("aten.adaptive_max_pool2d", [T("fp32", 1, 8, 16, 16)], [T("fp32", 1, 8, 1, 1)])
    assert cost(n).vector_flops == 2040


def test_interpolation():
    n = node("aten.upsample_nearest2d", [T("fp32", 1, 2, 4, 4)], [T("fp32", 1, 2, 8, 8)])
    c = cost(n)
    assert c.vector_flops == 0 and c.act_read_bytes == 128 and c.act_write_bytes == 512
    n = node("aten.upsample_bilinear2d", [T("fp32", 1, 2, 4, 4)], [T("fp32", 1, 2, 8, 8)])
    assert cost(n).vector_flops == 128 * 7   # 4 taps: 4 multiplies, 3 adds


# -- ONNX keys on literals ----------------------------------------------------------------------------------

def test_onnx_conv_bias_depthwise_transpose():
    # X [1,3,8,8], W [8,3,3,3], pads 1: Y [1,8,8,8] = 512 outputs, each 3 * 9 MACs: 2 * 512 * 27 = 27648
    c = cost(node("onnx.Conv", [T("fp32", 1, 3, 8, 8), W("fp32", 8, 3, 3, 3), W("fp32", 8)], [T("fp32", 1, 8, 8, 8)],
                  pads=[1, 1, 1, 1], kernel_shape=[3, 3]))
    assert c == Cost(matrix_flops=27648, vector_flops=512, act_read_bytes=192 * 4, weight_bytes=(216 + 8) * 4,
                     act_write_bytes=512 * 4)
    # depthwise: Y [1,4,4,4] = 64 outputs, Cin/groups = 1: 2 * 64 * 9 = 1152
    c = cost(node("onnx.Conv", [T("fp32", 1, 4, 6, 6), W("fp32", 4, 1, 3, 3)], [T("fp32", 1, 4, 4, 4)], group=4))
    assert c.matrix_flops == 1152 and c.vector_flops == 0
    # transposed: each of the 32 input pixels scatters Cout/groups (3) x 3x3 MACs: 2 * 32 * 3 * 9 = 1728
    c = cost(node("onnx.ConvTranspose", [T("fp32", 1, 2, 4, 4), W("fp32", 2, 3, 3, 3)], [T("fp32", 1, 3, 9, 9)],
                  strides=[2, 2]))
    assert c.matrix_flops == 1728 and c.act_write_bytes == 3 * 9 * 9 * 4


def test_onnx_pooling():
    x = T("fp32", 1, 1, 4, 4)
    c = cost(node("onnx.MaxPool", [x], [T("fp32", 1, 1, 2, 2)], kernel_shape=[2, 2], strides=[2, 2]))
    assert c == Cost(vector_flops=4 * 3, act_read_bytes=64, act_write_bytes=16)  # 4 outputs x (4 - 1)
    c = cost(node("onnx.AveragePool", [x], [T("fp32", 1, 1, 2, 2)], kernel_shape=[2, 2], strides=[2, 2]))
    assert c.vector_flops == 4 * 4
    c = cost(node("onnx.GlobalAveragePool", [T("fp32", 1, 2, 4, 4)], [T("fp32", 1, 2, 1, 1)]))
    assert c == Cost(vector_flops=32, act_read_bytes=128, act_write_bytes=8)


@pytest.mark.parametrize("mode, per", [("nearest", 0), ("linear", 7), ("cubic", 31)])
def test_onnx_resize(mode, per):
    # 2 axes resized: linear 2^2 taps -> 2*4-1 = 7, cubic 4^2 taps -> 2*16-1 = 31 per output; 16 outputs
    n = node("onnx.Resize", [T("fp32", 1, 1, 2, 2), None, None, W("int64", 4)], [T("fp32", 1, 1, 4, 4)], mode=mode)
    c = cost(n)
    assert c.vector_flops == per * 16
    assert c.act_write_bytes == 64 and c.act_read_bytes == 16 and c.weight_bytes == 32


# -- ATen and ONNX keys of one row give the same Cost -------------------------------------------------------

X, Y = T("fp32", 1, 4, 8, 8), T("fp32", 1, 6, 6, 6)
_CASES = {
    # ATen's conv overloads and ONNX Conv take (x, weight, bias) alike
    "conv": lambda key: node(key, [X, W("fp32", 6, 4, 3, 3), W("fp32", 6)], [Y], stride=[1, 1], transposed=False),
    "conv_transpose": lambda key: node(key, [T("fp32", 1, 2, 4, 4), W("fp32", 2, 3, 3, 3), W("fp32", 3)],
                                       [T("fp32", 1, 3, 9, 9)], stride=[2, 2], transposed=True),
    "max_pool": (node("aten.max_pool2d", [X], [T("fp32", 1, 4, 4, 4)], kernel_size=[2, 2]),
                 node("onnx.MaxPool", [X], [T("fp32", 1, 4, 4, 4)], kernel_shape=[2, 2])),
    "avg_pool": (node("aten.avg_pool2d", [X], [T("fp32", 1, 4, 4, 4)], kernel_size=[2, 2]),
                 node("onnx.AveragePool", [X], [T("fp32", 1, 4, 4, 4)], kernel_shape=[2, 2])),
    "global_avg_pool": lambda key: node(key, [X], [T("fp32", 1, 4, 1, 1)], output_size=[1, 1]),
    "global_max_pool": lambda key: node(key, [X], [T("fp32", 1, 4, 1, 1)], output_size=[1, 1]),
    # bilinear upsampling x2 of X (two resized axes, 7 per output).  ONNX's sizes input is a 0-element tensor
    # here so that only the formula is compared; its 32 bytes are checked in test_interpolation_modes_agree
    "interpolate": (node("aten.upsample_bilinear2d", [X], [T("fp32", 1, 4, 16, 16)]),
                    node("onnx.Resize", [X, None, None, W("int64", 0)], [T("fp32", 1, 4, 16, 16)], mode="linear")),
}


@pytest.mark.parametrize("member", paired_members("conv"))
def test_aten_and_onnx_keys_agree(member):
    assert_frontends_agree("conv", member, _CASES)


@pytest.mark.parametrize("aten_op, mode", [("aten.upsample_bicubic2d", "cubic"), ("aten.upsample_nearest2d", "nearest")])
def test_interpolation_modes_agree(aten_op, mode):
    # bicubic: 16 taps -> 31 per output; nearest: a copy.  The same Cost up to ONNX's sizes input (32 bytes)
    a = cost(node(aten_op, [X], [T("fp32", 1, 4, 16, 16)]))
    o = cost(node("onnx.Resize", [X, None, None, W("int64", 4)], [T("fp32", 1, 4, 16, 16)], mode=mode))
    assert a.vector_flops == o.vector_flops == {"cubic": 31, "nearest": 0}[mode] * 1024
    assert o.weight_bytes - a.weight_bytes == 32 and a.act_bytes == o.act_bytes
