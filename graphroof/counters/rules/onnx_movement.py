"""ONNX data movement: copies cost their bytes, indexing reads only what it indexes, views are free.

* Free (alias or metadata only, no data moved): Shape, Size, Reshape, Squeeze, Unsqueeze, Flatten, Identity,
  Dropout (inference), Constant (folded into the model; its readers count its bytes).
* Copies (0 FLOPs, read every input, write every output): Concat, Split, Transpose, Expand, Tile, Pad,
  Scatter*, Trilu, DepthToSpace, ... .
* Indexing reads only the selected elements: Gather from an embedding table reads ``numel(output)`` elements
  of the table (the rows it indexes), not the table; Slice likewise.
* If / Loop / Scan: their bodies are flattened into the graph by the frontend (scaled by the trip count), so
  the container node itself adds nothing.
"""

from __future__ import annotations

import math

from ...graph import OpNode, Role, TensorSpec
from ..common import io_cost
from ..cost import Cost
from ..registry import REGISTRY, register_rule

__all__ = ["partial_read"]

REGISTRY.free("onnx.Shape", "onnx.Size", "onnx.Reshape", "onnx.Squeeze", "onnx.Unsqueeze", "onnx.Flatten",
              "onnx.Identity", "onnx.Dropout", "onnx.Constant")


@register_rule("onnx.Concat", "onnx.Split", "onnx.Transpose", "onnx.Expand", "onnx.Tile", "onnx.Pad",
               "onnx.ScatterND", "onnx.ScatterElements", "onnx.Scatter", "onnx.Trilu", "onnx.ReverseSequence",
               "onnx.DepthToSpace", "onnx.SpaceToDepth", "onnx.Compress", "onnx.ConstantOfShape", "onnx.EyeLike",
               "onnx.OneHot", "onnx.NonZero", "onnx.Unique", "onnx.Col2Im", "onnx.CenterCropPad")
def copy(node: OpNode) -> Cost:
    """Data movement: no FLOPs; every input read and every output written once."""
    return io_cost(node)


@register_rule("onnx.Range")
def range_(node: OpNode) -> Cost:
    """``start + i * delta``: one FLOP per output element (the multiply-add is fused into a running add)."""
    return io_cost(node, vector_flops=node.outputs[0].numel)


def partial_read(t: TensorSpec, nbytes: float) -> Cost:
    """A read of *nbytes* of *t*, in the byte bucket of *t*'s role."""
    if t.role in (Role.WEIGHT, Role.CONST):
        return Cost(weight_bytes=nbytes)
    if t.role is Role.KV_CACHE:
        return Cost(kv_read_bytes=nbytes)
    return Cost(act_read_bytes=nbytes)


def _indexed(node: OpNode) -> Cost:
    data, out = node.inputs[0], node.outputs[0]
    selected = math.ceil(out.numel * data.itemsize_bits / 8)
    return io_cost(node, inputs=node.inputs[1:]) + partial_read(data, min(selected, data.nbytes))


@register_rule("onnx.Gather", "onnx.GatherElements", "onnx.GatherND")
def gather(node: OpNode) -> Cost:
    """Reads the indices and ``numel(output)`` elements of data (an embedding lookup reads its rows)."""
    return _indexed(node)


@register_rule("onnx.Slice")
def slice_(node: OpNode) -> Cost:
    """Reads the ``numel(output)`` selected elements of data, plus starts / ends / axes / steps."""
    return _indexed(node)


@register_rule("com.microsoft.GatherBlockQuantized")
def gather_block_quantized(node: OpNode) -> Cost:
    """A quantized embedding lookup: (data packed, indices, scales, zero_points), attrs bits, block_size.

    Reads the selected rows' packed codes (``numel(out) * bits / 8`` bytes) and their scales and zero points
    (``numel(out) / block_size`` each); dequantizes with 2 FLOPs per output element.
    """
    data, out = node.inputs[0], node.outputs[0]
    bits = int(node.attrs.get("bits", data.itemsize_bits if data.itemsize_bits < 8 else 4))
    block = int(node.attrs.get("block_size", 128))
    c = io_cost(node, vector_flops=2 * out.numel, inputs=[node.input(1)])
    c = c + partial_read(data, min(data.nbytes, math.ceil(out.numel * bits / 8)))
    for t in (node.input(2), node.input(3)):
        if t is not None:
            c = c + partial_read(t, min(t.nbytes, math.ceil(out.numel / block * t.itemsize_bits / 8)))
    return c


@register_rule("onnx.If", "onnx.Loop", "onnx.Scan")
def control_flow(node: OpNode) -> Cost:  # noqa: ARG001 - the bodies carry the cost
    """0: the frontend flattens the body ops (scaled by the trip count) into the graph; they carry the cost."""
    return Cost()
