"""The one dtype vocabulary graphroof uses, and aliases from torch / ONNX / numpy / user input.

Canonical names match the keys of hardware profiles' peak tables where a peak exists
(``fp64 fp32 tf32 bf16 fp16 fp8 int8 int4``); storage-only types (``int64``, ``bool`` ...) have a size but
no peak of their own.
"""

from __future__ import annotations

import functools

from .errors import InputError

__all__ = ["DTYPE_BITS", "canonical_dtype", "dtype_bits", "peak_key_candidates", "is_float"]

#: Storage size in bits of each canonical dtype.  Bytes are ``ceil(numel * bits / 8)``.
DTYPE_BITS: dict[str, int] = {
    "fp64": 64, "fp32": 32, "tf32": 32, "fp16": 16, "bf16": 16,
    "fp8_e4m3": 8, "fp8_e5m2": 8, "fp8": 8, "fp4": 4,
    "int64": 64, "int32": 32, "int16": 16, "int8": 8, "uint64": 64, "uint32": 32, "uint16": 16,
    "uint8": 8, "int4": 4, "uint4": 4, "bool": 8, "complex64": 64, "complex128": 128, "string": 64,
}

_ALIASES: dict[str, str] = {
    "float64": "fp64", "double": "fp64", "f64": "fp64",
    "float32": "fp32", "float": "fp32", "f32": "fp32",
    "float16": "fp16", "half": "fp16", "f16": "fp16",
    "bfloat16": "bf16",
    "float8_e4m3fn": "fp8_e4m3", "float8e4m3fn": "fp8_e4m3", "float8e4m3fnuz": "fp8_e4m3",
    "float8_e4m3fnuz": "fp8_e4m3", "e4m3": "fp8_e4m3", "fp8e4m3": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2", "float8e5m2": "fp8_e5m2", "float8e5m2fnuz": "fp8_e5m2",
    "float8_e5m2fnuz": "fp8_e5m2", "e5m2": "fp8_e5m2", "fp8e5m2": "fp8_e5m2",
    "float4e2m1": "fp4", "float4_e2m1fn_x2": "fp4", "nvfp4": "fp4",
    "long": "int64", "i64": "int64", "int": "int32", "i32": "int32", "short": "int16", "i16": "int16",
    "i8": "int8", "u8": "uint8", "byte": "uint8", "i4": "int4", "u4": "uint4",
    "uint": "uint32", "bool_": "bool", "boolean": "bool", "cfloat": "complex64",
    "complex": "complex64", "cdouble": "complex128",
}

# When a profile has no peak for a dtype, try these in order (a wider type runs on slower units).
_PEAK_FALLBACK: dict[str, tuple[str, ...]] = {
    "fp64": ("fp64", "fp32"),
    "fp32": ("fp32", "tf32", "fp16", "bf16"),
    "tf32": ("tf32", "fp32", "bf16", "fp16"),
    "bf16": ("bf16", "fp16", "fp32"),
    "fp16": ("fp16", "bf16", "fp32"),
    "fp8": ("fp8", "bf16", "fp16", "fp32"),
    "fp4": ("fp4", "fp8", "int4", "bf16", "fp16", "fp32"),
    "int8": ("int8", "fp8", "bf16", "fp16", "fp32"),
    "int4": ("int4", "int8", "fp8", "bf16", "fp16", "fp32"),
}


@functools.lru_cache(maxsize=1024)
def canonical_dtype(name: object) -> str:
    """Return the canonical dtype name for *name* (``torch.float16``, ``"half"``, ``"FLOAT16"`` ...).

    >>> canonical_dtype("torch.bfloat16")
    'bf16'
    """
    s = str(name).strip().lower()
    for prefix in ("torch.", "numpy.", "np.", "tensorproto."):
        if s.startswith(prefix):
            s = s[len(prefix):]
    s = s.replace("-", "_")
    if s in DTYPE_BITS:
        return s
    if s in _ALIASES:
        return _ALIASES[s]
    raise InputError(
        f"unknown dtype {name!r}; use one of: {', '.join(sorted(k for k in DTYPE_BITS if k != 'string'))}"
    )


@functools.lru_cache(maxsize=1024)
def dtype_bits(dtype: str) -> int:
    """Storage bits of a canonical (or aliased) dtype."""
    return DTYPE_BITS[canonical_dtype(dtype)]


@functools.lru_cache(maxsize=1024)
def is_float(dtype: str) -> bool:
    """True for floating-point dtypes (which set the compute peak over integer index tensors)."""
    return canonical_dtype(dtype).startswith(("fp", "bf", "tf"))


def peak_key_candidates(dtype: str) -> tuple[str, ...]:
    """Peak-table keys to try, best first, for computing in *dtype*."""
    d = canonical_dtype(dtype)
    if d.startswith("fp8"):
        d = "fp8"
    elif d == "uint8":
        d = "int8"
    elif d == "uint4":
        d = "int4"
    elif d in ("int16", "int32", "int64", "uint16", "uint32", "uint64", "bool"):
        return ("int8", "fp32", "fp16", "bf16") if d == "bool" else ("fp32", "int8", "fp16", "bf16")
    elif d.startswith("complex"):
        return ("fp32", "fp64")
    return _PEAK_FALLBACK.get(d, (d,))
