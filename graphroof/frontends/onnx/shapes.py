"""Shapes for the ONNX frontend: bind user dims into the model, infer, and read back a name -> type table.

Order of work (cheapest first, each step only where the previous one left gaps):

1. user dims (``--dim batch=8``) and input overrides (``--input input_ids=1x512``) are written into the
   graph inputs (and into every symbolic dim elsewhere that they decide), so inference sees numbers;
2. ONNX shape inference with data propagation;
3. where a node output still has no shape or an unknown dim: onnxruntime's symbolic shape inference (knows the
   ``com.microsoft`` ops, keeps dims as expressions such as ``past_sequence_length + 1``);
4. an op neither knows (a custom domain) gets its first input's shape, and inference is re-run from there;
   each guess is reported as a note.

Everything here works on the weights' metadata only (initializer dims and dtypes), never on their data.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto

from ...errors import FrontendError
from .bind import bind_inputs, iter_graphs, normalize_dim, real_inputs
from .fold import MAX_ELEMS, fold_values, small_value, to_initializer

__all__ = ["TypeTable", "ONNX_DTYPES", "bind_inputs", "infer", "real_inputs", "iter_graphs", "normalize_dim", "precheck"]

#: ONNX TensorProto element type -> graphroof canonical dtype.
ONNX_DTYPES: dict[int, str] = {
    TensorProto.FLOAT: "fp32", TensorProto.UINT8: "uint8", TensorProto.INT8: "int8",
    TensorProto.UINT16: "uint16", TensorProto.INT16: "int16", TensorProto.INT32: "int32",
    TensorProto.INT64: "int64", TensorProto.STRING: "string", TensorProto.BOOL: "bool",
    TensorProto.FLOAT16: "fp16", TensorProto.DOUBLE: "fp64", TensorProto.UINT32: "uint32",
    TensorProto.UINT64: "uint64", TensorProto.COMPLEX64: "complex64", TensorProto.COMPLEX128: "complex128",
    TensorProto.BFLOAT16: "bf16", 17: "fp8_e4m3", 18: "fp8_e4m3", 19: "fp8_e5m2", 20: "fp8_e5m2",
    21: "uint4", 22: "int4", 23: "fp4", 24: "fp8",
}

#: name -> (canonical dtype, shape or None when even the rank is unknown).
TypeTable = dict[str, tuple[str, "tuple[int | str, ...] | None"]]


_TERM = r"[A-Za-z]*(?:\.\.\.)?[A-Za-z]*"
_EINSUM = re.compile(rf"^{_TERM}(?:,{_TERM})*(?:->{_TERM})?$")
#: No tensor has this many dims; a larger axis attribute is malformed (and crashes ONNX's inference).
_MAX_AXIS = 1 << 16


def precheck(model: onnx.ModelProto) -> None:
    """Refuse, before shape inference sees them, attributes known to hang or crash it: a malformed ``Einsum``
    equation, an ``axis`` / ``axes`` beyond any rank."""
    for g in iter_graphs(model.graph):
        for node in g.node:
            where = f"{node.name or node.output[0] if node.output else node.op_type} ({node.op_type})"
            for a in node.attribute:
                if node.op_type == "Einsum" and a.name == "equation":
                    eq = a.s.decode("utf-8", errors="replace") if isinstance(a.s, bytes) else str(a.s)
                    if len(eq) > 1000 or not _EINSUM.match(re.sub(r"\s", "", eq)):
                        raise FrontendError(f"{where}: Einsum equation {eq[:80]!r} is malformed (letters, ',', "
                                            "'->' and '...' only)")
                elif a.name in ("axis", "axes") and a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS):
                    vals = [a.i] if a.type == onnx.AttributeProto.INT else list(a.ints)
                    bad = next((v for v in vals if abs(v) > _MAX_AXIS), None)
                    if bad is not None:
                        raise FrontendError(f"{where}: attribute {a.name} = {bad} is out of range for any tensor")


def _read_types(model: onnx.ModelProto) -> TypeTable:
    table: TypeTable = {}
    for g in iter_graphs(model.graph):
        inits = set()
        for t in g.initializer:
            inits.add(t.name)
            table[t.name] = (_dtype(t.data_type), tuple(int(d) for d in t.dims))
        for st in g.sparse_initializer:
            table[st.values.name] = (_dtype(st.values.data_type), tuple(int(d) for d in st.dims))
        for vi in (*g.input, *g.value_info, *g.output):
            if vi.name in inits:
                continue
            entry = _vi_type(vi)
            if entry is not None:
                table[vi.name] = entry
        for node in g.node:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.output:
                table[node.output[0]] = _constant_type(node)
    return table


def _dtype(elem_type: int) -> str:
    return ONNX_DTYPES.get(elem_type, "uint8")


def _vi_type(vi: onnx.ValueInfoProto) -> tuple[str, tuple[int | str, ...] | None] | None:
    t = vi.type
    if not t.HasField("tensor_type"):
        return None
    tt = t.tensor_type
    if tt.elem_type == 0:
        return None
    if not tt.HasField("shape"):
        return _dtype(tt.elem_type), None
    shape: list[int | str] = []
    for axis, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value"):
            shape.append(int(d.dim_value))
        elif d.dim_param:
            shape.append(normalize_dim(d.dim_param))
        else:
            shape.append(f"{_ident(vi.name)}_d{axis}")
    return _dtype(tt.elem_type), tuple(shape)


def _ident(name: str) -> str:
    return re.sub(r"\W+", "_", name).strip("_") or "t"


_SCALAR_ATTRS = {"value_float": ("fp32", ()), "value_int": ("int64", ()), "value_string": ("string", ()),
                 "value_floats": ("fp32", 1), "value_ints": ("int64", 1), "value_strings": ("string", 1)}


def _constant_type(node: onnx.NodeProto) -> tuple[str, tuple[int, ...]]:
    for a in node.attribute:
        if a.name == "value":
            return _dtype(a.t.data_type), tuple(int(d) for d in a.t.dims)
        if a.name == "sparse_value":
            return _dtype(a.sparse_tensor.values.data_type), tuple(int(d) for d in a.sparse_tensor.dims)
        if a.name in _SCALAR_ATTRS:
            dt, rank = _SCALAR_ATTRS[a.name]
            if rank == ():
                return dt, ()
            return dt, (len(a.floats) or len(a.ints) or len(a.strings),)
    return "fp32", ()


def _gaps(model: onnx.ModelProto, table: TypeTable) -> list[onnx.NodeProto]:
    """Nodes with an output whose shape is unknown or holds an unnamed dynamic dim."""
    out = []
    for g in iter_graphs(model.graph):
        for node in g.node:
            for o in node.output:
                if not o:
                    continue
                e = table.get(o)
                if e is None or e[1] is None or any(isinstance(d, str) and d.startswith(("unk__", _ident(o) + "_d"))
                                                    for d in e[1]):
                    out.append(node)
                    break
    return out


def _onnx_infer(model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception as e:  # onnx raises InferenceError / ValidationError / RuntimeError
        if "bad_alloc" in str(e):  # C++ out of memory: the guard reports it with its memory budget
            raise MemoryError(str(e)) from None
        raise FrontendError(f"ONNX shape inference failed: {str(e).splitlines()[0]}; check the model with "
                            "onnx.checker.check_model") from None


def _symbolic_infer(model: onnx.ModelProto, notes: list[str]) -> onnx.ModelProto | None:
    """onnxruntime's symbolic shape inference, driven step by step so a failure writes no temp file."""
    SymbolicShapeInference = ssi_class()
    if SymbolicShapeInference is None:
        notes.append("some shapes stayed unknown after ONNX shape inference and onnxruntime is not installed "
                     "(pip install onnxruntime) for its symbolic shape inference")
        return None
    log = logging.getLogger("onnxruntime.tools.symbolic_shape_infer")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        ssi = SymbolicShapeInference(2**31 - 1, True, True, 0)
        ssi._preprocess(model)
        rounds = 0
        while ssi.run_:  # it re-runs while new symbolic dims appear; a malformed graph can make that endless
            rounds += 1
            if rounds > _SYMBOLIC_ROUNDS:
                raise RuntimeError(f"no fixed point after {_SYMBOLIC_ROUNDS} rounds")
            ssi._infer_impl()
        ssi._update_output_from_vi()
        return ssi.out_mp_
    except Exception as e:  # its failures are plain Exceptions / asserts; keep ONNX's shapes then
        notes.append(f"onnxruntime symbolic shape inference stopped ({type(e).__name__}: "
                     f"{str(e).splitlines()[0] if str(e) else 'no message'}); kept ONNX's shapes")
        return None
    finally:
        log.setLevel(level)


