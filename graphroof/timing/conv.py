"""Convolution as implicit GEMM (NHWC), with the channel padding tensor cores need and a CUDA-core fallback.

A forward convolution of ``x[N, Cin, H, W]`` by ``w[Cout, Cin/g, kh, kw]`` (``g`` groups) into
``y[N, Cout, Ho, Wo]`` is, per group, one GEMM (cuDNN / CUTLASS implicit GEMM, NHWC)::

    M = N * Ho * Wo          N = Cout / g          K = Cin / g * kh * kw

Two ways to run it; the library picks the faster (cuDNN / TensorRT time their algorithms), so the model takes
the minimum of:

* **tensor cores** (a matrix peak for the dtype): the MMA instructions consume channels in chunks of 16 bytes
  (8 fp16 / bf16, 16 int8, 4 tf32 channels), so ``Cin/g`` and ``Cout/g`` are padded up to that multiple and the
  padding is wasted work (the first conv's 3 input channels run as 8); the ``g`` groups are ``batch``
  independent GEMMs.  The tile / wave quantisation is :func:`~graphroof.timing.gemm_time`'s compute time on the
  padded shape; the memory time is the conv's real bytes (input read once, not the im2col matrix: the
  kernel re-reads its halo from L2 / shared memory), combined as the GEMM model does, plus its latency;
* **CUDA cores** (direct convolution): the FLOPs at the vector peak times the profile's vector efficiency,
  against the same bytes (overlapped as the GEMM model does), plus the GEMM latency.  Depthwise convolutions (``Cin/g = 1``: one input channel
  per output, nothing to share across channels) have no GEMM at all and always run here as a streaming kernel
  (max of compute and bytes, plus the stream latency), as do convolutions in a dtype without a matrix peak.

**Non-persistent conv kernels on a stream-K device.**  Where the profile's GEMM constants describe persistent
stream-K kernels (``gemm_stream_k``: Hopper / Blackwell cuBLAS, whose next tile's mainloop hides each tile's
pipeline fill and epilogue), the implicit-GEMM conv kernels are not persistent: CUTLASS's Hopper conv kernel
launches one CTA per output tile (grid = the tiled M x N, no tile scheduler: ``static_assert(is_void_v<
TileSchedulerTag>)``, one producer and one MMA warpgroup, ``MinBlocksPerMultiprocessor = 1``, no workspace;
NVIDIA/cutlass@2ceb95b ``include/cutlass/conv/kernel/sm90_implicit_gemm_tma_warpspecialized.hpp``), and cuDNN's
Hopper kernels are of that kind (``sm90_xmma_fprop_implicit_gemm_..._warpgroupsize1x1x1_..._cudnn`` in H100
traces).  So the tensor-core path there runs whole waves (no stream-K: a partial last wave costs a full one)
and each wave pays, before its mainloop, the first k-block's load round trip and, after it, the epilogue's store
drain, serially within the CTA::

    t_compute = (GEMM compute time in whole waves) + waves * stream_latency_s

``stream_latency_s`` (the profile's fixed time of a plain streaming kernel: its first loads' round trip and its
stores' drain) stands for that per-wave fill + drain; it is not refitted here.  Profiles without stream-K
(Ampere and older: the GEMM fit already describes one-CTA-per-tile kernels) are unchanged.

Constants: the profile's ``[timing]`` (via :func:`~graphroof.timing.gemm_time` and
:func:`~graphroof.timing.profile.timing_of`) and ``[efficiency].vector``; nothing fitted here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..dtypes import dtype_bits
from ..errors import UnboundDimError
from ..graph import OpNode, Role
from .gemm import gemm_time
from .precision import matmul_peak
from .profile import timing_of

if TYPE_CHECKING:
    from ..hardware import HardwareProfile

__all__ = ["ConvShape", "ConvTime", "conv_shape", "conv_time", "channel_align", "is_conv_key"]

_CONV_PREFIXES = ("conv", "_conv", "qconv", "qlinearconv", "cudnn_convolution", "convolution", "mkldnn_conv")


def is_conv_key(key: str) -> bool:
    """Whether an op key (``aten.conv2d``, ``onnx.Conv``, ``aten._convolution``) is a convolution."""
    k = key.lower().rsplit(".", 1)[-1]
    return k.startswith(_CONV_PREFIXES) and "transpose" not in k


@dataclass(frozen=True)
class ConvShape:
    """A 2-D (or 1-D / 3-D, spatial dims multiplied out) forward convolution."""

    n: int
    cin: int
    cout: int
    out_spatial: int    # Ho * Wo (product of the output's spatial dims)
    kernel: int         # kh * kw (product of the kernel's spatial dims)
    groups: int

    @property
    def gemm(self) -> tuple[int, int, int]:
        """(M, N, K) of one group's implicit GEMM."""
        return self.n * self.out_spatial, self.cout // self.groups, self.cin // self.groups * self.kernel

    @property
    def depthwise(self) -> bool:
        return self.cin // self.groups == 1


