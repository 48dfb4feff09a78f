"""Op-by-op capture: run ``forward`` over fake tensors and record every ATen op as it executes.

* Nothing is computed: inputs are fake tensors, real or meta parameters are wrapped as fake on first use
  (``FakeTensorMode(allow_non_fake_inputs=True)``), so no weight is copied and no math runs.
* A ``TorchDispatchMode`` records the ATen ops; a ``TorchFunctionMode`` catches the high-level calls that ATen
  would decompose (``F.linear``, ``scaled_dot_product_attention``, ``layer_norm``, convolutions, ``matmul``,
  ``einsum``, grouped GEMMs) and records each as one node (``aten.linear`` ...) with the ops inside suppressed,
  so rules see them whole, as in a ``torch.export`` graph.
* Global module hooks keep the stack of module names: a node's scope is the innermost module running.
* Data-dependent control flow works where the model only asks "am I being traced?" (transformers does);
  reading a tensor's value (``.item()``, ``if x.any()``) fails with a clear message.
"""

from __future__ import annotations

import inspect
import types as types_mod
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import DataDependentOutputException, FakeTensor, FakeTensorMode
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakIdKeyDictionary

from ...graph import OpGraph, Role
from .common import (
    BROADCAST_VIEWS,
    GraphBuilder,
    Ref,
    bind,
    broadcast_view,
    flash_layout,
    is_view_op,
    op_key,
    spec_of,
    storage_key,
)
from .quantized import QuantHandler, is_quant_op, real_scalar
from .symbols import DataDims, candidates_of, quiet_shape_logs, set_value
from .values import ValueReads

__all__ = ["capture_dispatch", "MAYBE_ALIAS"]

#: ops that return their input (or a view) when they can and copy otherwise: the node gets ``alias=True``
#: when the output shares the input's storage.
MAYBE_ALIAS = {"aten.reshape", "aten.flatten", "aten.contiguous", "aten.to", "aten.type_as", "aten.dropout",
               "aten.ravel", "aten.reshape_as", "aten.feature_dropout", "aten.alpha_dropout"}

_A = torch.ops.aten


def _keep_table() -> dict[Any, Any]:
    """Python-level function -> the ATen overload it is recorded as."""
    t: dict[Any, Any] = {
        F.linear: _A.linear.default,
        F.scaled_dot_product_attention: _A.scaled_dot_product_attention.default,
        F.layer_norm: _A.layer_norm.default, torch.layer_norm: _A.layer_norm.default,
        F.group_norm: _A.group_norm.default, torch.group_norm: _A.group_norm.default,
        F.batch_norm: _A.batch_norm.default, torch.batch_norm: _A.batch_norm.default,
        F.instance_norm: _A.instance_norm.default, torch.instance_norm: _A.instance_norm.default,
        torch.conv1d: _A.conv1d.default, torch.conv2d: _A.conv2d.default, torch.conv3d: _A.conv3d.default,
        torch.conv_transpose1d: _A.conv_transpose1d.default, torch.conv_transpose2d: _A.conv_transpose2d.input,
        torch.conv_transpose3d: _A.conv_transpose3d.input,
        torch.matmul: _A.matmul.default, torch.Tensor.matmul: _A.matmul.default,
        torch.Tensor.__matmul__: _A.matmul.default, torch.Tensor.__rmatmul__: _A.matmul.default,
        torch.einsum: _A.einsum.default,
        torch.max_pool1d: _A.max_pool1d.default, torch.max_pool2d: _A.max_pool2d.default,
        torch.max_pool3d: _A.max_pool3d.default, F.max_pool1d: _A.max_pool1d.default,
        F.max_pool2d: _A.max_pool2d.default, F.max_pool3d: _A.max_pool3d.default,
        F.adaptive_avg_pool1d: _A.adaptive_avg_pool1d.default, torch.adaptive_avg_pool1d: _A.adaptive_avg_pool1d.default,
        F.adaptive_avg_pool2d: _A.adaptive_avg_pool2d.default, F.adaptive_avg_pool3d: _A.adaptive_avg_pool3d.default,
    }
    if hasattr(F, "rms_norm"):
        t[F.rms_norm] = _A.rms_norm.default
        t[torch.rms_norm] = _A.rms_norm.default
    for fn in (getattr(F, "grouped_mm", None), getattr(torch, "_grouped_mm", None)):
        if fn is not None:
            t[fn] = _A._grouped_mm.default
    for rnn in ("lstm", "gru", "rnn_tanh", "rnn_relu"):  # nn.LSTM / GRU / RNN call _VF.<rnn> (= torch.<rnn>)
        t[getattr(torch, rnn)] = getattr(_A, rnn).input
    return t


