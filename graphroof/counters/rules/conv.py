"""Conv family: convolutions (1-3 spatial dims, grouped, depthwise, transposed), pooling and resampling, in ATen
and ONNX.  (Quantized convolutions are in :mod:`.quant`.)

* Convolution: :func:`~graphroof.counters.formulas.conv_flops`.  Every output element of a forward conv is a
  dot product of ``Cin/groups * prod(kernel)`` terms (weight ``[Cout, Cin/groups, *kernel]``); a transposed
  conv scatters every *input* element through ``Cout/groups * prod(kernel)`` multiply-adds (weight
  ``[Cin, Cout/groups, *kernel]``).  The bias is one vector add per output element.
* Pooling over a window of k elements: max ``k - 1`` compares per output, average ``k - 1`` adds and a divide
  (``k``), Lp ``2k`` (a power and an add per element).  Global / adaptive average: ``numel(in)``; max:
  ``numel(in) - numel(out)``.
* Interpolation per output element: a blend of t taps is t multiplies and ``t - 1`` adds, ``t = taps_per_axis
  ^ axes`` (linear 2 per axis, cubic 4): linear 1-d 3, bilinear 7, trilinear 15, bicubic 31; nearest 0.
* Sampling at computed points (GridSample, RoiAlign, DeformConv): the blend above per channel, plus per point
  (shared by the channels) its coordinates and bilinear tap weights: GridSample unnormalises each of its r
  coordinates (multiply, add: ``2r``); RoiAlign / DeformConv compute y and x (a multiply-add each, 4), the
  fractions and their complements (4) and the four tap weights (4 products) = 12 / a point (DeformConv: the
  offset adds replace the multiply-adds, 2 + 4 + 4 = 10).
"""

from __future__ import annotations

from ...graph import OpNode
from ..common import io_cost, req
from ..cost import FLOPS_PER_MAC, Cost
from ..family import Row, aten, ms, onnx, register_family
from ..formulas import conv_flops, prod
from .movement import partial_read

__all__ = ["ROWS", "conv", "interp_flops", "pool_flops"]


def conv(node: OpNode, xi: int = 0, wi: int = 1, bias_i: int | None = 2, transposed: bool = False) -> Cost:
    """Convolution of input *xi* by weight *wi*, plus the bias add when input *bias_i* is given."""
    x, w, y = req(node, xi), req(node, wi), node.outputs[0]
    kernel = prod(w.dims[2:])
    flops = conv_flops(x.numel if transposed else y.numel, w.dims[1], kernel)
    vec = y.numel if bias_i is not None and node.input(bias_i) is not None else 0
    return io_cost(node, matrix_flops=flops, vector_flops=vec)


def pool_flops(out_numel: int, window: int, kind: str) -> int:
    """``max``: ``k - 1`` compares per output; ``avg``: ``k`` (k - 1 adds, a divide); ``lp``: ``2k``."""
    per = {"max": window - 1, "avg": window, "lp": 2 * window}[kind]
    return out_numel * per


def interp_flops(out_numel: int, taps_per_axis: int, axes: int) -> int:
    """A blend of ``t = taps_per_axis ** axes`` taps per output element: ``2t - 1`` (nearest, t = 1: 0)."""
    t = taps_per_axis ** axes
    return out_numel * (2 * t - 1 if t > 1 else 0)


# -- adapters ----------------------------------------------------------------------------------------------

def aten_conv(node: OpNode) -> Cost:
    """Input 0 = x, 1 = weight, 2 = optional bias; transposed by ``attrs["transposed"]`` or the op name;
    ``conv_tbc``: [time, batch, channels] with weight [k, Cin, Cout]."""
    if node.op == "aten.conv_tbc":
        w, out = req(node, 1).dims, node.outputs[0]
        return io_cost(node, matrix_flops=conv_flops(out.numel, w[1], w[0]),
                       vector_flops=out.numel if node.input(2) is not None else 0)
    return conv(node, transposed=bool(node.attrs.get("transposed", False)) or "transpose" in node.op)


def onnx_conv(node: OpNode) -> Cost:
    """ONNX Conv (X, W, B)."""
    return conv(node)


def onnx_conv_transpose(node: OpNode) -> Cost:
    """ONNX ConvTranspose (X, W, B), W [Cin, Cout/groups, k...]."""
    return conv(node, transposed=True)


def fused_conv(node: OpNode) -> Cost:
    """com.microsoft FusedConv (X, W, B, Z): Conv, + Z (sum input) and the activation, one FLOP per output each."""
    y = node.outputs[0].numel
    extra = (y if node.input(3) is not None else 0) + (y if node.attrs.get("activation") else 0)
    return conv(node) + Cost(vector_flops=extra)


def _aten_window(node: OpNode) -> int:
    rank = next((d for d in (1, 2, 3) if f"{d}d" in node.op), 2)
    k = node.attrs.get("kernel_size", 1)
    if isinstance(k, (list, tuple)):
        return prod(k) if len(k) > 1 else int(k[0]) ** rank
    return int(k) ** rank


