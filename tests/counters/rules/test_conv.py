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
    # bilinear sampling of X at a 5x5 grid; the default modes (ONNX "linear", ATen interpolation_mode 0) agree
    "grid_sample": lambda key: node(key, [X, T("fp32", 1, 5, 5, 2)], [T("fp32", 1, 4, 5, 5)]),
    # ATen's size is an attribute, ONNX's an int64 input (a 0-element placeholder here)
    "affine_grid": (node("aten.affine_grid_generator", [T("fp32", 2, 2, 3)], [T("fp32", 2, 4, 4, 2)],
                         size=[2, 1, 4, 4], align_corners=False),
                    node("onnx.AffineGrid", [T("fp32", 2, 2, 3), W("int64", 0)], [T("fp32", 2, 4, 4, 2)])),
}


def test_grid_sample_modes():
    # X [1,2,4,4], grid [1,3,3,2] -> Y [1,2,3,3] = 18 outputs, 9 grid points of r = 2 coordinates.
    # bilinear: blend 4 taps (4 mul + 3 add = 7) x 18 = 126 + unnormalise 2*2 per point x 9 = 36 -> 162
    x, g, y = T("fp32", 1, 2, 4, 4), T("fp32", 1, 3, 3, 2), T("fp32", 1, 2, 3, 3)
    c = cost(node("onnx.GridSample", [x, g], [y]))
    assert c == Cost(vector_flops=162, act_read_bytes=(32 + 18) * 4, act_write_bytes=18 * 4)
    # nearest: no blend, 36; cubic: 16 taps, 31 x 18 = 558 + 36 = 594; ATen bicubic (mode 2) agrees
    assert cost(node("onnx.GridSample", [x, g], [y], mode="nearest")).vector_flops == 36
    assert cost(node("onnx.GridSample", [x, g], [y], mode="cubic")).vector_flops == 594
    assert cost(node("aten.grid_sampler_2d", [x, g], [y], interpolation_mode=2)).vector_flops == 594


def test_affine_grid_is_a_batched_matmul():
    # theta [1,2,3] -> grid [1,4,4,2]: 16 points, each theta [2x3] . [x, y, 1]: 2 * 16 * 2 * 3 = 192 matrix;
    # normalising the 2 base coordinates: 16 * 2 = 32 vector
    c = cost(node("onnx.AffineGrid", [T("fp32", 1, 2, 3), W("int64", 4)], [T("fp32", 1, 4, 4, 2)]))
    assert (c.matrix_flops, c.vector_flops) == (192, 32)
    assert c.act_read_bytes == 24 and c.weight_bytes == 32 and c.act_write_bytes == 128


def test_roi_align_and_max_roi_pool():
    # X [1,4,8,8], 2 rois, output 2x2, sampling_ratio 2 -> Y [2,4,2,2] = 32 outputs, 4 samples each.
    # points 2*2*2*4 = 32 x 12 (coords, weights) = 384; blend 32*4*7 = 896; average 32*4 = 128 -> 1408
    x, rois, idx, y = T("fp32", 1, 4, 8, 8), T("fp32", 2, 4), T("int64", 2), T("fp32", 2, 4, 2, 2)
    c = cost(node("onnx.RoiAlign", [x, rois, idx], [y], output_height=2, output_width=2, sampling_ratio=2))
    assert c.vector_flops == 384 + 896 + 128 == 1408 and not c.estimated
    # reads 4 taps per sampled value: 32*4*4 = 512 values = 2048 bytes, capped at X (256 values, 1024 bytes);
    # + rois 32 + indices 16 bytes
    assert c.act_read_bytes == 1024 + 32 + 16 and c.act_write_bytes == 128
    # max mode: s*s - 1 = 3 per output: 384 + 896 + 96; adaptive ratio (0) is an estimate with s = 2
    c = cost(node("onnx.RoiAlign", [x, rois, idx], [y], mode="max", sampling_ratio=0))
    assert c.vector_flops == 384 + 896 + 96 and c.estimated
    # MaxRoiPool 2 rois over the whole 4x8x8 map (upper bound): 2*256 - 32 outputs = 480 compares, estimated
    c = cost(node("onnx.MaxRoiPool", [x, T("fp32", 2, 5)], [y], pooled_shape=[2, 2]))
    assert c.vector_flops == 480 and c.estimated


def test_deform_conv():
    # X [1,4,5,5], W [8,4,3,3] (K = 9), pads 1 -> Y [1,8,5,5] = 200; offset [1,18,5,5] = 225 points
    # conv 2 * 200 * 4 * 9 = 14,400; sampling 1*4*9*25 = 900 values x 7 = 6,300; points 225 x 10 = 2,250
    x, w, off, y = T("fp32", 1, 4, 5, 5), W("fp32", 8, 4, 3, 3), T("fp32", 1, 18, 5, 5), T("fp32", 1, 8, 5, 5)
    c = cost(node("onnx.DeformConv", [x, w, off], [y], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    assert (c.matrix_flops, c.vector_flops) == (14_400, 6_300 + 2_250)
    # with bias (+200) and mask [1,9,5,5] (+900 multiplies)
    c = cost(node("onnx.DeformConv", [x, w, off, W("fp32", 8), T("fp32", 1, 9, 5, 5)], [y], kernel_shape=[3, 3]))
    assert (c.matrix_flops, c.vector_flops) == (14_400, 6_300 + 2_250 + 200 + 900)


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


def test_causal_conv_with_state():
    # input [2,4,8], weight [4,1,3] (depthwise, k = 3): 2 * (2*4*8 = 64 outputs) * 3 = 384 matrix;
    # bias 64 + silu 5 * 64 = 384 vector; reads past_state [2,4,2] (16 values), writes present_state
    x, w, b, st = T("fp32", 2, 4, 8), W("fp32", 4, 1, 3), W("fp32", 4), T("fp32", 2, 4, 2)
    c = cost(node("onnx.CausalConvWithState", [x, w, b, st], [x, st], activation="silu"))
    assert (c.matrix_flops, c.vector_flops) == (384, 64 + 320)
    assert c.act_read_bytes == (64 + 16) * 4 and c.weight_bytes == (12 + 4) * 4 and c.act_write_bytes == 80 * 4
    assert cost(node("onnx.CausalConvWithState", [x, w], [x, st])).vector_flops == 0
