"""Spectral family (ONNX DFT, STFT): FFT counts."""

from __future__ import annotations

from graphroof.counters.cost import Cost
from graphroof.counters.rules.spectral import fft_flops
from tests.conftest import T, W, node
from tests.counters.rules._family import run


def test_fft_flops():
    # power of two: 5 n log2 n: n = 8 -> 5 * 8 * 3 = 120; n = 1: nothing to do
    assert (fft_flops(8), fft_flops(1)) == (120, 0)
    # n = 6 (Bluestein): m = 2^ceil(log2 11) = 16; 3 * 5 * 16 * 4 = 960 + chirps 6 * (12 + 16) = 168 -> 1128
    assert fft_flops(6) == 1128


def test_dft_complex_real_onesided_inverse():
    # complex X [4,8,2] along axis -2: 4 transforms of n = 8: 4 * 120 = 480; reads 256 bytes + int64 axis 8
    x = T("fp32", 4, 8, 2)
    c = run(node("onnx.DFT", [x, None, W("int64")], [x]))
    assert c == Cost(vector_flops=480, act_read_bytes=256, weight_bytes=8, act_write_bytes=256)
    # real onesided X [4,8,1] -> [4,5,2] (8 // 2 + 1 bins): still n = 8, 480; writes 4*5*2*4 = 160 bytes
    c = run(node("onnx.DFT", [T("fp32", 4, 8, 1)], [T("fp32", 4, 5, 2)], onesided=1))
    assert (c.vector_flops, c.act_write_bytes, c.estimated) == (480, 160, False)
    # inverse: + 1/n scaling, 2 per complex output: 4 * (120 + 16) = 544
    assert run(node("onnx.DFT", [x], [x], inverse=1)).vector_flops == 544
    # opset-17 axis attribute: X [2,6,3,2] along axis 1, n = 6 (Bluestein, estimated): 2*3 transforms * 1128
    c = run(node("onnx.DFT", [T("fp32", 2, 6, 3, 2)], [T("fp32", 2, 6, 3, 2)], axis=1))
    assert c.vector_flops == 6 * 1128 and c.estimated


def test_stft_windowed_frames():
    # signal [1,160,1], window [16], onesided: output [1,10,9,2] (16 // 2 + 1 = 9 bins), 10 frames:
    # per frame window multiply 16 + FFT 5 * 16 * 4 = 320 -> 10 * 336 = 3,360
    sig, win = T("fp32", 1, 160, 1), W("fp32", 16)
    c = run(node("onnx.STFT", [sig, W("int64"), win], [T("fp32", 1, 10, 9, 2)]))
    assert c.vector_flops == 3360 and not c.estimated
    assert c.act_read_bytes == 640 and c.weight_bytes == 8 + 64 and c.act_write_bytes == 10 * 9 * 2 * 4
    # no window, onesided 0: n = bins = 16, FFT only: 10 * 320 = 3,200
    c = run(node("onnx.STFT", [sig, W("int64"), None, W("int64")], [T("fp32", 1, 10, 16, 2)], onesided=0))
    assert c.vector_flops == 3200


def test_window_generators():
    # size 16 (an int64 scalar input, 8 bytes): Hann 4 per element = 64, writes 16 fp32 = 64 bytes
    c = run(node("onnx.HannWindow", [W("int64")], [T("fp32", 16)]))
    assert c == Cost(vector_flops=64, weight_bytes=8, act_write_bytes=64)
    assert run(node("onnx.HammingWindow", [W("int64")], [T("fp32", 16)])).vector_flops == 64
    assert run(node("onnx.BlackmanWindow", [W("int64")], [T("fp32", 16)])).vector_flops == 128  # 8 x 16
    # MelWeightMatrix dft_length 16 -> [9, 4] mel bins: 36 entries x 4 = 144
    s = W("int64")
    assert run(node("onnx.MelWeightMatrix", [s, s, s, W("fp32"), W("fp32")], [T("fp32", 9, 4)])).vector_flops == 144
