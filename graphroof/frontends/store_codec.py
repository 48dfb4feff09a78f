"""A data-only serialization of what the trace store keeps (:mod:`.trace_store`): tagged JSON, no code runs.

The store used to keep pickles, and unpickling runs whatever the file names.  This codec knows a closed set of
types and nothing else: ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``list``, ``tuple``, ``set``,
``frozenset``, ``dict`` (of any of these), :class:`~graphroof.graph.Role`, :class:`~graphroof.graph.TensorSpec`,
:class:`~graphroof.graph.OpNode`, :class:`~graphroof.graph.OpGraph` (its networkx graph with the node, successor
and predecessor order kept), :class:`~graphroof.frontends.source.ModelSpec` and the warning classes of graphroof
(``(category, message)`` pairs replayed on a hit).  Types are matched exactly (a ``str`` subclass is not a
``str``), so :func:`encode` either writes a value that :func:`decode` rebuilds equal, in the same order and with
the same types, or raises :class:`CodecError` (the capture is then not stored).

Layout: a JSON scalar is itself; a ``dict`` whose keys are all ``str`` is a JSON object; everything else is a
JSON array whose first item is a one-letter tag.  Tensor specs are interned in a table per graph (a 7B model's
graph has ~30,000 specs but a few hundred distinct ones).  :func:`decode` raises :class:`CodecError` on anything
unexpected; the store reads that as a miss.
"""

from __future__ import annotations

import base64
import importlib
import json
from typing import Any

import networkx as nx

from ..graph import IN_TENSORS, OP, OUT_TENSORS, OpGraph, OpNode, Role, TensorSpec, fill_digraph

__all__ = ["CodecError", "encode", "decode", "dumps", "loads"]

_SCALARS = (str, int, float, bool, type(None))
_SEQUENCES: dict[type, str] = {list: "l", tuple: "t", set: "s", frozenset: "f"}


class CodecError(ValueError):
    """A value the codec does not know (when encoding) or a payload it did not write (when decoding)."""


def dumps(obj: Any) -> bytes:
    """*obj* as UTF-8 JSON bytes (see the module docstring); :class:`CodecError` for a type it does not know."""
    try:
        return json.dumps(encode(obj), separators=(",", ":"), ensure_ascii=False).encode()
    except (TypeError, ValueError, RecursionError) as e:
        raise CodecError(str(e)) from None


def loads(data: bytes) -> Any:
    """The object :func:`dumps` wrote; :class:`CodecError` on anything else."""
    try:
        return decode(json.loads(data))
    except CodecError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError, ImportError) as e:
        raise CodecError(f"{type(e).__name__}: {e}") from None


def _warning_name(cls: type) -> str:
    from ..errors import GraphroofWarning

    mod = getattr(cls, "__module__", "")
    if not (issubclass(cls, GraphroofWarning) and (mod == "graphroof" or mod.startswith("graphroof."))):
        raise CodecError(f"class {cls!r} is not a graphroof warning")
    return f"{mod}:{cls.__qualname__}"


def _warning_class(name: str) -> type:
    from ..errors import GraphroofWarning

    mod, _, qual = name.partition(":")
    if not (mod == "graphroof" or mod.startswith("graphroof.")):
        raise CodecError(f"warning class {name!r} is not graphroof's")
    obj: Any = importlib.import_module(mod)
    for part in qual.split("."):
        obj = getattr(obj, part)
    if not (isinstance(obj, type) and issubclass(obj, GraphroofWarning)):
        raise CodecError(f"{name!r} is not a graphroof warning")
    return obj


