"""ONNX rules, one family at a time: models built with onnx.helper, FLOPs and bytes checked by hand."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")

import numpy as np  # noqa: E402

from graphroof.counters.cost import Cost  # noqa: E402
from graphroof.counters.settings import CountSettings  # noqa: E402
from tests.frontends._onnx_build import (  # noqa: E402
    BOOL, F16, F32, I32, I64, I8, U8, cost, counted, init, model, node, save, vi,
)


def one(tmp_path, n, inputs, inits=(), opset=20, ms=False, outputs=None, **kw):
    """Build a one-node model, count it, return the node's Cost."""
    m = model([n], inputs, outputs or list(n.output), inits, opset=opset, ms=ms)
    g = counted(save(tmp_path, m), **kw)
    return cost(g, n.name)


# -- matrix ops -----------------------------------------------------------------------------------------

def test_matmul_activation_times_weight(tmp_path):
    c = one(tmp_path, node("MatMul", ["a", "w"], ["y"]), [vi("a", F32, [2, 3, 4])], [init("w", (4, 5))])
    assert c.matrix_flops == 2 * 2 * 3 * 5 * 4  # 2 * batch 2 * m 3 * n 5 * k 4 = 240
    assert c.act_read_bytes == 2 * 3 * 4 * 4    # A: 24 fp32 = 96
    assert c.weight_bytes == 4 * 5 * 4          # W: 20 fp32 = 80
    assert c.act_write_bytes == 2 * 3 * 5 * 4   # Y: 30 fp32 = 120
    assert c.vector_flops == 0


def test_matmul_broadcast_batch_and_fp16(tmp_path):
    # [3,1,4,8] @ [2,8,5] -> [3,2,4,5]: batch 6, 2 * 6 * 4 * 5 * 8 = 1920
    c = one(tmp_path, node("MatMul", ["a", "b"], ["y"]), [vi("a", F16, [3, 1, 4, 8]), vi("b", F16, [2, 8, 5])])
    assert c.matrix_flops == 1920
    assert c.act_read_bytes == (96 + 80) * 2 and c.act_write_bytes == 120 * 2


def test_gemm_trans_b_with_bias(tmp_path):
    n = node("Gemm", ["a", "w", "c"], ["y"], transB=1)
    c = one(tmp_path, n, [vi("a", F32, [3, 4])], [init("w", (5, 4)), init("c", (5,))])
    assert c.matrix_flops == 2 * 3 * 5 * 4   # 120
    assert c.vector_flops == 3 * 5           # bias add over Y [3,5]
    assert c.weight_bytes == (20 + 5) * 4    # W and C
    assert c.act_read_bytes == 12 * 4 and c.act_write_bytes == 15 * 4


def test_conv_with_bias_and_padding(tmp_path):
    n = node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    c = one(tmp_path, n, [vi("x", F32, [1, 3, 8, 8])], [init("w", (8, 3, 3, 3)), init("b", (8,))])
    # Y [1,8,8,8] = 512 outputs, each 3 * 9 MACs: 2 * 512 * 27 = 27648
    assert c.matrix_flops == 27648 and c.vector_flops == 512
    assert c.act_read_bytes == 192 * 4 and c.weight_bytes == (216 + 8) * 4 and c.act_write_bytes == 512 * 4


def test_depthwise_conv_groups(tmp_path):
    n = node("Conv", ["x", "w"], ["y"], group=4)
    c = one(tmp_path, n, [vi("x", F32, [1, 4, 6, 6])], [init("w", (4, 1, 3, 3))])
    assert c.matrix_flops == 2 * (4 * 4 * 4) * 1 * 9  # Y [1,4,4,4] = 64 outputs, Cin/groups = 1: 1152
    assert c.vector_flops == 0


def test_conv_transpose_counts_input_scatter(tmp_path):
    n = node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2])
    c = one(tmp_path, n, [vi("x", F32, [1, 2, 4, 4])], [init("w", (2, 3, 3, 3))])
    # each of the 32 input pixels scatters Cout/groups (3) x 3x3 MACs: 2 * 32 * 3 * 9 = 1728; Y [1,3,9,9]
    assert c.matrix_flops == 1728
    assert c.act_write_bytes == 3 * 9 * 9 * 4