_KEEP: dict[Any, Any] | None = None
_SIGS: dict[Any, inspect.Signature | None] = {}
_WITH_INDICES = {_A.max_pool2d.default: _A.max_pool2d_with_indices.default,
                 _A.max_pool3d.default: _A.max_pool3d_with_indices.default}
_RNN_DATA = {getattr(_A, r).input: getattr(_A, r).data for r in ("lstm", "gru", "rnn_tanh", "rnn_relu")}
_PADDING_OVERLOAD = {"conv1d": _A.conv1d.padding, "conv2d": _A.conv2d.padding, "conv3d": _A.conv3d.padding}


def _signature(fn: Any) -> inspect.Signature | None:
    if fn not in _SIGS:
        try:
            _SIGS[fn] = inspect.signature(fn)
        except (TypeError, ValueError):
            _SIGS[fn] = None
    return _SIGS[fn]


def _bind_call(fn: Any, op: Any, args: tuple, kwargs: dict) -> list[tuple[str, str, Any]]:
    """Python call -> the ATen schema's named arguments (by name where the function has a signature)."""
    if op is _A.einsum.default:
        ops = args[1] if len(args) == 2 and isinstance(args[1], (list, tuple)) else args[1:]
        return [("equation", "value", args[0]), ("tensors", "tensors", list(ops)), ("path", "value", None)]
    if fn is torch.Tensor.__rmatmul__:
        args = (args[1], args[0])
    sig = _signature(fn)
    if sig is not None and not any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values()):
        named = sig.bind(*args, **kwargs).arguments
        return bind(op, (), {k: v for k, v in named.items()})
    return bind(op, args, kwargs)


