"""The OpGraph: a networkx ``DiGraph`` whose nodes are ops and whose edges are tensors.

Node-attribute keys (documented once, ShapeProp style):

* ``OP`` (``"op"``): the :class:`OpNode` (plain data: op key, tensor specs, attributes, scope).
* ``COST`` (``"cost"``): the :class:`~graphroof.counters.cost.Cost`, written by ``counters.count``.
* ``BOUND`` (``"bound"``): the :class:`~graphroof.roofline.Bound`, written by ``roofline.evaluate_graph``.
* ``IN_TENSORS`` (``"in_tensors"``): the names of the op's input tensors, by input position (``None`` when
  absent), as given to :meth:`OpGraph.add_op`; which input an edge feeds, when two inputs look alike.
* ``OUT_TENSORS`` (``"out_tensors"``): the names of the op's output tensors, by output position.

Reserved op-attribute keys (a model's own attributes never use the ``graphroof.`` prefix; frontends rename any
that do):

* ``REPEAT`` (``"graphroof.repeat"``): trip count of an op inside a loop body (int or symbolic dim); the
  counting pass scales the op's cost by it.
* ``SHAPE_UNKNOWN`` (``"graphroof.shape_unknown"``): names of the op's tensors whose shape nobody could infer;
  the counting pass counts the op as unknown (bytes only, estimated, warned), never as a ruled zero.
* ``ESTIMATED`` (``"graphroof.estimated"``): a reason string; the op's cost is marked estimated (e.g. a
  data-dependent output counted at its upper bound).

Edge attribute ``"tensor"`` is the name of the tensor flowing producer -> consumer.  Shapes may hold symbolic
dims (``str``: a name such as ``"seq"`` or an arithmetic expression such as ``"past + 1"``, evaluated by
:func:`graphroof.dims.resolve_dim`); :func:`bind` substitutes them.
"""

from __future__ import annotations

import ast
import builtins
import enum
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import networkx as nx

from .dims import Dim, resolve_dim
from .dtypes import canonical_dtype, dtype_bits
from .errors import UnboundDimError

__all__ = [
    "OP", "COST", "BOUND", "IN_TENSORS", "OUT_TENSORS", "REPEAT", "SHAPE_UNKNOWN", "ESTIMATED", "Role", "TensorSpec",
    "OpNode", "OpGraph", "Dim", "resolve_dim", "bind", "fill_digraph", "edge_copies",
]

OP = "op"
COST = "cost"
BOUND = "bound"
IN_TENSORS = "in_tensors"
OUT_TENSORS = "out_tensors"
REPEAT = "graphroof.repeat"
SHAPE_UNKNOWN = "graphroof.shape_unknown"
ESTIMATED = "graphroof.estimated"


