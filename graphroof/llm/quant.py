"""Quantization what-ifs: re-type a graph's tensors by role (weights, activations, KV cache).

Only floating-point tensors are re-typed (index tensors, masks and positions keep their integer / bool type).
Bytes then follow from the new dtypes through the ordinary rules, and the compute peak follows
:func:`graphroof.roofline.compute_dtype`: the activation / KV inputs decide, so

* int8 weights x int8 activations compute on the int8 peak;
* int8 (or int4) weights with bf16 activations compute on the bf16 peak (weight-only quantization: the
  weights are dequantized on the fly) while reading int8 weight bytes.

Quantization scales and zero points are not counted in the bytes or the memory fit (for int4 with group size 128
and fp16 scales they add about 3% to the weight bytes); the kernel-time model adds them to a weight-only GEMM's
stream, with the dequantisation's ALU work (:mod:`graphroof.timing.quantgemm`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..dtypes import canonical_dtype, is_float
from ..errors import InputError
from ..graph import OpGraph, OpNode, Role, TensorSpec

__all__ = ["QUANT_DTYPES", "Quant", "parse_quant_dtype", "requantize"]

#: Storage dtypes a what-if may name (anything else is rejected with this list).
QUANT_DTYPES = ("fp32", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2", "int8", "int4", "fp4")


def parse_quant_dtype(name: str | None, flag: str) -> str | None:
    """Canonical dtype for a ``--weights/--activations/--kv`` value, or an :class:`InputError` naming the flag."""
    if name is None or name == "":
        return None
    try:
        d = canonical_dtype(name)
    except InputError:
        d = None
    if d not in QUANT_DTYPES:
        gguf = name.strip().lower().lstrip("i")[:1] == "q" and name.strip()[-1:].isalnum()
        hint = ("; a GGUF type is not a dtype: price Q4_* / IQ4_* as int4 and Q8_0 as int8 (--runtime llama.cpp "
                "prices int4 with a scale and a minimum per 32 weights, as Q4_K)") if gguf else ""
        raise InputError(f"{flag} {name!r}: unknown dtype; use one of: {', '.join(QUANT_DTYPES)}{hint}")
    return d


@dataclass(frozen=True)
class Quant:
    """Dtypes by role; ``None`` keeps the model's own dtype for that role."""

    weights: str | None = None
    activations: str | None = None
    kv: str | None = None

    @classmethod
    def parse(cls, weights: str | None = None, activations: str | None = None, kv: str | None = None) -> Quant:
        return cls(parse_quant_dtype(weights, "--weights"), parse_quant_dtype(activations, "--activations"),
                   parse_quant_dtype(kv, "--kv"))

    @property
    def is_identity(self) -> bool:
        return self.weights is None and self.activations is None and self.kv is None

    def for_role(self, role: Role) -> str | None:
        if role is Role.WEIGHT:
            return self.weights
        if role is Role.KV_CACHE:
            return self.kv
        if role is Role.ACTIVATION:
            return self.activations
        return None  # constants (buffers like rotary tables) keep their dtype

    def describe(self) -> str:
        parts = [f"{k} {v}" for k, v in (("weights", self.weights), ("activations", self.activations),
                                          ("kv", self.kv)) if v]
        return ", ".join(parts) if parts else "model dtypes"


def _retype(t: TensorSpec | None, q: Quant) -> TensorSpec | None:
    return None if t is None else _retype_spec(t, q)


def _retype_spec(t: TensorSpec, q: Quant) -> TensorSpec:
    if not is_float(t.dtype):
        return t
    d = q.for_role(t.role)
    return t if d is None or d == t.dtype else t.with_dtype(d)


def requantize_op(op: OpNode, q: Quant) -> OpNode:
    """One op with its float tensors re-typed by role; a stated ``compute_dtype`` attr is dropped when the
    activations change (the activation dtype then decides the peak)."""
    attrs = op.attrs
    if q.activations and attrs.get("compute_dtype"):
        attrs = {**attrs, "compute_dtype": None}
    ins = tuple(_retype(t, q) for t in op.inputs)
    outs = tuple(_retype_spec(t, q) for t in op.outputs)
    if attrs is op.attrs and all(a is b for a, b in zip(ins, op.inputs)) and all(a is b for a, b in zip(outs, op.outputs)):
        return op  # nothing re-typed (OpNode is frozen: the same op)
    return replace(op, inputs=ins, outputs=outs, attrs=attrs)


def requantize(graph: OpGraph, q: Quant) -> OpGraph:
    """A new graph with every float tensor re-typed by its role (see module docstring)."""
    if q.is_identity:
        return graph
    g = graph.map_ops(lambda op: requantize_op(op, q))
    g.meta["quant"] = q.describe()
    return g
