"""Make every name in an ONNX model plain, printable text before anything else reads it.

Protobuf hands back a ``string`` field holding invalid UTF-8 as ``bytes`` (upb), and a name may carry
terminal escape sequences or other control characters.  :func:`clean_names` rewrites, in place and
consistently (the same text always maps to the same name, so every reference still matches), every name a
model holds: node, tensor, value-info, initializer, graph, function and attribute names, op types and
domains, symbolic dims, the producer and metadata.  Invalid bytes become ``\\xNN``; control characters become
``\\xNN`` / ``\\uNNNN`` (:func:`graphroof.errors.sanitize_terminal`).
"""

from __future__ import annotations

import re
from typing import Any

import onnx

from ...errors import sanitize_terminal

__all__ = ["clean_names", "text"]

_BAD = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def text(s: Any) -> str:
    """*s* as a printable ``str`` (bytes decoded with invalid bytes escaped, control characters escaped)."""
    if type(s) is str and not _BAD.search(s):
        return s
    return sanitize_terminal(s)


class _Count:
    n = 0


def _fix(s: Any, c: _Count) -> str:
    t = text(s)
    if t is not s:
        c.n += 1
    return t


def _fix_list(rep: Any, c: _Count) -> None:
    for i, s in enumerate(rep):
        if type(s) is not str or _BAD.search(s):
            rep[i] = _fix(s, c)


def _value_info(vi: onnx.ValueInfoProto, c: _Count) -> None:
    if type(vi.name) is not str or _BAD.search(vi.name):
        vi.name = _fix(vi.name, c)
    _type(vi.type, c)


def _type(t: onnx.TypeProto, c: _Count, depth: int = 0) -> None:
    if depth > 32:
        return
    which = t.WhichOneof("value")
    if which in ("tensor_type", "sparse_tensor_type"):
        tt = getattr(t, which)
        if tt.HasField("shape"):
            for d in tt.shape.dim:
                if d.dim_param and (type(d.dim_param) is not str or _BAD.search(d.dim_param)):
                    d.dim_param = _fix(d.dim_param, c)
    elif which == "sequence_type":
        _type(t.sequence_type.elem_type, c, depth + 1)
    elif which == "optional_type":
        _type(t.optional_type.elem_type, c, depth + 1)
    elif which == "map_type":
        _type(t.map_type.value_type, c, depth + 1)


def _props(props: Any, c: _Count) -> None:
    for p in props:
        if type(p.key) is not str or _BAD.search(p.key):
            p.key = _fix(p.key, c)
        if type(p.value) is not str or _BAD.search(p.value):
            p.value = _fix(p.value, c)


def _node(n: onnx.NodeProto, c: _Count, depth: int) -> None:
    for field in ("name", "op_type", "domain"):
        v = getattr(n, field)
        if type(v) is not str or _BAD.search(v):
            setattr(n, field, _fix(v, c))
    _fix_list(n.input, c)
    _fix_list(n.output, c)
    _props(n.metadata_props, c)
    for a in n.attribute:
        if type(a.name) is not str or _BAD.search(a.name):
            a.name = _fix(a.name, c)
        if a.type == onnx.AttributeProto.GRAPH:
            _graph(a.g, c, depth + 1)
        elif a.type == onnx.AttributeProto.GRAPHS:
            for g in a.graphs:
                _graph(g, c, depth + 1)


def _graph(g: onnx.GraphProto, c: _Count, depth: int = 0) -> None:
    if depth > 64:
        from ...errors import FrontendError

        raise FrontendError("subgraphs (If / Loop / Scan bodies) nested more than 64 deep")
    if type(g.name) is not str or _BAD.search(g.name):
        g.name = _fix(g.name, c)
    for vi in (*g.input, *g.output, *g.value_info):
        _value_info(vi, c)
    for t in g.initializer:
        if type(t.name) is not str or _BAD.search(t.name):
            t.name = _fix(t.name, c)
    for st in g.sparse_initializer:
        if type(st.values.name) is not str or _BAD.search(st.values.name):
            st.values.name = _fix(st.values.name, c)
    for n in g.node:
        _node(n, c, depth)


def clean_names(model: onnx.ModelProto) -> int:
    """Rewrite every name of *model* in place (see module docstring); returns how many were changed."""
    c = _Count()
    for field in ("producer_name", "producer_version", "domain"):
        v = getattr(model, field)
        if type(v) is not str or _BAD.search(v):
            setattr(model, field, _fix(v, c))
    for imp in model.opset_import:
        if type(imp.domain) is not str or _BAD.search(imp.domain):
            imp.domain = _fix(imp.domain, c)
    _props(model.metadata_props, c)
    _graph(model.graph, c)
    for f in model.functions:
        for field in ("name", "domain"):
            v = getattr(f, field)
            if type(v) is not str or _BAD.search(v):
                setattr(f, field, _fix(v, c))
        _fix_list(f.input, c)
        _fix_list(f.output, c)
        _fix_list(f.attribute, c)
        for n in f.node:
            _node(n, c, 0)
    return c.n
