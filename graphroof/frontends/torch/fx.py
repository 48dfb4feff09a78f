"""The ``torch.export`` capture: ``torch.export.export(..., strict=False)`` -> OpGraph.

The pre-dispatch ATen graph keeps high-level ops whole (``aten.linear``, ``aten.scaled_dot_product_attention``,
``aten.layer_norm``, ``aten.conv2d`` ...).  Shapes and dtypes come from each node's ``meta["val"]``, the layer
from ``meta["nn_module_stack"]``, roles from the graph signature (parameters -> weight, buffers and lifted
constants -> const, user inputs as the caller named them).  ``no_grad`` / ``autocast`` regions are inlined;
other higher-order ops (``cond``, ``while_loop``) are refused so the caller can fall back.
"""

from __future__ import annotations

import contextlib
import io
import logging
import operator
import warnings
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import torch

from ...errors import FrontendError
from ...graph import OpGraph, Role
from .common import (
    BROADCAST_VIEWS,
    GraphBuilder,
    Ref,
    bind,
    broadcast_view,
    clean_scope,
    is_view_op,
    op_key,
    spec_of,
    storage_key,
)
from .dispatch import MAYBE_ALIAS
from .symbols import DataDims

__all__ = ["capture_export"]

def _val_refs(node, name: str, role: Role) -> Any:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return Ref(spec_of(val, role), name)
    if isinstance(val, (list, tuple)):
        return [Ref(spec_of(v, role), f"{name}:{i}") if isinstance(v, torch.Tensor) else None
                for i, v in enumerate(val)]
    return None


def _name_sizes(n: torch.fx.Node, dd: DataDims, ranges: dict, scope: str) -> None:
    """Name the data-dependent sizes node *n* creates (``nonzero_0``), as the dispatch capture does."""
    for sym in (n.meta.get("unbacked_bindings") or {}):
        cands = None
        vr = ranges.get(sym)
        if vr is not None and vr.upper.is_finite and int(vr.upper) < 2 ** 40:
            cands = int(vr.upper)
        else:
            first = next((a for a in n.args if isinstance(a, torch.fx.Node)), None)
            val = first.meta.get("val") if first is not None else None
            if isinstance(val, torch.Tensor) and val.dim() and isinstance(val.shape[0], int):
                cands = val.shape[0]
        dd.name(sym, n.target, cands, scope, op_key(n.target) if isinstance(n.target, torch._ops.OpOverload)
                else "")


def _walk(gm: torch.fx.GraphModule, env: dict[str, Any], b: GraphBuilder, dd: DataDims | None = None,
          ranges: dict | None = None) -> list[Any]:
    """Append gm's ops to the builder; *env* maps fx node names to Refs.  Returns the graph's outputs."""
    dd = dd if dd is not None else DataDims()
    ranges = ranges or {}
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
            res = _walk(sub, sub_env, b, dd, ranges)
            env[n.name] = res
            continue
        stack = n.meta.get("nn_module_stack") or {}
        scope = clean_scope(list(stack.values())[-1][0]) if stack else ""
        if n.meta.get("unbacked_bindings"):
            _name_sizes(n, dd, ranges, scope)
        if not isinstance(tgt, torch._ops.OpOverload):
            if isinstance(n.meta.get("val"), torch.Tensor):
                raise FrontendError(f"torch.export produced a call to {tgt!r}, which is not an ATen op")
            continue
        val = n.meta.get("val")
        if not isinstance(val, torch.Tensor) and \
                not (isinstance(val, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in val)):
            continue  # assertions, shape queries (sym_size), scalars
        bound = bind(tgt, [lookup(a) for a in n.args], {k: lookup(v) for k, v in n.kwargs.items()})
        in_refs = [v for _, _, v in bound if isinstance(v, Ref)]
        role = in_refs[0].spec.role if in_refs and is_view_op(tgt) else Role.ACTIVATION
        key = op_key(tgt)
        if key == "aten.cat" and any(r.spec.role is Role.KV_CACHE for _, _, v in bound
                                     for r in (v if isinstance(v, list) else []) if isinstance(r, Ref)):
            role = Role.KV_CACHE
        if role in (Role.WEIGHT, Role.CONST) and key in MAYBE_ALIAS and isinstance(val, torch.Tensor) and \
                in_refs[0].spec.is_bound and val.numel() > in_refs[0].spec.numel:
            role = Role.ACTIVATION  # reshaping a broadcast weight copies it (dispatch records clone + view)
        out = _val_refs(n, n.name, role)
        if key in BROADCAST_VIEWS and in_refs and isinstance(out, Ref):
            out = Ref(broadcast_view(in_refs[0].spec, out.spec), out.name)
        env[n.name] = out
        outs = [o for o in (out if isinstance(out, list) else [out]) if o is not None]
        extra = {}
        if key in MAYBE_ALIAS:
            ins = [a.meta.get("val") for a in n.args if isinstance(a, torch.fx.Node)]
            if ins and isinstance(val, torch.Tensor) and storage_key(val) == storage_key(ins[0]):
                extra["alias"] = True
        b.add(key, bound, outs, scope, name=b.fresh(n.name), extra=extra)
    return outputs if isinstance(outputs, list) else [outputs]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """torch.export logs and warns about the model's internals and prints partial graphs when it fails; the
    caller reports a failure in one line."""
    level = logging.root.manager.disable
    sink = io.StringIO()
    logging.disable(logging.ERROR)
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(level)


def capture_export(module, args, kwargs, *, input_refs, name, meta, causal_masks=False, dims=None) -> OpGraph:
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
    dd = DataDims(dims)
    _walk(ep.graph_module, env, b, dd, dict(ep.range_constraints))
    g = dd.apply(b.graph)
    if causal_masks:
        g = g.map_ops(_mark_causal_masks)
    return g


def _mark_causal_masks(op):
    if op.op == "aten.scaled_dot_product_attention" and op.input(3) is not None:
        m, q, k = op.inputs[3], op.inputs[0], op.inputs[1]
        if m.rank >= 2 and tuple(m.shape[-2:]) == (q.shape[-2], k.shape[-2]):
            return replace(op, attrs={**op.attrs, "mask_causal": True, "mask_align": "bottom_right"})
    return op