@pytest.mark.parametrize("eq,shapes,mat,vec", [
    ("bij,bjk->bik", [[2, 3, 4], [2, 4, 5]], 2 * 2 * 3 * 4 * 5, 0),   # batched matmul: 240
    ("ij->", [[3, 4]], 0, 12 - 1),                                      # full sum: 11 adds
    ("i,j->ij", [[3], [4]], 0, 12),                                     # outer product: 12 multiplies
    ("...ij,...jk", [[2, 3, 4], [2, 4, 5]], 240, 0),                    # ellipsis, implicit output
])
def test_einsum(tmp_path, eq, shapes, mat, vec):
    names = [f"x{i}" for i in range(len(shapes))]
    c = one(tmp_path, node("Einsum", names, ["y"], equation=eq), [vi(n, F32, s) for n, s in zip(names, shapes)],
            opset=12)
    assert (c.matrix_flops, c.vector_flops) == (mat, vec)


# -- elementwise ----------------------------------------------------------------------------------------

def test_add_broadcast_reads_inputs_at_their_size(tmp_path):
    c = one(tmp_path, node("Add", ["a", "b"], ["y"]), [vi("a", F32, [2, 3]), vi("b", F32, [3])])
    assert c == Cost(vector_flops=6, act_read_bytes=(6 + 3) * 4, act_write_bytes=6 * 4)


@pytest.mark.parametrize("op,attrs,per", [
    ("Sigmoid", {}, 4), ("Relu", {}, 1), ("Erf", {}, 1), ("Tanh", {}, 1), ("Sqrt", {}, 1),
    ("Gelu", {}, 5), ("Gelu", {"approximate": "tanh"}, 9), ("HardSwish", {}, 5), ("LeakyRelu", {}, 2),
])
def test_unary_per_element_table(tmp_path, op, attrs, per):
    c = one(tmp_path, node(op, ["x"], ["y"], **attrs), [vi("x", F32, [10])])
    assert c.vector_flops == per * 10
    assert c.act_read_bytes == 40 and c.act_write_bytes == 40


def test_cast_moves_bytes_in_real_dtypes(tmp_path):
    c = one(tmp_path, node("Cast", ["x"], ["y"], to=F16), [vi("x", F32, [10])])
    assert c == Cost(act_read_bytes=40, act_write_bytes=20)


def test_where_and_variadic_sum(tmp_path):
    c = one(tmp_path, node("Where", ["c", "x", "z"], ["y"]), [vi("c", BOOL, [4]), vi("x", F32, [4]), vi("z", F32, [4])])
    assert c == Cost(vector_flops=4, act_read_bytes=4 + 16 + 16, act_write_bytes=16)
    c = one(tmp_path, node("Sum", ["a", "b", "d"], ["y"]), [vi(n, F32, [5]) for n in "abd"])
    assert c.vector_flops == 2 * 5  # 3 inputs: 2 adds per element


# -- norms, softmax, reductions, pooling ----------------------------------------------------------------

def test_layer_norm(tmp_path):
    n = node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1)
    c = one(tmp_path, n, [vi("x", F32, [2, 8])], [init("s", (8,)), init("b", (8,))], opset=17)
    assert c == Cost(vector_flops=7 * 16, act_read_bytes=64, weight_bytes=64, act_write_bytes=64)


def test_rms_norm_opset23(tmp_path):
    n = node("RMSNormalization", ["x", "s"], ["y"], axis=-1)
    c = one(tmp_path, n, [vi("x", F32, [2, 8])], [init("s", (8,))], opset=23)
    assert c == Cost(vector_flops=4 * 16, act_read_bytes=64, weight_bytes=32, act_write_bytes=64)


def test_batch_group_instance_norm(tmp_path):
    ins = [vi("x", F32, [1, 4, 2, 2])]
    c = one(tmp_path, node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"]), ins,
            [init(n, (4,)) for n in "sbmv"])
    assert c.vector_flops == 4 * 16 and c.weight_bytes == 4 * 16
    c = one(tmp_path, node("InstanceNormalization", ["x", "s", "b"], ["y"]), ins, [init(n, (4,)) for n in "sb"])
    assert c.vector_flops == 7 * 16
    c = one(tmp_path, node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2), ins,
            [init(n, (4,)) for n in "sb"], opset=21)
    assert c.vector_flops == 7 * 16