#: Rounds of onnxruntime's symbolic inference before giving up (it needs 1-3 on real models).
_SYMBOLIC_ROUNDS = 8


def _placeholder(d: int | str, name: str) -> bool:
    """A dim nobody named: ONNX's ``unk__N`` or the ``<tensor>_dN`` graphroof gives a bare unknown dim."""
    return isinstance(d, str) and (d.startswith("unk__") or d.startswith(_ident(name) + "_d"))


def _merge(table: TypeTable, new: TypeTable) -> None:
    """Fill what *table* does not know from *new*: missing shapes, numbers for symbolic dims, names for dims
    nobody named."""
    for name, (dt, shape) in new.items():
        old = table.get(name)
        if old is None or old[1] is None:
            table[name] = (dt, shape)
        elif shape is not None and len(shape) == len(old[1]):
            merged = tuple(n if isinstance(o, str) and (isinstance(n, int) or _placeholder(o, name)
                                                        and not _placeholder(n, name)) else o
                           for o, n in zip(old[1], shape))
            table[name] = (old[0], merged)


_SSI: list[Any] = []


def ssi_class() -> Any:
    """onnxruntime's ``SymbolicShapeInference`` class (``None`` without onnxruntime), loaded from its file:
    ``import onnxruntime.tools`` would import torch (3 s) for a helper this never uses.  Cached."""
    if not _SSI:
        cls = None
        try:
            import importlib.util
            import os
            import sys

            spec = importlib.util.find_spec("onnxruntime")
            locs = list(spec.submodule_search_locations or []) if spec else []
            path = next((p for p in (f"{loc}/tools/symbolic_shape_infer.py" for loc in locs)
                         if os.path.exists(p)), None)
            if path:
                mspec = importlib.util.spec_from_file_location("graphroof._ort_symbolic_shape_infer", path)
                if mspec is None or mspec.loader is None:
                    raise ImportError(f"cannot load {path}")
                mod = importlib.util.module_from_spec(mspec)
                sys.modules[mspec.name] = mod
                mspec.loader.exec_module(mod)
                cls = mod.SymbolicShapeInference
        except Exception:  # noqa: BLE001 - missing or changed onnxruntime: ONNX's inference only
            cls = None
        _SSI.append(cls)
    return _SSI[0]


