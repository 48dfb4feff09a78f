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