def test_softmax(tmp_path):
    c = one(tmp_path, node("Softmax", ["x"], ["y"], axis=-1), [vi("x", F32, [4, 10])])
    assert c == Cost(vector_flops=5 * 40, act_read_bytes=160, act_write_bytes=160)


@pytest.mark.parametrize("op,flops", [
    ("ReduceSum", 24 - 4), ("ReduceMax", 24 - 4), ("ReduceMean", 24), ("ReduceL2", 2 * 24),
    ("ReduceSumSquare", 2 * 24 - 4), ("ReduceLogSumExp", 2 * 24),
])
def test_reductions(tmp_path, op, flops):
    n = node(op, ["x", "axes"], ["y"], keepdims=0)
    c = one(tmp_path, n, [vi("x", F32, [4, 6])], [init("axes", (1,), np.int64, 1)], opset=18)
    assert c.vector_flops == flops  # X [4,6] reduced over axis 1 -> 4 outputs
    assert c.act_write_bytes == 16 and c.weight_bytes == 8  # the axes tensor is a constant


def test_argmax(tmp_path):
    c = one(tmp_path, node("ArgMax", ["x"], ["y"], axis=1, keepdims=0), [vi("x", F32, [4, 6])])
    assert c == Cost(vector_flops=20, act_read_bytes=96, act_write_bytes=4 * 8)  # int64 indices


def test_pooling(tmp_path):
    ins = [vi("x", F32, [1, 1, 4, 4])]
    c = one(tmp_path, node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2]), ins)
    assert c == Cost(vector_flops=4 * 3, act_read_bytes=64, act_write_bytes=16)  # 4 outputs x (4 - 1)
    c = one(tmp_path, node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2]), ins)
    assert c.vector_flops == 4 * 4
    c = one(tmp_path, node("GlobalAveragePool", ["x"], ["y"]), [vi("x", F32, [1, 2, 4, 4])])
    assert c == Cost(vector_flops=32, act_read_bytes=128, act_write_bytes=8)


@pytest.mark.parametrize("mode,per", [("nearest", 0), ("linear", 7), ("cubic", 31)])
def test_resize(tmp_path, mode, per):
    n = node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode)
    c = one(tmp_path, n, [vi("x", F32, [1, 1, 2, 2])], [init("sizes", (4,), np.int64, np.array([1, 1, 4, 4]))],
            opset=19)
    # 2 axes resized: linear 2^2 taps -> 2*4-1 = 7, cubic 4^2 taps -> 2*16-1 = 31 per output; 16 outputs
    assert c.vector_flops == per * 16
    assert c.act_write_bytes == 64 and c.act_read_bytes == 16 and c.weight_bytes == 32


def test_cumsum_and_topk(tmp_path):
    c = one(tmp_path, node("CumSum", ["x", "ax"], ["y"]), [vi("x", F32, [10])], [init("ax", (), np.int64, 0)])
    assert c.vector_flops == 10
    c = one(tmp_path, node("TopK", ["x", "k"], ["v", "i"], axis=-1), [vi("x", F32, [4, 16])],
            [init("k", (1,), np.int64, 4)])
    assert c.vector_flops == 64 * 2  # 64 elements x ceil(log2 4)
    assert c.act_write_bytes == 16 * 4 + 16 * 8  # values fp32 [4,4] + indices int64 [4,4]


# -- data movement --------------------------------------------------------------------------------------

def test_gather_embedding_reads_rows_not_table(tmp_path):
    n = node("Gather", ["table", "ids"], ["y"], axis=0)
    c = one(tmp_path, n, [vi("ids", I64, [2, 3])], [init("table", (100, 8))])
    # 6 rows of 8 fp32 = 192 bytes of the 3200-byte table
    assert c == Cost(weight_bytes=192, act_read_bytes=6 * 8, act_write_bytes=192)


def test_slice_reads_selected_part(tmp_path):
    n = node("Slice", ["x", "st", "en", "ax"], ["y"])
    inits = [init("st", (1,), np.int64, 2), init("en", (1,), np.int64, 5), init("ax", (1,), np.int64, 0)]
    c = one(tmp_path, n, [vi("x", F32, [10, 8])], inits)
    assert c == Cost(act_read_bytes=3 * 8 * 4, weight_bytes=3 * 8, act_write_bytes=3 * 8 * 4)