def aten_pool(node: OpNode) -> Cost:
    """``kernel_size`` (an int is repeated over the op's spatial rank)."""
    kind = "avg" if "avg" in node.op else "max"
    return io_cost(node, vector_flops=pool_flops(node.outputs[0].numel, _aten_window(node), kind))


def onnx_pool(node: OpNode) -> Cost:
    """``kernel_shape``; the optional Indices output of MaxPool is written too."""
    kind = {"onnx.MaxPool": "max", "onnx.AveragePool": "avg", "onnx.LpPool": "lp"}[node.op]
    window = prod(node.attrs.get("kernel_shape", ()) or (1,))
    return io_cost(node, vector_flops=pool_flops(node.outputs[0].numel, window, kind))


def global_pool(node: OpNode) -> Cost:
    """Windows tile the input: ``numel(in) - numel(out)`` adds / compares, plus a divide per output (average);
    Lp: a power and an add per element (the root per output rounds it up)."""
    x, out = req(node, 0), node.outputs[0]
    if "Lp" in node.op:
        return io_cost(node, vector_flops=2 * x.numel)
    avg = "avg" in node.op or "Average" in node.op
    return io_cost(node, vector_flops=x.numel - (0 if avg else out.numel))


_ATEN_TAPS = {"nearest": (1, 0), "linear": (2, 1), "bilinear": (2, 2), "trilinear": (2, 3), "bicubic": (4, 2)}


def aten_interpolate(node: OpNode) -> Cost:
    op = node.op.split(".")[-1]
    mode = next((m for m in ("bicubic", "trilinear", "bilinear", "linear", "nearest") if m in op), "bilinear")
    taps, axes = _ATEN_TAPS[mode]
    return io_cost(node, vector_flops=interp_flops(node.outputs[0].numel, taps, axes))


def resize(node: OpNode) -> Cost:
    """ONNX Resize / Upsample: ``mode`` nearest / linear / cubic over the axes whose size changes.  Reads X (and
    the small roi / scales / sizes)."""
    x, y = req(node, 0), node.outputs[0]
    axes = sum(1 for a, b in zip(x.shape, y.shape) if a != b)
    taps = {"linear": 2, "bilinear": 2, "cubic": 4}.get(str(node.attrs.get("mode", "nearest")), 1)
    return io_cost(node, vector_flops=interp_flops(y.numel, taps, axes))


_GRID_TAPS = {"nearest": 1, "linear": 2, "bilinear": 2, "cubic": 4, "bicubic": 4}
_ATEN_GRID_MODE = {0: "bilinear", 1: "nearest", 2: "bicubic"}


def grid_sample(node: OpNode) -> Cost:
    """(X [N, C, *in], grid [N, *out, r]) -> Y [N, C, *out]: per grid point ``2r`` (unnormalise), per output
    element the blend of ``taps ** r`` taps.  ONNX ``mode`` (linear / nearest / cubic, opset 16 names bilinear /
    bicubic); ATen ``interpolation_mode`` 0 bilinear, 1 nearest, 2 bicubic."""
    grid, y = req(node, 1), node.outputs[0]
    r = int(grid.shape[-1])
    mode = node.attrs.get("mode", "linear") if node.op.startswith("onnx.") else \
        _ATEN_GRID_MODE.get(int(node.attrs.get("interpolation_mode", 0)), "bilinear")
    points = grid.numel // r if r else 0
    return io_cost(node, vector_flops=interp_flops(y.numel, _GRID_TAPS[str(mode)], r) + 2 * r * points)


def affine_grid(node: OpNode) -> Cost:
    """theta [N, r, r+1] -> grid [N, *size, r] (ONNX AffineGrid; ATen affine_grid_generator): each grid point is
    theta times its homogeneous base coordinate, a batched matmul ``[N, P, r+1] @ [N, r+1, r]`` =
    ``2 * N * P * r * (r+1)``; the base coordinates are normalised to [-1, 1] (one per coordinate: ``N * P * r``).
    The size input (ONNX) is read as data."""
    theta, grid = req(node, 0), node.outputs[0]
    r = int(theta.shape[1])
    n_points = grid.numel // r if r else 0          # N * P
    return io_cost(node, matrix_flops=FLOPS_PER_MAC * n_points * r * (r + 1), vector_flops=n_points * r)


def roi_align(node: OpNode) -> Cost:
    """(X [N, C, H, W], rois [R, 4], batch_indices [R]) -> Y [R, C, oh, ow], ``s = sampling_ratio`` samples per
    bin axis: per sample point 12 (coordinates and weights), per sampled value the bilinear blend (7), per output
    ``s*s`` (avg: adds and the divide) or ``s*s - 1`` (max).  ``sampling_ratio`` 0 (adaptive, decided by the
    roi sizes at run time) is estimated as 2.  Reads at most the 4 taps of each sampled value from X."""
    x, y = req(node, 0), node.outputs[0]
    ratio = int(node.attrs.get("sampling_ratio", 0))
    s = ratio if ratio > 0 else 2
    samples = s * s
    points = int(y.shape[0]) * prod(int(d) for d in y.shape[2:]) * samples   # R * oh * ow * s * s, for all channels
    per_out = samples if node.attrs.get("mode", "avg") == "avg" else samples - 1
    flops = 12 * points + y.numel * samples * 7 + y.numel * per_out
    taps_bytes = y.numel * samples * 4 * x.itemsize_bits / 8
    return io_cost(node, vector_flops=flops, inputs=node.inputs[1:], estimated=ratio <= 0) + \
        partial_read(x, min(x.nbytes, taps_bytes))


