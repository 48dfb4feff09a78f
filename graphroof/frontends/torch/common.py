"""Pieces both torch captures share: tensors -> :class:`TensorSpec`, ATen schemas -> named inputs and attrs,
op keys, scopes, and the builder that appends :class:`OpNode` s to an :class:`OpGraph`.

A node's inputs are the op's tensor arguments in schema order (``None`` for an absent optional tensor, tensor
lists flattened in place); every other argument becomes a named plain-Python attr (dtypes as canonical names).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from ...dtypes import canonical_dtype
from ...graph import OpGraph, OpNode, Role, TensorSpec

__all__ = ["Ref", "spec_of", "BROADCAST_VIEWS", "broadcast_view", "dtype_name", "op_key", "plain", "schema_plan", "bind", "GraphBuilder",
           "clean_scope", "is_view_op", "storage_key", "one_line", "flash_layout"]

_DTYPES: dict[torch.dtype, str] = {}


def dtype_name(dt: torch.dtype) -> str:
    """Canonical graphroof dtype name of a torch dtype (cached)."""
    name = _DTYPES.get(dt)
    if name is None:
        name = _DTYPES[dt] = canonical_dtype(str(dt))
    return name


def _dim(d: Any) -> int | str:
    if isinstance(d, torch.SymInt):  # never int(): that would fix a data-dependent size at its traced value
        expr = d.node.expr
        if getattr(expr, "is_number", False):
            return int(expr)
        from .symbols import sym_text
        return sym_text(expr)
    try:
        return int(d)
    except (TypeError, ValueError):  # an unbacked / symbolic size
        return str(d)


def spec_of(t: torch.Tensor, role: Role = Role.ACTIVATION) -> TensorSpec:
    return TensorSpec(tuple(_dim(d) for d in t.shape), dtype_name(t.dtype), role)


#: views that repeat their input along new or size-1 dims without copying it (stride 0)
BROADCAST_VIEWS = frozenset({"aten.expand", "aten.expand_as", "aten.broadcast_to", "aten.expand_copy"})


def broadcast_view(src: TensorSpec, out: TensorSpec) -> TensorSpec:
    """The spec a broadcast view of a weight / constant is recorded with: the underlying tensor, its shape
    left-padded with 1s to the view's rank (``[C]`` expanded to ``[B, N, C]`` -> ``[1, 1, C]``), so a
    consumer reads the weight's bytes once, not once per broadcast copy; elementwise consumers broadcast it
    back and matrix rules take their sizes from the output and the contracted (last) dim."""
    if src.role not in (Role.WEIGHT, Role.CONST) or len(src.shape) > len(out.shape):
        return out
    return TensorSpec((1,) * (len(out.shape) - len(src.shape)) + tuple(src.shape), out.dtype, src.role)


def flash_layout(query: Any, out: Any) -> Any:
    """``scaled_dot_product_attention``'s output laid out as the fused kernels write it: in the query's layout
    (``empty_like(query)``: the CPU flash kernel; CUDA's writes ``[B, L, H, E]`` transposed, the layout of a
    query projected and transposed as transformers does).  The meta device runs the math fallback, whose output
    is contiguous ``[B, H, L, E]``, so the model's ``transpose(1, 2).contiguous()`` became an extra copy
    (``aten.clone``) that neither a CPU nor a GPU run does.  Call with the fake mode active; *out* unchanged
    where the shapes differ (value head size != query's) or the layouts already agree, and always for a real
    tensor (its values are the user's: :mod:`.live` records code running on real tensors)."""
    from torch._subclasses.fake_tensor import FakeTensor

    if not isinstance(out, FakeTensor) and not (isinstance(out, torch.Tensor) and out.device.type == "meta"):
        return out
    if not isinstance(query, torch.Tensor) or out.shape != query.shape or \
            out.dtype != query.dtype or out.stride() == query.stride():
        return out
    return torch.empty_like(query)  # the query's strides where it is dense, else contiguous (as *out*)


class Ref:
    """A tensor as the capture knows it: its spec (shape, dtype, role) and a graph-unique name."""

    __slots__ = ("spec", "name")

    def __init__(self, spec: TensorSpec, name: str):
        self.spec = spec
        self.name = name

    def __repr__(self) -> str:
        return f"Ref({self.name}: {self.spec})"


def op_key(op: Any) -> str:
    """``torch.ops.aten.addmm.default`` -> ``"aten.addmm"`` (overload stripped)."""
    return f"{op.namespace}.{op._opname}"


def plain(v: Any) -> Any:
    """A non-tensor argument as plain data: dtypes as canonical names, devices / layouts / enums as strings."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, torch.dtype):
        try:
            return dtype_name(v)
        except Exception:  # a dtype graphroof has no name for
            return str(v)
    if isinstance(v, (list, tuple)):
        return tuple(plain(x) for x in v)
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        try:
            if v.node.hint is not None:
                return type(v.node.hint)(v)
            from .symbols import sym_text
            return sym_text(v.node.expr)
        except Exception:
            return str(v)
    if isinstance(v, enum.Enum):
        return v.name
    text = str(v)
    return text[len("torch."):] if text.startswith("torch.") else text   # memory formats, layouts, devices


# -- schemas ----------------------------------------------------------------------------------------------

_PLANS: dict[Any, tuple[tuple[str, str, Any], ...]] = {}
_NO_DEFAULT = object()


def _kind(t: Any) -> str:
    if isinstance(t, torch.OptionalType):
        t = t.getElementType()
    if isinstance(t, torch.TensorType):
        return "tensor"
    if isinstance(t, torch.ListType):
        e = t.getElementType()
        if isinstance(e, torch.OptionalType):
            e = e.getElementType()
        if isinstance(e, torch.TensorType):
            return "tensors"
    return "value"


def schema_plan(op: Any) -> tuple[tuple[str, str, Any], ...]:
    """``((name, kind, default), ...)`` for an OpOverload's arguments; kind is tensor | tensors | value."""
    plan = _PLANS.get(op)
    if plan is None:
        args = []
        for a in op._schema.arguments:
            default = a.default_value if a.has_default_value() else _NO_DEFAULT
            args.append((a.name, _kind(a.type), default))
        plan = _PLANS[op] = tuple(args)
    return plan


def bind(op: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """Match call arguments to the schema: ``[(name, kind, value)]``; missing ones take their default."""
    out = []
    for i, (name, kind, default) in enumerate(schema_plan(op)):
        if i < len(args):
            v = args[i]
        elif name in kwargs:
            v = kwargs[name]
        elif name == "self" and "input" in kwargs:
            v = kwargs["input"]
        else:
            v = None if default is _NO_DEFAULT else default
        out.append((name, kind, v))
    return out


def is_view_op(op: Any) -> bool:
    """True for ops whose first output aliases an input without writing it (views)."""
    rets = op._schema.returns
    if not rets or rets[0].alias_info is None:
        return False
    return not rets[0].alias_info.is_write


def storage_key(t: Any) -> int | None:
    try:
        return t.untyped_storage()._cdata
    except Exception:
        return None


_SCOPE_JUNK = re.compile(r"^(L\['self'\]\.?|L__self__\.?|self\.?)")


def clean_scope(path: str) -> str:
    """``"L['self'].model.layers[0]._modules['mlp']"`` -> ``"model.layers.0.mlp"``."""
    s = _SCOPE_JUNK.sub("", path or "")
    s = re.sub(r"\._modules\['([^']+)'\]", r".\1", s)
    s = re.sub(r"\[(\d+)\]", r".\1", s)
    s = re.sub(r"getattr\((.*?), '([^']+)'\)", r"\1.\2", s)
    return s.strip(".")


def one_line(e: BaseException, limit: int = 300) -> str:
    msg = " ".join(str(e).split()) or type(e).__name__
    if len(msg) > limit:
        msg = msg[:limit - 3] + "..."
    return f"{type(e).__name__}: {msg}"


# -- building the graph -------------------------------------------------------------------------------------

class GraphBuilder:
    """Appends nodes in execution order; names ops ``<op>_<n>`` unless given a name."""

    def __init__(self, name: str, meta: dict[str, Any]):
        self.graph = OpGraph(name, meta)
        self._counts: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        n = self._counts.get(base, 0)
        self._counts[base] = n + 1
        return f"{base}_{n}" if n else base

    def add(self, key: str, bound: Iterable[tuple[str, str, Any]], outputs: Sequence[Ref], scope: str,
            name: str | None = None, extra: dict[str, Any] | None = None) -> OpNode:
        """*bound* values are :class:`Ref` for tensors (``None`` when absent), lists of them, or plain data."""
        inputs: list[TensorSpec | None] = []
        in_names: list[str | None] = []
        attrs: dict[str, Any] = {}
        for arg, kind, v in bound:
            if kind == "tensor" or isinstance(v, Ref):
                if isinstance(v, Ref):
                    inputs.append(v.spec)
                    in_names.append(v.name)
                elif v is None:
                    inputs.append(None)
                    in_names.append(None)
                else:  # a Python number passed where the schema takes a tensor
                    attrs[arg] = plain(v)
            elif kind == "tensors" or (isinstance(v, (list, tuple)) and any(isinstance(x, Ref) for x in v)):
                refs = [x for x in (v or ()) if isinstance(x, Ref)]
                inputs.extend(r.spec for r in refs)
                in_names.extend(r.name for r in refs)
                attrs[f"n_{arg}"] = len(refs)
            else:
                attrs[arg] = plain(v)
        if extra:
            attrs.update(extra)
        node = OpNode(name or self.fresh(key.split(".", 1)[1]), key, tuple(inputs),
                      tuple(o.spec for o in outputs), attrs, scope)
        self.graph.add_op(node, in_names, [o.name for o in outputs])
        return node
