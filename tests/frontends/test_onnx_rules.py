"""ONNX rules end to end: models built with onnx.helper, loaded by the frontend, counted, checked by hand.

These keep what only a real .onnx file tests: initializers read as weights, shape inference feeding the rules,
KV-cache roles of past / present tensors, com.microsoft shapes, compute dtypes, control-flow flattening.  The rule
arithmetic itself is tested on literal nodes in tests/counters/rules/test_<family>.py."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")

import numpy as np

from graphroof.counters.cost import Cost
from graphroof.counters.settings import CountSettings
from tests.frontends._onnx_build import (
    BOOL,
    F32,
    I32,
    I64,
    cost,
    counted,
    init,
    model,
    node,
    save,
    vi,
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


# -- elementwise ----------------------------------------------------------------------------------------

def test_clip_bounds_come_from_its_inputs(tmp_path):
    # opset 13 Clip(x, min, max): both bounds -> 2 compares per element; min left empty ("") -> 1
    ins = [vi("x", F32, [10])]
    c = one(tmp_path, node("Clip", ["x", "lo", "hi"], ["y"]), ins, [init("lo", ()), init("hi", (), value=6.0)],
            opset=13)
    assert c == Cost(vector_flops=20, act_read_bytes=40, weight_bytes=8, act_write_bytes=40)
    c = one(tmp_path, node("Clip", ["x", "", "hi"], ["y"]), ins, [init("hi", (), value=6.0)], opset=13)
    assert c.vector_flops == 10


# -- data movement --------------------------------------------------------------------------------------

def test_gather_embedding_reads_rows_not_table(tmp_path):
    n = node("Gather", ["table", "ids"], ["y"], axis=0)
    c = one(tmp_path, n, [vi("ids", I64, [2, 3])], [init("table", (100, 8))])
    # 6 rows of 8 fp32 = 192 bytes of the 3200-byte table
    assert c == Cost(weight_bytes=192, act_read_bytes=6 * 8, act_write_bytes=192)


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


# -- quantized ------------------------------------------------------------------------------------------

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

    from graphroof.frontends.onnx.load import load_onnx
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


