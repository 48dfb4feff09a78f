"""Example inputs for the torch captures: tensors, shapes, ``(shape, dtype)`` pairs or TensorSpecs, positional or
by name, become fake tensors on the model's device (no data), each with a :class:`Ref` naming it and its role.

Shapes without a dtype are int64 for index-like inputs (``input_ids``, ``*_mask``, ``*_ids``, or a model whose
first layer is an ``nn.Embedding``) and the model's floating dtype otherwise.  Tensors inside plain input objects
(a transformers ``Cache``) are found and named too; those of a cache (or named in ``kv_inputs``) are KV-cache
tensors.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import torch

from ...dtypes import canonical_dtype
from ...errors import InputError
from ...graph import Role, TensorSpec, resolve_dim
from .common import Ref, spec_of

__all__ = ["prepare_inputs", "TORCH_DTYPES"]

_INDEX_NAMES = ("input_ids", "token_type_ids", "position_ids", "attention_mask", "labels", "ids", "indices",
                "tokens", "cache_position")


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
    try:
        params = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _make_input(v: Any, name: str | None, pos: int, module, fake_mode, device, fdtype, dims, kv_inputs):
    """One input -> (fake tensor or plain value, Ref or None)."""
    kv = (name is not None and name in kv_inputs) or (isinstance(v, TensorSpec) and v.role is Role.KV_CACHE)
    role = Role.KV_CACHE if kv else Role.ACTIVATION
    if isinstance(v, torch.Tensor):
        if v.device != device:  # e.g. a CPU example for a meta model: same shape and dtype on its device
            with fake_mode:
                t = torch.empty(v.shape, dtype=v.dtype, device=device)
        else:
            t = fake_mode.from_tensor(v) if not isinstance(v, torch._subclasses.FakeTensor) else v
    else:
        given: str | torch.dtype | None = None
        found: tuple[int, ...] | None
        if isinstance(v, TensorSpec):
            found, given = tuple(resolve_dim(d, dims) for d in v.shape), v.dtype
        elif isinstance(v, tuple) and len(v) == 2 and not isinstance(v[0], (int, str)) and \
                _as_shape(v[0], dims) is not None and (v[1] is None or isinstance(v[1], (str, torch.dtype))):
            found, given = _as_shape(v[0], dims), v[1]
        else:
            found = _as_shape(v, dims)
        if found is None:
            return v, None  # a plain argument (flag, number, None)
        shape = found
        dtype: torch.dtype | None = given if isinstance(given, torch.dtype) else None
        if isinstance(given, str):
            dtype = TORCH_DTYPES.get(canonical_dtype(given))
            if dtype is None:
                raise InputError(f"input {name or pos}: dtype {v[1]!r} has no torch equivalent")
        if dtype is None:
            dtype = torch.int64 if _is_index_input(name, module, pos) else fdtype
        if any(d < 0 for d in shape):
            raise InputError(f"input {name or pos}: negative dimension in shape {shape}")
        with fake_mode:
            t = torch.empty(shape, dtype=dtype, device=device)
    return t, Ref(spec_of(t, role), name or f"input_{pos}")


TORCH_DTYPES = {"fp64": torch.float64, "fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
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
