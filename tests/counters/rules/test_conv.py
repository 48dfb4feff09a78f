"""Convolution, pooling and interpolation rules against hand arithmetic."""

from __future__ import annotations

from graphroof.counters.registry import REGISTRY
from tests.conftest import T, W, node


def cost(n):
    return REGISTRY.lookup(n.op)(n)


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
