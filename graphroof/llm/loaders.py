"""Open a model given by name, path or object as an :class:`~graphroof.llm.source.LLMSource`.

* a zoo name (``llama-2-7b``), a transformers ``config.json`` or its folder, a transformers model object, or a
  ``module:factory`` returning one: :class:`~graphroof.llm.hf.HFSource` (decode traced with a KV cache);
* an ``.onnx`` file: :class:`~graphroof.llm.onnx.ONNXSource` (decode binds the ``past_key_values`` inputs);
* any other ``nn.Module`` (or factory): :class:`ModuleSource`, which has no KV cache: it takes token ids
  ``[batch, seq]`` and every generated token recomputes the context.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import FrontendError, InputError
from ..graph import OpGraph, Role
from .source import LLMSource, ModelSpec, Param

__all__ = ["open_model", "ModuleSource"]

#: ``pkg.module:factory`` or ``path/to/file.py:factory``.
_FACTORY = re.compile(r"^[\w.\-/\\]+:[A-Za-z_]\w*$")


class ModuleSource(LLMSource):
    """A plain ``nn.Module`` language model ``forward(ids [batch, seq]) -> logits``, without a KV cache."""

    def __init__(self, module: Any, *, name: str, capture: str = "auto", max_positions: int | None = None):
        self.module = module
        self.capture = capture
        self.spec = ModelSpec(name=name, max_positions=max_positions)
        self.kv_cache = False
        self.no_cache_reason = (f"{type(module).__name__} is a plain nn.Module: graphroof cannot hand it a KV "
                                "cache (a transformers model can)")
        self.notes = []

    def prefill_graph(self, batch: int, seq: int) -> OpGraph:
        from ..frontends.torch_export import load_module

        return load_module(self.module, [((batch, seq), "int64")], capture=self.capture, name=self.spec.name)

    def params(self) -> list[Param]:
        from ..frontends.torch_common import spec_of

        return [(n.rsplit(".", 1)[0] if "." in n else "", spec_of(p, Role.WEIGHT))
                for n, p in self.module.named_parameters()]


def _frontend(name: str):
    """``graphroof.frontends.<name>``, or a FrontendError saying which part of the install is missing."""
    import importlib

    try:
        return importlib.import_module(f"graphroof.frontends.{name}")
    except ModuleNotFoundError as e:
        what = (e.name or "").split(".")[0]
        if what in ("torch", "transformers", "onnx", "onnxruntime"):
            extra = "onnx" if what.startswith("onnx") else "torch,hf"
            raise FrontendError(f"this model needs the {what} package: pip install 'graphroof[{extra}]'") from None
        raise FrontendError(f"this model needs graphroof's {name} frontend (graphroof.frontends.{name}), which this "
                            "install does not have") from None


def _import_factory(target: str) -> Any:
    """The object named by ``pkg.module:attr`` (importable from the current directory) or ``file.py:attr``."""
    import importlib
    import importlib.util
    import os
    import sys

    mod_name, _, attr = target.rpartition(":")
    try:
        if mod_name.endswith(".py") or "/" in mod_name or os.sep in mod_name:
            spec = importlib.util.spec_from_file_location(Path(mod_name).stem, mod_name)
            if spec is None or not Path(mod_name).exists():
                raise InputError(f"{target!r}: file {mod_name} not found")
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        else:
            sys.path.insert(0, os.getcwd())
            try:
                mod = importlib.import_module(mod_name)
            finally:
                sys.path.remove(os.getcwd())
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's module failed to import
        raise InputError(f"cannot import {mod_name!r} for {target!r}: {type(e).__name__}: {e}") from None
    if not hasattr(mod, attr):
        raise InputError(f"module {mod_name!r} has no attribute {attr!r} (from {target!r})")
    return getattr(mod, attr)


def _is_hf_model(obj: Any) -> bool:
    cfg = getattr(obj, "config", None)
    return cfg is not None and hasattr(cfg, "model_type") and hasattr(obj, "named_parameters")


def _from_module(module: Any, name: str, opts: dict) -> LLMSource:
    from .hf import HFSource

    if _is_hf_model(module):
        return HFSource(name=name, model=module, capture=opts.get("capture", "dispatch"))
    limit = getattr(getattr(module, "config", None), "block_size", None)
    return ModuleSource(module, name=name, capture=opts.get("capture", "auto"),
                        max_positions=limit if isinstance(limit, int) else None)


def open_model(model: Any, *, dtype: str | None = None, name: str | None = None, **opts: Any) -> LLMSource:
    """See the module docstring.  *dtype* overrides a config's dtype; *opts* may carry ``dims`` (ONNX) and
    ``capture`` (torch)."""
    from ..frontends import is_torch_module

    if is_torch_module(model):
        return _from_module(model, name or type(model).__name__, opts)
    if not isinstance(model, (str, Path)):
        raise InputError(f"cannot estimate a {type(model).__name__}; pass a zoo name, a config.json, an .onnx file, "
                         "'module:factory' or an nn.Module")
    s = str(model)
    path = Path(s).expanduser()
    if path.suffix.lower() == ".onnx":
        if not path.exists():
            raise InputError(f"model file {s!r} not found; check the path")
        _frontend("onnx")
        from .onnx_source import ONNXSource

        return ONNXSource(path, dims=opts.get("dims"), name=name)
    if path.is_dir() and (path / "config.json").exists():
        path = path / "config.json"
    if path.suffix.lower() == ".json":
        if not path.exists():
            raise InputError(f"model file {s!r} not found; check the path")
        from .hf import HFSource

        data = _frontend("hf").read_config(path)
        nm = name or str(data.get("_name_or_path") or path.parent.name or path.stem)
        return HFSource(data, name=nm, dtype=dtype, source=str(path))
    if path.exists():
        raise InputError(f"don't know how to read {s!r} as an LLM; use a zoo name, a config.json (or its folder), "
                         "an .onnx file or 'module:factory'")
    if _FACTORY.match(s):
        _frontend("torch_export")
        import torch

        fn = _import_factory(s)
        if isinstance(fn, torch.nn.Module):
            module = fn
        else:
            with torch.device("meta"):
                module = fn()
        if isinstance(module, tuple):
            module = module[0]
        if not is_torch_module(module):
            raise InputError(f"{s!r} returned a {type(module).__name__}, not an nn.Module")
        return _from_module(module, name or s.rpartition(":")[2], opts)
    zoo = _frontend("zoo")
    from .hf import HFSource

    m = zoo.resolve(s)
    if m.family != "llm" or m.source != "hf":
        raise InputError(f"zoo model {m.name} is a {m.family} model, not a language model; use `graphroof analyze`")
    hf = _frontend("hf")
    return HFSource(hf.read_config(zoo.config_path(m.name)), name=m.name, dtype=dtype, source=f"zoo:{m.name}")
