"""PyTorch frontend: an ``nn.Module`` (or a ``"pkg.module:factory"``) -> :class:`OpGraph`, with no weights
materialised and no real math run.

Captures (``capture=``):

* ``"export"``: ``torch.export.export(..., strict=False)``; shapes and dtypes from each node's
  ``meta["val"]``, the layer from ``meta["nn_module_stack"]``.  High-level ops (``linear``,
  ``scaled_dot_product_attention``, ``layer_norm``, ``conv2d`` ...) stay whole in its pre-dispatch graph.
* ``"dispatch"``: op by op over fake tensors (:mod:`graphroof.frontends.torch_dispatch`), with the same
  high-level ops kept whole.  Much faster on deep models and tolerant of data-dependent Python.
* ``"auto"`` (default): ``export`` for models of up to :data:`EXPORT_MAX_MODULES` submodules, ``dispatch``
  for deeper ones (exporting a 32-layer LLM takes ~4 s against ~0.6 s op by op); when export fails the
  dispatch capture is tried and the report says so.  If every capture fails: one error with the last reason.

Inputs: tensors (real, meta or fake: only shapes and dtypes are used) or shapes, ``(shape, dtype)`` pairs or
TensorSpecs; positional (a tuple / list) or by name (a dict).  Shapes without a dtype are int64 for index-like
inputs (``input_ids``, ``*_mask``, ``*_ids``, or a model whose first layer is an ``nn.Embedding``) and the
model's floating dtype otherwise.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import logging
import operator
import os
import sys
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ..errors import FrontendError, GraphroofError, InputError
from ..graph import OpGraph, Role, TensorSpec, resolve_dim
from .torch_common import GraphBuilder, Ref, bind, clean_scope, is_view_op, one_line, op_key, spec_of, storage_key
from .torch_dispatch import MAYBE_ALIAS, capture_dispatch

__all__ = ["load_module", "load_factory", "EXPORT_MAX_MODULES", "CAPTURES"]

#: ``capture="auto"`` exports models with at most this many submodules and records deeper ones op by op.
EXPORT_MAX_MODULES = 256
CAPTURES = ("auto", "export", "dispatch")
CAPTURE_NAMES = {"export": "torch.export (non-strict)", "dispatch": "dispatch (fake tensors)"}
_INDEX_NAMES = ("input_ids", "token_type_ids", "position_ids", "attention_mask", "labels", "ids", "indices",
                "tokens", "cache_position")
_TORCH_DIR = str(Path(torch.__file__).parent)


# -- inputs ---------------------------------------------------------------------------------------------------

def _model_device_dtype(module: torch.nn.Module) -> tuple[torch.device, torch.dtype]:
    device, dtype = None, None
    for t in (*module.parameters(), *module.buffers()):
        device = device or t.device
        if dtype is None and t.is_floating_point():
            dtype = t.dtype
        if device is not None and dtype is not None:
            break
    return device or torch.device("cpu"), dtype or torch.float32


def _is_index_input(name: str | None, module: torch.nn.Module, position: int) -> bool:
    if name and (name in _INDEX_NAMES or name.endswith(("_ids", "_mask", "_indices", "_index"))):
        return True
    if position == 0:
        first = next((m for m in module.modules() if not list(m.children())), None)
        return isinstance(first, (torch.nn.Embedding, torch.nn.EmbeddingBag))
    return False


def _as_shape(v: Any, dims: Mapping[str, int] | None) -> tuple[int, ...] | None:
    if isinstance(v, torch.Size) or (isinstance(v, (tuple, list)) and all(isinstance(d, (int, str)) for d in v)
                                     and not any(isinstance(d, bool) for d in v)):
        return tuple(resolve_dim(d, dims) for d in v)
    return None


def _forward_names(module: torch.nn.Module) -> list[str]:
    import inspect

    try:
        params = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _make_input(v: Any, name: str | None, pos: int, module, fake_mode, device, fdtype, dims, kv_inputs):
    """One input -> (fake tensor or plain value, Ref or None)."""
    role = Role.KV_CACHE if name is not None and name in kv_inputs else Role.ACTIVATION
    if isinstance(v, torch.Tensor):
        if v.device != device:  # e.g. a CPU example for a meta model: same shape and dtype on its device
            with fake_mode:
                t = torch.empty(v.shape, dtype=v.dtype, device=device)
        else:
            t = fake_mode.from_tensor(v) if not isinstance(v, torch._subclasses.FakeTensor) else v
    else:
        dtype = None
        if isinstance(v, TensorSpec):
            shape, dtype = tuple(resolve_dim(d, dims) for d in v.shape), v.dtype
        elif isinstance(v, tuple) and len(v) == 2 and not isinstance(v[0], (int, str)) and \
                _as_shape(v[0], dims) is not None and (v[1] is None or isinstance(v[1], (str, torch.dtype))):
            shape, dtype = _as_shape(v[0], dims), v[1]
        else:
            shape = _as_shape(v, dims)
            if shape is None:
                return v, None  # a plain argument (flag, number, None)
        if isinstance(dtype, str):
            from ..dtypes import canonical_dtype

            dtype = _TORCH_DTYPES.get(canonical_dtype(dtype))
            if dtype is None:
                raise InputError(f"input {name or pos}: dtype {v[1]!r} has no torch equivalent")
        if dtype is None:
            dtype = torch.int64 if _is_index_input(name, module, pos) else fdtype
        if any(d < 0 for d in shape):
            raise InputError(f"input {name or pos}: negative dimension in shape {shape}")
        with fake_mode:
            t = torch.empty(shape, dtype=dtype, device=device)
    return t, Ref(spec_of(t, role), name or f"input_{pos}")


_TORCH_DTYPES = {"fp64": torch.float64, "fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
                 "int64": torch.int64, "int32": torch.int32, "int16": torch.int16, "int8": torch.int8,
                 "uint8": torch.uint8, "bool": torch.bool, "fp8_e4m3": torch.float8_e4m3fn,
                 "fp8_e5m2": torch.float8_e5m2, "complex64": torch.complex64}


def prepare_inputs(module, inputs, input_shapes, dims, fake_mode, kv_inputs=()):
    """-> (args, kwargs, refs by id, description) with fake tensors on the model's device."""
    if inputs is None:
        inputs = input_shapes
    if inputs is None:
        raise InputError("an nn.Module needs example inputs: pass inputs=(tensor, ...) or shapes such as "
                         "inputs=[(1, 3, 224, 224)] (API), or --input 1x3x224x224 (CLI)")
    device, fdtype = _model_device_dtype(module)
    names = _forward_names(module)
    if names and names[0] == "self":
        names = names[1:]
    if isinstance(inputs, (torch.Tensor, TensorSpec)) or _as_shape(inputs, dims) is not None:
        inputs = [inputs]
    args, kwargs, refs = [], {}, {}
    if isinstance(inputs, Mapping):
        items = list(inputs.items())
    elif isinstance(inputs, (list, tuple)):
        items = [(names[i] if i < len(names) else None, v) for i, v in enumerate(inputs)]
    else:
        raise InputError(f"inputs must be a tensor, a shape, a list / tuple or a dict, not {type(inputs).__name__}")
    for pos, (name, v) in enumerate(items):
        t, ref = _make_input(v, name, pos, module, fake_mode, device, fdtype, dims, set(kv_inputs))
        if ref is not None:
            refs[id(t)] = (t, ref)
        else:  # an object holding tensors (a transformers Cache ...): name them, KV when it is a cache
            kv = (name in set(kv_inputs)) or "cache" in type(t).__name__.lower() or "past_key" in str(name)
            for i, nt in enumerate(_nested_tensors(t)):
                refs[id(nt)] = (nt, Ref(spec_of(nt, Role.KV_CACHE if kv else Role.ACTIVATION), f"{name or pos}.{i}"))
        if isinstance(inputs, Mapping):
            kwargs[name] = t
        else:
            args.append(t)
    desc = ", ".join(f"{r.name}={r.spec}" for _, r in refs.values())
    return tuple(args), kwargs, refs, desc