def max_roi_pool(node: OpNode) -> Cost:
    """(X [N, C, H, W], rois [R, 5]) -> Y [R, C, ph, pw]: each roi's window size is data, so the count is the
    upper bound of rois covering the whole map: ``R * C * H * W - numel(Y)`` compares (estimated).  X is read
    once."""
    x, y = req(node, 0), node.outputs[0]
    r = int(y.shape[0])
    return io_cost(node, vector_flops=max(r * prod(int(d) for d in x.shape[1:]) - y.numel, 0), estimated=True)


def deform_conv(node: OpNode) -> Cost:
    """ONNX DeformConv (X [N, C, H, W], W [M, C/g, *k], offset [N, og*K*2, *out], B, mask [N, og*K, *out]): the
    convolution ``2 * numel(Y) * C/g * K`` on the sampled values, the bilinear sampling of ``V = N * C * K *
    prod(out)`` values (blend 7 each), 10 per sample point (``offset.numel / 2``: offset add, weights), the
    mask multiply (V) and the bias add (numel(Y))."""
    x, w, off, y = req(node, 0), req(node, 1), req(node, 2), node.outputs[0]
    k = prod(int(d) for d in w.shape[2:])
    sampled = int(x.shape[0]) * int(x.shape[1]) * k * prod(int(d) for d in y.shape[2:])
    vector = 7 * sampled + 10 * (off.numel // 2) + (sampled if node.input(4) is not None else 0)
    return conv(node, 0, 1, 3) + Cost(vector_flops=vector)


def causal_conv_with_state(node: OpNode) -> Cost:
    """ONNX CausalConvWithState (input [B, C, L], weight [C, 1, k], bias [C], past_state [B, C, k-1]): a
    depthwise causal conv, ``2 * B * C * L * k``; the bias add (``B*C*L``) and the fused silu activation (5 per
    output) when given.  Reads the carried state, writes output and present_state."""
    w, y = req(node, 1), node.outputs[0]
    act = str(node.attrs.get("activation", "none")).lower()
    vec = (y.numel if node.input(2) is not None else 0) + (5 * y.numel if act in ("silu", "swish") else 0)
    kernel = prod(int(d) for d in w.shape[2:])
    return io_cost(node, matrix_flops=conv_flops(y.numel, 1, kernel), vector_flops=vec)


ROWS = (
    #   member            ATen keys                                                   ONNX keys
    Row("conv",           aten("convolution", "_convolution", "conv1d", "conv2d", "conv3d",
                               "convolution_overrideable", "mkldnn_convolution", "cudnn_convolution"),
        onnx("Conv"), aten_conv, onnx_rule=onnx_conv),
    Row("conv_tbc",       aten("conv_tbc"),                                            (),  aten_conv),
    Row("conv_transpose", aten("conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                               "cudnn_convolution_transpose"),
        onnx("ConvTranspose"), aten_conv, onnx_rule=onnx_conv_transpose),
    Row("fused_conv",     (),                                                          ms("FusedConv"), fused_conv),
    Row("max_pool",       aten("max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices",
                               "max_pool2d_with_indices", "max_pool3d_with_indices"),
        onnx("MaxPool"), aten_pool, onnx_rule=onnx_pool),
    Row("avg_pool",       aten("avg_pool1d", "avg_pool2d", "avg_pool3d"), onnx("AveragePool"), aten_pool,
        onnx_rule=onnx_pool),
    Row("lp_pool",        (),                                                          onnx("LpPool"), onnx_pool),
    Row("global_avg_pool", aten("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
                                "_adaptive_avg_pool2d", "_adaptive_avg_pool3d"), onnx("GlobalAveragePool"), global_pool),
    Row("global_max_pool", aten("adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d"),
        onnx("GlobalMaxPool"), global_pool),
    Row("global_lp_pool", (),                                                          onnx("GlobalLpPool"), global_pool),
    Row("interpolate",    aten("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
                               "_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d",
                               "upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d",
                               "upsample_bicubic2d", "_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa"),
        onnx("Resize", "Upsample"), aten_interpolate, onnx_rule=resize),
    Row("grid_sample",    aten("grid_sampler_2d", "grid_sampler_3d", "grid_sampler"), onnx("GridSample"), grid_sample),
    Row("affine_grid",    aten("affine_grid_generator"),                               onnx("AffineGrid"), affine_grid),
    Row("roi_align",      (),                                                          onnx("RoiAlign"), roi_align),
    Row("max_roi_pool",   (),                                                          onnx("MaxRoiPool"),
        max_roi_pool),
    Row("deform_conv",    (),                                                          onnx("DeformConv"), deform_conv),
    Row("causal_conv_state", (),                                                       onnx("CausalConvWithState"),
        causal_conv_with_state),
)

register_family("conv", ROWS)
