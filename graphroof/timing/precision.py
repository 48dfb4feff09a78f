"""Precision policy: which matrix peak an fp32 matmul runs at.

One rule for every vendor, driven by the profile's peak table (PyTorch's ``torch.set_float32_matmul_precision``
vocabulary):

- ``"highest"``: fp32 stays fp32: the matrix units' fp32 peak if the profile lists one (TPU-style), else the
  vector (CUDA-core) fp32 peak.
- ``"high"`` (default, as PyTorch's cuDNN convolutions, which allow TF32): fp32 matmuls run on TF32 matrix
  units where the profile lists ``matrix_peak_flops_per_s.tf32``; otherwise as ``"highest"``.
- ``"medium"``: fp32 matmuls may run in bf16 (``matrix.bf16``) where listed; otherwise as ``"high"``.

Other dtypes are unaffected (bf16 runs at ``matrix.bf16`` ...).  ``dtype="tf32"`` asks for TF32 explicitly.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..dtypes import canonical_dtype
from ..errors import InputError
from ..hardware.profile_cache import memo_of

if TYPE_CHECKING:
    from ..hardware import HardwareProfile

__all__ = ["MATMUL_PRECISIONS", "matmul_peak_key", "matmul_peak", "gemm_ceiling"]

MATMUL_PRECISIONS = ("highest", "high", "medium")


def matmul_peak_key(dtype: str, precision: str, hw: HardwareProfile) -> str:
    """The peak-table key (``"matrix.tf32"``, ``"vector.fp32"``, ``"matrix.bf16"``) a matmul in *dtype* uses.

    >>> from graphroof.hardware import load_hardware
    >>> matmul_peak_key("fp32", "high", load_hardware("a100"))
    'matrix.tf32'
    >>> matmul_peak_key("fp32", "highest", load_hardware("a100"))
    'vector.fp32'
    """
    if precision not in MATMUL_PRECISIONS:
        raise InputError(f"matmul precision {precision!r}: use one of {', '.join(MATMUL_PRECISIONS)}")
    d = canonical_dtype(dtype)
    table = hw.matrix_peak_flops_per_s
    if d == "fp32":
        if precision == "medium" and table.get("bf16"):
            return "matrix.bf16"
        if precision in ("high", "medium") and table.get("tf32"):
            return "matrix.tf32"
    if d == "tf32" and not table.get("tf32"):
        d = "fp32"  # no TF32 units: fp32 math
    return replace(hw, matmul_precision="highest" if precision == "highest" else "high").peak("matrix", d)[1]


def matmul_peak(hw: HardwareProfile, dtype: str, precision: str = "high") -> tuple[float, str]:
    """(peak FLOP/s, key) for a matmul computing in *dtype* under *precision* on *hw* (memoised per profile: a
    pure function of the immutable profile, see :mod:`graphroof.hardware.profile_cache`)."""
    memo = memo_of(hw)
    mk = ("matmul_peak", dtype, precision)
    hit = memo.get(mk)
    if hit is None:
        hit = memo[mk] = _matmul_peak(hw, dtype, precision)
    return hit


def _matmul_peak(hw: HardwareProfile, dtype: str, precision: str) -> tuple[float, str]:
    key = matmul_peak_key(dtype, precision, hw)
    unit, k = key.split(".", 1)
    table = hw.matrix_peak_flops_per_s if unit == "matrix" else hw.vector_peak_flops_per_s
    if table.get(k):
        return table[k], key
    return replace(hw, matmul_precision="highest" if precision == "highest" else "high").peak(unit, k)


#: dtypes that run at the same matrix rate as a listed one (the MAMF table lists bf16; fp16 runs alike)
_SAME_RATE = {"fp16": "bf16", "bf16": "fp16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}


def gemm_ceiling(hw: HardwareProfile, peak_flops_per_s: float, key: str) -> tuple[float, str]:
    """(the large-GEMM ceiling FLOP/s, how it was found) for a matmul whose peak is *peak_flops_per_s* at peak-table
    *key* (``"matrix.bf16"``): the profile's ``[timing.gemm_achievable_flops_per_s]`` entry of that dtype (the
    best achievable dense matmul rate, the "MAMF" table), else of a dtype with the same rate (fp16 <-> bf16), else
    the peak scaled by the device's own bf16 achievable / peak ratio, else the peak itself (no table: the
    profile's ``gemm_matrix_efficiency`` is then a fraction of the peak).

    >>> from graphroof.hardware import load_hardware
    >>> hw = load_hardware("h100-sxm")
    >>> gemm_ceiling(hw, 494.7e12, "matrix.tf32")[1]
    'peak x bf16 achievable/peak'
    """
    memo = memo_of(hw)
    mk = ("gemm_ceiling", peak_flops_per_s, key)
    hit = memo.get(mk)
    if hit is None:
        hit = _gemm_ceiling(hw, peak_flops_per_s, key)
        if peak_flops_per_s == peak_flops_per_s:  # a NaN key never hits: not stored
            memo[mk] = hit
    return hit


def _gemm_ceiling(hw: HardwareProfile, peak_flops_per_s: float, key: str) -> tuple[float, str]:
    table = hw.timing.gemm_achievable_flops_per_s if hw.timing is not None else {}  # derived timing: no table
    d = key.split(".", 1)[-1]
    if not table:
        return peak_flops_per_s, "peak"
    for cand in (d, _SAME_RATE.get(d, "")):
        if table.get(cand):
            return table[cand], f"achievable.{cand}"
    ref = next((c for c in ("bf16", "fp16") if table.get(c) and hw.matrix_peak_flops_per_s.get(c)), None)
    if ref is None:
        return peak_flops_per_s, "peak"
    return peak_flops_per_s * table[ref] / hw.matrix_peak_flops_per_s[ref], f"peak x {ref} achievable/peak"