class _Capture:
    def __init__(self, root: torch.nn.Module, builder: GraphBuilder, refs: WeakIdKeyDictionary,
                 causal_masks: bool, shape_env: Any = None, data_dims: DataDims | None = None):
        self.b = builder
        self.shape_env = shape_env
        self.dd = data_dims if data_dims is not None else DataDims()
        self.values = ValueReads()
        self.sym_values: dict[Any, int] = {}
        self.q = QuantHandler()
        self.refs = refs
        self.depth = 0
        self.scopes = [""]
        self.names: dict[int, str] = {}
        for name, m in root.named_modules(remove_duplicate=False):
            self.names.setdefault(id(m), name)
        self.causal_masks = causal_masks
        self.n_unknown = 0

    # -- tensors ----------------------------------------------------------------------------------------
    def ref(self, t: torch.Tensor) -> Ref:
        r = self.refs.get(t)
        if r is None:  # a tensor the model made outside any recorded op: a constant in its code
            role = Role.ACTIVATION if isinstance(t, FakeTensor) else Role.CONST
            self.n_unknown += 1
            r = self.refs[t] = Ref(spec_of(t, role), f"const_{self.n_unknown}")
        return r

    def value(self, v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return self.ref(v)
        if isinstance(v, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in v):
            return [self.ref(x) if isinstance(x, torch.Tensor) else x for x in v]
        return v

    # -- data-dependent sizes ---------------------------------------------------------------------------
    def hint(self, d: Any) -> int:
        if isinstance(d, torch.SymInt):
            return int(d.node.expr.xreplace(self.sym_values))
        return int(d)

    def name_sizes(self, func: Any, args: tuple, out: Any) -> None:
        """Name the unbacked sizes *func* returned (``nonzero_0`` ...) and trace on with their assumed value."""
        from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
        for o in (out if isinstance(out, (tuple, list)) else (out,)):
            if not isinstance(o, torch.Tensor) or not any(isinstance(d, torch.SymInt) for d in o.shape):
                continue
            for sym in free_unbacked_symbols(o.shape):
                if sym in self.sym_values:
                    continue
                ins = [a for a in args if isinstance(a, torch.Tensor)]
                most, held = candidates_of(sym, self.shape_env, ins, self.hint, func)
                n, value = self.dd.name(sym, func, most, self.scopes[-1],
                                        op_key(func) if hasattr(func, "_opname") else "", held)
                self.sym_values[sym] = value
                set_value(self.shape_env, sym, value)

    # -- recording --------------------------------------------------------------------------------------
    def record(self, op: Any, bound: list[tuple[str, str, Any]], out: Any, extra: dict | None = None) -> None:
        outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(o, torch.Tensor)]
        if not outs:
            return
        key = op_key(op)
        raw_inputs = [v for _, _, v in bound if isinstance(v, torch.Tensor)]
        for _, _, v in bound:
            if isinstance(v, (list, tuple)):
                raw_inputs.extend(x for x in v if isinstance(x, torch.Tensor))
        bound = [(n, k, self.value(v)) for n, k, v in bound]
        in_refs = [self.refs[t] for t in raw_inputs]
        name = self.b.fresh(key.split(".", 1)[1])
        view = is_view_op(op)
        inherit = in_refs[0].spec.role if in_refs and view else Role.ACTIVATION
        if key == "aten.cat" and any(r.spec.role is Role.KV_CACHE for r in in_refs):
            inherit = Role.KV_CACHE  # a cache grown by concatenation is still the cache
        out_refs = []
        in_ids = {id(t) for t in raw_inputs}
        for i, o in enumerate(outs):
            if id(o) in in_ids and o in self.refs:  # in place: same tensor, new producer
                out_refs.append(self.refs[o])
                continue
            spec = spec_of(o, inherit)
            qd = self.q.dtypes.get(o) if len(self.q.dtypes) else None
            if qd is not None:  # a float stand-in for a quantized tensor
                spec = replace(spec, dtype=qd)
            if key in BROADCAST_VIEWS and in_refs and i == 0:
                spec = broadcast_view(in_refs[0].spec, spec)
            r = Ref(spec, name if len(outs) == 1 else f"{name}:{i}")
            self.refs[o] = r
            out_refs.append(r)
        extra = dict(extra or {})
        if key in MAYBE_ALIAS and raw_inputs and storage_key(outs[0]) == storage_key(raw_inputs[0]):
            extra["alias"] = True
        self.b.add(key, bound, out_refs, self.scopes[-1], name=name, extra=extra)

    def record_whole(self, fn: Any, op: Any, args: tuple, kwargs: dict, out: Any) -> None:
        bound = _bind_call(fn, op, args, kwargs)
        extra = None
        if op in (_A.conv1d.default, _A.conv2d.default, _A.conv3d.default):
            pad = dict((n, v) for n, _, v in bound).get("padding")
            if isinstance(pad, str):
                op = _PADDING_OVERLOAD[op._opname]
                bound = _bind_call(fn, op, args, kwargs)
        if op in _RNN_DATA and len(args) > 2 and not isinstance(args[2], (list, tuple)):  # a packed sequence
            op = _RNN_DATA[op]
            bound = bind(op, args, kwargs)
        if op in _WITH_INDICES and (kwargs.get("return_indices") or (len(args) > 6 and args[6])):
            op = _WITH_INDICES[op]
            bound = _bind_call(fn, op, args[:6], {k: v for k, v in kwargs.items() if k != "return_indices"})
        if op is _A.scaled_dot_product_attention.default and self.causal_masks:
            vals = {n: v for n, _, v in bound}
            mask = vals.get("attn_mask")
            q: Any = vals.get("query")  # read only when the mask is a tensor: SDPA's query and key are given then
            k: Any = vals.get("key")
            if isinstance(mask, torch.Tensor) and mask.dim() >= 2 and \
                    tuple(mask.shape[-2:]) == (q.shape[-2], k.shape[-2]):
                extra = {"mask_causal": True, "mask_align": "bottom_right"}
        self.record(op, bound, out, extra)


