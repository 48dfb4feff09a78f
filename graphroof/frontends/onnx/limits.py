"""Plausibility bounds of an ONNX model, checked without running anything heavy.

* :func:`check_inlined_size`: local functions are inlined before shape inference; a function calling another twice
  at each of 30 levels is a 2 KB file that inlines to 2^30 nodes (tens of GB, minutes).  The inlined node count is
  computed first (each function once, calls multiplied out, no recursion) and a model past
  :data:`MAX_INLINED_NODES`, or whose functions call themselves, is a :class:`~graphroof.errors.FrontendError`.
* :func:`warn_huge_tensors`: a 2^62-element tensor is accepted by every step (its size is just a number) and
  reports exabytes and months; past :data:`MAX_TENSOR_ELEMS` elements in one tensor or :data:`MAX_TOTAL_BYTES`
  bytes over all tensors, one :class:`~graphroof.errors.GraphroofWarning` names the largest tensor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import onnx

from ...dtypes import dtype_bits
from ...errors import FrontendError, sanitize_terminal
from ...errors import warn as warn_user

__all__ = ["MAX_INLINED_NODES", "MAX_TENSOR_ELEMS", "MAX_TOTAL_BYTES", "inlined_size", "check_inlined_size",
           "warn_huge_tensors"]

#: The most nodes a model's local functions may expand to when inlined (the largest real exports have ~10^5).
MAX_INLINED_NODES = 1_000_000
#: One tensor with more elements than this is implausible (10^13 fp16 elements are 20 TB).
MAX_TENSOR_ELEMS = 10**13
#: All tensors together above this many bytes (10 PB) are implausible.
MAX_TOTAL_BYTES = 10**16

_Key = tuple[str, str, str]


def _key(domain: str, name: str, overload: str = "") -> _Key:
    return (domain or "", name, overload or "")


def _walk(nodes: Iterable[onnx.NodeProto], local: set[_Key]) -> tuple[int, dict[_Key, int]]:
    """(plain nodes, calls per local function) of *nodes* and their subgraphs (If / Loop / Scan bodies)."""
    plain, calls = 0, {}  # type: int, dict[_Key, int]
    stack = [iter(nodes)]
    while stack:
        node = next(stack[-1], None)
        if node is None:
            stack.pop()
            continue
        k = _key(node.domain, node.op_type, getattr(node, "overload", ""))
        if k in local:
            calls[k] = calls.get(k, 0) + 1
        else:
            plain += 1
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                stack.append(iter(a.g.node))
            elif a.type == onnx.AttributeProto.GRAPHS:
                stack.extend(iter(g.node) for g in a.graphs)
    return plain, calls


def inlined_size(model: onnx.ModelProto, cap: int = MAX_INLINED_NODES) -> int:
    """The number of nodes *model* has once its local functions are inlined (counts above *cap* are reported as
    ``cap + 1``); a :class:`FrontendError` when a function calls itself, directly or through others."""
    funcs = {_key(f.domain, f.name, getattr(f, "overload", "")): f for f in model.functions}
    local = set(funcs)
    body = {k: _walk(f.node, local) for k, f in funcs.items()}
    size: dict[_Key, int] = {}
    for root in funcs:  # iterative post-order: deep chains of functions need no Python recursion
        if root in size:
            continue
        path: list[_Key] = [root]
        on_path = {root}
        pending = [iter(body[root][1])]
        while pending:
            callee = next(pending[-1], None)
            if callee is None:
                k = path.pop()
                on_path.discard(k)
                pending.pop()
                plain, calls = body[k]
                size[k] = min(cap + 1, plain + sum(n * size[c] for c, n in calls.items()))
                continue
            if callee in on_path:
                cycle = " -> ".join(c[1] for c in [*path[path.index(callee):], callee])
                raise FrontendError(f"local function {callee[1]!r} calls itself ({cycle}): inlining it never ends; "
                                    "the model is malformed")
            if callee not in size:
                path.append(callee)
                on_path.add(callee)
                pending.append(iter(body[callee][1]))
    plain, calls = _walk(model.graph.node, local)
    return min(cap + 1, plain + sum(n * size[c] for c, n in calls.items()))


def check_inlined_size(model: onnx.ModelProto, name: str, cap: int = MAX_INLINED_NODES) -> None:
    """A :class:`FrontendError` when *model*'s local functions inline to more than *cap* nodes."""
    if not model.functions:
        return
    n = inlined_size(model, cap)
    if n > cap:
        raise FrontendError(f"{name}: its local functions expand to more than {cap:,} nodes when inlined (nested "
                            "calls multiply); the model is malformed or built to exhaust memory")


def warn_huge_tensors(table: Mapping[str, tuple[str, Any]], name: str, max_elems: int = MAX_TENSOR_ELEMS,
                      max_bytes: int = MAX_TOTAL_BYTES) -> None:
    """One warning when a tensor of the type *table* (name -> (dtype, shape)) holds more than *max_elems*
    elements or all of them together more than *max_bytes* bytes; it names the largest tensor."""
    largest, largest_n, largest_dtype, total = "", 0, "fp32", 0.0
    for tensor, (dtype, shape) in table.items():
        if not shape or not all(isinstance(d, int) and d >= 0 for d in shape):
            continue
        n = 1
        for d in shape:
            n *= d
        try:
            bits = dtype_bits(dtype)
        except Exception:  # noqa: BLE001 - strings and unknown dtypes: count them as one byte
            bits = 8
        total += n * bits / 8
        if n > largest_n:
            largest, largest_n, largest_dtype = tensor, n, dtype
    if largest_n <= max_elems and total <= max_bytes:
        return
    from ...units import fmt_bytes

    try:
        size = fmt_bytes(largest_n * dtype_bits(largest_dtype) / 8)
    except Exception:  # noqa: BLE001
        size = f"{largest_n:.3g} elements"
    warn_user(f"{name}: tensor {sanitize_terminal(largest)!r} has {largest_n:.3g} elements ({size} as {largest_dtype}; all tensors "
              f"{fmt_bytes(total)}): past any real model (over {max_elems:.0e} elements in one tensor or "
              f"{fmt_bytes(max_bytes)} in all), so the figures are not meaningful; check the model's shapes and "
              "the --dim / --input values")
