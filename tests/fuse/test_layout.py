"""Views that leave a tensor strided (graphroof.fuse.layout), the kernels that read through them, and the element
bound those kernels get under the PyTorch presets (graphroof.timing.aten)."""

from __future__ import annotations

import pytest

from graphroof.counters import count
from graphroof.fuse import fuse
from graphroof.fuse.layout import strided_view
from graphroof.fuse.runtimes import get_runtime
from graphroof.graph import COST, OpGraph, OpNode, TensorSpec
from graphroof.hardware import load_hardware
from graphroof.timing.aten import off_vector_path
from graphroof.timing.kernel import kernel_time


def _view(op: str, x: tuple, out: tuple, **attrs) -> OpNode:
    return OpNode("v", op, (TensorSpec(x, "bf16"),), (TensorSpec(out, "bf16"),), attrs)


def test_which_views_leave_a_tensor_strided():
    # rotate_half's x[..., 64:] of [1, 32, S, 128]: 32 x S rows before the sliced dim -> strided
    assert strided_view(_view("aten.slice", (1, 32, 512, 128), (1, 32, 512, 64), dim=3, start=64))
    # a slice of the outermost dim, or of a dim with only size-1 dims before it, stays contiguous
    assert not strided_view(_view("aten.slice", (4, 512, 4096), (2, 512, 4096), dim=0))
    assert not strided_view(_view("aten.slice", (1, 512, 4096), (1, 256, 4096), dim=1))
    assert strided_view(_view("aten.slice", (2, 512, 4096), (2, 256, 4096), dim=1))
    # a slice that keeps the whole dim is no slice
    assert not strided_view(_view("aten.slice", (1, 32, 512, 128), (1, 32, 512, 128), dim=3))
    # the gate / up halves of a chunked [T, 2I] projection (transformers' MoE experts)
    assert strided_view(_view("aten.split", (2048, 1536), (2048, 768), split_size=768, dim=-1))
    # select of a middle dim with rows before it; of the first dim: contiguous
    assert strided_view(_view("aten.select", (8, 3, 64), (8, 64), dim=1))
    assert not strided_view(_view("aten.select", (3, 8, 64), (8, 64), dim=0))
    # [B, S, H, D] -> [B, H, S, D]: S and H both > 1 change order; at one token (decode) nothing moves
    assert strided_view(_view("aten.transpose", (1, 512, 32, 128), (1, 32, 512, 128), dim0=1, dim1=2))
    assert not strided_view(_view("aten.transpose", (1, 1, 32, 128), (1, 32, 1, 128), dim0=1, dim1=2))
    assert strided_view(_view("aten.t", (4096, 14336), (14336, 4096)))
    assert strided_view(_view("aten.permute", (8, 196, 768), (8, 768, 196), dims=(0, 2, 1)))
    assert not strided_view(_view("aten.permute", (1, 196, 768), (196, 1, 768), dims=(1, 0, 2)))
    # expand grows a size-1 dim (stride 0); view / unsqueeze keep the layout; ONNX views are not ATen's
    assert strided_view(_view("aten.expand", (1, 768), (8, 768)))
    assert not strided_view(_view("aten.expand", (8, 768), (8, 768)))
    assert not strided_view(_view("aten.view", (8, 768), (8, 12, 64)))
    assert not strided_view(_view("aten.unsqueeze", (8, 768), (8, 1, 768), dim=1))
    assert not strided_view(_view("Reshape", (8, 768), (8, 12, 64)))