class _Recorder(TorchDispatchMode):
    def __init__(self, cap: _Capture):
        super().__init__()
        self.cap = cap

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        value = real_scalar(func, args)
        if value is not None:  # float(self.scale) of a real buffer: its value, not a fake
            return value
        if func is _A._local_scalar_dense.default and args and isinstance(args[0], FakeTensor):
            try:  # a constant fake tensor (torch.tensor(2.0)) knows its value
                return func(*args, **kwargs)
            except DataDependentOutputException:  # a computed value: assumed, named per line of code
                return self.cap.values.read(args[0], self.cap.scopes[-1])
        q = self.cap.q
        if is_quant_op(func):
            out, bound, attrs, qd = q.run(func, args, kwargs, self.cap.scopes[-1])
            if qd is not None:
                for o in (out if isinstance(out, (list, tuple)) else (out,)):
                    q.dtypes[o] = qd
            if not self.cap.depth:
                self.cap.record(func, bound, out, attrs)
            return out
        out = _unbind_unbacked(self.cap, func, args, kwargs)
        if out is None:
            out = func(*args, **kwargs)
        if len(q.dtypes):  # ops on a quantized stand-in (relu, max_pool2d, flatten ...) stay quantized
            first = next((a for a in args if isinstance(a, torch.Tensor)), None)
            qd = q.dtypes.get(first) if first is not None else None
            if qd is not None:
                for o in (out if isinstance(out, (list, tuple)) else (out,)):
                    if isinstance(o, torch.Tensor) and o.is_floating_point():
                        q.dtypes[o] = qd
        if self.cap.shape_env is not None:
            self.cap.name_sizes(func, args, out)
        if func is _A.lift_fresh.default:  # a constant made by torch.tensor() on the CPU entering the trace:
            self.cap.refs[out] = self.cap.ref(args[0])  # free, and no op on meta: a constant there too
        elif not self.cap.depth:
            self.cap.record(func, bind(func, args, kwargs), out)
        return out


def _unbind_unbacked(cap: _Capture, func: Any, args: tuple, kwargs: dict) -> Any:
    """``unbind`` (``for row in boxes``) along a data-dependent dim: fake tensors split it into pieces of
    symbolic size (torch 2.14), so ``row[2]`` fails; take the rows one by one up to the traced value."""
    if func is not _A.unbind.int or cap.shape_env is None:
        return None
    t = args[0]
    dim = kwargs.get("dim", args[1] if len(args) > 1 else 0)
    dim = dim % t.dim() if t.dim() else 0
    size = t.shape[dim]
    if not isinstance(size, torch.SymInt):
        return None
    return tuple(_A.select.int(t, dim, i) for i in range(cap.hint(size)))


def _grouped_mm_any_dtype(fn: Callable, args: tuple, kwargs: dict) -> Any:
    """The meta kernel of ``_grouped_mm`` accepts only bf16 (like the CUDA one): shapes are dtype-free, so run
    it in bf16 and hand back the caller's dtype."""
    a, b = args[0], args[1]
    out = fn(a.to(torch.bfloat16), b.to(torch.bfloat16), *args[2:], **kwargs)
    return out.to(a.dtype)


#: calls a Python-level torch function with this mode active inside it (``None`` on a torch without it)
_REDISPATCH = getattr(torch.overrides, "redispatch_function", None)


def _reenter(func: Any) -> bool:
    """A torch function written in Python whose body calls other torch functions (``torch.nn.functional``)."""
    return _REDISPATCH is not None and isinstance(func, types_mod.FunctionType) and \
        (getattr(func, "__module__", None) or "").startswith(("torch.nn.functional", "torch.functional"))


