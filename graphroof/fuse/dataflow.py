"""The fusion pass's view of a counted op graph: every op's producers and consumers looking through views
(:class:`Dataflow`), and the bookkeeping of a kernel's cost and boundary tensors (:func:`kernel_cost`,
:func:`boundary`).

A kernel's FLOPs are its ops' FLOPs; its bytes are the tensors that cross its boundary: an internal edge
subtracts the tensor's bytes from the consumer's reads and, when every consumer is inside, from the producer's
writes, each clamped at zero; an external tensor read by several of its ops is read once.
"""

from __future__ import annotations

from collections import defaultdict

from ..counters.cost import Cost
from ..errors import CostError, UnboundDimError
from ..graph import COST, IN_TENSORS, OP, OUT_TENSORS, OpGraph, OpNode, Role, TensorSpec
from .classify import op_class
from .layout import strided_view

__all__ = ["Dataflow", "kernel_cost", "boundary"]

_BUCKET = {Role.WEIGHT: "weight_bytes", Role.CONST: "weight_bytes", Role.KV_CACHE: "kv_read_bytes",
           Role.ACTIVATION: "act_read_bytes"}
_WRITE_BUCKET = {Role.KV_CACHE: "kv_write_bytes"}


class Dataflow:
    """Producers and consumers of every op, looking through views."""

    def __init__(self, graph: OpGraph):
        self.graph = graph
        self.order: list[str] = []
        self.nodes: dict[str, OpNode] = {}
        self.costs: dict[str, Cost] = {}
        self.in_names: dict[str, tuple] = {}   # op -> IN_TENSORS (the graph's node attr, () when absent)
        self.out_names: dict[str, tuple] = {}  # op -> OUT_TENSORS
        for n, data in graph.nx.nodes(data=True):
            self.order.append(n)
            self.nodes[n] = data[OP]
            self.costs[n] = data.get(COST)
            self.in_names[n] = data.get(IN_TENSORS) or ()
            self.out_names[n] = data.get(OUT_TENSORS) or ()
        self.topo = {n: i for i, n in enumerate(self.order)}
        missing = [n for n, c in self.costs.items() if c is None]
        if missing:
            raise ValueError(f"op {missing[0]!r} has no cost; run graphroof.counters.count(graph) first")
        self.cls = {n: op_class(self.nodes[n], self.costs[n]) for n in self.order}
        # (op, input position) -> (real producer op or None, producer output tensor name)
        self.src: dict[tuple[str, int], tuple[str | None, str | None]] = {}
        self.consumers: dict[tuple[str, str], set[str]] = defaultdict(set)  # (producer, tensor) -> ops
        self.preds: dict[str, set[str]] = defaultdict(set)
        # (op, input position) read through a view chain that leaves the tensor strided in memory (fuse.layout)
        self.strided_in: set[tuple[str, int]] = set()
        last: dict[str, str] = {}
        view_src: dict[str, tuple[str | None, str | None]] = {}  # view output tensor -> real source
        view_strided: set[str] = set()                           # view output tensors left strided
        for n in self.order:
            ins = self.in_names[n]
            for pos, t in enumerate(ins):
                if not t:
                    continue
                p = last.get(t)
                real = view_src.get(t, (p, t)) if p is not None and self.cls[p] == "view" else (p, t)
                self.src[(n, pos)] = real
                if p is not None and self.cls[p] == "view" and t in view_strided:
                    self.strided_in.add((n, pos))
                if self.cls[n] != "view" and real[0] is not None:
                    self.consumers[(real[0], real[1])].add(n)
                    self.preds[n].add(real[0])
            for t in self.out_names[n]:
                if t:
                    last[t] = n
                    if self.cls[n] == "view":
                        first = next((self.src[(n, i)] for i in range(len(ins)) if (n, i) in self.src), (None, None))
                        view_src[t] = first
                        if (n, 0) in self.strided_in or strided_view(self.nodes[n]):
                            view_strided.add(t)

    def reachable_any(self, members: set[str], targets: set[str]) -> bool:
        """Whether any of *targets* can be reached from *members*: one search bounded by the latest target
        (a path to a target only passes ops before it in topological order), not one search per target."""
        if not targets:
            return False
        limit = max(self.topo[t] for t in targets)
        stack = list(members)
        seen = set(stack)
        succ = self.graph.nx.succ
        while stack:
            u = stack.pop()
            for w in succ[u]:
                if w in targets:
                    return True
                if w not in seen and self.topo[w] < limit:
                    seen.add(w)
                    stack.append(w)
        return False