@dataclass(frozen=True)
class ConvTime:
    t_s: float
    path: str                 # "tensor_core" | "cuda_core"
    shape: ConvShape
    padded_mnk: tuple[int, int, int]   # the GEMM the tensor-core path runs per group (channels padded)
    flops: float


def conv_shape(node: OpNode) -> ConvShape | None:
    """The convolution of *node* (an op or a kernel that runs one) from its tensors, or None: the weights of rank
    >= 3 are the filters ``[Cout, Cin/g, k...]`` (several of the same ``[Cin/g, k...]``: convolutions of one input
    run as one, their output channels side by side; different ones: None), the first activation input of the
    same rank whose channel count is a multiple of ``Cin/g`` the input, and an output ``[N, Cout_i, ...]`` gives
    the output size."""
    try:
        ws = [t for t in node.inputs if t is not None and t.role is Role.WEIGHT and t.rank >= 3]
        if not ws:
            return None
        w = ws[0]
        if any(tuple(t.shape[1:]) != tuple(w.shape[1:]) for t in ws[1:]):
            return None
        couts = {int(t.shape[0]) for t in ws}
        cout, cin_g = sum(int(t.shape[0]) for t in ws), int(w.shape[1])
        kernel = math.prod(int(d) for d in w.shape[2:])
        x = next((t for t in node.inputs if t is not None and t.role is Role.ACTIVATION and t.rank == w.rank
                  and cin_g and int(t.shape[1]) % cin_g == 0), None)
        y = next((t for t in node.outputs if t.rank == w.rank and int(t.shape[1]) in couts | {cout}), None)
        if x is None or y is None or cin_g <= 0 or cout <= 0:
            return None
        cin = int(x.shape[1])
        groups = cin // cin_g
        if groups < 1 or cout % groups:
            return None
        return ConvShape(int(y.shape[0]), cin, cout, math.prod(int(d) for d in y.shape[2:]), kernel, groups)
    except (UnboundDimError, TypeError, ValueError, IndexError):
        return None


def channel_align(peak_key: str, dtype: str) -> int:
    """Channels per 16-byte MMA operand chunk on matrix units (8 fp16, 16 int8, 4 tf32); 1 on vector units."""
    if not peak_key.startswith("matrix"):
        return 1
    bits = 32 if peak_key.endswith("tf32") else dtype_bits(dtype)
    return max(1, 128 // max(bits, 1))


def _pad(v: int, a: int) -> int:
    return -(-v // a) * a


def _wave_cost_s(hw: HardwareProfile) -> float:
    """The fixed time each wave of a conv's CTAs pays (module docstring): on a device whose GEMMs run persistent
    stream-K kernels, one ``stream_latency_s`` of fill + drain, the conv itself run in whole waves
    (``schedule="waves"``); else 0 (the GEMM fit already describes one-CTA-per-tile kernels)."""
    t = timing_of(hw)
    return t.stream_latency_s if t.gemm_stream_k and t.sm_count and hw.timing is not None else 0.0


def conv_time(shape: ConvShape, nbytes: float, hw: HardwareProfile, dtype: str,
              matmul_precision: str | None = None) -> ConvTime:
    """Predicted time of one convolution kernel of *shape* moving *nbytes* (its real input, weight, output and
    fused-epilogue bytes) computing in *dtype* on *hw* (see the module docstring); *matmul_precision*: the fp32
    math (``high``: TF32 where the device has it, ``highest``: fp32), default the profile's
    (``--matmul-precision``)."""
    matmul_precision = matmul_precision or hw.matmul_precision
    t = timing_of(hw)
    m, n, k = shape.gemm
    flops = 2.0 * m * n * k * shape.groups
    t_mem = nbytes / (hw.mem_bw_bytes_per_s * t.gemm_mem_bw_efficiency)
    vec_peak, _ = hw.peak("vector", dtype)
    t_vec_compute = flops / (vec_peak * hw.vector_efficiency)
    p = t.gemm_overlap_exponent

    def overlap(tc: float) -> float:  # loads and math overlap as in the GEMM model
        return max(tc, t_mem) if not p else (tc ** p + t_mem ** p) ** (1.0 / p)

    if shape.depthwise:  # a streaming kernel: each input channel read once, a few taps per output element
        return ConvTime(max(t_vec_compute, t_mem) + t.stream_latency_s, "cuda_core", shape, (m, n, k), flops)
    best = ConvTime(overlap(t_vec_compute) + t.gemm_latency_s, "cuda_core", shape, (m, n, k), flops)
    peak, key = matmul_peak(hw, dtype, matmul_precision)
    a = channel_align(key, dtype)
    np_, kp = _pad(n, a), _pad(shape.cin // shape.groups, a) * shape.kernel
    t_wave = _wave_cost_s(hw)
    g = gemm_time(m, np_, kp, hw, dtype, batch=shape.groups, matmul_precision=matmul_precision,
                  schedule="waves" if t_wave else "auto")
    t_tc = overlap(g.t_compute_s + g.waves * t_wave) + t.gemm_latency_s
    if t_tc <= best.t_s:
        best = ConvTime(t_tc, "tensor_core" if key.startswith("matrix") else "cuda_core", shape, (m, np_, kp), flops)
    return best
