"""PyTorch's non-vectorised elementwise kernels (graphroof.timing.aten): which one-op kernels leave the vectorised
path, and the element bound they get, checked by hand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from graphroof.counters import count
from graphroof.errors import InputError
from graphroof.fuse.preset_file import read_preset_fields
from graphroof.fuse.runtimes import get_runtime
from graphroof.graph import COST, OpGraph, OpNode, Role, TensorSpec
from graphroof.hardware import load_hardware
from graphroof.timing.aten import aten_floor_s, off_vector_path, strided_elements_per_s
from graphroof.timing.kernel import kernel_time
from graphroof.timing.vectorized import kernel_times

S, H = 2048, 4096


def _node(op: str, inputs, out, keys=None) -> OpNode:
    return OpNode("x", op, tuple(inputs), (out,), {"op_keys": keys} if keys else {})


def test_which_kernels_leave_the_vectorised_path():
    x32 = TensorSpec((1, S, H), "fp32")
    stat = TensorSpec((1, S, 1), "fp32")
    xb = TensorSpec((1, S, H), "bf16")
    w = TensorSpec((H,), "bf16", Role.WEIGHT)
    # a norm's [S, 1] statistics, a [H] weight, rotary's cos over the heads: broadcast operands
    assert off_vector_path(_node("aten.mul", (x32, stat), x32))
    assert off_vector_path(_node("aten.mul", (w, xb), xb))
    q, cos = TensorSpec((1, 32, S, 128), "bf16"), TensorSpec((1, 1, S, 128), "bf16")
    assert off_vector_path(_node("aten.mul", (q, cos), q))
    # a cast (bf16 -> fp32): unrolled_elementwise_kernel with a dynamic cast
    assert off_vector_path(_node("aten._to_copy", (xb,), x32))
    # contiguous operands of the output's shape, no cast: the vectorised kernel
    assert not off_vector_path(_node("aten.add", (xb, xb), xb))
    assert not off_vector_path(_node("aten._to_copy", (xb,), xb))
    # ... and the narrowing fp32 -> bf16 / fp16 copy, a vectorised kernel of its own (bfloat16_copy_kernel_cuda)
    assert not off_vector_path(_node("aten._to_copy", (x32,), xb))
    assert not off_vector_path(_node("aten._to_copy", (x32,), TensorSpec((1, S, H), "fp16")))
    # a multiply of fp32 by bf16 into bf16 casts an operand: off the vectorised path
    assert off_vector_path(_node("aten.mul", (x32, xb), xb))
    # a one-element operand is a scalar PyTorch lifts out; a dim missing where the output's is 1 is no broadcast
    assert not off_vector_path(_node("aten.mul", (xb, TensorSpec((1,), "bf16")), xb))
    assert not off_vector_path(_node("aten.add", (xb, TensorSpec((S, H), "bf16")), xb))
    # a symbolic output dim counts as more than one
    sym = TensorSpec(("B", S, H), "bf16")
    assert off_vector_path(_node("aten.add", (sym, xb), sym))
    # not TensorIterator pointwise: concatenation, a batch norm (its own kernel), a fused kernel of two ops,
    # an ONNX op
    assert not off_vector_path(_node("aten.cat", (q, cos), q))
    bn_in = TensorSpec((8, 64, 56, 56), "fp16")
    p = TensorSpec((64,), "fp16", Role.WEIGHT)
    assert not off_vector_path(_node("aten.batch_norm", (bn_in, p, p, p, p), bn_in))
    assert not off_vector_path(_node("aten.mul", (x32, stat), x32, keys=["aten.mul", "aten.add"]))
    assert not off_vector_path(_node("Mul", (x32, stat), x32))
    assert not off_vector_path(None)


def test_element_bound_by_hand_on_h200():
    hw = load_hardware("h200-sxm")
    rt = get_runtime("pytorch-eager")
    # rate = 1.45 elements / SM / clock x SMs x clock, SMs x clock = attn_exp_per_s / 16 = 4.04e12 / 16 = 2.525e11
    # -> 3.66125e11 elements / s
    assert strided_elements_per_s(hw, rt) == pytest.approx(1.45 * 4.04e12 / 16)
    assert strided_elements_per_s(hw, get_runtime("compiled")) == 0.0  # no such kernels: no bound
    x32 = TensorSpec((1, S, H), "fp32")
    stat = TensorSpec((1, S, 1), "fp32")
    g = OpGraph("t")
    node = _node("aten.mul", (x32, stat), x32)
    g.add_op(node)
    count(g)
    cost = g.get("x", COST)
    # bytes: x read 4 B x 8,388,608 + stat 4 B x 2,048 + out 4 B x 8,388,608 = 67,117,056 B; at the H200's
    # elementwise rate 4.8e12 x 0.905: 15.451 us + stream_latency_s 1.65 us = 17.10 us (the byte model alone)
    stream_s = 67_117_056 / (4.8e12 * 0.905) + 1.65e-6
    # elements: 8,388,608 / 3.66125e11 = 22.912 us + 1.65 us = 24.56 us: the element bound wins
    floor_s = 1.65e-6 + S * H / (1.45 * 4.04e12 / 16)
    assert floor_s == pytest.approx(24.562e-6, rel=1e-4)
    assert aten_floor_s(node, cost.act_write_bytes, hw, rt, 1.65e-6) == pytest.approx(floor_s)
    kt = kernel_time(node, "pointwise", cost, hw, "fp32", 0.0, 0.0, rt)
    assert kt.t_kernel_s == pytest.approx(floor_s)
    assert kernel_time(node, "pointwise", cost, hw, "fp32", 0.0, 0.0, get_runtime("compiled")).t_kernel_s \
        == pytest.approx(stream_s)
    # the array model gives the same times along a range (here: 1x and 2x the tokens)
    arr = {f: np.array([getattr(cost, f), 2 * getattr(cost, f)], dtype=float) for f in
           ("matrix_flops", "vector_flops", "weight_bytes", "act_read_bytes", "act_write_bytes", "kv_read_bytes",
            "kv_write_bytes", "net_bytes")}
    out = kernel_times("pointwise", ("aten.mul",), "fp32", arr, None, hw, rt, node)
    assert out is not None
    assert out[0] == pytest.approx(floor_s)
    assert out[1] == pytest.approx(1.65e-6 + 2 * S * H / (1.45 * 4.04e12 / 16))
    # a preset with the constant at 0 has no element bound
    rt0 = dataclasses.replace(rt, aten_strided_elements_per_sm_clock=0.0)
    assert kernel_time(node, "pointwise", cost, hw, "fp32", 0.0, 0.0, rt0).t_kernel_s == pytest.approx(stream_s)


def test_preset_key_is_checked(tmp_path):
    base = 'name = "mine"\n[kernels]\naten_strided_elements_per_sm_clock = {}\n'
    p = tmp_path / "mine.toml"
    p.write_text(base.format(2.0))
    assert read_preset_fields(p)["aten_strided_elements_per_sm_clock"] == 2.0
    for bad in ("100", "-1", "true"):
        p.write_text(base.format(bad))
        with pytest.raises(InputError, match="elements per SM per clock"):
            read_preset_fields(p)


def test_softmax_kernel_by_row_length():
    from graphroof.timing.aten import softmax_kernel

    # PyTorch >= 2.7 (SoftMax.cu host_softmax): the warp kernel up to 2,048 elements and 8 KB a row, the register
    # kernel while ceil(L / 1024) < 10 (L <= 9,216), then the shared-memory / plain block kernel
    assert softmax_kernel(512, 2) == softmax_kernel(2048, 2) == softmax_kernel(2048, 4) == "warp"
    assert softmax_kernel(2049, 2) == softmax_kernel(4096, 2) == softmax_kernel(9216, 4) == "reg"
    assert softmax_kernel(2048, 8) == "reg"  # fp64: 16 KB a row, over the warp kernel's 8 KB
    assert softmax_kernel(9217, 2) == softmax_kernel(16384, 2) == "block"


def test_register_softmax_bound_by_hand():
    from graphroof.counters.settings import CountSettings
    from graphroof.timing.aten import eager_attention_device_s, softmax_reg_s
    from graphroof.validate.torchgpu import attention_graph

    hw = load_hardware("h200-sxm")
    rt = get_runtime("pytorch-eager")
    assert rt.aten_softmax_reg_elements_per_sm_clock == 1.14
    # a stand-alone fp16 softmax over 1,024 rows of 4,096: 4,194,304 elements / (1.14 x 4.04e12 / 16 = 2.8785e11)
    # = 14.571 us, + stream_latency_s 1.65 us = 16.22 us; its bytes (16.8 MB at 4.344 TB/s: 3.86 + 1.65 us) lose
    x = TensorSpec((1024, 4096), "fp16")
    g = OpGraph("t")
    node = OpNode("x", "aten._softmax", (x,), (x,), {"dim": -1})
    g.add_op(node)
    count(g)
    cost = g.get("x", COST)
    want = 1.65e-6 + 1024 * 4096 / (1.14 * 4.04e12 / 16)
    assert want == pytest.approx(16.221e-6, rel=1e-4)
    assert kernel_time(node, "reduction", cost, hw, "fp16", 0.0, 0.0, rt).t_kernel_s == pytest.approx(want)
    # rows of 2,048 (the warp kernel) and 16,384 (shared memory) keep the byte model; so does another dim
    assert softmax_reg_s(1024, 2048, 2, hw, rt) == softmax_reg_s(1024, 16384, 2, hw, rt) == 0.0
    other = OpNode("y", "aten._softmax", (x,), (x,), {"dim": 0})
    assert aten_floor_s(other, cost.act_write_bytes, hw, rt, 1.65e-6) == 0.0
    # fp16 in, fp32 out (half_to_float): no register kernel on that path
    half_to_float = OpNode("z", "aten._softmax", (x,), (TensorSpec((1024, 4096), "fp32"),), {"dim": -1})
    assert aten_floor_s(half_to_float, 2 * cost.act_write_bytes, hw, rt, 1.65e-6) == 0.0
    # an eager naive attention over 4,096 keys: 4 x 32 x 4,096 rows of 4,096 fp16 scores = 2.147e9 elements: the
    # register softmax takes 2.147e9 / 2.8785e11 = 7.459 ms; the byte model already streams its read of S and
    # write of P (2 x 4.295 GB) at the GEMM bandwidth, 4.8e12 x 0.886 = 4.2528e12 B/s: 2.020 ms; it adds the
    # difference, 5.439 ms
    ag = attention_graph(4, 32, 32, 4096, 4096, 64, False, "fp16")
    count(ag, settings=CountSettings(attention="naive", causal="full"))
    sdpa = ag.node("sdpa")
    elements = 4 * 32 * 4096 * 4096
    extra = elements / (1.14 * 4.04e12 / 16) - 2 * 2 * elements / (4.8e12 * 0.886)
    assert extra == pytest.approx(5.439e-3, rel=1e-3)
    no_reg = dataclasses.replace(rt, aten_softmax_reg_elements_per_sm_clock=0.0)
    cost = ag.get("sdpa", COST)
    assert eager_attention_device_s(sdpa, cost, hw, rt) - eager_attention_device_s(sdpa, cost, hw, no_reg) \
        == pytest.approx(extra)
    assert eager_attention_device_s(sdpa, cost, hw, get_runtime("compiled")) == 0.0
    # 2,048 keys: the warp kernel, nothing added
    ag = attention_graph(8, 32, 32, 2048, 2048, 64, False, "fp16")
    count(ag, settings=CountSettings(attention="naive", causal="full"))
    cost = ag.get("sdpa", COST)
    assert eager_attention_device_s(ag.node("sdpa"), cost, hw, rt) == \
        pytest.approx(eager_attention_device_s(ag.node("sdpa"), cost, hw, no_reg))