def ssi_loaded() -> bool:
    return bool(_SSI)


def _known_ops() -> set[tuple[str, str]]:
    """(domain, op) pairs onnxruntime's symbolic shape inference handles (empty without onnxruntime)."""
    cls = ssi_class()
    if cls is None:
        return set()
    try:
        ops = cls(2**31 - 1, True, True, 0).dispatcher_
    except Exception:  # noqa: BLE001 - no onnxruntime, or its internals moved: rely on ONNX's schemas
        return set()
    return {(d, op) for op in ops for d in ("", "com.microsoft")}


def _unknown_op(node: onnx.NodeProto, ort_ops: set[tuple[str, str]]) -> bool:
    dom = "" if node.domain == "ai.onnx" else node.domain
    if (dom, node.op_type) in ort_ops:
        return False
    try:
        return not onnx.defs.has(node.op_type, dom)
    except Exception:  # noqa: BLE001
        return True


class NeedsSymbolic(Exception):
    """Raised by :func:`infer` with ``allow_symbolic=False`` when onnxruntime's step is needed: the caller
    loads it (:func:`ssi_class`, once per process) and runs :func:`infer` again."""


def infer(model: onnx.ModelProto, notes: list[str], allow_symbolic: bool = True) -> tuple[TypeTable, dict[str, Any]]:
    """Run the inference steps of the module docstring; returns the type table and the folded small values
    (name -> numpy array: shape arithmetic, trip counts, conditions)."""
    inferred = _onnx_infer(model)
    table = _read_types(inferred)
    values = _initial_values(model)
    if not _gaps(inferred, table):
        return table, values
    inferred = _fold_loop(model, inferred, table, values)
    if not _gaps(inferred, table):
        return table, values
    if not allow_symbolic and not ssi_loaded():
        raise NeedsSymbolic()
    ort_ops = _known_ops()
    inferred = _guess_loop(inferred, table, notes, lambda n: _unknown_op(n, ort_ops))
    if _gaps(inferred, table):
        sym = _symbolic_infer(inferred, notes)
        if sym is not None:
            _merge(table, _read_types(sym))
        else:  # no onnxruntime help: every op ONNX has no schema for gets its first input's shape
            inferred = _guess_loop(inferred, table, notes, lambda n: _unknown_op(n, set()))
    return table, values