def _rotate_half_graph(tokens: int) -> OpGraph:
    """x[..., 64:] negated, concatenated with x[..., :64] (rotate_half of transformers' Llama), then a view of the
    contiguous result multiplied by itself."""
    g = OpGraph("t")
    x = TensorSpec((1, 32, tokens, 128), "bf16")
    half = TensorSpec((1, 32, tokens, 64), "bf16")
    g.add_op(OpNode("x1", "aten.slice", (x,), (half,), {"dim": 3, "start": 0, "end": 64}), ["x"], ["x1"])
    g.add_op(OpNode("x2", "aten.slice", (x,), (half,), {"dim": 3, "start": 64}), ["x"], ["x2"])
    g.add_op(OpNode("neg", "aten.neg", (half,), (half,)), ["x2"], ["n"])
    g.add_op(OpNode("cat", "aten.cat", (half, half), (x,), {"dim": -1}), ["n", "x1"], ["c"])
    flat = TensorSpec((tokens, 4096), "bf16")
    g.add_op(OpNode("v", "aten.view", (x,), (flat,), {"size": (tokens, 4096)}), ["c"], ["cv"])
    g.add_op(OpNode("sq", "aten.mul", (flat, flat), (flat,)), ["cv", "cv"], ["sq"])
    count(g)
    return g


def test_kernels_reading_through_a_strided_view_are_marked():
    g = _rotate_half_graph(512)
    kg = fuse(g, "pytorch-eager").as_opgraph(g)
    marked = {n.attrs["ops"][0]: bool(n.attrs.get("strided_input")) for n in kg.ops()}
    # neg reads x2 (a strided slice), cat reads x1 (one); the multiply reads a view of cat's contiguous output
    assert marked == {"neg": True, "cat": True, "sq": False}
    # .contiguous() of a transposed tensor reads it strided; of a contiguous one it is a plain copy
    t = OpGraph("t2")
    x = TensorSpec((1, 512, 32, 128), "bf16")
    xt = TensorSpec((1, 32, 512, 128), "bf16")
    t.add_op(OpNode("tr", "aten.transpose", (x,), (xt,), {"dim0": 1, "dim1": 2}), ["x"], ["xt"])
    t.add_op(OpNode("cl", "aten.clone", (xt,), (xt,)), ["xt"], ["y"])
    t.add_op(OpNode("cl2", "aten.clone", (xt,), (xt,)), ["y"], ["z"])
    count(t)
    kt = {n.attrs["ops"][0]: n for n in fuse(t, "pytorch-eager").as_opgraph(t).ops()}
    assert off_vector_path(kt["cl"]) and not off_vector_path(kt["cl2"])
    nodes = {n.attrs["ops"][0]: n for n in kg.ops()}
    assert off_vector_path(nodes["neg"]) and off_vector_path(nodes["cat"]) and not off_vector_path(nodes["sq"])


def test_strided_kernels_priced_by_their_elements_by_hand():
    hw = load_hardware("h200-sxm")
    rt = get_runtime("pytorch-eager")
    g = _rotate_half_graph(2048)
    kg = fuse(g, rt).as_opgraph(g)
    nodes = {n.attrs["ops"][0]: n for n in kg.ops()}
    rate = 1.45 * 4.04e12 / 16  # elements / s: aten_strided_elements_per_sm_clock x SMs x clock (3.66e11)
    for name, elements in (("neg", 32 * 2048 * 64), ("cat", 32 * 2048 * 128)):
        node = nodes[name]
        cost = kg.get(node.name, COST)
        # neg: 4,194,304 elements / 3.66125e11 = 11.456 us + 1.65 us; its bytes (16.8 MB at 4.344 TB/s) take
        # 3.86 + 1.65 us.  cat: 8,388,608 elements: 22.91 + 1.65 us against 7.73 + 1.65 us of bytes
        t = kernel_time(node, "pointwise", cost, hw, "bf16", 0.0, 0.0, rt).t_kernel_s
        assert t == pytest.approx(1.65e-6 + elements / rate)
        assert t > 1.65e-6 + cost.bytes / (4.8e12 * 0.905)
    # without the PyTorch preset: the byte model
    node = nodes["cat"]
    cost = kg.get(node.name, COST)
    t = kernel_time(node, "pointwise", cost, hw, "bf16", 0.0, 0.0, get_runtime("compiled")).t_kernel_s
    assert t == pytest.approx(1.65e-6 + cost.bytes / (4.8e12 * 0.905))
