"""Frontends turn a model into an :class:`~graphroof.graph.OpGraph`.  Only frontends import torch or onnx.

``load(model, ...)`` resolves *model* once with :func:`graphroof.frontends.resolve.resolve_model` (the same
dispatcher ``llm`` (:func:`graphroof.frontends.sources.open_model`) and ``profile`` use) and hands it to its
frontend (the sub-packages :mod:`.torch`, :mod:`.onnx` and :mod:`.hf`):

* an ``OpGraph``: returned as is;
* a ``torch.nn.Module``: :func:`graphroof.frontends.torch.export.load_module` (needs *inputs*);
* a path ending in ``.onnx``: :func:`graphroof.frontends.onnx.load.load_onnx`;
* a ``.csv`` / ``.yaml`` / ``.yml`` file, or a ``.json`` file that is not a transformers config: the op table;
* a ``config.json`` with ``model_type`` / ``architectures`` (or its folder), or a Hugging Face model id whose
  config.json is cached or fetched alone (:mod:`.hf.hub`): a transformers model built on the meta device;
* ``"pkg.module:factory"``: a Python callable returning an ``nn.Module`` (:mod:`graphroof.frontends.torch.factory`);
* a name from the bundled zoo (``llama-2-7b``).

The run-wide switches come as one :class:`~graphroof.options.Options` value (``options=``): ``fold`` (torch
captures fold identical blocks) and ``store`` (captures of transformers configs and zoo models go through the
store of traces, :mod:`.stored`).  Options a frontend does not take raise :class:`~graphroof.errors.InputError` naming the valid ones.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from ..errors import FrontendError
from ..graph import OpGraph
from ..options import DEFAULT, Options
from .resolve import (
    TABLE_SUFFIXES,
    ModelRef,
    Resolved,
    check_options,
    classify,
    is_hf_config,
    is_torch_module,
    resolve_model,
)

__all__ = ["load", "load_ref", "classify", "resolve_model", "check_options", "ModelRef", "Resolved",
           "is_torch_module", "is_hf_config", "frontend", "TABLE_SUFFIXES"]

_EXTRAS = {"torch": "torch", "onnx": "onnx", "onnxruntime": "onnx", "transformers": "hf"}
#: kinds captured by the torch frontend (where ``options.fold`` applies)
_TRACED = ("module", "factory", "hf_config", "zoo")


def frontend(name: str) -> ModuleType:
    """``graphroof.frontends.<name>`` (``torch.export``, ``onnx.load``, ``hf.build``, ``zoo`` ...), or a
    :class:`FrontendError` naming the missing package and its extra."""
    try:
        return importlib.import_module(f"graphroof.frontends.{name}")
    except ModuleNotFoundError as e:
        what = (e.name or "").split(".")[0]
        if what in _EXTRAS:
            raise FrontendError(f"this model needs the {what} package: pip install 'graphroof[{_EXTRAS[what]}]'") \
                from None
        raise


def load(model: Any, inputs: Any = None, *, options: Options = DEFAULT, **opts: Any) -> OpGraph:
    """Load *model* into an OpGraph; *opts* go to the frontend (``dims``, ``input_shapes``, ``batch``, ``seq``...)."""
    return load_ref(classify(model), inputs, options=options, **opts)


def load_ref(ref: ModelRef, inputs: Any = None, *, options: Options = DEFAULT, **opts: Any) -> OpGraph:
    """Load an already classified model (see :func:`load`)."""
    check_options(ref, opts)
    opts = {k: v for k, v in opts.items() if v is not None}
    if ref.kind == "graph":
        return ref.model
    if ref.kind == "table":
        from .optable import load_table

        assert ref.path is not None
        return load_table(ref.path, name=opts.get("name"))
    if ref.kind == "onnx":
        return frontend("onnx.load").load_onnx(ref.path, **opts)
    traced = {"fold_blocks": options.fold, **opts} if ref.kind in _TRACED else opts
    if ref.kind == "module":
        return frontend("torch.export").load_module(ref.model, inputs, **traced)
    if ref.kind == "factory":
        target = ref.model if callable(ref.model) else ref.target
        return frontend("torch.export").load_factory(target, inputs, **traced)
    res = resolve_model(ref)
    return _load_resolved(res, opts, traced, options)


def _load_resolved(res: Resolved, opts: dict[str, Any], traced: dict[str, Any], options: Options) -> OpGraph:
    """A transformers config or a zoo model, captured through the store of traces (:mod:`.stored`)."""
    from .stored import stored_graph

    if res.kind == "hf_config":
        if res.ref.repo_id:  # a Hugging Face model id: reports name it, not the cache's snapshot folder
            opts = {"name": res.ref.repo_id, **opts}
            traced = {"name": res.ref.repo_id, **traced}
        return stored_graph(res, opts, lambda: frontend("hf.build").load_config(res.ref.path, **traced), options)
    return stored_graph(res, opts, lambda: frontend("zoo").load_zoo(str(res.ref.model), **traced), options)
