"""Quant family (ONNX and com.microsoft keys): quantize / dequantize, quantized products, convs and lookups."""

from __future__ import annotations

from graphroof.counters.cost import Cost
from tests.conftest import T, W, node
from tests.counters.rules._family import run


def cost(n):
    return run(n)


def test_quantize_dequantize_per_element():
    # DynamicQuantizeLinear: 5 per element (min, max, quantize); writes y uint8 + scale fp32 + zero point uint8
    c = cost(node("onnx.DynamicQuantizeLinear", [T("fp32", 2, 4)], [T("uint8", 2, 4), T("fp32"), T("uint8")]))
    assert c == Cost(vector_flops=5 * 8, act_read_bytes=32, act_write_bytes=8 + 4 + 1)
    # DequantizeLinear (x - zp) * scale: 2 per element; int8 weight 12 bytes + fp32 scale 4
    c = cost(node("onnx.DequantizeLinear", [W("int8", 4, 3), W("fp32")], [T("fp32", 4, 3)]))
    assert c == Cost(vector_flops=2 * 12, weight_bytes=12 + 4, act_write_bytes=48)
    assert cost(node("onnx.QuantizeLinear", [T("fp32", 10), W("fp32"), W("uint8")], [T("uint8", 10)])).vector_flops == 30


def test_matmul_nbits_bytes_are_packed():
    # K=32, N=16, 4 bits, block 16: B uint8 [16, 2, 8] = 256 bytes, scales fp32 [32] = 128 bytes
    n = node("com.microsoft.MatMulNBits", [T("fp32", 1, 2, 32), W("uint8", 16, 2, 8), W("fp32", 32)],
             [T("fp32", 1, 2, 16)], K=32, N=16, bits=4, block_size=16)
    c = cost(n)
    assert c.matrix_flops == 2 * 2 * 16 * 32       # M = 2 tokens
    assert c.weight_bytes == 256 + 128             # not 32 * 16 * 4 = 2048
    assert c.act_read_bytes == 2 * 32 * 4 and c.act_write_bytes == 2 * 16 * 4


def test_integer_products():
    c = cost(node("onnx.MatMulInteger", [T("uint8", 2, 4), W("int8", 4, 3), T("uint8")], [T("int32", 2, 3)]))
    assert c.matrix_flops == 2 * 2 * 3 * 4 and c.weight_bytes == 12 and c.act_write_bytes == 6 * 4
    # DynamicQuantizeMatMul: quantizing A (5 per element, 8 elements) + the int8 GEMM 2 * 2 * 3 * 4 = 48
    c = cost(node("com.microsoft.DynamicQuantizeMatMul", [T("fp32", 2, 4), W("int8", 4, 3), W("fp32", 3)],
                  [T("fp32", 2, 3)]))
    assert (c.matrix_flops, c.vector_flops) == (48, 40)


def test_qlinear_matmul_conv_and_qgemm():
    s, z = W("fp32"), W("uint8")
    c = cost(node("onnx.QLinearMatMul", [T("uint8", 2, 4), s, z, W("uint8", 4, 3), s, z, s, z], [T("uint8", 2, 3)]))
    assert c.matrix_flops == 2 * 2 * 3 * 4 and c.act_write_bytes == 6
    c = cost(node("onnx.QLinearConv", [T("uint8", 1, 2, 4, 4), s, z, W("uint8", 3, 2, 3, 3), s, z, s, z],
                  [T("uint8", 1, 3, 2, 2)]))
    assert c.matrix_flops == 2 * (3 * 2 * 2) * 2 * 9  # Y [1,3,2,2] = 12 outputs x 2 x 9 MACs = 432
    a = T("uint8", 3, 4)
    c = cost(node("com.microsoft.QGemm", [a, s, z, W("int8", 5, 4), s, z, W("int32", 5)], [T("fp32", 3, 5)], transB=1))
    assert c.matrix_flops == 2 * 3 * 5 * 4 and c.vector_flops == 15


def test_gather_block_quantized_reads_selected_rows():
    data = W("uint8", 1000, 32)          # 64 int4 codes per row packed in 32 bytes
    n = node("com.microsoft.GatherBlockQuantized", [data, T("int64", 1, 3), W("fp16", 1000, 2)],
             [T("fp16", 1, 3, 64)], bits=4, block_size=32)
    c = cost(n)
    # 192 outputs: 96 bytes of codes, 192/32 = 6 fp16 scales = 12 bytes; dequant 2 per output
    assert c.weight_bytes == 96 + 12 and c.vector_flops == 2 * 192


