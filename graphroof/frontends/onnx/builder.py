"""The graph builder of the ONNX frontend: walks an inferred ``ModelProto`` (subgraphs of If / Loop / Scan
flattened under their node's scope) into an :class:`~graphroof.graph.OpGraph`; :func:`.load.load_onnx` reads
the file, infers shapes and hands the model here.  Roles, op keys, scopes and control flow: see
:mod:`graphroof.frontends.onnx.load`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeGuard

import onnx
import onnx.inliner
from onnx import AttributeProto

from ...errors import FrontendError
from ...errors import warn as warn_user
from ...graph import REPEAT, SHAPE_UNKNOWN, OpGraph, OpNode, Role, TensorSpec
from .control import DEFAULT_LOOP_TRIPS, Trips, loop_trips, scan_trips
from .naming import is_kv_name, node_label, op_key, own_scope, path_scope, weight_scope
from .shapes import (
    TypeTable,
    iter_graphs,
    normalize_dim,
    real_inputs,
)

_SKIP_ATTR = {AttributeProto.GRAPH, AttributeProto.GRAPHS, AttributeProto.TENSOR, AttributeProto.TENSORS,
              AttributeProto.SPARSE_TENSOR, AttributeProto.SPARSE_TENSORS, AttributeProto.TYPE_PROTO,
              AttributeProto.TYPE_PROTOS}
#: Integer GEMM / conv kernels: they run on the int8 units whatever dtype their scales have.
_INT_COMPUTE = {"MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv", "QGemm", "DynamicQuantizeMatMul",
                "MatMulIntegerToFloat", "QAttention"}
_ABSENT = TensorSpec((0,), "fp32")
#: Attribute-name prefix graphroof keeps for itself (``graphroof.repeat``): a model's own is renamed.
_RESERVED = "graphroof."
#: Dims nobody can bind: ONNX's ``unk__N``, onnxruntime's ``<Op>_<N>_o<K>__d<J>``, graphroof's ``<tensor>_d<J>``.
_PLACEHOLDER = re.compile(r"^(unk__\d+|\w+_\d+_o\d+__d\d+|.*_d\d+)$")
#: Ops whose outputs differ per run even from constant inputs: never a weight.
_NOT_DERIVED = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
                "Bernoulli", "If", "Loop", "Scan"}
#: Ops on weights that runtimes keep in the graph (QDQ: fused into the quantized consumer, never folded).
_KEPT = {"DequantizeLinear", "QuantizeLinear", "DynamicQuantizeLinear"}
#: Ops whose output size depends on input values but is bounded by the input's shape.
_BOUNDED = {"NonZero", "Unique", "Compress", "Slice"}
#: Deepest If / Loop / Scan nesting walked.
_MAX_NESTING = 32
#: Ops whose output aliases their first input (no copy): the output keeps the input's role.
_ALIAS = {"Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Dropout"}


# -- building the graph -------------------------------------------------------------------------------------

def _plain(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    if isinstance(v, list):
        return tuple(_plain(x) for x in v)
    return v


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    """The node's plain attributes; a model attribute in graphroof's reserved ``graphroof.`` namespace is
    renamed ``model.graphroof...`` so it can never act as graphroof's own (``graphroof.repeat``)."""
    out: dict[str, Any] = {}
    for a in node.attribute:
        if a.type in _SKIP_ATTR:
            continue
        try:
            v = _plain(onnx.helper.get_attribute_value(a))
        except Exception:  # noqa: BLE001 - an attribute with no value or an unknown type: not readable
            continue
        out[f"model.{a.name}" if a.name.startswith(_RESERVED) else a.name] = v
    return out


def _mul(a: int | str, b: int | str) -> int | str:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if a == 1:
        return b
    if b == 1:
        return a
    return f"({a})*({b})"


def _is_placeholder(d: Any) -> TypeGuard[str]:
    return isinstance(d, str) and bool(_PLACEHOLDER.match(d))