class Role(str, enum.Enum):
    """What a tensor is, which decides the byte bucket it is counted in."""

    WEIGHT = "weight"
    ACTIVATION = "activation"
    KV_CACHE = "kv_cache"
    CONST = "const"


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """Shape, dtype and role of one tensor.  ``shape`` entries are ints or symbolic ``str`` dims."""

    shape: tuple[Dim, ...]
    dtype: str = "fp32"
    role: Role = Role.ACTIVATION

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))
        object.__setattr__(self, "role", Role(self.role))

    @property
    def is_bound(self) -> bool:
        return not any(isinstance(d, str) for d in self.shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def dims(self) -> tuple[int, ...]:
        """The shape as ints (what a counting rule computes with); raises :class:`UnboundDimError` naming the
        first symbolic dim."""
        for d in self.shape:
            if not isinstance(d, int):
                raise UnboundDimError(d)
        return cast("tuple[int, ...]", self.shape)

    @property
    def numel(self) -> int:
        """Number of elements; raises :class:`UnboundDimError` naming the first symbolic dim."""
        n = 1
        for d in self.shape:
            if not isinstance(d, int):
                raise UnboundDimError(d)
            n *= d
        return n

    @property
    def itemsize_bits(self) -> int:
        return dtype_bits(self.dtype)

    @property
    def nbytes(self) -> int:
        """Storage bytes, packed for sub-byte types: ``ceil(numel * bits / 8)``."""
        return math.ceil(self.numel * self.itemsize_bits / 8)

    def bind(self, dims: Mapping[str, int]) -> TensorSpec:
        if self.is_bound:
            return self
        return replace(self, shape=tuple(resolve_dim(d, dims) for d in self.shape))

    def with_dtype(self, dtype: str) -> TensorSpec:
        return replace(self, dtype=dtype)

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"


@dataclass(frozen=True, slots=True)
class OpNode:
    """One op: plain data only, so rules can be tested with literals.

    ``op`` is a namespaced key (``aten.addmm``, ``onnx.Gemm``, ``table.op``); ``attrs`` are named plain Python
    values; ``scope`` is the dotted module / layer path (``model.layers.0.self_attn``).
    """

    name: str
    op: str
    inputs: tuple[TensorSpec | None, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()
    attrs: Mapping[str, Any] = field(default_factory=dict)
    scope: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))

    def input(self, i: int) -> TensorSpec | None:
        """The i-th input, or ``None`` when absent (optional inputs)."""
        return self.inputs[i] if i < len(self.inputs) else None

    def bind(self, dims: Mapping[str, int]) -> OpNode:
        if all(t is None or t.is_bound for t in (*self.inputs, *self.outputs)):
            return self
        return replace(
            self,
            inputs=tuple(t.bind(dims) if t is not None else None for t in self.inputs),
            outputs=tuple(t.bind(dims) for t in self.outputs),
        )

    def describe(self) -> str:
        """``name (op) in [..] out [..] scope s``: used in error messages."""
        ins = ", ".join(str(t) if t is not None else "-" for t in self.inputs)
        outs = ", ".join(str(t) for t in self.outputs)
        return f"node {self.name!r} ({self.op}) inputs [{ins}] outputs [{outs}] scope {self.scope or '-'!r}"


