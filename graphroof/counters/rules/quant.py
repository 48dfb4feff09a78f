"""Quant family: quantize / dequantize and the quantized products, convolutions and lookups (ONNX and its
``com.microsoft`` contrib ops).  The products use the matmul / conv formulas on the integer operands; bytes are
the tensors' real sizes in their real dtypes (an int4 ``MatMulNBits`` weight is its packed uint8 blob, not
``K * N`` at the activation dtype).

Per element: DequantizeLinear ``(x - zp) * scale`` = 2; QuantizeLinear ``saturate(round(x / s) + zp)`` = 3;
DynamicQuantizeLinear = 5 (min and max over x, then quantize).

No ATen keys yet: the torch frontends see dequantized weights (a quantized checkpoint is a weight-dtype
setting of :mod:`graphroof.llm`), so a row here gets its ATen key when a frontend emits one.
"""

from __future__ import annotations

import math

from ...graph import OpNode
from ..common import io_cost
from ..cost import Cost
from ..family import Row, ms, onnx, register_family
from ..formulas import matmul_flops
from .conv import conv
from .elementwise import per_element
from .matmul import onnx_product, req
from .movement import partial_read

__all__ = ["DEQUANTIZE_FLOPS", "DYNAMIC_QUANTIZE_FLOPS", "QUANTIZE_FLOPS", "ROWS"]

DEQUANTIZE_FLOPS, QUANTIZE_FLOPS, DYNAMIC_QUANTIZE_FLOPS = 2, 3, 5


def matmul_integer(node: OpNode) -> Cost:
    """(A, B, a_zp, b_zp): the int8 product of A and B."""
    return onnx_product(node, 0, 1)


def qlinear_matmul(node: OpNode) -> Cost:
    """(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): the int8 product of a and b."""
    return onnx_product(node, 0, 3)


def matmul_integer_to_float(node: OpNode) -> Cost:
    """(A, B, a_scale, b_scale, a_zp, b_zp, bias): int8 product, scaled to float, optional bias add."""
    return onnx_product(node, 0, 1, bias_i=6)


def dynamic_quantize_matmul(node: OpNode) -> Cost:
    """(A float, B int8, b_scale, b_zp, bias): quantize A (as DynamicQuantizeLinear), then the int8 GEMM."""
    return onnx_product(node, 0, 1, bias_i=4) + Cost(vector_flops=DYNAMIC_QUANTIZE_FLOPS * req(node, 0).numel)


def qgemm(node: OpNode) -> Cost:
    """(A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp) with transA / transB: an int8 Gemm."""
    return onnx_product(node, 0, 3, bool(node.attrs.get("transA", 0)), bool(node.attrs.get("transB", 0)), bias_i=6)


def matmul_nbits(node: OpNode) -> Cost:
    """A [..., K] @ dequant(B) with B packed to ``bits`` bits: ``2 * M * N * K`` (attrs K, N); bias adds ``M*N``.

    The weight bytes are B's real packed size (``N * ceil(K / block_size) * blob`` uint8) plus its scales and
    zero points.
    """
    a = req(node, 0)
    k, n = int(node.attrs["K"]), int(node.attrs["N"])
    m = a.numel // k if k else 0
    bias = node.input(5) if node.op.endswith("MatMulNBits") else None
    return io_cost(node, matrix_flops=matmul_flops(m, n, k), vector_flops=m * n if bias is not None else 0)


def conv_integer(node: OpNode) -> Cost:
    """(x, w, x_zp, w_zp): an int8 Conv."""
    return conv(node, 0, 1, None)


def qlinear_conv(node: OpNode) -> Cost:
    """(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B): an int8 Conv with an int32 bias."""
    return conv(node, 0, 3, 8)


def gather_block_quantized(node: OpNode) -> Cost:
    """A quantized embedding lookup: (data packed, indices, scales, zero_points), attrs bits, block_size.

    Reads the selected rows' packed codes (``numel(out) * bits / 8`` bytes) and their scales and zero points
    (``numel(out) / block_size`` each), each capped at the whole tensor; dequantizes with 2 FLOPs per output
    element.
    """
    data, out = node.inputs[0], node.outputs[0]
    bits = int(node.attrs.get("bits", data.itemsize_bits if data.itemsize_bits < 8 else 4))
    block = int(node.attrs.get("block_size", 128))
    c = io_cost(node, vector_flops=DEQUANTIZE_FLOPS * out.numel, inputs=[node.input(1)])
    c = c + partial_read(data, min(data.nbytes, math.ceil(out.numel * bits / 8)))
    for t in (node.input(2), node.input(3)):
        if t is not None:
            c = c + partial_read(t, min(t.nbytes, math.ceil(out.numel / block * t.itemsize_bits / 8)))
    return c


ROWS = (
    #   member                  ATen keys  ONNX keys                                             rule
    Row("dequantize",           (),  onnx("DequantizeLinear") + ms("DequantizeLinear"),  per_element(DEQUANTIZE_FLOPS)),
    Row("quantize",             (),  onnx("QuantizeLinear") + ms("QuantizeLinear"),      per_element(QUANTIZE_FLOPS)),
    Row("dynamic_quantize",     (),  onnx("DynamicQuantizeLinear"),                      per_element(DYNAMIC_QUANTIZE_FLOPS)),
    Row("matmul_integer",       (),  onnx("MatMulInteger") + ms("MatMulInteger16"),      matmul_integer),
    Row("qlinear_matmul",       (),  onnx("QLinearMatMul"),                              qlinear_matmul),
    Row("matmul_integer_to_float", (), ms("MatMulIntegerToFloat"),                       matmul_integer_to_float),
    Row("dynamic_quantize_matmul", (), ms("DynamicQuantizeMatMul"),                      dynamic_quantize_matmul),
    Row("qgemm",                (),  ms("QGemm"),                                        qgemm),
    Row("matmul_nbits",         (),  ms("MatMulNBits", "MatMulBnb4"),                    matmul_nbits),
    Row("conv_integer",         (),  onnx("ConvInteger"),                                conv_integer),
    Row("qlinear_conv",         (),  onnx("QLinearConv"),                                qlinear_conv),
    Row("gather_block_quantized", (), ms("GatherBlockQuantized"),                        gather_block_quantized),
)

register_family("quant", ROWS)
