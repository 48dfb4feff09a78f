"""ATen convolutions (1-3 spatial dims, grouped, depthwise, transposed), pooling and resampling.

Convolution FLOPs are :func:`~graphroof.counters.formulas.conv_flops`: every output element of a forward conv
is a dot product of ``Cin/groups * prod(kernel)`` terms; a transposed conv scatters every *input* element
through ``Cout/groups * prod(kernel)`` multiply-adds.  The bias is one vector add per output element.

Pooling (as the ONNX rules): a max over a window of k elements is ``k - 1`` compares per output, an average
``k - 1`` adds and a divide (``k``); adaptive average pooling ``numel(in)``, adaptive max ``numel(in) -
numel(out)``.  Interpolation per output element: nearest copies (0), a blend of t taps is t multiplies and
``t - 1`` adds (linear t = 2, bilinear 4, trilinear 8, bicubic 16).
"""

from __future__ import annotations

from ...graph import OpNode
from ..common import io_cost
from ..cost import Cost
from ..formulas import conv_flops, prod
from ..registry import register_rule

_CONV = ("aten.convolution", "aten._convolution", "aten.conv1d", "aten.conv2d", "aten.conv3d",
         "aten.convolution_overrideable", "aten.mkldnn_convolution", "aten.cudnn_convolution",
         "aten.conv_transpose1d", "aten.conv_transpose2d", "aten.conv_transpose3d",
         "aten.cudnn_convolution_transpose", "aten.conv_tbc")


@register_rule(*_CONV)
def conv_cost(node: OpNode) -> Cost:
    """Input 0 = x [N, Cin, *spatial], input 1 = weight, input 2 = optional bias.

    Forward weight: ``[Cout, Cin/groups, *kernel]`` -> ``2 * numel(out) * (Cin/groups) * prod(kernel)``.
    Transposed weight: ``[Cin, Cout/groups, *kernel]`` -> ``2 * numel(x) * (Cout/groups) * prod(kernel)``.
    """
    x, w = node.inputs[0], node.inputs[1]
    bias = node.input(2)
    out = node.outputs[0]
    transposed = bool(node.attrs.get("transposed", False)) or "transpose" in node.op
    if node.op == "aten.conv_tbc":  # [time, batch, channels] with weight [k, Cin, Cout]
        flops = conv_flops(out.numel, w.shape[1], w.shape[0])
    elif transposed:
        flops = conv_flops(x.numel, w.shape[1], prod(w.shape[2:]))
    else:
        flops = conv_flops(out.numel, w.shape[1], prod(w.shape[2:]))
    return io_cost(node, matrix_flops=flops, vector_flops=out.numel if bias is not None else 0)


def _window(node: OpNode, rank: int) -> int:
    k = node.attrs.get("kernel_size", 1)
    if isinstance(k, (list, tuple)):
        return prod(k) if len(k) > 1 else int(k[0]) ** rank
    return int(k) ** rank


def _spatial_rank(op: str) -> int:
    for d in (1, 2, 3):
        if f"{d}d" in op:
            return d
    return 2


@register_rule("aten.max_pool1d", "aten.max_pool2d", "aten.max_pool3d", "aten.max_pool2d_with_indices",
               "aten.max_pool3d_with_indices", "aten.max_pool1d_with_indices", "aten.avg_pool1d",
               "aten.avg_pool2d", "aten.avg_pool3d")
def pool_cost(node: OpNode) -> Cost:
    """Max: ``numel(out) * (k - 1)`` compares; average: ``numel(out) * k`` (k - 1 adds and a divide)."""
    out = node.outputs[0]
    k = _window(node, _spatial_rank(node.op))
    return io_cost(node, vector_flops=out.numel * (k if "avg" in node.op else k - 1))


@register_rule("aten.adaptive_avg_pool1d", "aten.adaptive_avg_pool2d", "aten.adaptive_avg_pool3d",
               "aten._adaptive_avg_pool2d", "aten._adaptive_avg_pool3d", "aten.adaptive_max_pool1d",
               "aten.adaptive_max_pool2d", "aten.adaptive_max_pool3d")
def adaptive_pool_cost(node: OpNode) -> Cost:
    """Windows tile the input: ``numel(in) - numel(out)`` adds / compares, plus a divide per output (average)."""
    x, out = node.inputs[0], node.outputs[0]
    return io_cost(node, vector_flops=x.numel - (0 if "avg" in node.op else out.numel))


#: FLOPs per output element of an interpolation, by mode: a t-tap blend is t multiplies and t - 1 adds.
INTERP_FLOPS_PER_ELEMENT = {"nearest": 0, "linear": 3, "bilinear": 7, "trilinear": 15, "bicubic": 31}


@register_rule("aten.upsample_nearest1d", "aten.upsample_nearest2d", "aten.upsample_nearest3d",
               "aten._upsample_nearest_exact1d", "aten._upsample_nearest_exact2d",
               "aten._upsample_nearest_exact3d", "aten.upsample_linear1d", "aten.upsample_bilinear2d",
               "aten.upsample_trilinear3d", "aten.upsample_bicubic2d", "aten._upsample_bilinear2d_aa",
               "aten._upsample_bicubic2d_aa", "aten.grid_sampler_2d", "aten.grid_sampler")
def interpolate_cost(node: OpNode) -> Cost:
    op = node.op.split(".")[-1]
    mode = next((m for m in ("bicubic", "trilinear", "bilinear", "linear", "nearest") if m in op), "bilinear")
    if op.startswith("grid_sampler"):
        mode = {0: "bilinear", 1: "nearest", 2: "bicubic"}.get(node.attrs.get("interpolation_mode", 0), "bilinear")
    return io_cost(node, vector_flops=node.outputs[0].numel * INTERP_FLOPS_PER_ELEMENT[mode])
