"""Spectral family: ONNX DFT and STFT (and the window generators), counted as FFTs.

A complex FFT of power-of-two length n costs ``5 n log2 n`` real FLOPs (``n/2 log2 n`` butterflies, each a
complex multiply (6) and two complex adds (4)).  Other lengths are counted as Bluestein's algorithm: three FFTs
of length ``m = 2^ceil(log2(2n - 1))`` plus the chirp multiplies (complex, 6 FLOPs each) before (n), between (m)
and after (n) = ``15 m log2 m + 6 (2n + m)``; runtimes may pick mixed radices instead, so these counts are
marked estimated.  A real input is counted as a complex one (``onesided`` halves the output written, not the
FLOPs); an inverse transform adds the ``1/n`` scaling (2 per complex output).

Window generators, per output element: Hann / Hamming ``a0 - a1 cos(2 pi n / N)``: the phase multiply, cos,
the multiply by a1, the subtract = 4; Blackman ``a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N)``: two phases,
two cos, two multiplies, a subtract and an add = 8.  MelWeightMatrix ``[dft_length // 2 + 1, mel_bins]``: each
entry a triangular filter value, two compares (which slope), a subtract and a divide = 4.

No ATen keys yet: ``aten._fft_*`` work on complex tensors over several dims, another adapter to write.
"""

from __future__ import annotations

import math

from ...graph import OpNode
from ..common import io_cost, req
from ..cost import Cost
from ..family import Row, onnx, register_family
from .elementwise import per_element

__all__ = ["ROWS", "fft_flops"]


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def fft_flops(n: int) -> int:
    """Real FLOPs of one complex FFT of length *n* (see the module docstring)."""
    if n <= 1:
        return 0
    if _pow2(n):
        return 5 * n * int(math.log2(n))
    m = 1 << math.ceil(math.log2(2 * n - 1))
    return 3 * 5 * m * int(math.log2(m)) + 6 * (2 * n + m)


def dft(node: OpNode) -> Cost:
    """(input [..., 1|2], dft_length, axis) -> [..., 2].  The axis is the opset-17 attribute, else -2 (an
    ``axis`` input's value is not known from shapes).  The length n is the output's along the axis, or, when
    ``onesided`` (``n // 2 + 1`` bins written), the input's (without ``dft_length``) or ``2 * (bins - 1)``."""
    x, y = req(node, 0), node.outputs[0]
    rank = len(y.shape)
    axis = int(node.attrs.get("axis", -2))
    axis = axis + rank if axis < 0 else axis
    bins = int(y.shape[axis])
    if node.attrs.get("onesided", 0):
        n = int(x.shape[axis]) if node.input(1) is None else 2 * (bins - 1)
    else:
        n = bins
    batch = y.numel // (bins * int(y.shape[-1])) if bins else 0
    scale = 2 * bins if node.attrs.get("inverse", 0) else 0
    return io_cost(node, vector_flops=batch * (fft_flops(n) + scale), estimated=not _pow2(n))


def stft(node: OpNode) -> Cost:
    """(signal [B, L, 1|2], frame_step, window [n], frame_length) -> [B, frames, bins, 2]: per frame the
    window multiply (n, 2n on a complex signal) and an FFT of the frame length n (the window's length, else
    from the bins: ``2 * (bins - 1)`` onesided (the default), ``bins`` otherwise)."""
    x, y = req(node, 0), node.outputs[0]
    window = node.input(2)
    frames, bins = int(y.shape[1]), int(y.shape[2])
    onesided = bool(node.attrs.get("onesided", 1))
    n = int(window.shape[0]) if window is not None else (2 * (bins - 1) if onesided else bins)
    mult = (2 if int(x.shape[-1]) == 2 else 1) * n if window is not None else 0
    transforms = int(y.shape[0]) * frames
    return io_cost(node, vector_flops=transforms * (mult + fft_flops(n)), estimated=not _pow2(n))


ROWS = (
    #   member   ATen keys  ONNX keys      rule
    Row("dft",   (),        onnx("DFT"),   dft),
    Row("stft",  (),        onnx("STFT"),  stft),
    Row("cosine_window",   (), onnx("HannWindow", "HammingWindow"), per_element(4)),
    Row("blackman_window", (), onnx("BlackmanWindow"),              per_element(8)),
    Row("mel_weight_matrix", (), onnx("MelWeightMatrix"),           per_element(4)),
)

register_family("spectral", ROWS)
