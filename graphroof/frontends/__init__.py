"""Frontends turn a model into an :class:`~graphroof.graph.OpGraph`.  Only frontends import torch or onnx.

``load(model, ...)`` dispatches on what *model* is:

* an ``OpGraph``: returned as is;
* a ``torch.nn.Module``: :func:`graphroof.frontends.torch_export.load_module` (needs *inputs*);
* a path ending in ``.onnx``: :func:`graphroof.frontends.onnx.load_onnx`;
* a ``.csv`` / ``.yaml`` / ``.yml`` file, or a ``.json`` file that is not a transformers config: the op table;
* a ``config.json`` with ``model_type`` / ``architectures``: a transformers model built on the meta device;
* ``"pkg.module:factory"``: a Python callable returning an ``nn.Module``;
* a name from the bundled zoo (``llama-2-7b``).
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import FrontendError, InputError
from ..graph import OpGraph

__all__ = ["load", "is_torch_module", "is_hf_config"]

TABLE_SUFFIXES = (".csv", ".yaml", ".yml", ".json")


def is_torch_module(obj: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


def _lazy(module: str, extra: str):
    try:
        return importlib.import_module(f"graphroof.frontends.{module}")
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] in ("torch", "onnx", "onnxruntime", "transformers"):
            raise FrontendError(f"this model needs the {e.name.split('.')[0]} package: pip install 'graphroof[{extra}]'") from None
        raise


def _is_hf_config(path: Path) -> bool:
    if path.suffix != ".json":
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and ("model_type" in data or "architectures" in data)


#: Public name for the config.json test (used by :mod:`graphroof.measure.model`).
is_hf_config = _is_hf_config


def load(model: Any, inputs: Any = None, **opts: Any) -> OpGraph:
    """Load *model* into an OpGraph; *opts* go to the frontend (``dims``, ``input_shapes``, ``batch``, ``seq``...)."""
    if isinstance(model, OpGraph):
        return model
    if is_torch_module(model):
        return _lazy("torch_export", "torch").load_module(model, inputs, **opts)
    if not isinstance(model, (str, Path)):
        raise InputError(f"cannot analyse a {type(model).__name__}; pass an nn.Module, an .onnx / op-table path, "
                         "a config.json, 'module:factory' or a zoo name")
    s = str(model)
    path = Path(s).expanduser()
    mod, sep, attr = s.rpartition(":")
    if sep and attr.isidentifier() and len(mod) > 1 and not path.exists():  # "pkg.mod:factory", "file.py:fn"
        return _lazy("torch_export", "torch").load_factory(s, inputs, **opts)
    if path.suffix.lower() == ".onnx":
        if not path.exists():
            raise InputError(f"model file {s!r} not found; check the path")
        return _lazy("onnx", "onnx").load_onnx(path, **opts)
    if path.suffix.lower() in TABLE_SUFFIXES:
        if not path.exists():
            raise InputError(f"model file {s!r} not found; check the path")
        if _is_hf_config(path):
            return _lazy("hf", "hf").load_config(path, **opts)
        from .optable import load_table

        return load_table(path, **{k: v for k, v in opts.items() if k in ("name",)})
    if path.exists():
        if path.is_dir() and (path / "config.json").exists():
            return _lazy("hf", "hf").load_config(path / "config.json", **opts)
        raise InputError(f"don't know how to read {s!r}; use .onnx, .csv, .yaml, .json, a config.json, "
                         "'module:factory' or a zoo name (graphroof zoo list)")
    zoo = _lazy("zoo", "torch")
    return zoo.load_zoo(s, **opts)