class _Encoder:
    def __init__(self) -> None:
        self.specs: dict[tuple[Any, ...], int] = {}
        self.table: list[list[Any]] = []

    def spec(self, t: TensorSpec | None) -> int:
        if t is None:
            return -1
        if type(t) is not TensorSpec or type(t.role) is not Role or type(t.dtype) is not str:
            raise CodecError(f"not a plain TensorSpec: {t!r}")
        for d in t.shape:
            if type(d) is not int and type(d) is not str:
                raise CodecError(f"tensor dim {d!r} is neither int nor str")
        key = (t.shape, tuple(type(d) is int for d in t.shape), t.dtype, t.role.value)
        i = self.specs.get(key)
        if i is None:
            i = self.specs[key] = len(self.table)
            self.table.append([list(t.shape), t.dtype, t.role.value])
        return i

    def value(self, o: Any) -> Any:
        t = type(o)
        if t in _SCALARS:
            return o
        if t is dict:
            if all(type(k) is str for k in o):
                return {k: self.value(v) for k, v in o.items()}
            out: list[Any] = ["d"]
            for k, v in o.items():
                out += (self.value(k), self.value(v))
            return out
        if t in _SEQUENCES:
            return [_SEQUENCES[t], *(self.value(v) for v in o)]
        if t is bytes:
            return ["b", base64.b64encode(o).decode("ascii")]
        if t is Role:
            return ["r", o.value]
        if t is TensorSpec:
            return ["T", self.inline(o)]
        if t is OpNode:  # an op outside a graph: its specs written in place
            return ["N", self.node(o, inline=True)]
        if t is OpGraph:
            return ["G", *_Encoder().graph(o)]
        if isinstance(o, type):
            return ["W", _warning_name(o)]
        if t.__name__ == "ModelSpec" and t.__module__ == "graphroof.frontends.source":
            import dataclasses

            return ["M", {f.name: self.value(getattr(o, f.name)) for f in dataclasses.fields(o)}]
        raise CodecError(f"the store cannot keep a {t.__module__}.{t.__qualname__}")

    def inline(self, t: TensorSpec | None) -> Any:
        """A spec written in place (outside a graph's table): ``[shape, dtype, role]`` or None."""
        if t is None:
            return None
        e = _Encoder()
        return e.table[e.spec(t)]

    def node(self, op: OpNode, inline: bool = False) -> list[Any]:
        if type(op.attrs) is not dict or type(op.name) is not str or type(op.op) is not str \
                or type(op.scope) is not str:
            raise CodecError(f"not a plain OpNode: {op.name!r}")
        ref = self.inline if inline else self.spec
        return [op.name, op.op, [ref(t) for t in op.inputs], [ref(t) for t in op.outputs],
                self.value(op.attrs), op.scope]

    def graph(self, g: OpGraph) -> list[Any]:
        if set(vars(g)) != {"nx", "name", "meta", "_producer"} or type(g.nx) is not nx.DiGraph:
            raise CodecError("an OpGraph with attributes the store does not know")
        index: dict[Any, int] = {}
        nodes: list[Any] = []
        for n, data in g.nx.nodes(data=True):
            index[n] = len(index)
            keys = list(data)
            if keys[:3] != [OP, IN_TENSORS, OUT_TENSORS] or type(data[OP]) is not OpNode:
                raise CodecError(f"node {n!r} does not hold an op and its tensor names")
            ins, outs = data[IN_TENSORS], data[OUT_TENSORS]
            if type(ins) is not tuple or type(outs) is not tuple \
                    or any(x is not None and type(x) is not str for x in (*ins, *outs)):
                raise CodecError(f"node {n!r}: tensor names are not a tuple of str")
            extra = {k: data[k] for k in keys[3:]}
            nodes.append([self.value(n), self.node(data[OP]), list(ins), list(outs), self.value(extra)])
        edges: list[Any] = []
        for u, nbrs in g.nx.adjacency():
            for v, d in nbrs.items():
                edges.append([index[u], index[v], self.value(d)])
        # predecessor order: rebuilding from the successor order gives the order edges reach each node; record
        # the nodes whose real order differs (their inputs are not in producer order)
        seen: dict[Any, list[Any]] = {n: [] for n in index}
        for u, nbrs in g.nx.adjacency():
            for v in nbrs:
                seen[v].append(u)
        preds = [[index[v], [index[u] for u in g.nx.pred[v]]] for v in index if list(g.nx.pred[v]) != seen[v]]
        return [self.value(g.name), self.value(g.meta), self.value(dict(g.nx.graph)), self.table, nodes, edges,
                preds, self.value(g.producers)]


def encode(obj: Any) -> Any:
    """*obj* as JSON-able data (lists, dicts, scalars); :class:`CodecError` for a type the codec does not know."""
    return _Encoder().value(obj)


def _spec(row: list[Any]) -> TensorSpec:
    shape, dtype, role = row
    if type(shape) is not list or type(dtype) is not str or any(type(d) not in (int, str) for d in shape):
        raise CodecError("malformed tensor spec")
    t = object.__new__(TensorSpec)  # the fields as stored, as pickle restored them (no re-canonicalising)
    object.__setattr__(t, "shape", tuple(shape))
    object.__setattr__(t, "dtype", dtype)
    object.__setattr__(t, "role", Role(role))
    return t