def test_copies_and_free_views(tmp_path):
    m = model([node("Transpose", ["x"], ["t"], perm=[1, 0]), node("Reshape", ["t", "shp"], ["r"]),
               node("Shape", ["r"], ["s"]), node("Concat", ["r", "r"], ["y"], axis=0)],
              [vi("x", F32, [3, 4])], ["y", "s"], [init("shp", (2,), np.int64, np.array([2, 6]))])
    g = counted(save(tmp_path, m))
    assert cost(g, "t") == Cost(act_read_bytes=48, act_write_bytes=48)
    assert cost(g, "r") == Cost() and cost(g, "s") == Cost()
    assert cost(g, "y") == Cost(act_read_bytes=96, act_write_bytes=96)


def test_range_expand_pad(tmp_path):
    m = model([node("Range", ["a", "b", "d"], ["r"]), node("Expand", ["r", "shp"], ["e"]),
               node("Pad", ["e", "pads"], ["y"])], [], ["y"],
              [init("a", (), np.int64, 0), init("b", (), np.int64, 6), init("d", (), np.int64, 1),
               init("shp", (2,), np.int64, np.array([2, 6])), init("pads", (4,), np.int64, np.array([0, 1, 0, 1]))])
    g = counted(save(tmp_path, m))
    # every node here reads only initializers: folded when the model loads (repeat 0, cost 0); the rules'
    # per-run cost is checked directly, with r and e read as weights (constants built at run time)
    from graphroof.counters.count import count_node
    from graphroof.counters.registry import REGISTRY
    from graphroof.graph import REPEAT

    assert g.node("r").attrs[REPEAT] == 0 and cost(g, "r") == Cost()
    rule = lambda name: count_node(g.node(name), REGISTRY.lookup(g.node(name).op))  # noqa: E731
    assert rule("r") == Cost(vector_flops=6, weight_bytes=24, act_write_bytes=48)
    assert rule("e") == Cost(weight_bytes=48 + 16, act_write_bytes=96)
    assert rule("y") == Cost(weight_bytes=96 + 32, act_write_bytes=2 * 8 * 8)


# -- attention ------------------------------------------------------------------------------------------

def test_attention_opset23_no_cache(tmp_path):
    n = node("Attention", ["q", "k", "v"], ["o"])
    c = one(tmp_path, n, [vi("q", F32, [1, 2, 4, 8]), vi("k", F32, [1, 2, 6, 8]), vi("v", F32, [1, 2, 6, 8])],
            opset=23)
    # BH = 2, pairs = 4 * 6 = 24: matrix 2 * 2 * 24 * (8 + 8) = 1536; vector (5 + 1) * 2 * 24 = 288
    assert (c.matrix_flops, c.vector_flops) == (1536, 288)
    assert c.act_read_bytes == (64 + 96 + 96) * 4 and c.act_write_bytes == 64 * 4


def test_attention_opset23_causal_with_past(tmp_path):
    n = node("Attention", ["q", "k", "v", "", "past_key", "past_value"], ["o", "present_key", "present_value"],
             is_causal=1)
    ins = [vi("q", F32, [1, 2, 2, 8]), vi("k", F32, [1, 2, 2, 8]), vi("v", F32, [1, 2, 2, 8]),
           vi("past_key", F32, [1, 2, 3, 8]), vi("past_value", F32, [1, 2, 3, 8])]
    c = one(tmp_path, n, ins, opset=23)
    # kv = 3 + 2 = 5; bottom-right causal q=2: 4 + 5 = 9 pairs; BH = 2
    assert c.matrix_flops == 2 * 2 * 9 * 16 and c.vector_flops == 6 * 2 * 9
    assert c.kv_read_bytes == 2 * (2 * 3 * 8 * 4)     # past K and V
    assert c.kv_write_bytes == 2 * (2 * 5 * 8 * 4)    # present K and V
    full = one(tmp_path, n, ins, opset=23, settings=CountSettings(causal="full"))
    assert full.matrix_flops == 2 * 2 * 10 * 16       # the whole 2 x 5 square
    naive = one(tmp_path, n, ins, opset=23, settings=CountSettings(attention="naive"))
    assert naive.act_write_bytes - c.act_write_bytes == 2 * (2 * 2 * 5 * 4)  # S and P written: BH*q*kv fp32


