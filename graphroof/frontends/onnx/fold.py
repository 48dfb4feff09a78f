"""Constant folding of the small tensors that size other tensors (shape arithmetic), for shape inference only.

Exporters and ONNX's own ``*_expanded`` function bodies compute shapes at run time: ``Shape -> Gather ->
Range -> Expand``.  ONNX's data propagation follows only a few ops, so with fully static inputs such graphs
still end with ``unk__N`` dims.  This module evaluates the nodes whose inputs are all known *small* values
(initializers and ``Constant`` s of at most :data:`MAX_ELEMS` elements, ``Shape`` / ``Size`` of a tensor whose
shape is static) with ONNX's reference implementation, op by op, and returns the values; the caller turns them
into initializers of a copy of the model and re-runs inference there.  Nothing here touches a weight's data
beyond small inline tensors, and nothing is kept in the OpGraph: the folded nodes are still counted.

Every output is bounded before it is computed (``ConstantOfShape``, ``Range``, ``Expand``, ``Tile``: their
sizes follow from the input values) or after (others: at most :data:`MAX_ELEMS` elements kept).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto
from onnx.reference import ReferenceEvaluator  # 40 ms: imported here so forked children inherit it

__all__ = ["MAX_ELEMS", "fold_values", "small_value"]

#: The largest tensor (elements) folding computes or keeps.
MAX_ELEMS = 4096

#: Default-domain ops that are pure functions of their inputs and cheap (no convolutions, no random numbers).
_FOLDABLE = {
    "Abs", "Add", "And", "Cast", "CastLike", "Ceil", "Concat", "ConstantOfShape", "Div", "Equal", "Expand",
    "Flatten", "Floor", "Gather", "GatherElements", "Greater", "GreaterOrEqual", "Identity", "Less",
    "LessOrEqual", "Max", "Min", "Mod", "Mul", "Neg", "Not", "Or", "Range", "ReduceMax", "ReduceMin",
    "ReduceProd", "ReduceSum", "Reshape", "Sign", "Slice", "Squeeze", "Sub", "Sum", "Tile", "Transpose",
    "Unsqueeze", "Where", "Xor", "Sqrt", "Reciprocal", "Pow", "Clip", "Round", "IsNaN", "IsInf", "Size",
    "Shape", "Split", "ArgMax", "ArgMin", "ReduceMean", "Relu", "Trilu", "CumSum", "BitShift",
}
_SIZED = (np.integer, np.floating, np.bool_)


def small_value(t: TensorProto) -> np.ndarray | None:
    """The value of an inline tensor of at most :data:`MAX_ELEMS` elements; ``None`` otherwise."""
    if t.data_location == TensorProto.EXTERNAL:
        return None
    try:
        if onnx.helper.tensor_dtype_to_np_dtype(t.data_type) is None:
            return None
    except (KeyError, ValueError, TypeError):
        return None
    n = 1
    for d in t.dims:
        if d < 0:
            return None
        n *= d
        if n > MAX_ELEMS:
            return None
    try:
        arr = onnx.numpy_helper.to_array(t)
    except Exception:  # noqa: BLE001 - malformed payload (wrong length, bad dtype): unknown value
        return None
    if arr.size != n or not issubclass(arr.dtype.type, _SIZED):
        return None
    return arr


def _numel(shape: Any) -> int | None:
    try:
        n = 1
        for d in shape:
            d = int(d)
            if d < 0:
                return None
            n *= d
        return n
    except (TypeError, ValueError, OverflowError):
        return None


def _out_size_ok(node: onnx.NodeProto, args: list[np.ndarray]) -> bool:
    """False when the op would build a tensor larger than MAX_ELEMS (checked before running it)."""
    op = node.op_type
    try:
        if op == "ConstantOfShape":
            n = _numel(args[0].reshape(-1).tolist())
        elif op == "Range":
            start, limit, delta = (float(a.reshape(-1)[0]) for a in args[:3])
            if delta == 0 or not all(map(math.isfinite, (start, limit, delta))):
                return False
            n = max(0, math.ceil((limit - start) / delta))
        elif op == "Expand":
            shape = [int(x) for x in args[1].reshape(-1).tolist()]
            n = _numel(np.broadcast_shapes(args[0].shape, tuple(max(x, 1) for x in shape)))
        elif op == "Tile":
            reps = [int(x) for x in args[1].reshape(-1).tolist()]
            n = _numel([a * r for a, r in zip(args[0].shape, reps)]) if len(reps) == args[0].ndim else None
        elif op in ("Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Cast", "CastLike", "Transpose",
                    "Shape", "Size", "Slice", "Split", "Gather", "GatherElements", "Concat", "Trilu", "CumSum")\
                or op.startswith(("Reduce", "Arg")):
            n = sum(a.size for a in args) if op == "Concat" else max((a.size for a in args), default=0)
            if op == "Gather" and len(args) > 1:
                n = args[0].size * max(args[1].size, 1)
        else:  # elementwise with broadcasting
            n = _numel(np.broadcast_shapes(*(a.shape for a in args if a is not None)))
    except (ValueError, TypeError, IndexError, OverflowError, ZeroDivisionError):
        return False
    return n is not None and n <= MAX_ELEMS


def fold_values(graph: onnx.GraphProto, opsets: Mapping[str, int], static_shape: Callable[[str], tuple | None],
                values: dict[str, np.ndarray], *, max_nodes: int = 20000) -> dict[str, np.ndarray]:
    """Evaluate what can be evaluated in *graph* (top level only); returns the newly folded node outputs.

    *values* holds the known values (initializers, constants) and is extended in place; *static_shape(name)*
    gives a tensor's shape when every dim is a number (for ``Shape`` / ``Size``), else ``None``.
    """
    folded: dict[str, np.ndarray] = {}
    for node in graph.node[:max_nodes]:
        if node.domain not in ("", "ai.onnx") or node.op_type not in _FOLDABLE or not node.output:
            continue
        if any(o in values for o in node.output if o):
            continue
        if node.op_type in ("Shape", "Size"):
            shape = static_shape(node.input[0]) if node.input else None
            if shape is None:
                continue
            out = _shape_value(node, shape)
            if out is not None:
                values[node.output[0]] = folded[node.output[0]] = out
            continue
        names = list(node.input)
        if not names or any(x and x not in values for x in names):
            continue
        args = [values[x] if x else None for x in names]
        if not _out_size_ok(node, [a for a in args if a is not None]):
            continue
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                ev = ReferenceEvaluator(node, opsets=dict(opsets))
                outs = ev.run(None, {x: a for x, a in zip(names, args) if x})
        except Exception:  # noqa: BLE001 - invalid inputs for this op: leave it to shape inference
            continue
        for name, arr in zip(node.output, outs):
            if not name or not isinstance(arr, np.ndarray) or arr.size > MAX_ELEMS \
                    or not issubclass(arr.dtype.type, _SIZED):
                continue
            values[name] = folded[name] = arr
    return folded


def _shape_value(node: onnx.NodeProto, shape: tuple[int, ...]) -> np.ndarray | None:
    if node.op_type == "Size":
        return np.array(math.prod(shape), dtype=np.int64)
    attrs = {a.name: a.i for a in node.attribute if a.type == onnx.AttributeProto.INT}
    rank = len(shape)
    start, end = attrs.get("start", 0), attrs.get("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return np.array(shape[start:end], dtype=np.int64)


def to_initializer(name: str, arr: np.ndarray) -> TensorProto | None:
    """*arr* as a TensorProto named *name* (``None`` for a dtype ONNX cannot hold)."""
    try:
        return onnx.numpy_helper.from_array(np.asarray(arr), name)
    except Exception:  # noqa: BLE001
        return None