def _node(row: list[Any], specs: list[TensorSpec]) -> OpNode:
    name, op, ins, outs, attrs, scope = row
    if type(name) is not str or type(op) is not str or type(scope) is not str:
        raise CodecError("malformed op")
    attrs = decode(attrs)
    if type(attrs) is not dict:
        raise CodecError("malformed op attributes")
    if any(type(i) is not int or i < -1 for i in ins) or any(type(i) is not int or i < 0 for i in outs):
        raise CodecError("malformed op tensors")
    n = object.__new__(OpNode)
    for k, v in (("name", name), ("op", op), ("inputs", tuple(specs[i] if i >= 0 else None for i in ins)),
                 ("outputs", tuple(specs[i] for i in outs)), ("attrs", attrs), ("scope", scope)):
        object.__setattr__(n, k, v)
    return n


def _graph(parts: list[Any]) -> OpGraph:
    name, meta, gattrs, table, rows, edge_rows, preds, producer = parts
    specs = [_spec(r) for r in table]
    name, meta, producer = decode(name), decode(meta), decode(producer)
    if type(meta) is not dict or type(producer) is not dict:
        raise CodecError("malformed graph")
    g = OpGraph(name)
    g.meta = meta
    g.set_producers(producer)
    g.nx = nx.DiGraph()
    g.nx.graph.update(decode(gattrs))
    names: list[Any] = []
    nodes: list[tuple[Any, dict[str, Any]]] = []
    for key, op, ins, outs, extra in rows:
        extra = decode(extra)
        if type(extra) is not dict or any(x is not None and type(x) is not str for x in (*ins, *outs)):
            raise CodecError("malformed node")
        n = decode(key)
        names.append(n)
        nodes.append((n, {OP: _node(op, specs), IN_TENSORS: tuple(ins), OUT_TENSORS: tuple(outs), **extra}))
    edges = []
    for u, v, d in edge_rows:
        d = decode(d)
        if type(d) is not dict or u < 0 or v < 0:
            raise CodecError("malformed edge")
        edges.append((names[u], names[v], d))
    fill_digraph(g.nx, nodes, edges)
    pred = getattr(g.nx, "_pred", None)
    for v, order in preds:
        old = g.nx.pred[names[v]]
        if type(pred) is dict and set(old) == {names[u] for u in order}:
            pred[names[v]] = {names[u]: old[names[u]] for u in order}
    if len(g.nx) != len(rows):
        raise CodecError("duplicate node names")
    return g


def decode(x: Any) -> Any:
    """The object of :func:`encode`'s data *x*; :class:`CodecError` (or a ``ValueError`` / ``TypeError``) when
    *x* is not data that :func:`encode` writes."""
    t = type(x)
    if t in _SCALARS:
        return x
    if t is dict:
        return {k: decode(v) for k, v in x.items()}
    if t is not list or not x or type(x[0]) is not str:
        raise CodecError("malformed value")
    tag = x[0]
    if tag == "t":
        return tuple(decode(v) for v in x[1:])
    if tag == "l":
        return [decode(v) for v in x[1:]]
    if tag == "d":
        if len(x) % 2 != 1:
            raise CodecError("malformed dict")
        return {decode(x[i]): decode(x[i + 1]) for i in range(1, len(x), 2)}
    if tag == "s":
        return {decode(v) for v in x[1:]}
    if tag == "f":
        return frozenset(decode(v) for v in x[1:])
    if tag == "b" and len(x) == 2 and type(x[1]) is str:
        return base64.b64decode(x[1], validate=True)
    if tag == "r" and len(x) == 2:
        return Role(x[1])
    if tag == "T" and len(x) == 2:
        return _spec(x[1])
    if tag == "N" and len(x) == 2:  # an op outside a graph: its specs in place
        name, op, ins, outs, attrs, scope = x[1]
        specs = [_spec(r) for r in (*ins, *outs) if r is not None]
        it = iter(range(len(specs)))
        return _node([name, op, [next(it) if r is not None else -1 for r in ins], [next(it) for _ in outs],
                      attrs, scope], specs)
    if tag == "G" and len(x) == 9:
        return _graph(x[1:])
    if tag == "W" and len(x) == 2 and type(x[1]) is str:
        return _warning_class(x[1])
    if tag == "M" and len(x) == 2 and type(x[1]) is dict:
        from .source import ModelSpec

        return ModelSpec(**{k: decode(v) for k, v in x[1].items()})
    raise CodecError(f"unknown tag {tag!r}")