def test_attention_opset23_causal_without_cache_is_top_left(tmp_path):
    # ONNX spec: query i sees keys j <= i + past_sequence_length; no past_key -> offset 0 (top-left), so with
    # q = 2, kv = 6 query 0 sees key 0 and query 1 keys 0..1: 1 + 2 = 3 pairs (bottom-right would be 5 + 6 = 11)
    n = node("Attention", ["q", "k", "v"], ["o"], is_causal=1)
    c = one(tmp_path, n, [vi("q", F32, [1, 1, 2, 8]), vi("k", F32, [1, 1, 6, 8]), vi("v", F32, [1, 1, 6, 8])],
            opset=23)
    # BH = 1: matrix 2 * 1 * 3 * (8 + 8) = 96; vector (5 + 1) * 1 * 3 = 18
    assert (c.matrix_flops, c.vector_flops) == (96, 18)


def test_ms_group_query_attention_and_skip_norm(tmp_path):
    # B=1, S=4, N=4 query heads, Nkv=2, H=8, past 6; shapes of com.microsoft outputs from onnxruntime's inference
    nodes = [
        node("SkipLayerNormalization", ["x", "skip", "gamma", "beta"], ["h"], domain="com.microsoft"),
        node("MatMul", ["h", "wk"], ["k"]), node("MatMul", ["h", "wk"], ["v"]),
        node("GroupQueryAttention", ["h", "k", "v", "past_key", "past_value", "seqlens", "total"],
             ["o", "present_key", "present_value"], domain="com.microsoft", num_heads=4, kv_num_heads=2),
        node("FastGelu", ["o"], ["y"], domain="com.microsoft"),
    ]
    ins = [vi("x", F32, [1, 4, 32]), vi("skip", F32, [1, 4, 32]), vi("past_key", F32, [1, 2, 6, 8]),
           vi("past_value", F32, [1, 2, 6, 8]), vi("seqlens", I32, [1]), vi("total", I32, [])]
    m = model(nodes, ins, ["y", "present_key", "present_value"],
              [init("gamma", (32,)), init("beta", (32,)), init("wk", (32, 16))], ms=True)
    g = counted(save(tmp_path, m))
    assert cost(g, "h").vector_flops == (7 + 1) * 128  # LayerNorm + skip add over 128 elements
    gqa = cost(g, "o")
    # kv = 6 + 4 = 10; causal q=4: 7 + 8 + 9 + 10 = 34 pairs; BH = 4 query heads
    assert gqa.matrix_flops == 2 * 4 * 34 * (8 + 8) and gqa.vector_flops == 6 * 4 * 34
    assert gqa.kv_read_bytes == 2 * (2 * 6 * 8 * 4)
    assert cost(g, "y").vector_flops == 9 * 128


def test_ms_multi_head_attention_and_rotary(tmp_path):
    nodes = [
        node("RotaryEmbedding", ["q0", "pos", "cos", "sin"], ["q"], domain="com.microsoft"),
        node("MultiHeadAttention", ["q", "k", "v"], ["o"], domain="com.microsoft", num_heads=2, unidirectional=0),
    ]
    ins = [vi("q0", F32, [1, 4, 16]), vi("pos", I64, [1, 4]), vi("k", F32, [1, 6, 16]), vi("v", F32, [1, 6, 16])]
    m = model(nodes, ins, ["o"], [init("cos", (32, 4)), init("sin", (32, 4))], ms=True,
              value_info=[vi("q", F32, [1, 4, 16]), vi("o", F32, [1, 4, 16])])
    g = counted(save(tmp_path, m))
    rot = cost(g, "q")
    # head dim 2 * 4 = 8 (from the cache), all rotated: 3 FLOPs x 64 elements; cos/sin: 4 rows of 4 fp32 each
    assert rot.vector_flops == 3 * 64 and rot.weight_bytes == 2 * 4 * 4 * 4
    mha = cost(g, "o")
    # BH = 2, head 8, pairs 4 * 6 = 24: 2 * 2 * 24 * 16 = 1536
    assert mha.matrix_flops == 1536


# -- quantized ------------------------------------------------------------------------------------------