_FIELDS = ("matrix_flops", "vector_flops", "weight_bytes", "act_read_bytes", "act_write_bytes", "kv_read_bytes",
           "kv_write_bytes", "net_bytes")
_SLOT = {f: i for i, f in enumerate(_FIELDS)}


def kernel_cost(df: Dataflow, ops: list[str], folded: set[str]) -> Cost:
    if len(ops) == 1 and not folded:
        return df.costs[ops[0]]  # a one-op kernel is the op, as counted
    members = set(ops)
    vals: dict[str, list] = {}  # op -> its cost's fields (in _FIELDS order), then ``estimated``
    for n in ops:
        c = df.costs[n]
        if n in folded:  # folded into the producer's weights: only its output write remains
            vals[n] = [0, 0, 0, 0, c.act_write_bytes, 0, c.kv_write_bytes, 0, c.estimated]
        else:
            vals[n] = [c.matrix_flops, c.vector_flops, c.weight_bytes, c.act_read_bytes, c.act_write_bytes,
                       c.kv_read_bytes, c.kv_write_bytes, c.net_bytes, c.estimated]
    seen_external: set[tuple] = set()
    src_of = df.src
    for n in ops:
        node = df.nodes[n]
        v = vals[n]
        for pos, spec in enumerate(node.inputs):
            if spec is None:
                continue
            src = src_of.get((n, pos))
            if src is None:
                continue
            if src[0] in members or src in seen_external:  # internal, or read once per kernel
                try:
                    nbytes = spec.nbytes
                except UnboundDimError:
                    continue
                i = _SLOT[_BUCKET.get(spec.role, "act_read_bytes")]
                v[i] = max(0.0, v[i] - nbytes)
            else:
                try:
                    _ = spec.nbytes  # a tensor of unknown size is not counted as read (nor remembered)
                except UnboundDimError:
                    continue
                seen_external.add(src)
        for pos, t in enumerate(df.out_names[n]):
            if not t or pos >= len(node.outputs):
                continue
            users = df.consumers.get((n, t))
            if users and users <= members:
                try:
                    nbytes = node.outputs[pos].nbytes
                except UnboundDimError:
                    continue
                i = _SLOT[_WRITE_BUCKET.get(node.outputs[pos].role, "act_write_bytes")]
                v[i] = max(0.0, v[i] - nbytes)
    return _sum_fields(list(vals.values()))


def _sum_fields(rows: list[list]) -> Cost:
    """``sum((Cost(*row) for row in rows), Cost())`` without the intermediate Costs: the same additions in the
    same order (from the int 0 of ``Cost()``), so the same floats.  Every row is a valid cost (fields >= 0,
    finite); only the total can exceed ``MAX_COUNT``, and then the reference sum raises its own error."""
    acc: list[float] = [0, 0, 0, 0, 0, 0, 0, 0]
    est = False
    for row in rows:
        for i in range(8):
            acc[i] = acc[i] + row[i]
        est = est or row[8]
    try:
        return Cost(acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6], acc[7], est)
    except CostError:
        return sum((Cost(*row) for row in rows), Cost())


def boundary(df: Dataflow, ops: list[str]) -> tuple[list, list]:
    """(external inputs, outputs used outside or by nobody) of a kernel, as (tensor name, spec), deduplicated."""
    members = set(ops)
    ins: dict[tuple, tuple[str, TensorSpec]] = {}
    outs: list[tuple[str, TensorSpec]] = []
    for n in ops:
        node = df.nodes[n]
        names = df.in_names[n]
        for pos, spec in enumerate(node.inputs):
            if spec is None or pos >= len(names) or not names[pos]:
                continue
            src = df.src.get((n, pos), (None, names[pos]))
            if src[0] not in members and src not in ins:
                ins[src] = (src[1] or names[pos], spec)
        for pos, t in enumerate(df.out_names[n]):
            if t and pos < len(node.outputs):
                users = df.consumers.get((n, t))
                if not users or not users <= members:
                    outs.append((t, node.outputs[pos]))
    return list(ins.values()), outs
