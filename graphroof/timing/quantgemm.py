"""Weight-only quantized GEMMs: int4 / int8 / fp8 weights with bf16 / fp16 activations, dequantised in the kernel.

A weight-only kernel (gpt-fast's int8 / tinygemm int4, TensorRT-LLM's weight-only GEMMs, Marlin) streams the
packed weights and their scales, converts each weight to the activation dtype on the CUDA cores and multiplies on
the tensor cores.  Against a bf16 GEMM of the same shape it moves fewer bytes but does extra ALU work::

    weight bytes = K N bits / 8 + scale bytes
    scale bytes  = 4 K N / group          4-bit weights: a bf16 scale and a bf16 zero per group of `group`
                                          weights along K (tinygemm's scales_and_zeros, AWQ / GPTQ alike)
                 = 2 N                    8-bit weights (int8, fp8): one bf16 scale per output channel
    t_dequant    = gemm_dequant_flops_per_mac * M N K / vector_peak   (the half-precision vector peak: unpack,
                                          convert, subtract the zero, scale, once per multiply-add of a row)

``t_dequant`` adds to the GEMM's compute time (the dequant and the MMA issue from the same warps); the sum then
overlaps with the weight stream as any GEMM's compute does (:mod:`graphroof.timing.gemm`).  At batch 1 the
stream dominates (the scales cost int4 at group 32 a quarter more bytes); from a few rows up the dequant does,
so int4 at batch 1 does not reach 4x bf16's speed and falls behind bf16 at some tens of rows.

Runtime ``weight_only_gemm = "dequant_then_gemm"``: a separate kernel writes the bf16 weights (read packed +
write ``2 K N`` bytes), then a bf16 GEMM reads them (:func:`dequant_then_gemm_bytes`).

Every function here takes floats or numpy arrays alike (the per-op and the vectorised paths share them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import canonical_dtype, dtype_bits, is_float
from ..hardware.params import KernelTiming

__all__ = ["DEFAULT_GROUP", "weight_only_bits", "scale_bytes", "dequant_rows", "dequant_time", "dequant_then_gemm_bytes",
           "node_weight_dtype", "quant_group"]

#: weights per scale of 4-bit weights when the runtime does not say (AWQ / GPTQ / TensorRT-LLM's default)
DEFAULT_GROUP = 128
SCALE_ZERO_BYTES = 4  # a bf16 scale and a bf16 zero per group (4-bit)
CHANNEL_SCALE_BYTES = 2  # one bf16 scale per output channel (8-bit)


def weight_only_bits(weight_dtype: str | None, compute_dtype: str) -> int | None:
    """Bits per stored weight when the GEMM is weight-only quantized (weights narrower than the float compute
    dtype), else None."""
    if not weight_dtype:
        return None
    try:
        wb, cb = dtype_bits(weight_dtype), dtype_bits(compute_dtype)
    except Exception:  # noqa: BLE001 - an unknown dtype name: not a weight-only GEMM
        return None
    if not is_float(canonical_dtype(compute_dtype)) or wb >= cb:
        return None
    return int(wb)


def scale_bytes(n: Any, k: Any, bits: int, group: int | None = None) -> Any:
    """Bytes of the scales (and zeros) of a ``[K, N]`` weight at *bits* per weight (see the module docstring)."""
    if bits <= 4:
        return SCALE_ZERO_BYTES * k * n / (group or DEFAULT_GROUP)
    return CHANNEL_SCALE_BYTES * n


def dequant_rows(m: Any, variant: str, timing: KernelTiming) -> Any:
    """How many times each weight is dequantised in an M-row GEMM: once per row (``fused_dequant``: tinygemm /
    gpt-fast's int4 and int8 kernels, which convert a weight for every row they multiply: time grows with M, as
    measured), or once per M tile the weight tile is loaded for (``tile_dequant``: Marlin / Machete / TensorRT-LLM
    weight-only kernels, ``ceil(M / tile_m)`` with the profile's GEMM tile; equal to the per-row count at M = 1)."""
    if variant == "tile_dequant":
        return np.ceil(np.asarray(m, dtype=float) / float(timing.gemm_tile[0]))
    return m


def dequant_time(m: Any, n: Any, k: Any, timing: KernelTiming, hw: Any, variant: str = "fused_dequant") -> Any:
    """ALU time of dequantising the weights of an ``[M, K] x [K, N]`` weight-only GEMM in its main loop:
    ``gemm_dequant_flops_per_mac * rows * N K / vector_peak`` with rows from :func:`dequant_rows`."""
    vec = max(hw.vector_peak_flops_per_s.get("fp16", 0.0), hw.vector_peak_flops_per_s.get("bf16", 0.0))
    if not vec:
        vec = hw.peak("vector", "fp16")[0]
    return timing.gemm_dequant_flops_per_mac * dequant_rows(m, variant, timing) * n * k / vec


def dequant_then_gemm_bytes(n: Any, k: Any, bits: int, group: int | None, act_bytes: float) -> Any:
    """Bytes of the separate dequant kernel: read the packed weights and scales, write them at *act_bytes*."""
    return k * n * bits / 8 + scale_bytes(n, k, bits, group) + k * n * act_bytes


def node_weight_dtype(node: Any) -> str | None:
    """The dtype of a GEMM node's weight operand (its first input with the weight role), or None."""
    from ..graph import Role

    for t in getattr(node, "inputs", ()) or ():
        if t is not None and t.role is Role.WEIGHT:
            return str(t.dtype)
    return None


def quant_group(node: Any, runtime: Any) -> int | None:
    """Weights per scale: the node's ``quant_group`` attr, else the runtime preset's ``weight_only_group_size``."""
    g = (getattr(node, "attrs", None) or {}).get("quant_group") or getattr(runtime, "weight_only_group_size", None)
    return int(g) if g else None
