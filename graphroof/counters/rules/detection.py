"""Detection family: torchvision's region ops (``torchvision::roi_align``, ``roi_pool``, ``ps_roi_align``,
``ps_roi_pool``) and non-maximum suppression (``torchvision::nms``), on plain shapes and attributes.

* **roi_align** (X [N, C, H, W], rois [K, 5]) -> Y [K, C, ph, pw]: ``s = sampling_ratio`` samples per bin
  axis (``-1`` / ``0``, adaptive: decided by each roi's size at run time, estimated as 2, the ratio
  torchvision's detection poolers use).  Per sample point, shared by the channels: its y and x (a multiply-add
  each, 4), the fractions and their complements (4), the four tap weights (4 products) = 12.  Per sampled value:
  the bilinear blend of 4 taps (4 multiplies, 3 adds = 7) reading 4 values of X.  Per output: the average of
  its ``s*s`` samples (``s*s - 1`` adds and a divide = ``s*s``).  X is read at most once in all (the taps of
  neighbouring samples overlap; ``min(bytes of X, 4 taps per sampled value)``), the rois once, Y written.
* **ps_roi_align** (position-sensitive, R-FCN): Y [K, C/(ph*pw), ph, pw], each output sampling its own
  channel group: the same count per output element as roi_align; also writes ``channel_mapping``.
* **roi_pool / ps_roi_pool** (max over each bin): the bins' extents are data (the roi corners), so the count is
  the upper bound of rois covering the whole map: every element of its channel (group) compared once per roi,
  ``K * C_out * H * W - numel(Y)`` compares (roi_pool: ``C_out = C``); estimated.  X read once, Y and the
  argmax / channel mapping written.
* **nms** (boxes [N, 4], scores [N]) -> keep [k]: sort by score (``N * ceil(log2 N)`` compares), each box's
  area (2 subtracts, 1 multiply = 3), then the IoU of every pair ``i < j``: ``N (N - 1) / 2`` pairs, each 4
  max/min for the intersection corners, 2 subtracts and 2 clamps for its sides, 1 multiply for its area, 2 for
  the union (``a_i + a_j - inter``), 1 divide and 1 compare with the threshold = 13.  torchvision's CUDA kernel
  computes every pair (its CPU kernel skips suppressed boxes, so there this is the upper bound); it writes the
  suppression bitmask (``N * ceil(N / 64)`` 64-bit words) and reads it back to pick the boxes kept.  Boxes and
  scores read once, keep written (its length ``k`` is the data-dependent ``nms_N`` dim).
"""

from __future__ import annotations

import math

from ...graph import OpNode
from ..common import io_cost, req
from ..cost import Cost
from ..family import Row, register_family
from ..formulas import prod
from .movement import partial_read

__all__ = ["ROWS", "roi_align_flops", "nms_flops", "nms_mask_bytes"]

#: flops per sample point (coordinates, fractions, tap weights) and per bilinear blend of 4 taps
SAMPLE_POINT_FLOPS = 12
BLEND_FLOPS = 7
#: flops per box pair's IoU and threshold test, and per box's area
IOU_PAIR_FLOPS = 13
BOX_AREA_FLOPS = 3
#: the sampling ratio assumed where it is adaptive (decided per roi at run time)
ADAPTIVE_SAMPLING_RATIO = 2


def roi_align_flops(rois: int, channels: int, bins: int, s: int) -> float:
    """Sampled average over ``s*s`` points per bin of ``rois * bins`` bins, ``channels`` outputs per bin."""
    points = rois * bins * s * s                      # shared by the channels
    outputs = rois * channels * bins
    return SAMPLE_POINT_FLOPS * points + BLEND_FLOPS * outputs * s * s + outputs * s * s


def nms_flops(n: int) -> float:
    """Sort, areas and every pair's IoU test over *n* boxes."""
    sort = n * math.ceil(math.log2(n)) if n > 1 else 0
    return sort + BOX_AREA_FLOPS * n + IOU_PAIR_FLOPS * n * (n - 1) / 2


def nms_mask_bytes(n: int) -> float:
    """The suppression bitmask: a 64-bit word per box per 64 boxes."""
    return n * math.ceil(n / 64) * 8


def _ratio(node: OpNode) -> tuple[int, bool]:
    ratio = int(node.attrs.get("sampling_ratio", -1))
    return (ratio, False) if ratio > 0 else (ADAPTIVE_SAMPLING_RATIO, True)


def roi_align(node: OpNode) -> Cost:
    """``torchvision.roi_align`` / ``ps_roi_align``: see the module text."""
    x, y = req(node, 0), node.outputs[0]
    s, adaptive = _ratio(node)
    k, c_out, bins = int(y.shape[0]), int(y.shape[1]), prod(int(d) for d in y.shape[2:])
    taps_bytes = y.numel * s * s * 4 * x.itemsize_bits / 8
    return io_cost(node, vector_flops=roi_align_flops(k, c_out, bins, s), inputs=node.inputs[1:],
                   estimated=adaptive) + partial_read(x, min(x.nbytes, taps_bytes))


def roi_pool(node: OpNode) -> Cost:
    """``torchvision.roi_pool`` / ``ps_roi_pool``: see the module text."""
    x, y = req(node, 0), node.outputs[0]
    k, c_out = int(y.shape[0]), int(y.shape[1])
    compares = max(k * c_out * prod(int(d) for d in x.shape[2:]) - y.numel, 0)
    return io_cost(node, vector_flops=compares, estimated=True)


def nms(node: OpNode) -> Cost:
    """``torchvision.nms``: see the module text."""
    n = int(req(node, 0).shape[0])
    mask = nms_mask_bytes(n)
    return io_cost(node, vector_flops=nms_flops(n)) + Cost(act_write_bytes=mask, act_read_bytes=mask)


def _tv(*names: str) -> tuple[str, ...]:
    return tuple(f"torchvision.{n}" for n in names)


ROWS = (
    Row("roi_align",    _tv("roi_align", "ps_roi_align"), (), roi_align),
    Row("roi_pool",     _tv("roi_pool", "ps_roi_pool"),   (), roi_pool),
    Row("nms",          _tv("nms"),                       (), nms),
)

register_family("detection", ROWS)