def _initial_values(model: onnx.ModelProto) -> dict[str, Any]:
    """Small inline initializers and Constant outputs of every graph, by name."""
    values: dict[str, Any] = {}
    for vi in real_inputs(model.graph):  # an empty input's value is known from its shape alone (axes = [])
        e = _vi_type(vi)
        if e and e[1] is not None and 0 in e[1] and all(isinstance(d, int) for d in e[1]):
            np_dt = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
            values[vi.name] = np.zeros(e[1], dtype=np_dt)
    for g in iter_graphs(model.graph):
        for t in g.initializer:
            v = small_value(t)
            if v is not None:
                values[t.name] = v
        for node in g.node:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.output:
                v = _constant_value(node)
                if v is not None:
                    values[node.output[0]] = v
    return values


def _constant_value(node: onnx.NodeProto) -> Any:
    for a in node.attribute:
        if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
            return small_value(a.t)
        if a.name in ("value_int", "value_ints", "value_float", "value_floats") and \
                len(a.ints) + len(a.floats) <= MAX_ELEMS:
            v = onnx.helper.get_attribute_value(a)
            return np.array(v, dtype=np.int64 if "int" in a.name else np.float32)
    return None


def _fold_loop(model: onnx.ModelProto, inferred: onnx.ModelProto, table: TypeTable,
               values: dict[str, Any]) -> onnx.ModelProto:
    """Fold shape arithmetic (see :mod:`.fold`) and re-infer a copy where it is constant, a few rounds."""
    opsets = {(i.domain if i.domain != "ai.onnx" else ""): i.version for i in model.opset_import}

    def static_shape(name: str) -> tuple[int, ...] | None:
        e = table.get(name)
        if e is None or e[1] is None or any(not isinstance(d, int) or d < 0 for d in e[1]):
            return None
        return tuple(int(d) for d in e[1])

    inputs = {vi.name for vi in real_inputs(model.graph)}
    folded_all: dict[str, Any] = {k: v for k, v in values.items() if k in inputs}  # empty inputs
    for rnd in range(4):
        folded = fold_values(model.graph, opsets, static_shape, values)
        if not folded and (rnd > 0 or not folded_all):
            break
        folded_all.update(folded)
        trial = onnx.ModelProto()
        trial.CopyFrom(model)
        keep = [n for n in trial.graph.node if not (n.output and all(o in folded_all for o in n.output if o))]
        del trial.graph.node[:]
        trial.graph.node.extend(keep)
        kept_inputs = [vi for vi in trial.graph.input if vi.name not in folded_all]
        del trial.graph.input[:]
        trial.graph.input.extend(kept_inputs)
        have = {t.name for t in trial.graph.initializer}
        for name, arr in folded_all.items():
            t = to_initializer(name, arr)
            if t is not None and name not in have:
                trial.graph.initializer.append(t)
                if trial.ir_version < 4:
                    trial.graph.input.append(onnx.helper.make_tensor_value_info(name, t.data_type, list(t.dims)))
        try:
            new = _onnx_infer(trial)
        except FrontendError:
            break
        _merge(table, _read_types(new))
        if not _gaps(inferred, table):
            break
    return inferred


def _guess_loop(model: onnx.ModelProto, table: TypeTable, notes: list[str], which) -> onnx.ModelProto:
    """Guess the outputs of the ops *which* selects, then let ONNX inference continue from them; repeat."""
    for _ in range(64):
        if not _guess_unknown(model, table, notes, which):
            break
        model = _onnx_infer(model)
        _merge(table, _read_types(model))
    return model


def _guess_unknown(model: onnx.ModelProto, table: TypeTable, notes: list[str], which) -> bool:
    """Give each output with no type at all the type of its node's first typed input; True if any."""
    changed = False
    for g in iter_graphs(model.graph):
        for node in g.node:
            missing = [o for o in node.output if o and (o not in table or table[o][1] is None)]
            if not missing or not which(node):
                continue
            src = node.input[0] if node.input and table.get(node.input[0]) else None
            if src is None:
                continue
            dt, src_shape = table[src]
            if src_shape is None:
                continue
            shape = src_shape
            elem = next((k for k, v in ONNX_DTYPES.items() if v == dt), TensorProto.FLOAT)
            for o in missing:
                table[o] = (dt, shape)
                g.value_info.append(onnx.helper.make_tensor_value_info(o, elem, list(shape)))
            notes.append(f"no shape inference knows {node.domain or 'ai.onnx'}.{node.op_type} (node "
                         f"{node.name or node.output[0]!r}); assumed its output{'s' if len(missing) > 1 else ''} "
                         f"have its first input's shape {'x'.join(map(str, shape)) or 'scalar'}")
            changed = True
    return changed