def test_matmul_nbits_bytes_are_packed(tmp_path):
    # K=32, N=16, 4 bits, block 16: B uint8 [16, 2, 8] = 256 bytes, scales fp32 [32] = 128 bytes
    n = node("MatMulNBits", ["a", "b", "s"], ["y"], domain="com.microsoft", K=32, N=16, bits=4, block_size=16)
    c = one(tmp_path, n, [vi("a", F32, [1, 2, 32])], [init("b", (16, 2, 8), np.uint8), init("s", (32,))], ms=True)
    assert c.matrix_flops == 2 * 2 * 16 * 32       # M = 2 tokens
    assert c.weight_bytes == 256 + 128             # not 32 * 16 * 4 = 2048
    assert c.act_read_bytes == 2 * 32 * 4 and c.act_write_bytes == 2 * 16 * 4


def test_dynamic_quantize_then_matmul_integer(tmp_path):
    nodes = [node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             node("MatMulInteger", ["xq", "w", "xz"], ["acc"]),
             node("DequantizeLinear", ["w", "ws"], ["wd"])]
    m = model(nodes, [vi("x", F32, [2, 4])], ["acc", "xs", "wd"], [init("w", (4, 3), np.int8), init("ws", ())])
    g = counted(save(tmp_path, m))
    assert cost(g, "xq") == Cost(vector_flops=5 * 8, act_read_bytes=32, act_write_bytes=8 + 4 + 1)
    mm = cost(g, "acc")
    assert mm.matrix_flops == 2 * 2 * 3 * 4 and mm.weight_bytes == 12 and mm.act_write_bytes == 6 * 4
    assert g.node("acc").attrs["compute_dtype"] == "int8"
    assert cost(g, "wd") == Cost(vector_flops=2 * 12, weight_bytes=12 + 4, act_write_bytes=48)


def test_dynamic_quantize_matmul_computes_in_int8(tmp_path):
    # com.microsoft.DynamicQuantizeMatMul(A fp32 [2, 4], B int8 [4, 3], b_scale): A is quantized inside the op
    # and the GEMM runs in int8, so the int8 peak applies (A100: 624e12), not fp32 (19.5e12 on CUDA cores)
    from graphroof.hardware import load_hardware
    from graphroof.roofline import compute_dtype, evaluate

    n = node("DynamicQuantizeMatMul", ["a", "w", "ws"], ["y"], domain="com.microsoft")
    m = model([n], [vi("a", F32, [2, 4])], ["y"], [init("w", (4, 3), np.int8), init("ws", (3,))], ms=True)
    g = counted(save(tmp_path, m))
    c = cost(g, "y")
    assert c.matrix_flops == 2 * 2 * 3 * 4               # 2 * M 2 * N 3 * K 4 = 48
    assert c.vector_flops == 5 * 8                       # quantizing A: 5 per element, 8 elements
    assert compute_dtype(g.node("y")) == "int8"
    assert evaluate(c, load_hardware("a100"), "int8").peak_used.startswith("matrix.int8")


def test_qlinear_matmul_and_conv(tmp_path):
    q = [init("s", ()), init("z", (), np.uint8)]
    n = node("QLinearMatMul", ["a", "s", "z", "w", "s", "z", "s", "z"], ["y"])
    c = one(tmp_path, n, [vi("a", U8, [2, 4])], [init("w", (4, 3), np.uint8), *q])
    assert c.matrix_flops == 2 * 2 * 3 * 4 and c.act_write_bytes == 6
    n = node("QLinearConv", ["x", "s", "z", "w", "s", "z", "s", "z"], ["y"])
    c = one(tmp_path, n, [vi("x", U8, [1, 2, 4, 4])], [init("w", (3, 2, 3, 3), np.uint8), *q])
    assert c.matrix_flops == 2 * (3 * 2 * 2) * 2 * 9  # Y [1,3,2,2] = 12 outputs x 2 x 9 MACs = 432
    assert I8 and F16  # dtypes used above


# -- control flow ---------------------------------------------------------------------------------------

def _body_add():
    from onnx import helper as h

    body = h.make_graph([node("Add", ["acc_in", "x"], ["acc_out"], name="body_add"),
                         node("Identity", ["cond_in"], ["cond_out"], name="body_id")], "body",
                        [vi("i", I64, []), vi("cond_in", BOOL, []), vi("acc_in", F32, [4])],
                        [vi("cond_out", BOOL, []), vi("acc_out", F32, [4])])
    return body


