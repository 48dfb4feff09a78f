"""PyTorch frontend: an ``nn.Module`` (or a ``"pkg.module:factory"``) -> :class:`OpGraph`, with no weights
materialised and no real math run.

Captures (``capture=``):

* ``"export"``: ``torch.export.export(..., strict=False)`` (:mod:`graphroof.frontends.torch.fx`); shapes and
  dtypes from each node's ``meta["val"]``, the layer from ``meta["nn_module_stack"]``.  High-level ops
  (``linear``, ``scaled_dot_product_attention``, ``layer_norm``, ``conv2d`` ...) stay whole in its graph.
* ``"dispatch"``: op by op over fake tensors (:mod:`graphroof.frontends.torch.dispatch`), with the same
  high-level ops kept whole.  Much faster on deep models and tolerant of data-dependent Python.
* ``"auto"`` (default): ``dispatch`` first, ``export`` when it fails (the report says so).  Both keep the
  same high-level ops whole and give identical totals on every model both capture (tested), and dispatch
  takes a fraction of export's time (exporting a 32-layer LLM ~4 s against ~0.6 s op by op; the torchvision
  benchmark's median: see benchmarks/torchvision_models.py).  If every capture fails: one error with the
  last reason.

Inputs (:mod:`graphroof.frontends.torch.inputs`): tensors (real, meta or fake: only shapes and dtypes are
used) or shapes, ``(shape, dtype)`` pairs or TensorSpecs; positional (a tuple / list) or by name (a dict).
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ...errors import FrontendError, GraphroofError, InputError
from ...graph import OpGraph
from .common import one_line
from .dispatch import capture_dispatch
from .factory import build_module
from .fold import FoldMismatch
from .fx import capture_export
from .inputs import prepare_inputs
from .symbols import shape_fake_mode

__all__ = ["load_module", "load_factory", "AUTO_ORDER", "CAPTURES"]

#: ``capture="auto"``: the dispatch capture first (same totals as export on every model both capture, see
#: tests/frontends/test_torch_capture_agree.py, at a fraction of the time), torch.export where it fails.
AUTO_ORDER = ("dispatch", "export")
CAPTURES = ("auto", "export", "dispatch")
CAPTURE_NAMES = {"export": "torch.export (non-strict)", "dispatch": "dispatch (fake tensors)"}
#: torch's package folder with a trailing separator: ``site-packages/torchvision`` is not inside it
_TORCH_DIR = str(Path(torch.__file__).parent) + os.sep


def _in_torch(filename: str) -> bool:
    return filename.startswith(_TORCH_DIR)


def _user_frame(exc: BaseException) -> str:
    """``file.py:42`` of the innermost frame outside torch (the model's code, torchvision's, torchaudio's ...)."""
    where = ""
    for fs in traceback.extract_tb(exc.__traceback__):
        if not _in_torch(fs.filename) and "/graphroof/" not in fs.filename.replace(os.sep, "/"):
            where = f"{Path(fs.filename).name}:{fs.lineno}"
    return where


def _reason(exc: BaseException) -> str:
    text = one_line(exc)
    if "DataDependent" in type(exc).__name__ or "_local_scalar_dense" in text or "cannot be called on meta" in text:
        text += " (forward reads a tensor's value, e.g. .item() or `if x.any()`; graphroof traces without data)"
    where = _user_frame(exc)
    return f"{text} (at {where})" if where else text


def _count_params(module: torch.nn.Module) -> int:
    """Parameters, plus the packed weights of quantized modules (which hold no nn.Parameter)."""
    n = sum(p.numel() for p in {id(p): p for p in module.parameters()}.values())
    for m in module.modules():
        wb = getattr(m, "_weight_bias", None)
        if callable(wb) and "quantized" in type(m).__module__ and "PackedParams" not in type(m).__name__:
            try:
                n += sum(t.numel() for t in wb() if t is not None)
            except Exception:  # noqa: BLE001 - a module built without real packed params
                pass
    return n


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


def _transformers_context(module: Any) -> Any:
    """For a transformers model passed as a module, the same tracing context as a model built from its config
    (:func:`graphroof.frontends.hf.build.eager_prompt`: no value-reading packed-sequence check, whole-scan SSM ops);
    a no-op context for any other module."""
    import contextlib

    if not type(module).__module__.startswith("transformers."):
        return contextlib.nullcontext()
    from ..hf.compat import eager_prompt

    return eager_prompt()


def load_module(module: Any, inputs: Any = None, *, input_shapes: Any = None, dims: Mapping[str, int] | None = None,
                capture: str = "auto", kv_inputs: tuple[str, ...] | list[str] = (), causal_masks: bool = False,
                name: str | None = None, notes: list[str] | None = None, fold_blocks: bool | None = None,
                **ignored: Any) -> OpGraph:
    """Trace *module* on example *inputs* into an OpGraph (no weights copied, no real math).

    *inputs*: tensors / shapes / ``(shape, dtype)`` / TensorSpecs, positional (tuple, list) or named (dict);
    *input_shapes* is used when *inputs* is None (the CLI's ``--input``).  *dims* resolves symbolic dims in
    shapes.  *capture*: ``auto`` | ``export`` | ``dispatch`` (see the module docstring).  *kv_inputs*: names
    of inputs that are KV caches (their bytes count as KV-cache traffic).  *causal_masks*: explicit attention
    masks of shape ``[..., L, S]`` are causal (a causal LM's masks), counted as such.  *fold_blocks*: trace runs of
    identical blocks once and replicate them (:mod:`graphroof.frontends.torch.fold`; default on, ``False``
    traces every block).
    """
    if not isinstance(module, torch.nn.Module):
        raise InputError(f"expected a torch.nn.Module, got {type(module).__name__}")
    if capture not in CAPTURES:
        raise InputError(f"capture {capture!r} unknown; use one of {', '.join(CAPTURES)}")
    name = name or type(module).__name__
    order = list(AUTO_ORDER) if capture == "auto" else [capture]
    notes = list(notes or [])
    n_params = _count_params(module)
    training = {m: m.training for m in module.modules()}
    module.eval()
    errors: list[str] = []
    desc = ""
    hf_mode = _transformers_context(module)
    try:
        hf_mode.__enter__()
        for how in order:
            # each capture gets its own fake mode (the dispatch one with a ShapeEnv for data-dependent sizes)
            fake_mode = shape_fake_mode() if how == "dispatch" else FakeTensorMode(allow_non_fake_inputs=True)
            args, kwargs, refs, desc = prepare_inputs(module, inputs, input_shapes, dims, fake_mode, kv_inputs)
            meta = {"capture": CAPTURE_NAMES[how], "model": name, "inputs": desc, "notes": list(notes),
                    "module_params": n_params}
            if errors:
                meta["notes"].append(f"the {CAPTURE_NAMES[order[0]]} capture failed ({errors[-1]}); "
                                     f"captured by {CAPTURE_NAMES[how]} instead")
            try:
                if how == "export":
                    g = capture_export(module, args, kwargs, input_refs=refs, name=name, meta=meta,
                                       causal_masks=causal_masks, dims=dims)
                else:
                    try:
                        g = capture_dispatch(module, args, kwargs, fake_mode=fake_mode, input_refs=refs, name=name,
                                             meta=meta, causal_masks=causal_masks, dims=dims, fold_blocks=fold_blocks)
                    except FoldMismatch:  # a folded block's check failed after replication: trace every block
                        fake_mode = shape_fake_mode()
                        args, kwargs, refs, desc = prepare_inputs(module, inputs, input_shapes, dims, fake_mode,
                                                                  kv_inputs)
                        g = capture_dispatch(module, args, kwargs, fake_mode=fake_mode, input_refs=refs, name=name,
                                             meta=dict(meta, notes=list(meta["notes"])), causal_masks=causal_masks,
                                             dims=dims, fold_blocks=False)
                _attention_notes(g)
                return g
            except GraphroofError:
                raise
            except (Exception, RecursionError) as e:  # noqa: BLE001 - any failure of the user's forward
                errors.append(_reason(e))
    finally:
        hf_mode.__exit__(None, None, None)
        for m, t in training.items():
            m.training = t
    tried = " and ".join(CAPTURE_NAMES[h] for h in order)
    raise FrontendError(f"could not trace {name} with inputs ({desc or 'none'}) by {tried}: {errors[-1]}; "
                        "check the input shapes (--input) and that forward runs on them")


def load_factory(target: Any, inputs: Any = None, *, device: str = "meta", **opts: Any) -> OpGraph:
    """A factory -> :func:`load_module`.  *target*: ``"pkg.module:factory"`` or the factory itself (a function,
    an nn.Module class, a ``functools.partial``; API users: ``load_factory(torchvision.models.regnet_y_400mf,
    [(1, 3, 224, 224)])``).  It is called with no arguments with ``torch.device(device)`` active, so
    parameters are created on the meta device; a factory that cannot build on meta (RegNet's builder calls
    ``.tolist()``, quantized builders calibrate) is called again on the CPU and the report says so.
    The factory may return ``(module, example_inputs)``."""
    built = build_module(target, device=device)
    notes = list(opts.pop("notes", []) or []) + built.notes
    module = built.module
    if built.example is not None and inputs is None and opts.get("input_shapes") is None:
        inputs = built.example
    opts.setdefault("name", target if isinstance(target, str) else _callable_label(target))
    return load_module(module, inputs, notes=notes, **opts)


def _callable_label(fn: Any) -> str:
    from .factory import _callable_name
    return _callable_name(fn)