def _nested_tensors(obj: Any, depth: int = 4) -> list[torch.Tensor]:
    """Tensors held by a plain input object (lists, dicts, attributes), e.g. a KV cache's keys and values."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if depth == 0 or obj is None or isinstance(obj, (str, bytes, int, float, bool, torch.nn.Module)):
        return []
    if isinstance(obj, dict):
        items = list(obj.values())
    elif isinstance(obj, (list, tuple, set)):
        items = list(obj)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        items = list(vars(obj).values())
    else:
        return []
    out: list[torch.Tensor] = []
    for it in items:
        out.extend(_nested_tensors(it, depth - 1))
    return out


# -- torch.export capture -------------------------------------------------------------------------------------

def _val_refs(node, name: str, role: Role) -> Any:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return Ref(spec_of(val, role), name)
    if isinstance(val, (list, tuple)):
        return [Ref(spec_of(v, role), f"{name}:{i}") if isinstance(v, torch.Tensor) else None
                for i, v in enumerate(val)]
    return None


def _walk(gm: torch.fx.GraphModule, env: dict[str, Any], b: GraphBuilder, scope_prefix: str = "") -> list[Any]:
    """Append gm's ops to the builder; *env* maps fx node names to Refs.  Returns the graph's outputs."""
    outputs: list[Any] = []

    def lookup(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return env.get(a.name)
        if isinstance(a, (list, tuple)):
            return [lookup(x) for x in a]
        return a

    for n in gm.graph.nodes:
        if n.op in ("placeholder", "get_attr"):
            continue
        if n.op == "output":
            outputs = lookup(n.args[0])
            continue
        if n.op != "call_function":
            raise FrontendError(f"unsupported node {n.op} {n.target}")
        tgt = n.target
        if tgt is operator.getitem:
            seq = env.get(n.args[0].name)
            env[n.name] = seq[n.args[1]] if isinstance(seq, (list, tuple)) else None
            continue
        if isinstance(tgt, torch._ops.HigherOrderOperator):
            sub_i = next((i for i, a in enumerate(n.args) if isinstance(a, torch.fx.Node) and a.op == "get_attr"),
                         None)
            if tgt.__name__ not in ("wrap_with_set_grad_enabled", "wrap_with_autocast") or sub_i is None:
                raise FrontendError(f"torch.export produced a {tgt.__name__} region (control flow), "
                                    "which this capture does not inline")
            sub = getattr(gm, n.args[sub_i].target)
            phs = [p for p in sub.graph.nodes if p.op == "placeholder"]
            sub_env = {p.name: lookup(a) for p, a in zip(phs, n.args[sub_i + 1:])}
            res = _walk(sub, sub_env, b)
            env[n.name] = res
            continue
        if not isinstance(tgt, torch._ops.OpOverload):
            if isinstance(n.meta.get("val"), torch.Tensor):
                raise FrontendError(f"torch.export produced a call to {tgt!r}, which is not an ATen op")
            continue
        val = n.meta.get("val")
        if val is None or (isinstance(val, (list, tuple)) and not any(isinstance(v, torch.Tensor) for v in val)):
            continue  # assertions, shape queries
        bound = bind(tgt, [lookup(a) for a in n.args], {k: lookup(v) for k, v in n.kwargs.items()})
        in_refs = [v for _, _, v in bound if isinstance(v, Ref)]
        role = in_refs[0].spec.role if in_refs and is_view_op(tgt) else Role.ACTIVATION
        key = op_key(tgt)
        if key == "aten.cat" and any(r.spec.role is Role.KV_CACHE for _, _, v in bound
                                     for r in (v if isinstance(v, list) else []) if isinstance(r, Ref)):
            role = Role.KV_CACHE
        out = _val_refs(n, n.name, role)
        env[n.name] = out
        outs = [o for o in (out if isinstance(out, list) else [out]) if o is not None]
        extra = {}
        if key in MAYBE_ALIAS:
            ins = [a.meta.get("val") for a in n.args if isinstance(a, torch.fx.Node)]
            if ins and isinstance(val, torch.Tensor) and storage_key(val) == storage_key(ins[0]):
                extra["alias"] = True
        stack = n.meta.get("nn_module_stack") or {}
        scope = clean_scope(list(stack.values())[-1][0]) if stack else ""
        b.add(key, bound, outs, scope, name=b.fresh(n.name), extra=extra)
    return outputs if isinstance(outputs, list) else [outputs]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """torch.export logs warnings and prints partial graphs when it fails; the caller reports the failure."""
    level = logging.root.manager.disable
    sink = io.StringIO()
    logging.disable(logging.ERROR)
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            yield
    finally:
        logging.disable(level)


def capture_export(module, args, kwargs, *, input_refs, name, meta, causal_masks=False) -> OpGraph:
    with torch.no_grad(), _quiet():
        ep = torch.export.export(module, args, kwargs, strict=False)
    b = GraphBuilder(name, meta)
    env: dict[str, Any] = {}
    user = [r for _, r in input_refs.values()]
    by_name = {r.name: r for r in user}
    ui = 0
    kinds = torch.export.graph_signature.InputKind
    for spec in ep.graph_signature.input_specs:
        node = next(n for n in ep.graph.nodes if n.op == "placeholder" and n.name == spec.arg.name)
        if spec.kind == kinds.USER_INPUT:
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor):
                r = by_name.get(spec.arg.name) or (user[ui] if ui < len(user) else Ref(spec_of(val), spec.arg.name))
                env[node.name] = Ref(r.spec, r.name)
                ui += 1
            continue
        role = Role.WEIGHT if spec.kind == kinds.PARAMETER else Role.CONST
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            env[node.name] = Ref(spec_of(val, role), spec.target or node.name)
    _walk(ep.graph_module, env, b)
    g = b.graph
    if causal_masks:
        g = g.map_ops(_mark_causal_masks)
    return g


def _mark_causal_masks(op):
    from dataclasses import replace

    if op.op == "aten.scaled_dot_product_attention" and op.input(3) is not None:
        m, q, k = op.inputs[3], op.inputs[0], op.inputs[1]
        if m.rank >= 2 and tuple(m.shape[-2:]) == (q.shape[-2], k.shape[-2]):
            return replace(op, attrs={**op.attrs, "mask_causal": True, "mask_align": "bottom_right"})
    return op


# -- entry points -----------------------------------------------------------------------------------------------

def _user_frame(exc: BaseException) -> str:
    """``file.py:42`` of the innermost frame outside torch, where the model's own code raised."""
    where = ""
    for fs in traceback.extract_tb(exc.__traceback__):
        if not fs.filename.startswith(_TORCH_DIR) and "/graphroof/" not in fs.filename.replace(os.sep, "/"):
            where = f"{Path(fs.filename).name}:{fs.lineno}"
    return where


