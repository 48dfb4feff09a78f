"""Frontends turn a model into an :class:`~graphroof.graph.OpGraph`.  Only frontends import torch or onnx.

``load(model, ...)`` classifies *model* once with :func:`graphroof.frontends.resolve.classify` (the same
resolver ``llm`` and ``profile`` use) and hands it to its frontend:

* an ``OpGraph``: returned as is;
* a ``torch.nn.Module``: :func:`graphroof.frontends.torch_export.load_module` (needs *inputs*);
* a path ending in ``.onnx``: :func:`graphroof.frontends.onnx.load_onnx`;
* a ``.csv`` / ``.yaml`` / ``.yml`` file, or a ``.json`` file that is not a transformers config: the op table;
* a ``config.json`` with ``model_type`` / ``architectures`` (or its folder), or a Hugging Face model id whose
  config.json is cached or fetched alone (:mod:`.hf_hub`): a transformers model built on the meta device;
* ``"pkg.module:factory"``: a Python callable returning an ``nn.Module`` (:mod:`graphroof.frontends.factory`);
* a name from the bundled zoo (``llama-2-7b``).

Options a frontend does not take raise :class:`~graphroof.errors.InputError` naming the valid ones.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from ..errors import FrontendError
from ..graph import OpGraph
from .resolve import TABLE_SUFFIXES, ModelRef, check_options, classify, is_hf_config, is_torch_module

__all__ = ["load", "load_ref", "classify", "check_options", "ModelRef", "is_torch_module", "is_hf_config",
           "frontend", "TABLE_SUFFIXES"]

_EXTRAS = {"torch": "torch", "onnx": "onnx", "onnxruntime": "onnx", "transformers": "hf"}


def frontend(name: str) -> ModuleType:
    """``graphroof.frontends.<name>``, or a :class:`FrontendError` naming the missing package and its extra."""
    try:
        return importlib.import_module(f"graphroof.frontends.{name}")
    except ModuleNotFoundError as e:
        what = (e.name or "").split(".")[0]
        if what in _EXTRAS:
            raise FrontendError(f"this model needs the {what} package: pip install 'graphroof[{_EXTRAS[what]}]'") \
                from None
        raise


def load(model: Any, inputs: Any = None, **opts: Any) -> OpGraph:
    """Load *model* into an OpGraph; *opts* go to the frontend (``dims``, ``input_shapes``, ``batch``, ``seq``...)."""
    return load_ref(classify(model), inputs, **opts)


def load_ref(ref: ModelRef, inputs: Any = None, **opts: Any) -> OpGraph:
    """Load an already classified model (see :func:`load`)."""
    check_options(ref, opts)
    opts = {k: v for k, v in opts.items() if v is not None}
    if ref.kind == "graph":
        return ref.model
    if ref.kind == "module":
        return frontend("torch_export").load_module(ref.model, inputs, **opts)
    if ref.kind == "factory":
        target = ref.model if callable(ref.model) else ref.target
        return frontend("torch_export").load_factory(target, inputs, **opts)
    if ref.kind == "onnx":
        return frontend("onnx").load_onnx(ref.path, **opts)
    if ref.kind == "hf_config":
        if ref.repo_id:  # a Hugging Face model id: reports name it, not the cache's snapshot folder
            opts = {"name": ref.repo_id, **opts}
        return _stored(ref, opts, lambda: frontend("hf").load_config(ref.path, **opts))
    if ref.kind == "table":
        from .optable import load_table

        return load_table(ref.path, name=opts.get("name"))
    return _stored(ref, opts, lambda: frontend("zoo").load_zoo(str(ref.model), **opts))


def _stored(ref: ModelRef, opts: dict[str, Any], capture: Any) -> OpGraph:
    """A transformers config or zoo capture through the persistent store (:mod:`.trace_store`): keyed by the
    config's content and the options (and the folding switch), so a later run skips the imports and the trace."""
    import json

    from . import trace_store

    if not trace_store.enabled():
        return capture()
    request: dict[str, Any] = {"options": opts}
    try:
        if ref.kind == "hf_config":
            request["config"] = frontend("hf").read_config(ref.path)  # capped: never a FIFO or /dev/zero
            request["path"] = str(ref.path)
        else:
            zoo = frontend("zoo")
            m = zoo.resolve(str(ref.model))
            request["zoo"] = m.name
            if m.source == "hf":
                request["config"] = json.loads(zoo.config_path(m.name).read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 - unreadable or unknown: the frontend reports it
        return capture()
    return trace_store.capture(trace_store.Entry(ref.kind, request), "graph", capture, expect=OpGraph)