class _Keeper(TorchFunctionMode):
    """Records the kept high-level calls whole.  A torch function implemented in Python
    (``F.multi_head_attention_forward``, ``F.interpolate`` ...) is run with this mode re-entered, so the kept
    calls nested in it (its ``linear`` / ``scaled_dot_product_attention``) are kept whole too: a mode is
    otherwise switched off while its own handler runs."""

    def __init__(self, cap: _Capture):
        super().__init__()
        self.cap = cap
        self.active: set[Any] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        op = _KEEP.get(func) if not self.cap.depth else None
        if op is None:
            if self.cap.depth or not _reenter(func) or func in self.active:
                return func(*args, **kwargs)
            self.active.add(func)
            try:
                with self:
                    return _REDISPATCH(func, types, args, kwargs)
            finally:
                self.active.discard(func)
        self.cap.depth += 1
        try:
            try:
                out = func(*args, **kwargs)
            except RuntimeError:
                if op is not _A._grouped_mm.default:
                    raise
                out = _grouped_mm_any_dtype(func, args, kwargs)
            if op is _A.scaled_dot_product_attention.default:  # the fused kernel's layout on every device
                out = flash_layout(kwargs.get("query", args[0] if args else None), out)
        finally:
            self.cap.depth -= 1
        self.cap.record_whole(func, op, args, kwargs, out)
        return out


def name_module_tensors(root: Any, refs: Any) -> None:
    """Record *root*'s parameters (weights) and buffers (constants) in *refs* under their module paths; a tensor
    shared by two modules keeps its first name."""
    for pname, p in root.named_parameters(remove_duplicate=False):
        if p not in refs:
            refs[p] = Ref(spec_of(p, Role.WEIGHT), pname)
    for bname, buf in root.named_buffers(remove_duplicate=False):
        if buf not in refs:
            refs[buf] = Ref(spec_of(buf, Role.CONST), bname)


def capture_dispatch(root: torch.nn.Module, args: tuple, kwargs: dict, *, fake_mode: FakeTensorMode,
                     input_refs: dict[int, tuple[torch.Tensor, Ref]], name: str, meta: dict[str, Any],
                     causal_masks: bool = False, dims: Any = None, fold_blocks: bool | None = None) -> OpGraph:
    """Record ``root(*args, **kwargs)``; *args* / *kwargs* hold fake tensors from *fake_mode*, *input_refs*
    maps ``id(tensor)`` of each input tensor (including those inside input objects) to ``(tensor, Ref)``.
    With a ShapeEnv on *fake_mode* data-dependent sizes become named dims (:mod:`.symbols`), traced
    with the values in *dims* where given.  *fold_blocks* (default on; ``Options.fold``) traces runs of
    identical blocks a few times and replicates the rest (:mod:`.fold`; raises
    :class:`.fold.FoldMismatch` when a check after replication fails: trace again with ``fold_blocks=False``)."""
    global _KEEP
    if _KEEP is None:
        _KEEP = _keep_table()
    builder = GraphBuilder(name, meta)
    refs = WeakIdKeyDictionary()
    name_module_tensors(root, refs)
    for t, r in input_refs.values():
        refs[t] = r
    shape_env = getattr(fake_mode, "shape_env", None)
    cap = _Capture(root, builder, refs, causal_masks, shape_env, DataDims(dims))
    cap.values = ValueReads(dims)

    def pre(mod, _args):
        n = cap.names.get(id(mod))
        cap.scopes.append(n if n is not None else cap.scopes[-1])

    def post(mod, _args, _out):
        if len(cap.scopes) > 1:
            cap.scopes.pop()

    folder = _folder(root, cap, fold_blocks)
    hooks = [torch.nn.modules.module.register_module_forward_pre_hook(pre),
             torch.nn.modules.module.register_module_forward_hook(post, always_call=True)]
    try:
        with torch.no_grad(), quiet_shape_logs(), fake_mode, _Recorder(cap), _Keeper(cap):
            root(*args, **kwargs)
    finally:
        for h in hooks:
            h.remove()
        if folder is not None:
            folder.uninstall()
    if folder is not None and folder.groups:
        builder.graph.meta["fold"] = folder.summary_rows
    return cap.values.apply(cap.dd.apply(builder.graph))


def _folder(root: torch.nn.Module, cap: _Capture, fold_blocks: bool | None) -> Any:
    """The installed :class:`.fold.Folder` of this capture, or None when folding is off."""
    from .fold import Folder

    if fold_blocks is False:
        return None
    known = {r.name: r.spec for r in cap.refs.values()}
    try:
        folder = Folder(root, cap, known)
    except Exception:  # noqa: BLE001 - a module tree folding cannot read: every block is traced
        return None
    folder.install()
    return folder
