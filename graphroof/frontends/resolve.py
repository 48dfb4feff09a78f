"""One resolver: what a model argument *is*, decided once for ``analyze``, ``llm`` and ``profile`` alike.

:func:`classify` turns a model argument into a :class:`ModelRef` without importing torch or onnx:

========== ====================================================================================
kind        argument
========== ====================================================================================
graph       an :class:`~graphroof.graph.OpGraph` (used as is)
module      a ``torch.nn.Module`` (any device; meta, CPU or built under FakeTensorMode)
onnx        a path ending in ``.onnx``
table       an op table: ``.csv`` / ``.yaml`` / ``.yml``, or a ``.json`` that is not a transformers config
hf_config   a transformers ``config.json`` (a dict with ``model_type`` or ``architectures``) or its folder, or a
            Hugging Face model id ``org/name`` that is not a local path (its config.json from the local Hugging
            Face cache, fetched alone when online: :mod:`graphroof.frontends.hf.hub`)
factory     ``"pkg.module:factory"`` or ``"path/to/file.py:factory"`` (an existing path wins over this)
zoo         anything else: a name from the bundled zoo (``llama-2-7b``); the zoo says if it is unknown
========== ====================================================================================

:func:`resolve_model` is the one dispatcher on top of it: it also reads what a reference names (the
transformers config of a config file or a zoo entry, the zoo entry itself) into a :class:`Resolved`, the plain
data ``load`` (graphs), ``open_model`` (LLM sources), ``profile`` (real modules) and the CLI's checks all start
from.

:func:`check_options` validates the frontend options for a kind: a misspelled option raises naming the valid
ones, an option that sizes another kind of model says what to use instead.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..graph import OpGraph

__all__ = ["ModelRef", "Resolved", "classify", "resolve_model", "check_options", "is_hf_config", "is_torch_module",
           "OPTIONS", "FLAGS", "TABLE_SUFFIXES", "KINDS"]

TABLE_SUFFIXES = (".csv", ".yaml", ".yml", ".json")
KINDS = ("graph", "module", "onnx", "table", "hf_config", "factory", "zoo")

_TORCH = ("input_shapes", "capture", "kv_inputs", "causal_masks", "name", "notes", "fold_blocks")
_SIZED = ("batch", "seq", "dtype", "input_shapes", "capture", "name", "fold_blocks")
#: Frontend options each kind accepts (``dims`` is accepted everywhere: ``analyze`` binds it after loading).
OPTIONS: dict[str, tuple[str, ...]] = {
    "graph": ("dims", "name"),
    "module": ("dims", *_TORCH),
    "factory": ("dims", "device", *_TORCH),
    "onnx": ("dims", "batch", "input_shapes", "name", "loop_trips"),
    "table": ("dims", "name"),
    "hf_config": ("dims", *_SIZED),
    "zoo": ("dims", *_SIZED),
}
_HINTS = {
    "batch": "for a module give the input shapes with --input",
    "seq": "for an ONNX model bind its sequence dim with --dim NAME=VALUE; for a module give the input shapes with "
           "--input",
    "dtype": "only zoo and config.json models are built at a chosen dtype",
    "capture": "only PyTorch models are captured",
    "fold_blocks": "only PyTorch models are traced (an ONNX graph or an op table already lists every block)",
}
#: The command-line flag of each option that has one: CLI messages name flags, never Python keywords.
FLAGS = {"dims": "--dim", "input_shapes": "--input", "batch": "--batch", "seq": "--seq", "dtype": "--dtype",
         "loop_trips": "--loop-trips", "fold_blocks": "--no-fold-blocks"}
_KIND_NAMES = {"graph": "an OpGraph", "module": "an nn.Module", "factory": "a module factory",
               "onnx": "an ONNX model", "table": "an op table", "hf_config": "a transformers config",
               "zoo": "a zoo model"}


@dataclass(frozen=True)
class ModelRef:
    """A classified model argument: *kind* (one of :data:`KINDS`), the original *model*, and for files the
    resolved *path* (a config folder resolves to its ``config.json``), for factories the *target* string, for a
    Hugging Face model id its *repo_id* (then *path* is the cached config.json)."""

    kind: str
    model: Any
    path: Path | None = None
    target: str = ""
    repo_id: str = ""

    @property
    def label(self) -> str:
        """A short name for messages and report headers."""
        if self.kind == "factory":
            return self.target
        if self.path is not None:
            return str(self.model)
        if isinstance(self.model, str):
            return self.model
        return type(self.model).__name__


def is_torch_module(obj: Any) -> bool:
    """True for an ``nn.Module`` (without importing torch when nobody has)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


def is_hf_config(path: Path) -> bool:
    """A ``.json`` file holding a transformers config (``model_type`` or ``architectures``)."""
    if path.suffix.lower() != ".json":
        return False
    from ..safe_read import parse_json, read_text

    try:  # a regular file under the size cap, bounded nesting: a FIFO, /dev/zero or a deep file is not read here
        data = parse_json(read_text(path, "model file"), str(path))
    except InputError:
        return False
    return isinstance(data, dict) and ("model_type" in data or "architectures" in data)


def _is_factory(s: str, path: Path) -> bool:
    mod, sep, attr = s.rpartition(":")
    return bool(sep) and attr.isidentifier() and len(mod) > 1 and not path.exists()


