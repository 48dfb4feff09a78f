"""Quant family: quantize / dequantize and the quantized products, convolutions and lookups (ONNX and its
``com.microsoft`` contrib ops).  The products use the matmul / conv formulas on the integer operands; bytes are
the tensors' real sizes in their real dtypes (an int4 ``MatMulNBits`` weight is its packed uint8 blob, not
``K * N`` at the activation dtype).

Per element: DequantizeLinear ``(x - zp) * scale`` = 2; QuantizeLinear ``saturate(round(x / s) + zp)`` = 3;
DynamicQuantizeLinear = 5 (min and max over x, then quantize).

The ``com.microsoft`` QLinear* elementwise / pooling ops dequantize their int8 inputs, run the float op and
requantize the result, counted on the textbook formula (ONNX Runtime may use a 256-entry lookup table for the
unary ones, which these counts over-estimate): per output element a binary op (QLinearAdd / QLinearMul) is
2 + 2 (dequantize A and B) + 1 (the op) + 3 (requantize) = 8; a unary op is 2 + f + 3 with f the float op's
count (sigmoid 4, leaky relu 2, softmax 5); a requantizing copy (QLinearConcat) 2 + 3 = 5; QLinearWhere a
select (1) + requantize of the chosen value (5) = 6.  Average pools: dequantize every input element (2), the
float pool, requantize every output (3).

No ATen keys yet: the torch frontends see dequantized weights (a quantized checkpoint is a weight-dtype
setting of :mod:`graphroof.llm`), so a row here gets its ATen key when a frontend emits one.
"""

from __future__ import annotations

import math

from ...graph import OpNode
from ..common import io_cost, req
from ..cost import FLOPS_PER_MAC, Cost
from ..family import Row, ms, onnx, register_family
from ..formulas import SOFTMAX_FLOPS_PER_ELEMENT, matmul_flops, prod
from ..settings import DEFAULT, CountSettings
from .attention import _present, attention_cost
from .conv import conv, pool_flops
from .elementwise import per_element
from .matmul import onnx_product
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
    data, out = req(node, 0), node.outputs[0]
    bits = int(node.attrs.get("bits", data.itemsize_bits if data.itemsize_bits < 8 else 4))
    block = int(node.attrs.get("block_size", 128))
    c = io_cost(node, vector_flops=DEQUANTIZE_FLOPS * out.numel, inputs=[node.input(1)])
    c = c + partial_read(data, min(data.nbytes, math.ceil(out.numel * bits / 8)))
    for t in (node.input(2), node.input(3)):
        if t is not None:
            c = c + partial_read(t, min(t.nbytes, math.ceil(out.numel / block * t.itemsize_bits / 8)))
    return c


#: float-op FLOPs per element inside each QLinear unary op (see the module docstring).
_QLINEAR_UNARY = {"QLinearSigmoid": 4, "QLinearLeakyRelu": 2, "QLinearSoftmax": SOFTMAX_FLOPS_PER_ELEMENT}
QLINEAR_BINARY_FLOPS = 2 * DEQUANTIZE_FLOPS + 1 + QUANTIZE_FLOPS          # 8
REQUANTIZE_FLOPS = DEQUANTIZE_FLOPS + QUANTIZE_FLOPS                       # 5


def qlinear_unary(node: OpNode) -> Cost:
    """(X, X_scale, X_zp, Y_scale, Y_zp): dequantize, the float op, requantize: ``2 + f + 3`` per element."""
    f = _QLINEAR_UNARY[node.op.rsplit(".", 1)[-1]]
    return io_cost(node, vector_flops=(DEQUANTIZE_FLOPS + f + QUANTIZE_FLOPS) * node.outputs[0].numel)


def qlinear_avg_pool(node: OpNode) -> Cost:
    """(X, x_scale, x_zp, y_scale, y_zp): dequantize X (2 per input element), average pool (``kernel_shape``,
    k per output; global: ``numel(X)``), requantize Y (3 per output)."""
    x, y = req(node, 0), node.outputs[0]
    if node.op.endswith("GlobalAveragePool"):
        pool = x.numel
    else:
        pool = pool_flops(y.numel, prod(node.attrs.get("kernel_shape", ()) or (1,)), "avg")
    return io_cost(node, vector_flops=DEQUANTIZE_FLOPS * x.numel + pool + QUANTIZE_FLOPS * y.numel)


def qattention(node: OpNode, settings: CountSettings = DEFAULT) -> Cost:
    """com.microsoft QAttention (input [B,S,Hin] int8, weight [Hin, 3H] int8, bias [3H], input_scale,
    weight_scale, mask_index, input_zp, weight_zp, past [2,B,N,P,H/N]): the int8 QKV projection
    ``2*B*S*Hin*3H``, its dequantize (one scale multiply per projected value) and bias add (``B*S*3H`` each),
    then float attention as com.microsoft Attention (``unidirectional`` = causal)."""
    s = settings
    x, w = req(node, 0), req(node, 1)
    n = int(node.attrs["num_heads"])
    b, seq = int(x.shape[0]), int(x.shape[1])
    tokens, width = b * seq, int(w.shape[1])
    proj = Cost(matrix_flops=FLOPS_PER_MAC * tokens * int(x.shape[-1]) * width,
                vector_flops=tokens * width * (2 if node.input(2) is not None else 1))
    present, past = _present(node, 1), node.input(8)
    kv_len = int(present.shape[3]) if present is not None else seq + (int(past.shape[3]) if past is not None else 0)
    head = width // 3 // n
    return attention_cost(node, s, bh=b * n, q_len=seq, kv_len=kv_len, head_dim=head, v_head_dim=head,
                          causal=bool(node.attrs.get("unidirectional", 0)), past=(8,), present=(1,), extra=proj)


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
    Row("qlinear_conv",         (),  onnx("QLinearConv") + ms("QLinearConv"),             qlinear_conv),
    Row("qlinear_binary",       (),  ms("QLinearAdd", "QLinearMul"),
        per_element(QLINEAR_BINARY_FLOPS)),
    Row("qlinear_unary",        (),  ms("QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax"), qlinear_unary),
    Row("qlinear_avg_pool",     (),  ms("QLinearAveragePool", "QLinearGlobalAveragePool"), qlinear_avg_pool),
    Row("qlinear_concat",       (),  ms("QLinearConcat"),                                per_element(REQUANTIZE_FLOPS)),
    Row("qlinear_where",        (),  ms("QLinearWhere"),
        per_element(1 + REQUANTIZE_FLOPS)),
    Row("qattention",           (),  ms("QAttention"),                                   qattention),
    Row("gather_block_quantized", (), ms("GatherBlockQuantized"),                        gather_block_quantized),
)

register_family("quant", ROWS)
