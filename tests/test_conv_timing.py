"""Convolution as implicit GEMM (graphroof.timing.conv): shapes, channel padding, the CUDA-core path, and the
conv branch of the kernel model, checked against hand-derived numbers."""

from __future__ import annotations

import pytest

from graphroof.counters import count
from graphroof.counters.cost import Cost
from graphroof.graph import OpGraph, OpNode, Role, TensorSpec
from graphroof.hardware import load_hardware
from graphroof.timing import gemm_time, timing_of
from graphroof.timing.conv import ConvShape, channel_align, conv_shape, conv_time, is_conv_key
from graphroof.timing.kernel import kernel_time

A100 = load_hardware("a100-80gb-sxm")


def _conv_node(n, cin, cout, hw_in, k, stride=1, groups=1, dtype="fp16"):
    pad = k // 2
    ho = (hw_in + 2 * pad - k) // stride + 1
    x = TensorSpec((n, cin, hw_in, hw_in), dtype)
    w = TensorSpec((cout, cin // groups, k, k), dtype, Role.WEIGHT)
    y = TensorSpec((n, cout, ho, ho), dtype)
    return OpNode("c", "aten.conv2d", (x, w, None), (y,),
                  {"stride": [stride, stride], "padding": [pad, pad], "groups": groups})


def _cost(node):
    g = OpGraph("t")
    g.add_op(node)
    count(g)
    return g.get(node.name, "cost")


def test_conv_keys():
    assert is_conv_key("aten.conv2d") and is_conv_key("onnx.Conv") and is_conv_key("aten._convolution")
    assert is_conv_key("com.microsoft.QLinearConv")
    assert not is_conv_key("aten.conv_transpose2d") and not is_conv_key("aten.mm")


def test_shape_from_node_grouped_and_depthwise():
    # ResNeXt 3x3 grouped conv: 256 channels in 32 groups of 8 at 56x56, batch 2
    s = conv_shape(_conv_node(2, 256, 256, 56, 3, groups=32))
    assert s == ConvShape(n=2, cin=256, cout=256, out_spatial=56 * 56, kernel=9, groups=32)
    # implicit GEMM per group: M = N Ho Wo = 2 * 3136 = 6272, N = 256 / 32 = 8, K = 8 * 9 = 72
    assert s.gemm == (6272, 8, 72) and not s.depthwise
    d = conv_shape(_conv_node(1, 96, 96, 112, 3, stride=2, groups=96))
    assert d.depthwise and d.gemm == (56 * 56, 1, 9)


def test_channel_alignment_per_operand_width():
    # 16-byte MMA operand chunks: 8 fp16 / bf16, 16 int8, 4 tf32 channels; vector units need none
    assert channel_align("matrix.fp16", "fp16") == 8
    assert channel_align("matrix.bf16", "bf16") == 8
    assert channel_align("matrix.int8", "int8") == 16
    assert channel_align("matrix.tf32", "fp32") == 4
    assert channel_align("vector.fp32", "fp32") == 1


def test_first_conv_pads_three_channels_to_eight():
    # a stem conv: 3 -> 128 channels, 7x7 / 2 at 224 -> 112x112, batch 8, fp16 on A100 tensor cores
    node = _conv_node(8, 3, 128, 224, 7, stride=2)
    cost = _cost(node)
    c = conv_time(conv_shape(node), cost.bytes, A100, "fp16")
    # M = 8 * 112 * 112 = 100352; N = 128 (a multiple of 8); K = pad(3, 8) * 49 = 392 (not 3 * 49 = 147).
    # Tensor cores: 2 * 100352 * 128 * 392 = 10.1 GFLOP of padded work at ~225 TFLOP/s (~45 us) beat the CUDA
    # cores' 3.8 real GFLOP at 78 * 0.7 = 55 TFLOP/s (~69 us)
    assert c.path == "tensor_core" and c.padded_mnk == (100352, 128, 392)
    # useful FLOPs stay the real ones: 2 * M * N * 147
    assert c.flops == 2.0 * 100352 * 128 * 147


def test_aligned_conv_is_gemm_compute_with_real_bytes():
    # 3x3 conv, 128 -> 128 channels at 28x28, batch 32, fp16: M = 32 * 784 = 25088, N = 128, K = 1152
    node = _conv_node(32, 128, 128, 28, 3)
    cost = _cost(node)
    c = conv_time(conv_shape(node), cost.bytes, A100, "fp16")
    t = timing_of(A100)
    g = gemm_time(25088, 128, 1152, A100, "fp16")
    # memory: the conv's own bytes (x 2*32*128*28*28 + w 2*128*128*9 + y 2*32*128*28*28 = 6,717,440 B), not
    # the im2col matrix A (9x the input) that gemm_time would count
    assert cost.bytes == 2 * 32 * 128 * 784 * 2 + 2 * 128 * 128 * 9
    t_mem = cost.bytes / (A100.mem_bw_bytes_per_s * t.gemm_mem_bw_efficiency)
    p = t.gemm_overlap_exponent
    want = (g.t_compute_s ** p + t_mem ** p) ** (1 / p) + t.gemm_latency_s
    assert c.path == "tensor_core" and c.t_s == pytest.approx(want, rel=1e-12)


def test_depthwise_runs_on_cuda_cores_bandwidth_bound():
    # depthwise 3x3 on 96 channels at 112x112, batch 16, fp16: no GEMM, vector units
    node = _conv_node(16, 96, 96, 112, 3, groups=96)
    cost = _cost(node)
    c = conv_time(conv_shape(node), cost.bytes, A100, "fp16")
    t = timing_of(A100)
    flops = 2.0 * 16 * 112 * 112 * 96 * 9  # one multiply-add per tap per output element
    t_vec = flops / (A100.peak("vector", "fp16")[0] * A100.vector_efficiency)
    t_mem = cost.bytes / (A100.mem_bw_bytes_per_s * t.gemm_mem_bw_efficiency)
    assert c.path == "cuda_core"
    assert c.t_s == pytest.approx(max(t_vec, t_mem) + t.stream_latency_s, rel=1e-12)
    # x and y 16 * 96 * 112 * 112 * 2 B = 38.5 MB each: 77 MB at 2.039 TB/s * 0.806 (~47 us) vs
    # 0.35 GFLOP at 78 TFLOP/s * 0.7 (~6 us): bandwidth-bound
    assert t_mem > 5 * t_vec


def test_misaligned_channels_cost_more_per_flop():
    # same FLOPs up to the channel count: 60 channels (padded to 64) waste 1 - 60/64 of each MMA
    t60 = conv_time(conv_shape(_conv_node(64, 60, 60, 56, 3)), 0.0, A100, "fp16")
    t64 = conv_time(conv_shape(_conv_node(64, 64, 64, 56, 3)), 0.0, A100, "fp16")
    assert t60.padded_mnk[1:] == (64, 64 * 9)
    assert t60.t_s / t60.flops > 1.1 * t64.t_s / t64.flops


def test_kernel_time_routes_convs_to_the_conv_model():
    node = _conv_node(32, 128, 128, 28, 3)
    cost = _cost(node)
    kt = kernel_time(node, "gemm", cost, A100, "fp16", 0.0, 0.0)
    assert kt.model == "conv:tensor_core"
    assert kt.t_kernel_s == conv_time(conv_shape(node), cost.bytes, A100, "fp16").t_s
    dw = _conv_node(16, 96, 96, 112, 3, groups=96)
    assert kernel_time(dw, "gemm", _cost(dw), A100, "fp16", 0.0, 0.0).model == "conv:cuda_core"


def test_cost_without_shapes_falls_back_to_gemm():
    node = OpNode("c", "aten.conv2d", (), (TensorSpec((4, 64, 8, 8), "fp16"),), {"gemm_mnk": (256, 64, 576)})
    kt = kernel_time(node, "gemm", Cost(matrix_flops=2.0 * 256 * 64 * 576, act_read_bytes=1e5), A100, "fp16",
                     0.0, 0.0)
    assert kt.model == "gemm"


def test_convs_of_one_input_run_as_one_wider_gemm():
    # ResNet's first block: conv1 (64 -> 64, 1x1) and the downsample (64 -> 256, 1x1) read the same input; a
    # preset with horizontal fusion runs them as one implicit GEMM with N = 64 + 256 = 320 output channels
    x = TensorSpec((8, 64, 56, 56), "fp16")
    w1, w2 = TensorSpec((64, 64, 1, 1), "fp16", Role.WEIGHT), TensorSpec((256, 64, 1, 1), "fp16", Role.WEIGHT)
    y1, y2 = TensorSpec((8, 64, 56, 56), "fp16"), TensorSpec((8, 256, 56, 56), "fp16")
    node = OpNode("k", "kernel.gemm", (x, w1, w2), (y1, y2), {"op_keys": ("aten.conv2d", "aten.conv2d")})
    s = conv_shape(node)
    assert s.gemm == (8 * 56 * 56, 320, 64)
    # filters of different shapes (a 1x1 and a 3x3) are not one implicit GEMM: no conv shape (the GEMM fallback)
    w3 = TensorSpec((64, 64, 3, 3), "fp16", Role.WEIGHT)
    assert conv_shape(OpNode("k", "kernel.gemm", (x, w1, w3), (y1,), {})) is None


def test_fp32_conv_follows_the_profiles_matmul_precision():
    # a stem conv 3 -> 64, 7x7 / 2 at 224 (112x112 out), batch 8, fp32 on an A100: M = 8 * 112 * 112 = 100352
    node = _conv_node(8, 3, 64, 224, 7, stride=2, dtype="fp32")
    cost = _cost(node)
    shape = conv_shape(node)
    # default ("high"): TF32 tensor cores, 16-byte chunks of 4 tf32 channels: K = pad(3, 4) * 49 = 196
    tf32 = conv_time(shape, cost.bytes, A100, "fp32")
    assert tf32.path == "tensor_core" and tf32.padded_mnk == (100352, 64, 196)
    # --matmul-precision highest on the profile (no argument): fp32 math on the CUDA cores, no channel padding
    # (K = 3 * 49 = 147), the same as asking conv_time for "highest" explicitly
    full = A100.with_overrides(matmul_precision="highest")
    fp32 = conv_time(shape, cost.bytes, full, "fp32")
    assert fp32.path == "cuda_core" and fp32.padded_mnk == (100352, 64, 147)
    assert fp32.t_s == conv_time(shape, cost.bytes, A100, "fp32", "highest").t_s
    # 2 * 100352 * 64 * 147 = 1.89 GFLOP at 19.5 TFLOP/s x 0.7 (~138 us) vs 2.52 padded GFLOP at TF32 rates, where
    # the 30.5 MB of x and y (~19 us at 2.039 TB/s x 0.8) and the latency dominate (~54 us): over twice as slow
    assert fp32.t_s > 2 * tf32.t_s
