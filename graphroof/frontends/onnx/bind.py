"""Binding user dims into an ONNX model before inference: ``--dim batch=8`` and ``--input input_ids=1x512`` are
written into the graph inputs and into every symbolic dim elsewhere that they decide (in place; a fixed dim of
the model cannot be overridden); plus the walkers over a model's graphs and run-time inputs."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import onnx

from ...errors import InputError, UnboundDimError
from ...graph import resolve_dim

__all__ = ["iter_graphs", "real_inputs", "bind_inputs", "normalize_dim"]


def iter_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """*graph* and every subgraph (If / Loop / Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from iter_graphs(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from iter_graphs(g)


def real_inputs(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """Graph inputs that are fed at run time (old IR versions also list the initializers as inputs)."""
    inits = {t.name for t in graph.initializer}
    return [i for i in graph.input if i.name not in inits]


def _shape_text(vi: onnx.ValueInfoProto) -> str:
    if not vi.type.tensor_type.HasField("shape"):
        return "?"
    return "x".join(d.dim_param or (str(d.dim_value) if d.HasField("dim_value") else "?")
                    for d in vi.type.tensor_type.shape.dim) or "scalar"


def bind_inputs(model: onnx.ModelProto, dims: Mapping[str, int] | None,
                input_shapes: Mapping[str, Sequence[int]] | Sequence[Sequence[int]] | None) -> dict[str, int]:
    """Write *dims* and *input_shapes* into *model* (in place); return every dim value that is now fixed.

    Input overrides bind the input's symbolic dims by name (two inputs sharing ``batch`` must agree) and fix
    its unnamed dynamic dims; a fixed dim of the model cannot be overridden.
    """
    bound = {str(k): int(v) for k, v in (dims or {}).items()}
    inputs = real_inputs(model.graph)
    if input_shapes:
        if isinstance(input_shapes, Mapping):
            by_name = {i.name: i for i in inputs}
            pairs = []
            for name, shape in input_shapes.items():
                if name not in by_name:
                    raise InputError(f"--input {name}=...: the model has no input named {name!r}; its inputs are: "
                                     + ", ".join(f"{i.name} ({_shape_text(i)})" for i in inputs))
                pairs.append((by_name[name], shape))
        else:
            shapes = list(input_shapes)
            if len(shapes) > len(inputs):
                raise InputError(f"--input: {len(shapes)} shapes given but the model has {len(inputs)} input(s): "
                                 + ", ".join(f"{i.name} ({_shape_text(i)})" for i in inputs))
            pairs = list(zip(inputs, shapes))
        for vi, shape in pairs:
            _bind_one(vi, tuple(int(d) for d in shape), bound)
    _substitute(model, bound)
    return bound


def _bind_one(vi: onnx.ValueInfoProto, shape: tuple[int, ...], bound: dict[str, int]) -> None:
    tt = vi.type.tensor_type
    given = "x".join(map(str, shape))
    if tt.HasField("shape") and len(tt.shape.dim) != len(shape):
        raise InputError(f"--input {vi.name}={given}: rank {len(shape)}, but the model's input {vi.name} has rank "
                         f"{len(tt.shape.dim)} ({_shape_text(vi)})")
    if not tt.HasField("shape"):
        for d in shape:
            tt.shape.dim.add().dim_value = d
        return
    for axis, (dim, want) in enumerate(zip(tt.shape.dim, shape)):
        if dim.HasField("dim_value"):
            if dim.dim_value != want:
                raise InputError(f"--input {vi.name}={given}: dim {axis} is fixed to {dim.dim_value} in the model "
                                 f"({_shape_text(vi)}); only its symbolic dims can be set")
        elif dim.dim_param:
            old = bound.get(dim.dim_param)
            if old is not None and old != want:
                raise InputError(f"--input {vi.name}={given}: dim {dim.dim_param!r} is already {old} "
                                 "(from --dim or another input); inputs sharing a dim must agree")
            bound[dim.dim_param] = want
        else:
            dim.dim_value = want


def _substitute(model: onnx.ModelProto, bound: Mapping[str, int]) -> None:
    """Replace every symbolic dim that *bound* decides (names and expressions of them) by its value."""
    if not bound:
        return
    cache: dict[str, int | None] = {}
    for g in iter_graphs(model.graph):
        for vi in (*g.input, *g.output, *g.value_info):
            if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
                continue
            for dim in vi.type.tensor_type.shape.dim:
                p = dim.dim_param
                if not p:
                    continue
                if p not in cache:
                    try:
                        cache[p] = resolve_dim(normalize_dim(p), bound)
                    except (UnboundDimError, TypeError, ValueError, ZeroDivisionError):
                        cache[p] = None
                if cache[p] is not None:
                    dim.dim_value = cache[p]


_SYMPY_FUNCS = (("Max(", "max("), ("Min(", "min("), ("ceiling(", "ceil("), ("Floor(", "floor("))


def normalize_dim(p: str) -> str:
    """A symbolic dim as graphroof writes it: sympy's ``Max(...)`` -> ``max(...)``, spaces tidied."""
    for a, b in _SYMPY_FUNCS:
        p = p.replace(a, b)
    return p.strip()
