"""Byte accounting shared by rules: every tensor's bytes go in the bucket its role names."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

from ..errors import RuleError
from ..graph import OpNode, Role, TensorSpec
from .cost import Cost

__all__ = ["ReadBytes", "WriteBytes", "io_cost", "read_bytes", "req", "write_bytes"]


class ReadBytes(TypedDict):
    """The read buckets of a :class:`Cost`, as :func:`read_bytes` fills them."""

    weight_bytes: float
    act_read_bytes: float
    kv_read_bytes: float


class WriteBytes(TypedDict):
    """The write buckets of a :class:`Cost`, as :func:`write_bytes` fills them."""

    act_write_bytes: float
    kv_write_bytes: float


def req(node: OpNode, i: int) -> TensorSpec:
    """The *i*-th input of *node*, which the rule needs: a :class:`RuleError` when it is absent."""
    t = node.input(i)
    if t is None:
        raise RuleError(f"{node.op}: input {i} is missing")
    return t


def read_bytes(tensors: Iterable[TensorSpec | None]) -> ReadBytes:
    """Bytes read from *tensors*, keyed by Cost field (weights and constants count as weight bytes)."""
    out: ReadBytes = {"weight_bytes": 0, "act_read_bytes": 0, "kv_read_bytes": 0}
    for t in tensors:
        if t is None:
            continue
        if t.role in (Role.WEIGHT, Role.CONST):
            out["weight_bytes"] += t.nbytes
        elif t.role is Role.KV_CACHE:
            out["kv_read_bytes"] += t.nbytes
        else:
            out["act_read_bytes"] += t.nbytes
    return out


def write_bytes(tensors: Iterable[TensorSpec | None]) -> WriteBytes:
    """Bytes written to *tensors*, keyed by Cost field."""
    out: WriteBytes = {"act_write_bytes": 0, "kv_write_bytes": 0}
    for t in tensors:
        if t is None:
            continue
        if t.role is Role.KV_CACHE:
            out["kv_write_bytes"] += t.nbytes
        else:
            out["act_write_bytes"] += t.nbytes
    return out


def io_cost(
    node: OpNode,
    *,
    matrix_flops: float = 0,
    vector_flops: float = 0,
    inputs: Iterable[TensorSpec | None] | None = None,
    outputs: Iterable[TensorSpec | None] | None = None,
    estimated: bool = False,
) -> Cost:
    """A Cost reading *inputs* (default: all of the node's) and writing *outputs* (default: all)."""
    r = read_bytes(node.inputs if inputs is None else inputs)
    w = write_bytes(node.outputs if outputs is None else outputs)
    return Cost(matrix_flops=matrix_flops, vector_flops=vector_flops, estimated=estimated, **r, **w)