def test_qlinear_binary_and_unary_elementwise():
    s, z = W("fp32"), W("uint8")
    # QLinearAdd C [2,8]: dequant A (2) + dequant B (2) + add (1) + requant (3) = 8 per element: 16 * 8 = 128
    a, b = T("uint8", 2, 8), T("uint8", 1, 8)
    c = cost(node("com.microsoft.QLinearAdd", [a, s, z, b, s, z, s, z], [T("uint8", 2, 8)]))
    assert c.vector_flops == 16 * 8 == 128
    # reads A 16 + B 8 bytes (+ 3 fp32 scales, 3 uint8 zero points = 15 weight bytes), writes C 16 bytes
    assert (c.act_read_bytes, c.weight_bytes, c.act_write_bytes) == (24, 15, 16)
    assert cost(node("com.microsoft.QLinearMul", [a, s, z, b, s, z, s, z], [T("uint8", 2, 8)])).vector_flops == 128
    x = T("uint8", 4, 10)
    # 40 elements: sigmoid 2 + 4 + 3 = 9 -> 360; leaky relu 2 + 2 + 3 = 7 -> 280; softmax 2 + 5 + 3 = 10 -> 400
    assert cost(node("com.microsoft.QLinearSigmoid", [x, s, z, s, z], [x])).vector_flops == 360
    assert cost(node("com.microsoft.QLinearLeakyRelu", [x, s, z, s, z], [x], alpha=0.1)).vector_flops == 280
    assert cost(node("com.microsoft.QLinearSoftmax", [x, s, z, s, z], [x], axis=-1)).vector_flops == 400


def test_qlinear_pools_concat_where():
    s, z = W("fp32"), W("uint8")
    x = T("uint8", 1, 4, 8, 8)                       # 256 elements
    # AveragePool 2x2 -> Y [1,4,4,4] = 64: dequant 2*256 = 512 + pool 64*4 = 256 + requant 3*64 = 192 = 960
    c = cost(node("com.microsoft.QLinearAveragePool", [x, s, z, s, z], [T("uint8", 1, 4, 4, 4)], kernel_shape=[2, 2]))
    assert c.vector_flops == 512 + 256 + 192 == 960
    # global: dequant 512 + sum/divide over 256 inputs + requant 3*4 = 12 -> 780
    c = cost(node("com.microsoft.QLinearGlobalAveragePool", [x, s, z, s, z], [T("uint8", 1, 4, 1, 1)]))
    assert c.vector_flops == 512 + 256 + 12 == 780
    # QLinearConcat (y_scale, y_zp, (x, s, zp)...) -> [2,6]: requantize 5 per output element = 60
    c = cost(node("com.microsoft.QLinearConcat", [s, z, T("uint8", 2, 2), s, z, T("uint8", 2, 4), s, z],
                  [T("uint8", 2, 6)], axis=1))
    assert c.vector_flops == 12 * 5 and c.act_read_bytes == 4 + 8 and c.act_write_bytes == 12
    # QLinearWhere (cond, X, xs, xz, Y, ys, yz, zs, zz) -> [3,4]: select 1 + requantize 5 = 6 per element = 72
    c = cost(node("com.microsoft.QLinearWhere", [T("bool", 3, 4), T("uint8", 3, 4), s, z, T("uint8", 3, 4), s, z, s, z],
                  [T("uint8", 3, 4)]))
    assert c.vector_flops == 72
    # the com.microsoft QLinearConv has the ONNX one's inputs: Y [1,3,2,2] 12 outputs x 2 x (2*9) = 432
    c = cost(node("com.microsoft.QLinearConv", [T("uint8", 1, 2, 4, 4), s, z, W("uint8", 3, 2, 3, 3), s, z, s, z],
                  [T("uint8", 1, 3, 2, 2)]))
    assert c.matrix_flops == 432


def test_qattention_int8_projection_then_attention():
    s, z = W("fp32"), W("uint8")
    x, w, b = T("uint8", 1, 4, 8), W("int8", 8, 24), W("fp32", 24)
    n = node("com.microsoft.QAttention", [x, w, b, s, s, None, z, z], [T("fp32", 1, 4, 8)], num_heads=2)
    c = cost(n)
    # projection 2 * (1*4 tokens) * 8 * 24 = 1536 int8; attention BH=2, q=kv=4, 16 pairs, head 4:
    # 2 * 2*16 * (4 + 4) = 512.  Vector: dequant 4*24 = 96 + bias 96 + softmax/scale 6 * 2*16 = 192 -> 384
    assert (c.matrix_flops, c.vector_flops) == (1536 + 512, 96 + 96 + 192)
    assert c.weight_bytes == 8 * 24 + 24 * 4 + 2 * 4 + 2   # int8 weight, fp32 bias, two scales, two zero points
    # causal (unidirectional): 10 pairs per head -> 2 * 2*10 * 8 = 320
    n = node("com.microsoft.QAttention", [x, w, b, s, s, None, z, z], [T("fp32", 1, 4, 8)], num_heads=2,
             unidirectional=1)
    assert cost(n).matrix_flops == 1536 + 320
