"""torchvision's region ops and NMS against hand arithmetic (literal nodes: torchvision is not needed)."""

from __future__ import annotations

from tests.conftest import T, node
from tests.counters.rules._family import run


def test_roi_align():
    # X [1,8,10,10], 3 rois [3,5], 7x7 bins (ph = pw = 7), sampling_ratio 2 -> Y [3,8,7,7] = 1,176 outputs
    x, rois, y = T("fp32", 1, 8, 10, 10), T("fp32", 3, 5), T("fp32", 3, 8, 7, 7)
    c = run(node("torchvision.roi_align", [x, rois], [y], spatial_scale=0.25, pooled_height=7, pooled_width=7,
                 sampling_ratio=2, aligned=False))
    # sample points 3 rois * 49 bins * 4 = 588, 12 each (coords, fractions, tap weights) = 7,056;
    # blends 1,176 outputs * 4 samples * 7 = 32,928; averages 1,176 * 4 = 4,704 -> 44,688
    assert c.vector_flops == 7_056 + 32_928 + 4_704 == 44_688 and not c.estimated
    # reads: 4 taps per sampled value = 1,176*4*4 = 18,816 values, capped at X (800 values = 3,200 B);
    # rois 15 values = 60 B; writes Y 1,176 * 4 = 4,704 B
    assert c.act_read_bytes == 3_200 + 60 and c.act_write_bytes == 4_704
    # sampling_ratio -1 (adaptive): estimated at 2, same count, marked estimated
    c = run(node("torchvision.roi_align", [x, rois], [y], pooled_height=7, pooled_width=7, sampling_ratio=-1))
    assert c.vector_flops == 44_688 and c.estimated
    # sampling_ratio 1, a small X-read: 1,176 * 1 * 4 taps = 4,704 values = 18,816 B > 3,200 B: still capped
    c = run(node("torchvision.roi_align", [x, rois], [y], sampling_ratio=1))
    # points 147 * 12 = 1,764; blends 1,176 * 7 = 8,232; averages 1,176 -> 11,172
    assert c.vector_flops == 1_764 + 8_232 + 1_176


def test_roi_align_matches_onnx_roialign_flops():
    # the ONNX test's case: X [1,4,8,8], 2 rois, 2x2 bins, ratio 2 -> 1,408 (tests/counters/rules/test_conv.py)
    x, y = T("fp32", 1, 4, 8, 8), T("fp32", 2, 4, 2, 2)
    tv = run(node("torchvision.roi_align", [x, T("fp32", 2, 5)], [y], sampling_ratio=2))
    ox = run(node("onnx.RoiAlign", [x, T("fp32", 2, 4), T("int64", 2)], [y], sampling_ratio=2))
    assert tv.vector_flops == ox.vector_flops == 1_408


def test_ps_roi_align():
    # X [1,18,6,6] = 2 output channels x 3x3 bins, 2 rois -> Y [2,2,3,3] = 36 outputs, channel_mapping int32 alike
    x, y, cm = T("fp32", 1, 18, 6, 6), T("fp32", 2, 2, 3, 3), T("int32", 2, 2, 3, 3)
    c = run(node("torchvision.ps_roi_align", [x, T("fp32", 2, 5)], [y, cm], sampling_ratio=2))
    # points 2 * 9 * 4 = 72 * 12 = 864; blends 36 * 4 * 7 = 1,008; averages 36 * 4 = 144 -> 2,016
    assert c.vector_flops == 864 + 1_008 + 144
    # X read capped: taps 36*4*4 = 576 values < X's 648 values -> 576 * 4 = 2,304 B; rois 40 B
    assert c.act_read_bytes == 2_304 + 40 and c.act_write_bytes == 36 * 4 + 36 * 4


def test_roi_pool_upper_bound():
    # X [1,4,8,8], 2 rois -> Y [2,4,2,2] = 32 (+ argmax int64 [2,4,2,2]); every roi over the whole map:
    # 2 * 4 * 64 - 32 = 480 compares, estimated; X read once (1,024 B) + rois 40 B
    x, y, am = T("fp32", 1, 4, 8, 8), T("fp32", 2, 4, 2, 2), T("int64", 2, 4, 2, 2)
    c = run(node("torchvision.roi_pool", [x, T("fp32", 2, 5)], [y, am], pooled_height=2, pooled_width=2))
    assert c.vector_flops == 480 and c.estimated
    assert c.act_read_bytes == 1_024 + 40 and c.act_write_bytes == 32 * 4 + 32 * 8
    # ps_roi_pool: X [1,8,4,4] = 2 channels x 2x2 bins, 3 rois -> Y [3,2,2,2] = 24: 3 * 2 * 16 - 24 = 72
    c = run(node("torchvision.ps_roi_pool", [T("fp32", 1, 8, 4, 4), T("fp32", 3, 5)],
                 [T("fp32", 3, 2, 2, 2), T("int32", 3, 2, 2, 2)]))
    assert c.vector_flops == 72


def test_nms():
    # 100 boxes: sort 100 * ceil(log2 100) = 700; areas 100 * 3 = 300; pairs 100*99/2 = 4,950 * 13 = 64,350
    c = run(node("torchvision.nms", [T("fp32", 100, 4), T("fp32", 100)], [T("int64", 37)], iou_threshold=0.5))
    assert c.vector_flops == 700 + 300 + 64_350 == 65_350
    # bitmask 100 * ceil(100/64) = 200 words = 1,600 B written and read back; boxes 1,600 B + scores 400 B read,
    # keep 37 * 8 = 296 B written
    assert c.act_read_bytes == 1_600 + 400 + 1_600 and c.act_write_bytes == 296 + 1_600
    # one box: no sort, no pairs, its area only
    c = run(node("torchvision.nms", [T("fp32", 1, 4), T("fp32", 1)], [T("int64", 1)], iou_threshold=0.5))
    assert c.vector_flops == 3