class GraphBuilder:
    def __init__(self, model: onnx.ModelProto, table: TypeTable, values: Mapping[str, Any], notes: list[str],
                 opset: int, loop_trips: int | None):
        self.model = model
        self.table = table
        self.notes = notes
        self.opset = opset
        self.loop_trips = loop_trips
        self.graph = OpGraph()
        self.specs: dict[str, TensorSpec] = {}
        self.roles: dict[str, Role] = {}
        self.values = values
        self.names: set[str] = set()
        self.unknown_types: list[str] = []
        self.dropped: list[str] = []
        self.origins: dict[str, str] = {}
        self.consumed: set[str] = set()
        self.producer: dict[str, onnx.NodeProto] = {}
        self.bounds: dict[str, int] = {}
        self.bounded: list[str] = []
        self.inputs = {vi.name for vi in real_inputs(model.graph)}
        for g in iter_graphs(model.graph):
            for node in g.node:
                for o in node.output:
                    self.producer.setdefault(o, node)
        for g in iter_graphs(model.graph):
            for t in g.initializer:
                self.roles[t.name] = Role.WEIGHT
            for st in g.sparse_initializer:
                self.roles[st.values.name] = Role.WEIGHT
            for node in g.node:
                self.consumed.update(node.input)
                if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.output:
                    self.roles[node.output[0]] = Role.CONST
            self.consumed.update(o.name for o in g.output)
        top = model.graph
        for vi in real_inputs(top):
            self.roles[vi.name] = Role.KV_CACHE if is_kv_name(vi.name) else Role.ACTIVATION
            if vi.type.HasField("tensor_type"):
                for axis, d in enumerate(vi.type.tensor_type.shape.dim):
                    if d.dim_param:
                        self.origins.setdefault(normalize_dim(d.dim_param), f"dim {axis} of model input {vi.name!r}")
            elif vi.type.HasField("sequence_type") and vi.type.sequence_type.elem_type.HasField("tensor_type"):
                for axis, d in enumerate(vi.type.sequence_type.elem_type.tensor_type.shape.dim):
                    if d.dim_param:
                        self.origins.setdefault(normalize_dim(d.dim_param),
                                                f"dim {axis} of the tensors in model input sequence {vi.name!r}")
        for vi in top.output:
            if is_kv_name(vi.name) and vi.name not in self.roles:
                self.roles[vi.name] = Role.KV_CACHE
        self.folded_nodes: set[int] = set()
        self.derived = self._constant_derived()

    def _constant_derived(self) -> int:
        """Give the outputs of nodes that read only weights and constants (weights built at run time: a
        dequantized or transposed weight, a mask from constants) the weight / constant role; returns how many
        nodes.  A view of the KV cache stays KV cache."""
        n = 0
        for g in iter_graphs(self.model.graph):
            for node in g.node:
                ins = [x for x in node.input if x]
                if not ins or node.op_type in _NOT_DERIVED or (node.op_type == "Constant" and not node.domain):
                    continue
                roles = [self.roles.get(x, Role.ACTIVATION) for x in ins]
                if node.op_type in _ALIAS and roles[0] is not Role.ACTIVATION:
                    role = roles[0]
                elif all(r in (Role.WEIGHT, Role.CONST) for r in roles):
                    role = Role.WEIGHT if all(r is Role.WEIGHT for r in roles) else Role.CONST
                else:
                    continue
                for o in node.output:
                    if o and o not in self.roles:
                        self.roles[o] = role
                if node.op_type not in _ALIAS and node.domain in ("", "ai.onnx") and node.op_type not in _KEPT:
                    n += 1
                    self.folded_nodes.add(id(node))
        return n

    def spec(self, name: str) -> TensorSpec:
        s = self.specs.get(name)
        if s is None:
            entry = self.table.get(name)
            role = self.roles.get(name, Role.ACTIVATION)
            if entry is None or entry[1] is None:
                self.unknown_types.append(name)
                s = TensorSpec((0,), entry[0] if entry else "fp32", role)
            else:
                s = TensorSpec(entry[1], entry[0], role)
            self.specs[name] = s
        return s

    def shape_known(self, name: str) -> bool:
        e = self.table.get(name)
        return e is not None and e[1] is not None

    def unique(self, name: str) -> str:
        base, k = name, 1
        while name in self.names:
            k += 1
            name = f"{base}#{k}"
        self.names.add(name)
        return name

    def scopes(self, g: onnx.GraphProto) -> list[str]:
        """Each node's scope: its own (metadata, name path, unshared weight name), else its latest scoped producer's
        (a fused ``SkipLayerNorm_AddBias_3`` belongs with the projection it follows), else its first scoped
        consumer's.  Nodes with no scoped neighbour stay unscoped (``(top)`` in the rollup)."""
        uses: dict[str, int] = {}
        for n in g.node:
            for x in n.input:
                uses[x] = uses.get(x, 0) + 1
        # a weight read by one node names its module; a shared one (tied, or deduplicated by an optimizer) does not
        own: list[str | None] = []
        for n in g.node:
            sc = own_scope(n)
            if sc is None:
                sc = next((weight_scope(x) for x in n.input if self.roles.get(x) is Role.WEIGHT and uses[x] == 1
                           and weight_scope(x)), None)
            if sc is None:  # an unnamed node: the path its output tensor is named after
                sc = next((ps for o in n.output if o and (ps := path_scope(o)) is not None), None)
            own.append(sc)
        if all(sc is not None for sc in own) or not any(own):
            return [sc or "" for sc in own]
        first_consumer: dict[str, str] = {}
        for n, sc in zip(g.node, own):
            if sc:
                for x in n.input:
                    first_consumer.setdefault(x, sc)
        made: dict[str, tuple[int, str]] = {}  # tensor -> (producer's position, its scope)
        out = []
        for i, (n, sc) in enumerate(zip(g.node, own)):
            if sc is None:
                sc = max((made[x] for x in n.input if x in made and made[x][1]), default=(0, ""))[1]
                sc = sc or next((first_consumer[o] for o in n.output if o in first_consumer), "")
            for o in n.output:
                made[o] = (i, sc)
            out.append(sc)
        return out

    def value_sources(self, node: onnx.NodeProto) -> list[str]:
        """Model inputs whose *values* (not shapes) flow into *node*."""
        found: list[str] = []
        todo, seen = list(node.input), set[str]()
        while todo and len(seen) < 10000:
            t = todo.pop()
            if not t or t in seen or t in self.values:
                continue
            seen.add(t)
            if t in self.inputs:
                found.append(t)
                continue
            p = self.producer.get(t)
            if p is not None and p.op_type not in ("Shape", "Size"):
                todo.extend(p.input)
                for a in p.attribute:  # a subgraph reads outer-scope tensors by name
                    if a.type == AttributeProto.GRAPH:
                        todo.extend(x for g in iter_graphs(a.g) for n in g.node for x in n.input)
        return sorted(found)

    def bound_outputs(self, node: onnx.NodeProto, name: str, op: str) -> None:
        """Data-dependent output sizes (NonZero, Unique, Compress, a Slice with run-time bounds) get their upper
        bound from the input's static shape: ``meta["default_dims"]`` (``--dim`` overrides), noted, estimated."""
        for o in node.output:  # a tensor with a 0 dim holds nothing whatever its other dims
            e = self.table.get(o)
            if o and e is not None and e[1] is not None and 0 in e[1]:
                for d in e[1]:
                    if _is_placeholder(d) and d not in self.bounds:
                        self.bounds[d] = 0
                        self.bounded.append(f"{d} = 0 (empty {o!r})")
        if node.op_type not in _BOUNDED or not node.input:
            return
        src = self.table.get(node.input[0])
        dims = src[1] if src else None
        if not dims or any(not isinstance(d, int) for d in dims):
            return
        shape = [int(d) for d in dims]
        numel = 1
        for n in shape:
            numel *= n
        axis = next((a.i for a in node.attribute if a.name == "axis" and a.type == AttributeProto.INT), None)
        for o in node.output:
            e = self.table.get(o)
            if not o or e is None or e[1] is None:
                continue
            for k, d in enumerate(e[1]):
                if not _is_placeholder(d) or d in self.bounds:
                    continue
                if node.op_type == "Slice" and len(e[1]) == len(shape):
                    v = shape[k]
                elif node.op_type in ("Unique", "Compress") and axis is not None and -len(shape) <= axis < len(shape):
                    v = shape[axis]
                else:
                    v = numel
                self.bounds[d] = v
                self.bounded.append(f"{d} = {v} ({name}, {op})")

    def outputs(self, node: onnx.NodeProto, name: str, op: str) -> list[TensorSpec]:
        """Output specs; an output nothing reads whose size is unknown (Dropout's mask, a placeholder dim) is
        left out (listed in a note), so it never blocks the analysis."""
        self.bound_outputs(node, name, op)
        outs = []
        for k, o in enumerate(node.output):
            if not o:
                outs.append(_ABSENT)
                continue
            e = self.table.get(o)
            unknown = e is None or e[1] is None or any(_is_placeholder(d) for d in e[1])
            if unknown and o not in self.consumed:
                self.dropped.append(f"{o!r} of {name} ({op})")
                outs.append(_ABSENT)
                continue
            spec = self.spec(o)
            for d in spec.shape:
                if _is_placeholder(d) and d not in self.origins:
                    src = self.value_sources(node)
                    why = (f"which depends on the value of model input{'s' if len(src) > 1 else ''} "
                           + ", ".join(map(repr, src[:3])) if src else "known only at run time")
                    self.origins[d] = f"the size of output {k} {o!r} of {name} ({op}), {why}"
            outs.append(spec)
        while outs and outs[-1] is _ABSENT:
            outs.pop()
        return outs

    def walk(self, g: onnx.GraphProto, *, prefix: str = "", sub_scope: str | None = None,
             repeat: int | str = 1, depth: int = 0) -> None:
        scopes = self.scopes(g) if sub_scope is None else None
        for i, node in enumerate(g.node):
            local = node_label(node, i, next((ws for x in node.input if self.roles.get(x) is Role.WEIGHT
                                              and (ws := weight_scope(x))), ""))
            name = self.unique(prefix + local)
            key = op_key(node)
            scope = scopes[i] if scopes is not None else (sub_scope or "")
            ins = tuple(self.spec(x) if x else None for x in node.input)
            while ins and ins[-1] is None:
                ins = ins[:-1]
            if node.op_type == "If" and node.domain in ("", "ai.onnx"):
                self.if_outputs(node, name)
            outs = self.outputs(node, name, key)
            attrs = _attrs(node)
            if id(node) in self.folded_nodes:  # reads only weights / constants: folded once when the model loads
                attrs[REPEAT] = 0
            elif repeat != 1:
                attrs[REPEAT] = repeat
            unknown = [x for x in (*node.input, *node.output) if x and not self.shape_known(x)
                       and x in self.specs]
            if unknown and node.op_type not in ("If", "Loop", "Scan"):
                attrs[SHAPE_UNKNOWN] = tuple(unknown)
            if node.op_type in _INT_COMPUTE and ins and ins[0] is not None:
                # DynamicQuantizeMatMul takes a float A and quantizes it itself: its 8-bit B sets the GEMM dtype
                src = ins[1] if node.op_type == "DynamicQuantizeMatMul" and len(ins) > 1 and ins[1] else ins[0]
                attrs["compute_dtype"] = "int8" if src.dtype in ("int8", "uint8") else src.dtype
            self.graph.add_op(OpNode(name, key, ins, tuple(outs), attrs, scope),
                              inputs=list(node.input), outputs=list(node.output))
            if node.domain in ("", "ai.onnx") and node.op_type in ("If", "Loop", "Scan"):
                if depth >= _MAX_NESTING:
                    raise FrontendError(f"{name} ({key}): control flow nested more than {_MAX_NESTING} deep")
                self.control_flow(node, name, scope, repeat, depth)

    def if_branch(self, node: onnx.NodeProto, name: str) -> tuple[str, str]:
        """The branch of an If to count (the constant condition's, else the larger) and a note when guessed."""
        subs = {a.name: a.g for a in node.attribute if a.type == AttributeProto.GRAPH}
        cond = self.values.get(node.input[0]) if node.input else None
        cond = cond.reshape(-1).tolist() if cond is not None and getattr(cond, "size", 0) == 1 else None
        if cond:
            return ("then_branch" if bool(cond[0]) else "else_branch"), ""
        then_g, else_g = subs.get("then_branch"), subs.get("else_branch")
        n_then = sum(len(x.node) for x in iter_graphs(then_g)) if then_g else 0
        n_else = sum(len(x.node) for x in iter_graphs(else_g)) if else_g else 0
        attr = "then_branch" if n_then >= n_else else "else_branch"
        other = "else_branch" if attr == "then_branch" else "then_branch"
        return attr, (f"If {name!r}: condition unknown before run time; counted its {attr} "
                      f"({max(n_then, n_else)} ops), not its {other} ({min(n_then, n_else)} ops)")

    def if_outputs(self, node: onnx.NodeProto, name: str) -> None:
        """An If's outputs take the counted branch's output shapes where inference left them unknown (the
        branches disagree, so ONNX gives ``unk__N``)."""
        attr, _ = self.if_branch(node, name)
        branch = next((a.g for a in node.attribute if a.name == attr and a.type == AttributeProto.GRAPH), None)
        if branch is None:
            return
        for o, bo in zip(node.output, branch.output):
            e, eb = self.table.get(o), self.table.get(bo.name)
            if not o or eb is None or eb[1] is None or any(_is_placeholder(d) for d in eb[1]):
                continue
            if e is None or e[1] is None or any(_is_placeholder(d) for d in e[1]):
                self.table[o] = (e[0] if e else eb[0], eb[1])

    def control_flow(self, node: onnx.NodeProto, name: str, scope: str, repeat: int | str, depth: int) -> None:
        subs = {a.name: a.g for a in node.attribute if a.type == AttributeProto.GRAPH}
        short = re.sub(r"\W", "_", name.rsplit("/", 1)[-1]).strip("_") or node.op_type
        base = f"{scope}.{short}" if scope else short
        if node.op_type == "If":
            attr, note = self.if_branch(node, name)
            if note:
                self.notes.append(note)
            if subs.get(attr) is not None:
                self.walk(subs[attr], prefix=f"{name}/{attr}/", sub_scope=f"{base}_{attr}", repeat=repeat,
                          depth=depth + 1)
            return
        body = subs.get("body")
        if body is None:
            return
        trips: Trips | None
        if node.op_type == "Loop":
            trips = loop_trips(node, name, body, self.values, self.loop_trips)
        else:
            trips = scan_trips(node, name, _attrs(node), lambda x: self.table.get(x, (None, None))[1], self.opset)
            if trips is None:
                n = self.loop_trips if self.loop_trips is not None else DEFAULT_LOOP_TRIPS
                trips = Trips(n, False, f"Scan {name!r}: scan length unknown before run time; counted {n} "
                                        f"iteration{'s' if n != 1 else ''} (set --loop-trips N for another count)",
                              warn=True)
        if trips.note:
            self.notes.append(trips.note)
            if trips.warn:
                warn_user(trips.note)
        self.walk(body, prefix=f"{name}/body/", sub_scope=f"{base}_body", repeat=_mul(repeat, trips.count),
                  depth=depth + 1)