class OpGraph:
    """A model's op graph.  ``graph.nx`` is the underlying :class:`networkx.DiGraph` (public).

    Nodes are keyed by op name and carry ``nx.nodes[name][OP]``; edges carry the tensor name.  Frontends add
    ops in topological order, and :meth:`ops` yields them in that order.  ``meta`` holds graph-level facts
    (model name, capture method, symbolic dims and their defaults, notes for the report).
    """

    def __init__(self, name: str = "model", meta: Mapping[str, Any] | None = None):
        self.nx: nx.DiGraph = nx.DiGraph(name=name)
        self.name = name
        self.meta: dict[str, Any] = dict(meta or {})
        self._producer: dict[str, str] = {}

    @property
    def producers(self) -> dict[str, str]:
        """Tensor name -> the op that wrote it last (where a later :meth:`add_op` reading it draws its edge)."""
        return dict(self._producer)

    def set_producers(self, producers: Mapping[str, str]) -> None:
        """Restore :attr:`producers` (a graph rebuilt from its parts, e.g. by the trace store's decoder)."""
        self._producer = dict(producers)

    def add_op(self, node: OpNode, inputs: Sequence[str | None] = (), outputs: Sequence[str] = ()) -> OpNode:
        """Add *node*; *inputs* / *outputs* are tensor names used to draw producer -> consumer edges."""
        if node.name in self.nx:
            raise ValueError(f"duplicate op name {node.name!r}")
        self.nx.add_node(node.name, **{OP: node, IN_TENSORS: tuple(t or None for t in inputs),
                                       OUT_TENSORS: tuple(t or None for t in outputs)})
        for t in inputs:
            if t and t in self._producer and self._producer[t] != node.name:
                self.nx.add_edge(self._producer[t], node.name, tensor=t)
        for t in outputs:
            if t:
                self._producer[t] = node.name
        return node

    def add_ops(self, entries: Iterable[tuple[OpNode, Sequence[str | None], Sequence[str], Mapping[str, Any]]]) -> None:
        """Add many ops at once, each ``(node, inputs, outputs, extra node attrs)``: the same graph as one
        :meth:`add_op` per entry followed by setting the extra attrs (same node, edge and attribute order),
        built with one bulk networkx call for the nodes and one for the edges."""
        nodes: list[tuple[str, dict[str, Any]]] = []
        edges: list[tuple[str, str, dict[str, Any]]] = []
        names: set[str] = set()
        producer = self._producer
        pending: dict[str, str] = {}   # tensor -> producer, for the entries of this call
        for node, inputs, outputs, extra in entries:
            name = node.name
            if name in names or name in self.nx:
                raise ValueError(f"duplicate op name {name!r}")
            names.add(name)
            nodes.append((name, {OP: node, IN_TENSORS: tuple(t or None for t in inputs),
                                 OUT_TENSORS: tuple(t or None for t in outputs), **extra}))
            for t in inputs:
                if t:
                    p = pending.get(t) or producer.get(t)
                    if p is not None and p != name:
                        edges.append((p, name, {"tensor": t}))
            for t in outputs:
                if t:
                    pending[t] = name
        fill_digraph(self.nx, nodes, edges)
        producer.update(pending)

    def __len__(self) -> int:
        return self.nx.number_of_nodes()

    def __iter__(self) -> Iterator[OpNode]:
        return self.ops()

    def __contains__(self, name: object) -> bool:
        return name in self.nx

    def ops(self) -> Iterator[OpNode]:
        for _, data in self.nx.nodes(data=True):
            yield data[OP]

    def node(self, name: str) -> OpNode:
        return self.nx.nodes[name][OP]

    def get(self, name: str, key: str, default: Any = None) -> Any:
        return self.nx.nodes[name].get(key, default)

    def set(self, name: str, key: str, value: Any) -> None:
        self.nx.nodes[name][key] = value

    def symbolic_dims(self) -> builtins.set[str]:  # `set` in this class body is OpGraph.set
        """Names of the symbolic dims still present in any tensor shape."""
        names: builtins.set[str] = set()
        for op in self.ops():
            for t in (*op.inputs, *op.outputs):
                if t is None:
                    continue
                for d in t.shape:
                    if isinstance(d, str):
                        try:
                            tree = ast.parse(d.replace("//", "/"), mode="eval")
                            names.update(n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
                                         and n.id not in ("max", "min", "ceil", "floor"))
                        except SyntaxError:
                            names.add(d)
        return names

    def map_ops(self, fn) -> OpGraph:
        """A new graph with ``fn(OpNode) -> OpNode`` applied to every op; edges and meta are kept."""
        g = OpGraph(self.name, self.meta)
        g.nx = nx.DiGraph()
        g.nx.graph.update(self.nx.graph)  # DiGraph(dict) would read the dict as adjacency data
        fill_digraph(g.nx, _mapped_nodes(self.nx, fn), edge_copies(self.nx))
        g._producer = dict(self._producer)
        return g

    def __repr__(self) -> str:
        return f"OpGraph({self.name!r}, {len(self)} ops, {self.nx.number_of_edges()} edges)"


