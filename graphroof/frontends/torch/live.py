"""Record the ATen ops that a block of user code dispatches (``with graphroof.capture(hw="h100") as r:``), as
torch's ``FlopCounterMode`` does, into the OpGraph :func:`.dispatch.capture_dispatch` would give.

The block runs as written, on real or meta tensors (no fake tensors: its results are real), with the dispatch
capture's modes active (:class:`.dispatch._Recorder` for ATen ops, :class:`.dispatch._Keeper` to keep
``linear``, attention, norms, convolutions whole) and global module hooks for scopes.  The first module called at
the top level is a *root*: its parameters become weights named as :func:`graphroof.analyze` names them, its
buffers constants, the tensors it is called with inputs, and its submodules' paths the ops' scopes.  Ops run
outside any module (a loss after the forward) are recorded too, at the top-level scope.  Blocks are not folded
(each decoder layer is recorded as it runs).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.weak import WeakIdKeyDictionary

from ...errors import InputError
from ...graph import OpGraph, Role
from . import dispatch
from .common import GraphBuilder, Ref, spec_of
from .symbols import DataDims
from .values import ValueReads

__all__ = ["LiveCapture", "LIVE_CAPTURE"]

#: the capture method a live capture's report header names
LIVE_CAPTURE = "dispatch (live: graphroof.capture)"


class LiveCapture:
    """Context manager recording the ops dispatched inside its block; after the block, :attr:`graph` holds them
    and :attr:`analysis` what *finish* made of the graph (``graphroof.capture``: the :class:`Analysis`)."""

    def __init__(self, finish: Callable[[OpGraph], Any] | None = None, *, name: str | None = None):
        self._finish = finish
        self._name = name
        self.graph: OpGraph | None = None
        self.analysis: Any = None
        self._stack: contextlib.ExitStack | None = None
        self._roots: list[torch.nn.Module] = []

    def __enter__(self) -> LiveCapture:
        if self._stack is not None:
            raise InputError("graphroof.capture: this capture is already recording; use one `with` block per capture")
        if dispatch._KEEP is None:
            dispatch._KEEP = dispatch._keep_table()
        self._builder = GraphBuilder(self._name or "captured", {"capture": LIVE_CAPTURE, "notes": []})
        self._refs = WeakIdKeyDictionary()
        cap = self._cap = dispatch._Capture(torch.nn.Module(), self._builder, self._refs, False, None, DataDims())
        cap.values = ValueReads()
        cap.names = {}
        stack = contextlib.ExitStack()
        try:
            for h in (torch.nn.modules.module.register_module_forward_pre_hook(self._pre),
                      torch.nn.modules.module.register_module_forward_hook(self._post, always_call=True)):
                stack.callback(h.remove)
            stack.enter_context(_LiveRecorder(cap))
            stack.enter_context(dispatch._Keeper(cap))
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()
        if exc_type is not None:
            return  # the block's own error, as raised
        g = self._cap.values.apply(self._cap.dd.apply(self._builder.graph))
        if self._roots:
            g.meta["model"] = self._name or type(self._roots[0]).__name__
            g.meta["module_params"] = sum(p.numel() for r in self._roots for p in r.parameters())
        if not len(g):
            raise InputError("graphroof.capture recorded no PyTorch op: run the model inside the `with` block, "
                             "e.g. `with graphroof.capture(hw=\"h100\") as r: model(x)`")
        self.graph = g
        self.analysis = self._finish(g) if self._finish is not None else None

    # -- module hooks -----------------------------------------------------------------------------------
    def _pre(self, mod: torch.nn.Module, args: tuple) -> None:
        cap = self._cap
        if len(cap.scopes) == 1 and id(mod) not in cap.names:
            self._add_root(mod, args)
        n = cap.names.get(id(mod))
        cap.scopes.append(n if n is not None else cap.scopes[-1])

    def _post(self, _mod: torch.nn.Module, _args: tuple, _out: Any) -> None:
        if len(self._cap.scopes) > 1:
            self._cap.scopes.pop()

    def _add_root(self, root: torch.nn.Module, args: tuple) -> None:
        """Name a top-level module's submodules, parameters (weights), buffers and positional tensor inputs as the
        dispatch capture of ``analyze(root, args)`` names them."""
        self._roots.append(root)
        refs = self._refs
        for name, m in root.named_modules(remove_duplicate=False):
            self._cap.names.setdefault(id(m), name)
        dispatch.name_module_tensors(root, refs)
        try:
            names = [p.name for p in inspect.signature(root.forward).parameters.values()
                     if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            names = []
        named = [(names[i] if i < len(names) else f"input_{i}", a) for i, a in enumerate(args)]
        named += list(_call_kwargs().items())
        for name, a in named:
            if isinstance(a, torch.Tensor) and a not in refs:
                refs[a] = Ref(spec_of(a, Role.ACTIVATION), name)


class _LiveRecorder(dispatch._Recorder):
    """The dispatch capture's recorder; with grad enabled, the ``detach`` autograd dispatches to save a tensor for
    backward is not an op of the model (free, and absent under ``analyze``'s no_grad): its output is its input."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.detach.default and torch.is_grad_enabled() and args and \
                isinstance(args[0], torch.Tensor):
            out = func(*args, **(kwargs or {}))
            self.cap.refs[out] = self.cap.ref(args[0])
            return out
        return super().__torch_dispatch__(func, types, args, kwargs)


def _call_kwargs() -> dict[str, Any]:
    """The keyword arguments of the module call whose global forward pre-hook is running (a global pre-hook is
    given only the positional ones): read from ``Module._call_impl``'s frame, two frames up; ``{}`` where that
    frame does not hold them (another torch).  Without them a tensor passed by keyword counts as a constant."""
    import sys

    frame = sys._getframe(3)  # _call_kwargs <- _add_root <- _pre <- Module._call_impl (or its inner())
    kwargs = frame.f_locals.get("kwargs") if frame.f_code.co_filename.endswith(("module.py",)) else None
    return kwargs if isinstance(kwargs, dict) else {}
