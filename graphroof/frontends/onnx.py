"""ONNX frontend: any ``.onnx`` file -> :class:`~graphroof.graph.OpGraph`, weights never read.

* The file is loaded with ``load_external_data=False``: weight shapes and dtypes come from the initializers'
  metadata, so a model whose external data file is absent analyses the same.
* Shapes: see :mod:`graphroof.frontends.onnx_shapes` (user dims bound first, ONNX inference with data
  propagation, then onnxruntime's symbolic inference where gaps remain).  Dims nobody bound stay ``str``.
* Roles: initializers are weights, ``Constant`` outputs constants, graph inputs activations, and inputs /
  outputs named like a KV cache (``past_key_values.0.key``, ``present.0.value``) are KV cache.
* Op keys: ``onnx.<Op>`` for the default domain, ``<domain>.<Op>`` otherwise (``com.microsoft.MatMulNBits``).
* Scope: the torch dynamo exporter's ``pkg.torch.onnx.name_scopes`` / ``namespace`` metadata, else the node
  name's path (``/model/layers.0/self_attn/q_proj/MatMul`` -> ``model.layers.0.self_attn.q_proj``), else the
  module path in the name of a weight the node reads (``encoder.layer.3.output.dense.weight``).
* Control flow: If / Loop / Scan bodies are flattened into the graph under ``<scope>.<Node>_<attr>`` with
  ``attrs["repeat"]`` = trip count (the counting pass scales their cost by it); an unknown trip count is
  counted once, with a warning and a report note.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx
import onnx.inliner
from onnx import AttributeProto, TensorProto

from ..errors import FrontendError, GraphroofWarning, InputError
from ..graph import OpGraph, OpNode, Role, TensorSpec
from .onnx_shapes import TypeTable, bind_inputs, infer, iter_graphs, real_inputs, warn_unused_dims

__all__ = ["load_onnx", "op_key", "scope_of", "is_kv_name"]

_KV_RE = re.compile(r"past|present|key_cache|value_cache|kv_cache|cache_k|cache_v|key_values", re.I)
_NOT_KV_RE = re.compile(r"length|position|seqlen|seq_len|mask|step|index|indices", re.I)
_SKIP_ATTR = {AttributeProto.GRAPH, AttributeProto.GRAPHS, AttributeProto.TENSOR, AttributeProto.TENSORS,
              AttributeProto.SPARSE_TENSOR, AttributeProto.SPARSE_TENSORS, AttributeProto.TYPE_PROTO,
              AttributeProto.TYPE_PROTOS}
#: Integer GEMM / conv kernels: they run on the int8 units whatever dtype their scales have.
_INT_COMPUTE = {"MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv", "QGemm", "DynamicQuantizeMatMul",
                "MatMulIntegerToFloat", "QAttention"}
_ABSENT = TensorSpec((0,), "fp32")
#: Ops whose output aliases their first input (no copy): the output keeps the input's role.
_ALIAS = {"Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Dropout"}


def is_kv_name(name: str) -> bool:
    """True for tensor names of a KV cache (``past_key_values.3.value``, ``present.0.key``, ``cache_k``)."""
    return bool(_KV_RE.search(name)) and not _NOT_KV_RE.search(name)


def op_key(node: onnx.NodeProto) -> str:
    """``onnx.MatMul`` for the default domain, ``com.microsoft.GroupQueryAttention`` for others."""
    dom = node.domain
    return f"onnx.{node.op_type}" if dom in ("", "ai.onnx") else f"{dom}.{node.op_type}"


def _own_scope(node: onnx.NodeProto) -> str | None:
    """The module path *node* states (``""``: the root module), or ``None`` when it states nothing."""
    meta = {p.key: p.value for p in node.metadata_props} if node.metadata_props else {}
    scopes = meta.get("pkg.torch.onnx.name_scopes")
    if scopes:
        try:
            parts = ast.literal_eval(scopes)
            if isinstance(parts, list):  # [..., module path, op name]; "_empty_nn_module_stack..." = none
                mod = str(parts[-2]) if len(parts) >= 2 else ""
                return None if mod.startswith("_") else mod
        except (ValueError, SyntaxError):
            pass
    ns = meta.get("namespace")
    if ns:  # ": pkg.Model/layers.0: pkg.Block/layers.0.fc1: torch.nn.Linear/linear: aten.linear.default"
        mods = [seg.split(":")[0].strip() for seg in ns.split("/")]
        mods = [m for m in mods[:-1] if m]
        return mods[-1] if mods else ""
    parts = [p for p in node.name.split("/") if p]
    if node.name.startswith("/") or len(parts) > 1:  # "/model/layers.0/mlp/up_proj/MatMul", "/Relu"
        return ".".join(parts[:-1])
    return None


def scope_of(node: onnx.NodeProto) -> str:
    """The module path of *node* from exporter metadata or its name (``""`` when neither says)."""
    return _own_scope(node) or ""


_WEIGHT_SUFFIX = re.compile(r"\.(weight|bias|scale|scales|zero_points?|qweight|g_idx|[A-Za-z]*_(weight|bias))$")


def _weight_scope(name: str) -> str:
    """``model.layers.0.mlp.up_proj.weight`` -> ``model.layers.0.mlp.up_proj``; other names -> ``""``."""
    if "." not in name or "/" in name or not _WEIGHT_SUFFIX.search(name):
        return ""
    return name.rsplit(".", 1)[0]


# -- reading the file ---------------------------------------------------------------------------------------

def _read_model(path: Path) -> onnx.ModelProto:
    if path.is_dir():
        raise InputError(f"{path} is a directory, not an ONNX file; pass the .onnx file inside it")
    if not path.is_file():
        raise InputError(f"model file {str(path)!r} not found; check the path")
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from None
    if not head:
        raise FrontendError(f"{path} is empty (0 bytes); re-export or re-download the model")
    if head.startswith(b"version https://git-lfs"):
        raise FrontendError(f"{path} is a Git LFS pointer, not the model; fetch it with `git lfs pull`")
    if _looks_like_text(head):
        raise FrontendError(f"{path} is a text file, not a binary ONNX model (protobuf); export the model with "
                            "torch.onnx.export or onnx.save")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # google.protobuf DecodeError, RuntimeError from the C++ parser
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise FrontendError(f"{path} is not a readable ONNX model (truncated or not an ONNX protobuf: {msg}); "
                            "re-export or re-download it") from None
    if model.ir_version == 0 or not model.HasField("graph") or not model.opset_import:
        raise FrontendError(f"{path} is not a complete ONNX model (no ir_version, graph or opset_import: truncated "
                            "or another protobuf); re-export or re-download it")
    return model


def _looks_like_text(head: bytes) -> bool:
    """True when the first bytes are printable UTF-8 (a binary protobuf has control bytes early on)."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:  # only a multi-byte character cut at the end of the chunk is allowed
            return False
        text = head[:e.start].decode("utf-8")
    return all(c.isprintable() or c in "\n\r\t" for c in text)