def test_loop_with_constant_trip_count_scales_body(tmp_path):
    loop = node("Loop", ["M", "", "acc0"], ["acc"], name="loop", body=_body_add())
    m = model([loop], [vi("x", F32, [4]), vi("acc0", F32, [4])], ["acc"], [init("M", (), np.int64, 5)])
    g = counted(save(tmp_path, m))
    add = g.node("loop/body/body_add")
    assert add.attrs["graphroof.repeat"] == 5 and add.scope == "loop_body"
    assert cost(g, "loop/body/body_add") == Cost(vector_flops=5 * 4, act_read_bytes=5 * 32, act_write_bytes=5 * 16)
    assert cost(g, "loop") == Cost()


def test_loop_with_unknown_trip_count_counts_once_and_says_so(tmp_path):
    from graphroof.errors import GraphroofWarning

    loop = node("Loop", ["M", "", "acc0"], ["acc"], name="loop", body=_body_add())
    m = model([loop], [vi("x", F32, [4]), vi("acc0", F32, [4]), vi("M", I64, [])], ["acc"])
    with pytest.warns(GraphroofWarning, match="trip count M is unknown"):
        g = counted(save(tmp_path, m))
    assert cost(g, "loop/body/body_add").vector_flops == 4
    assert any("counted 1 iteration" in n and "--loop-trips" in n for n in g.meta["notes"])


def test_scan_length_from_shape_and_if_constant_branch(tmp_path):
    from onnx import helper as h

    body = h.make_graph([node("Add", ["s_in", "xi"], ["s_out"], name="sadd"),
                         node("Identity", ["s_out"], ["y_out"], name="sid")], "sb",
                        [vi("s_in", F32, [4]), vi("xi", F32, [4])], [vi("s_out", F32, [4]), vi("y_out", F32, [4])])
    scan = node("Scan", ["s0", "xs"], ["s", "ys"], name="scan", body=body, num_scan_inputs=1)
    then_g = h.make_graph([node("Neg", ["s"], ["t"], name="neg")], "then", [], [vi("t", F32, [4])])
    else_g = h.make_graph([node("Abs", ["s"], ["e"], name="abs")], "else", [], [vi("e", F32, [4])])
    iff = node("If", ["c"], ["z"], name="if", then_branch=then_g, else_branch=else_g)
    m = model([scan, iff], [vi("s0", F32, [4]), vi("xs", F32, ["steps", 4])], ["z", "ys"],
              [init("c", (), np.bool_, False)])
    g = counted(save(tmp_path, m), dims={"steps": 6})
    assert cost(g, "scan/body/sadd").vector_flops == 6 * 4
    assert "if/else_branch/abs" in g and "if/then_branch/neg" not in g


def test_scan_length_left_symbolic_is_bound_at_count_time(tmp_path):
    from onnx import helper as h

    from graphroof.frontends.onnx import load_onnx
    from graphroof.graph import bind

    body = h.make_graph([node("Add", ["s_in", "xi"], ["s_out"], name="sadd")], "sb",
                        [vi("s_in", F32, [4]), vi("xi", F32, [4])], [vi("s_out", F32, [4])])
    scan = node("Scan", ["s0", "xs"], ["s"], name="scan", body=body, num_scan_inputs=1)
    m = model([scan], [vi("s0", F32, [4]), vi("xs", F32, ["steps", 4])], ["s"])
    g = load_onnx(save(tmp_path, m))
    assert g.node("scan/body/sadd").attrs["graphroof.repeat"] == "steps"
    from graphroof.counters import count

    g = bind(g, {"steps": 3})
    count(g, warn=False)
    assert cost(g, "scan/body/sadd").vector_flops == 3 * 4


def test_lstm(tmp_path):
    # X [S=5, B=2, I=3], hidden 4, one direction: W [1, 16, 3], R [1, 16, 4], B [1, 32]
    n = node("LSTM", ["x", "w", "r", "b"], ["y", "yh"], hidden_size=4)
    c = one(tmp_path, n, [vi("x", F32, [5, 2, 3])], [init("w", (1, 16, 3)), init("r", (1, 16, 4)), init("b", (1, 32))])
    # 10 (step, batch) pairs: gate products 2 * 16 * (3 + 4) = 224 each; bias 32 + cell 18 * 4 = 104 each
    assert (c.matrix_flops, c.vector_flops) == (10 * 224, 10 * 104)
    assert c.weight_bytes == (48 + 64 + 32) * 4 and c.act_write_bytes == (5 * 1 * 2 * 4 + 2 * 4) * 4