def fill_digraph(g: nx.DiGraph, nodes: Iterable[tuple[Any, dict[str, Any]]],
                 edges: Iterable[tuple[Any, Any, dict[str, Any]]]) -> None:
    """Add *nodes* ``(name, attrs)`` then *edges* ``(u, v, attrs)`` to *g*: the same graph as
    ``g.add_nodes_from(nodes); g.add_edges_from(edges)`` (node, successor and predecessor order; a repeated
    edge updates the first one's attrs) but about twice as fast, which counts for graphs of ~5000 ops copied
    several times per counted point.  The attr dicts are stored as given (pass fresh ones), not copied.

    The fast path writes networkx's adjacency dicts (``_node``, ``_succ``, ``_pred``, stable since networkx 2)
    directly; new nodes only, on a graph without a cache of views to clear; anything else takes the public API.
    """
    node, succ, pred = getattr(g, "_node", None), getattr(g, "_succ", None), getattr(g, "_pred", None)
    if not (type(node) is dict and type(succ) is dict and type(pred) is dict and succ is getattr(g, "_adj", None)
            and not getattr(g, "__networkx_cache__", None)) or node is None or succ is None or pred is None:
        g.add_nodes_from(nodes)
        g.add_edges_from(edges)
        return
    for n, attrs in nodes:
        if n in node:  # an existing node: its attrs updated, as add_nodes_from does
            node[n].update(attrs)
            continue
        if n is None:
            raise ValueError("None cannot be a node")
        node[n] = attrs
        succ[n] = {}
        pred[n] = {}
    for u, v, attrs in edges:
        su = succ.get(u)
        if su is None or v not in succ:
            g.add_edge(u, v, **attrs)  # a new endpoint: networkx adds it
            continue
        old = su.get(v)
        if old is None:
            su[v] = pred[v][u] = attrs
        else:
            old.update(attrs)


def edge_copies(g: nx.DiGraph) -> Iterator[tuple[Any, Any, dict[str, Any]]]:
    """``(u, v, copy of the edge attrs)`` in ``g.edges(data=True)`` order, read through ``g.adjacency()``: the
    ``g.edges`` view, once created, is cached on the graph and refers back to it, a reference cycle that keeps
    a dropped intermediate graph (thousands of dicts) alive until the cyclic collector's next full pass."""
    for u, nbrs in g.adjacency():
        for v, d in nbrs.items():
            yield u, v, dict(d)


def _mapped_nodes(g: nx.DiGraph, fn) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(name, attrs)`` of every node of *g* in order, the op mapped by *fn* and the tensor names kept."""
    for name, data in g.nodes(data=True):
        attrs = {OP: fn(data[OP])}
        if IN_TENSORS in data:
            attrs[IN_TENSORS] = data[IN_TENSORS]
        if OUT_TENSORS in data:
            attrs[OUT_TENSORS] = data[OUT_TENSORS]
        yield name, attrs


def bind(graph: OpGraph, dims: Mapping[str, int]) -> OpGraph:
    """Substitute symbolic dims with *dims* in every tensor spec; returns a new graph.

    Raises :class:`UnboundDimError` naming the op, the tensor and the first dim that has no value (with where
    the dim comes from when the frontend recorded it in ``meta["dim_origins"]``).
    """
    origins = graph.meta.get("dim_origins", {})

    def one(op: OpNode) -> OpNode:
        try:
            return op.bind(dims)
        except UnboundDimError as e:
            raise _unbound_at(op, e, dims, origins) from None
        except (ZeroDivisionError, OverflowError, ValueError, TypeError, RecursionError) as e:
            raise UnboundDimError(str(e), "cannot evaluate this symbolic dimension expression",
                                  where=f"{op.name} ({op.op})") from None

    g = graph.map_ops(one)
    g.meta["dims"] = {**graph.meta.get("dims", {}), **dict(dims)}
    return g


def _unbound_at(op: OpNode, e: UnboundDimError, dims: Mapping[str, int], origins: Mapping[str, str]) -> UnboundDimError:
    """*e* restated with the op, which of its tensors holds the dim, and where the dim comes from."""
    where = f"{op.name} ({op.op})"
    for kind, tensors in (("input", op.inputs), ("output", op.outputs)):
        for i, t in enumerate(tensors):
            if t is None or t.is_bound:
                continue
            for d in t.shape:
                try:
                    resolve_dim(d, dims)
                except (UnboundDimError, ZeroDivisionError, OverflowError, ValueError, TypeError, RecursionError):
                    origin = origins.get(str(d)) or origins.get(str(e.dim))
                    hint = f"it is a dim of {kind} {i} {t}"
                    hint += f", {origin}" if origin else ""
                    hint += "; bind it with --dim NAME=VALUE (CLI) or dims={...} (API)"
                    return UnboundDimError(e.dim, hint, where=where)
    return UnboundDimError(e.dim, where=where)