def _reason(exc: BaseException) -> str:
    text = one_line(exc)
    if "DataDependent" in type(exc).__name__ or "_local_scalar_dense" in text or "cannot be called on meta" in text:
        text += " (forward reads a tensor's value, e.g. .item() or `if x.any()`; graphroof traces without data)"
    where = _user_frame(exc)
    return f"{text} (at {where})" if where else text


def _count_modules(module: torch.nn.Module) -> int:
    return sum(1 for _ in module.modules())


def _attention_notes(g: OpGraph) -> None:
    masks = [op for op in g.ops() if "scaled_dot_product" in op.op and op.input(3) is not None]
    if not masks:
        return
    causal = sum(1 for op in masks if op.attrs.get("mask_causal"))
    if causal:
        g.meta["notes"].append(f"{causal} attention op(s) with an explicit [.., L, S] mask counted as causal "
                               "(bottom-right aligned): the model is a causal LM, whose masks for one unpadded "
                               "prompt are causal")
    if causal < len(masks):
        g.meta["notes"].append(f"{len(masks) - causal} attention op(s) with an explicit mask counted as the full "
                               "L x S square (graphroof cannot see mask values)")


def load_module(module: Any, inputs: Any = None, *, input_shapes: Any = None, dims: Mapping[str, int] | None = None,
                capture: str = "auto", kv_inputs: tuple[str, ...] | list[str] = (), causal_masks: bool = False,
                name: str | None = None, notes: list[str] | None = None, **ignored: Any) -> OpGraph:
    """Trace *module* on example *inputs* into an OpGraph (no weights copied, no real math).

    *inputs*: tensors / shapes / ``(shape, dtype)`` / TensorSpecs, positional (tuple, list) or named (dict);
    *input_shapes* is used when *inputs* is None (the CLI's ``--input``).  *dims* resolves symbolic dims in
    shapes.  *capture*: ``auto`` | ``export`` | ``dispatch`` (see the module docstring).  *kv_inputs*: names
    of inputs that are KV caches (their bytes count as KV-cache traffic).  *causal_masks*: explicit attention
    masks of shape ``[..., L, S]`` are causal (a causal LM's masks), counted as such.
    """
    if not isinstance(module, torch.nn.Module):
        raise InputError(f"expected a torch.nn.Module, got {type(module).__name__}")
    if capture not in CAPTURES:
        raise InputError(f"capture {capture!r} unknown; use one of {', '.join(CAPTURES)}")
    name = name or type(module).__name__
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    args, kwargs, refs, desc = prepare_inputs(module, inputs, input_shapes, dims, fake_mode, kv_inputs)
    if capture == "auto":
        order = ["export", "dispatch"] if _count_modules(module) <= EXPORT_MAX_MODULES else ["dispatch"]
    else:
        order = [capture]
    notes = list(notes or [])
    training = {m: m.training for m in module.modules()}
    module.eval()
    errors: list[str] = []
    try:
        for how in order:
            meta = {"capture": CAPTURE_NAMES[how], "model": name, "inputs": desc, "notes": list(notes)}
            if errors:
                meta["notes"].append(f"torch.export failed ({errors[-1]}); captured op by op instead")
            elif capture == "auto" and how == "dispatch":
                meta["notes"].append(f"captured op by op: {_count_modules(module)} submodules > "
                                     f"{EXPORT_MAX_MODULES} (torch.export is slow on deep models; "
                                     "capture='export' forces it)")
            try:
                if how == "export":
                    g = capture_export(module, args, kwargs, input_refs=refs, name=name, meta=meta,
                                       causal_masks=causal_masks)
                else:
                    g = capture_dispatch(module, args, kwargs, fake_mode=fake_mode, input_refs=refs, name=name,
                                         meta=meta, causal_masks=causal_masks)
                _attention_notes(g)
                return g
            except GraphroofError:
                raise
            except (Exception, RecursionError) as e:  # noqa: BLE001 - any failure of the user's forward
                errors.append(_reason(e))
    finally:
        for m, t in training.items():
            m.training = t
    tried = " and ".join(CAPTURE_NAMES[h] for h in order)
    raise FrontendError(f"could not trace {name} with inputs ({desc or 'none'}) by {tried}: {errors[-1]}; "
                        "check the input shapes (--input) and that forward runs on them")