def _check_versions(model: onnx.ModelProto, path: Path) -> int:
    known = onnx.defs.onnx_opset_version()
    opset = 0
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            opset = imp.version
    if opset > known:
        raise FrontendError(f"{path} uses ONNX opset {opset}, newer than the installed onnx {onnx.__version__} knows "
                            f"(up to {known}); upgrade it: pip install -U onnx")
    if model.ir_version > onnx.IR_VERSION:
        raise FrontendError(f"{path} has ONNX IR version {model.ir_version}, newer than the installed onnx "
                            f"{onnx.__version__} reads (up to {onnx.IR_VERSION}); upgrade it: pip install -U onnx")
    return opset


# -- building the graph -------------------------------------------------------------------------------------

def _plain(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    if isinstance(v, list):
        return tuple(_plain(x) for x in v)
    return v


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in node.attribute:
        if a.type in _SKIP_ATTR:
            continue
        out[a.name] = _plain(onnx.helper.get_attribute_value(a))
    return out


def _small_value(t: TensorProto) -> Any:
    """The value of a small inline tensor (trip counts, conditions); ``None`` when external or large."""
    if t.data_location == TensorProto.EXTERNAL or onnx.helper.tensor_dtype_to_np_dtype(t.data_type) is None:
        return None
    n = 1
    for d in t.dims:
        n *= d
    if n > 16:
        return None
    try:
        arr = onnx.numpy_helper.to_array(t)
    except Exception:  # noqa: BLE001 - unreadable value: treat as unknown
        return None
    return arr.reshape(-1).tolist()


def _mul(a: int | str, b: int | str) -> int | str:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if a == 1:
        return b
    if b == 1:
        return a
    return f"({a})*({b})"


class _Builder:
    def __init__(self, model: onnx.ModelProto, table: TypeTable, notes: list[str]):
        self.model = model
        self.table = table
        self.notes = notes
        self.graph = OpGraph()
        self.specs: dict[str, TensorSpec] = {}
        self.roles: dict[str, Role] = {}
        self.values: dict[str, Any] = {}
        self.names: set[str] = set()
        self.unknown_types: list[str] = []
        for g in iter_graphs(model.graph):
            for t in g.initializer:
                self.roles[t.name] = Role.WEIGHT
                if t.data_location != TensorProto.EXTERNAL and len(t.dims) <= 1:
                    self.values[t.name] = _small_value(t)
            for st in g.sparse_initializer:
                self.roles[st.values.name] = Role.WEIGHT
            for node in g.node:
                if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.output:
                    self.roles[node.output[0]] = Role.CONST
                    for a in node.attribute:
                        if a.name == "value":
                            self.values[node.output[0]] = _small_value(a.t)
                        elif a.name in ("value_int", "value_float"):
                            self.values[node.output[0]] = [onnx.helper.get_attribute_value(a)]
        top = model.graph
        for vi in real_inputs(top):
            self.roles[vi.name] = Role.KV_CACHE if is_kv_name(vi.name) else Role.ACTIVATION
        for vi in top.output:
            if is_kv_name(vi.name) and vi.name not in self.roles:
                self.roles[vi.name] = Role.KV_CACHE

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
            sc = _own_scope(n)
            if sc is None:
                sc = next((_weight_scope(x) for x in n.input if self.roles.get(x) is Role.WEIGHT and uses[x] == 1
                           and _weight_scope(x)), None)
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

    def walk(self, g: onnx.GraphProto, *, prefix: str = "", sub_scope: str | None = None,
             repeat: int | str = 1) -> None:
        scopes = self.scopes(g) if sub_scope is None else None
        for i, node in enumerate(g.node):
            local = node.name or f"{node.op_type}_{i}"
            name = self.unique(prefix + local)
            scope = sub_scope if scopes is None else scopes[i]
            ins = tuple(self.spec(x) if x else None for x in node.input)
            while ins and ins[-1] is None:
                ins = ins[:-1]
            if node.op_type in _ALIAS and ins and ins[0] is not None and ins[0].role is not Role.ACTIVATION:
                for o in node.output:  # a view of a weight (or of the KV cache) is still that weight in memory
                    self.roles.setdefault(o, ins[0].role)
            outs = [self.spec(o) if o else _ABSENT for o in node.output]
            while outs and outs[-1] is _ABSENT:
                outs.pop()
            attrs = _attrs(node)
            if repeat != 1:
                attrs["repeat"] = repeat
            if node.op_type in _INT_COMPUTE and ins and ins[0] is not None:
                attrs["compute_dtype"] = "int8" if ins[0].dtype in ("int8", "uint8") else ins[0].dtype
            self.graph.add_op(OpNode(name, op_key(node), ins, tuple(outs), attrs, scope),
                              inputs=list(node.input), outputs=list(node.output))
            if node.domain in ("", "ai.onnx") and node.op_type in ("If", "Loop", "Scan"):
                self.control_flow(node, name, scope, repeat)

    def control_flow(self, node: onnx.NodeProto, name: str, scope: str, repeat: int | str) -> None:
        subs = {a.name: a.g for a in node.attribute if a.type == AttributeProto.GRAPH}
        short = re.sub(r"\W", "_", name.rsplit("/", 1)[-1]).strip("_") or node.op_type
        base = f"{scope}.{short}" if scope else short
        if node.op_type == "If":
            cond = self.values.get(node.input[0]) if node.input else None
            then_g, else_g = subs.get("then_branch"), subs.get("else_branch")
            if cond:
                attr = "then_branch" if bool(cond[0]) else "else_branch"
            else:
                n_then = sum(len(x.node) for x in iter_graphs(then_g)) if then_g else 0
                n_else = sum(len(x.node) for x in iter_graphs(else_g)) if else_g else 0
                attr = "then_branch" if n_then >= n_else else "else_branch"
                other = "else_branch" if attr == "then_branch" else "then_branch"
                self.notes.append(f"If {name!r}: condition unknown before run time; counted its {attr} "
                                  f"({max(n_then, n_else)} ops), not its {other} ({min(n_then, n_else)} ops)")
            if subs.get(attr) is not None:
                self.walk(subs[attr], prefix=f"{name}/{attr}/", sub_scope=f"{base}_{attr}", repeat=repeat)
            return
        body = subs.get("body")
        if body is None:
            return
        trips: int | str | None = None
        if node.op_type == "Loop":
            m = self.values.get(node.input[0]) if node.input and node.input[0] else None
            trips = int(m[0]) if m else None
            what = "trip count"
        else:
            attrs = _attrs(node)
            n_scan = int(attrs.get("num_scan_inputs", 0))
            axes = list(attrs.get("scan_input_axes", ())) or [0] * n_scan
            scan_in = [x for x in node.input if x][-n_scan:] if n_scan else []
            if scan_in:
                shape = self.spec(scan_in[0]).shape
                ax = axes[0] % len(shape) if shape else 0
                trips = shape[ax] if shape and shape != (0,) else None
            what = "scan length"
        if trips is None:
            msg = (f"{node.op_type} {name!r}: {what} unknown before run time; counted one iteration "
                   "(multiply its body's cost by the real count)")
            warnings.warn(msg, GraphroofWarning, stacklevel=4)
            self.notes.append(msg)
            trips = 1
        self.walk(body, prefix=f"{name}/body/", sub_scope=f"{base}_body", repeat=_mul(repeat, trips))


def _producer(model: onnx.ModelProto) -> str:
    return " ".join(x for x in (model.producer_name, model.producer_version) if x) or "unknown"


def load_onnx(path: str | Path, *, dims: Mapping[str, int] | None = None,
              input_shapes: Mapping[str, Sequence[int]] | Sequence[Sequence[int]] | None = None,
              **ignored: Any) -> OpGraph:
    """Load an ``.onnx`` file into an OpGraph without reading its weights.

    Parameters
    ----------
    path : the ``.onnx`` file (its external data file may be absent).
    dims : values for the model's symbolic dims, ``{"batch": 8, "seq": 512}`` (``--dim``).
    input_shapes : ``{"input_ids": (1, 512)}`` or positional ``[(1, 3, 224, 224)]`` (``--input``).

    Dims nobody bound stay symbolic (``str``) in the shapes; binding them later (``graphroof.graph.bind``,
    or ``analyze(..., dims=...)``) is enough, and counting an unbound one raises ``UnboundDimError``.
    """
    path = Path(path).expanduser()
    model = _read_model(path)
    opset = _check_versions(model, path)
    if model.functions:
        try:
            model = onnx.inliner.inline_local_functions(model)
        except Exception as e:  # noqa: BLE001 - keep the calls as (unknown) ops then
            warnings.warn(f"{path.name}: could not inline its local functions ({e}); counting calls as ops",
                          GraphroofWarning, stacklevel=2)
    warn_unused_dims(dims, model)
    for flag in ("batch", "seq"):
        if ignored.get(flag) is not None:
            warnings.warn(f"--{flag} applies to zoo and config models; bind an ONNX model's dims with --dim NAME=VALUE "
                          "or --input NAME=SHAPE", GraphroofWarning, stacklevel=2)
    bound = bind_inputs(model, dims, input_shapes)
    notes: list[str] = []
    inferred, table = infer(model, notes)
    b = _Builder(inferred, table, notes)
    b.walk(inferred.graph)
    if b.unknown_types:
        notes.append(f"{len(b.unknown_types)} tensor(s) have no shape after inference (e.g. "
                     f"{b.unknown_types[0]!r}); counted as 0 bytes")
    g = b.graph
    g.name = path.stem
    g.nx.graph["name"] = path.stem
    external = sum(1 for t in model.graph.initializer if t.data_location == TensorProto.EXTERNAL)
    used = {n.domain for g2 in iter_graphs(model.graph) for n in g2.node}
    others = ", ".join(f"{i.domain} {i.version}" for i in model.opset_import
                       if i.domain not in ("", "ai.onnx") and i.domain in used)
    header = (f"ONNX file: producer {_producer(model)}, IR {model.ir_version}, opset {opset}"
              + (f" (+ {others})" if others else "")
              + f"; {len(model.graph.initializer)} weight tensors, not read"
              + (f" ({external} in external data)" if external else ""))
    g.meta.update({
        "capture": "onnx", "model": path.stem, "producer": _producer(model), "opset": opset,
        "ir_version": model.ir_version, "notes": [header, *notes],
    })
    if bound:
        g.meta["dims"] = dict(bound)
    return g