def classify(model: Any) -> ModelRef:
    """What *model* is (see the module docstring); missing files and unreadable kinds raise :class:`InputError`."""
    if isinstance(model, OpGraph):
        return ModelRef("graph", model)
    if is_torch_module(model):
        return ModelRef("module", model)
    if callable(model) and not isinstance(model, (str, Path)):  # a factory function or nn.Module class
        return ModelRef("factory", model, target=getattr(model, "__qualname__", type(model).__name__))
    if not isinstance(model, (str, Path)):
        raise InputError(f"cannot analyse a {type(model).__name__}; pass an nn.Module, an .onnx / op-table path, "
                         "a config.json, 'module:factory' or a zoo name")
    s = str(model)
    path = Path(s).expanduser()
    if isinstance(model, str) and _is_factory(s, path):
        return ModelRef("factory", model, target=s)
    suffix = path.suffix.lower()
    if suffix == ".onnx" or suffix in TABLE_SUFFIXES:
        if not path.exists():
            raise InputError(f"model file {s!r} not found; check the path")
        if path.is_dir():
            raise InputError(f"{s!r} is a directory, not a model file")
        if suffix == ".onnx":
            return ModelRef("onnx", model, path=path)
        if is_hf_config(path):
            return ModelRef("hf_config", model, path=path)
        return ModelRef("table", model, path=path)
    if path.exists():
        if path.is_dir() and (path / "config.json").exists():
            return ModelRef("hf_config", model, path=path / "config.json")
        raise InputError(f"don't know how to read {s!r}; use .onnx, .csv, .yaml, .json, a config.json (or its "
                         "folder), 'module:factory', a Hugging Face model id or a zoo name (graphroof zoo list)")
    if isinstance(model, str):
        from .hf.hub import config_path, is_repo_id

        if is_repo_id(s):
            return ModelRef("hf_config", model, path=config_path(s), repo_id=s)
    return ModelRef("zoo", model)


def check_options(ref: ModelRef, opts: Mapping[str, Any]) -> None:
    """Raise :class:`InputError` for an option *ref*'s frontend does not take: misspelled options name the
    valid ones (with a close match), options of another kind of model say what to use instead."""
    valid = OPTIONS[ref.kind]
    known = {o for opts_ in OPTIONS.values() for o in opts_}
    for key, value in opts.items():
        if key in valid or value is None:
            continue
        what = _KIND_NAMES[ref.kind]
        if key in known:
            hint = ("its numbers are fixed: edit the table" if ref.kind in ("table", "graph")
                    else _HINTS.get(key, ""))
            if key in FLAGS:  # reachable from the command line: flags only
                flags = [FLAGS[o] for o in valid if o in FLAGS]
                raise InputError(f"{FLAGS[key]} does not apply to {what} ({ref.label})" + (f"; {hint}" if hint else "")
                                 + f"; flags that size it: {', '.join(flags)}")
            raise InputError(f"option {key!r} does not apply to {what} ({ref.label})"
                             + (f"; {hint}" if hint else "") + f"; valid options here: {', '.join(valid)}")
        close = difflib.get_close_matches(key, sorted(known), n=2)
        raise InputError(f"unknown option {key!r} for {what}" + (f" (did you mean {' or '.join(close)}?)" if close
                         else "") + f"; valid options here: {', '.join(valid)}")


@dataclass(frozen=True)
class Resolved:
    """A model reference and what it names, read once (:func:`resolve_model`).

    *ref*: the :class:`ModelRef`; *config*: the transformers config content (a config file, a Hugging Face model
    id or a zoo entry built from one), None otherwise; *zoo*: the zoo entry of a zoo name; *name*: the model's
    name in reports; *source*: what the model is, as a short stable label (the config's path, ``zoo:<name>``),
    part of the store's key.
    """

    ref: ModelRef
    config: dict[str, Any] | None = None
    zoo: Any = None
    name: str = ""
    source: str = ""

    @property
    def kind(self) -> str:
        return self.ref.kind

    @property
    def transformers(self) -> bool:
        """Whether the model is built from a transformers config (a config file or a zoo entry)."""
        return self.config is not None


def _config_name(ref: ModelRef, data: dict[str, Any]) -> str:
    from ..errors import sanitize_terminal

    assert ref.path is not None
    stem = ref.path.parent.name if ref.path.name == "config.json" and ref.path.parent.name else ref.path.stem
    return sanitize_terminal(ref.repo_id or data.get("_name_or_path") or stem)  # printable: it titles reports


def resolve_model(model: Any) -> Resolved:
    """Classify *model* (:func:`classify`) and read what it names: the config of a transformers config (checked for
    implausible sizes before transformers reads it) and the entry of a zoo name (with its config when it is built
    from one).  An unknown zoo name raises :class:`InputError` with close matches."""
    ref = model if isinstance(model, ModelRef) else classify(model)
    if ref.kind == "hf_config":
        from .hf.config import read_config
        from .hf.limits import check_config_values

        assert ref.path is not None
        data = read_config(ref.path)  # capped: never a FIFO or /dev/zero
        check_config_values(data, str(ref.path))
        return Resolved(ref, config=data, name=_config_name(ref, data), source=str(ref.path))
    if ref.kind == "zoo":
        from . import zoo

        m = zoo.resolve(str(ref.model))
        if m.source == "hf":
            from .hf.config import read_config

            return Resolved(ref, config=read_config(zoo.config_path(m.name)), zoo=m, name=m.name,
                            source=f"zoo:{m.name}")
        return Resolved(ref, zoo=m, name=m.name, source=f"zoo:{m.name}")
    return Resolved(ref, name=ref.label)