def _import_target(target: str):
    mod_name, _, attr = target.rpartition(":")
    if not mod_name or not attr:
        raise InputError(f"{target!r}: expected 'package.module:factory' (or 'path/to/file.py:factory')")
    try:
        if mod_name.endswith(".py") or os.sep in mod_name or "/" in mod_name:
            path = Path(mod_name)
            if not path.exists():
                raise InputError(f"{target!r}: file {mod_name} not found")
            spec = importlib.util.spec_from_file_location(path.stem, path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        else:
            added = os.getcwd() not in sys.path
            if added:
                sys.path.insert(0, os.getcwd())
            try:
                mod = importlib.import_module(mod_name)
            finally:
                if added:
                    sys.path.remove(os.getcwd())
    except GraphroofError:
        raise
    except ModuleNotFoundError as e:
        raise InputError(f"cannot import {mod_name!r} for {target!r}: {e}; check the module path and that it "
                         "is importable from the current directory or PYTHONPATH") from None
    except Exception as e:  # noqa: BLE001 - the user's module failed while importing
        raise InputError(f"importing {mod_name!r} for {target!r} raised {_reason(e)}") from None
    if not hasattr(mod, attr):
        import difflib

        close = difflib.get_close_matches(attr, [n for n in dir(mod) if not n.startswith("_")], n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise InputError(f"module {mod_name!r} has no attribute {attr!r}{hint}")
    return getattr(mod, attr)


def load_factory(target: str, inputs: Any = None, *, device: str = "meta", **opts: Any) -> OpGraph:
    """``"pkg.module:factory"``: call the factory (a function or an nn.Module class, no arguments) with
    ``torch.device(device)`` active, so parameters are created on the meta device, then :func:`load_module`.
    The factory may return ``(module, example_inputs)``."""
    fn = _import_target(target)
    notes = list(opts.pop("notes", []) or [])
    if isinstance(fn, torch.nn.Module):
        module = fn
    elif callable(fn):
        try:
            with torch.device(device):
                module = fn()
        except Exception as e:  # noqa: BLE001
            if device == "meta":  # e.g. a factory that loads a checkpoint: build it for real
                try:
                    module = fn()
                except Exception as e2:  # noqa: BLE001
                    raise FrontendError(f"factory {target!r} raised {_reason(e2)}") from None
                notes.append(f"built with real weights: on the meta device the factory raised {one_line(e, 120)}")
            else:
                raise FrontendError(f"factory {target!r} raised {_reason(e)}") from None
    else:
        raise InputError(f"{target!r} is a {type(fn).__name__}, not a factory or an nn.Module")
    if isinstance(module, tuple) and len(module) == 2 and isinstance(module[0], torch.nn.Module):
        module, example = module
        if inputs is None and opts.get("input_shapes") is None:
            inputs = example
    if not isinstance(module, torch.nn.Module):
        raise InputError(f"factory {target!r} returned a {type(module).__name__}, not a torch.nn.Module")
    opts.setdefault("name", target)
    return load_module(module, inputs, notes=notes, **opts)
