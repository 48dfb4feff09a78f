"""One factory importer: ``"pkg.module:factory"`` / ``"path/to/file.py:factory"`` -> the object it names, and
building an ``nn.Module`` from it on a chosen device.  Used by ``analyze``, ``llm`` and ``profile`` alike.

A factory is a function or an ``nn.Module`` class called with no arguments (an ``nn.Module`` instance is used
as is).  It may return ``(module, example_inputs)``.  Torch is imported only by :func:`build_module`.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import FrontendError, GraphroofError, InputError

__all__ = ["import_target", "build_module", "Built", "error_line"]


def error_line(e: BaseException, limit: int = 300) -> str:
    """``"TypeError: message"`` on one line, at most *limit* characters of message."""
    msg = " ".join(str(e).split()) or type(e).__name__
    if len(msg) > limit:
        msg = msg[:limit - 3] + "..."
    return f"{type(e).__name__}: {msg}"


def import_target(target: str) -> Any:
    """The object named by *target*: ``pkg.module:attr`` (importable from the current directory or
    ``PYTHONPATH``) or ``file.py:attr``.  Every failure is an :class:`InputError` naming the target."""
    mod_name, _, attr = target.rpartition(":")
    if not mod_name or not attr:
        raise InputError(f"{target!r}: expected 'package.module:factory' (or 'path/to/file.py:factory')")
    try:
        if mod_name.endswith(".py") or os.sep in mod_name or "/" in mod_name:
            path = Path(mod_name).expanduser()
            if not path.is_file():
                raise InputError(f"{target!r}: file {mod_name} not found")
            spec = importlib.util.spec_from_file_location(path.stem, path)
            if spec is None or spec.loader is None:
                raise InputError(f"{target!r}: {mod_name} is not a Python file")
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        else:
            added = os.getcwd() not in sys.path
            if added:
                sys.path.insert(0, os.getcwd())
            try:
                mod = importlib.import_module(mod_name)
            finally:
                if added:
                    sys.path.remove(os.getcwd())
    except GraphroofError:
        raise
    except ModuleNotFoundError as e:
        raise InputError(f"cannot import {mod_name!r} for {target!r}: {e}; check the module path and that it "
                         "is importable from the current directory or PYTHONPATH") from None
    except Exception as e:  # noqa: BLE001 - the user's module failed while importing
        raise InputError(f"importing {mod_name!r} for {target!r} raised {error_line(e)}") from None
    if not hasattr(mod, attr):
        close = difflib.get_close_matches(attr, [n for n in dir(mod) if not n.startswith("_")], n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise InputError(f"module {mod_name!r} has no attribute {attr!r}{hint}")
    return getattr(mod, attr)


@dataclass
class Built:
    """What a factory made: the module, the example inputs it returned (or ``None``) and notes for the report."""

    module: Any
    example: Any = None
    notes: list[str] = field(default_factory=list)


def build_module(target: Any, *, device: str = "meta", fallback_real: bool = True) -> Built:
    """Import *target* (``"pkg.module:factory"``; or the factory itself: a function, a class, a
    ``functools.partial``) and call it with ``torch.device(device)`` active.

    On the meta device a factory that needs real tensors (one that loads a checkpoint, or calls ``.tolist()``
    as torchvision's RegNet builder does, or quantizes its model) raises; with *fallback_real* it is then
    called again on the CPU, and a note says so.  Real weights are then held in memory but never computed
    with: the captures run over fake tensors.
    """
    try:
        import torch
    except ModuleNotFoundError:
        raise FrontendError("a module factory needs the torch package: pip install 'graphroof[torch]'") from None
    fn = import_target(target) if isinstance(target, str) else target
    label = target if isinstance(target, str) else _callable_name(target)
    notes: list[str] = []
    if isinstance(fn, torch.nn.Module):
        made: Any = fn
    elif callable(fn):
        try:
            with torch.device(device):
                made = fn()
        except GraphroofError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure of the user's factory
            if device != "meta" or not fallback_real:
                raise FrontendError(f"factory {label!r} raised {error_line(e)}") from None
            try:
                made = fn()
            except Exception as e2:  # noqa: BLE001
                raise FrontendError(f"factory {label!r} raised {error_line(e2)}") from None
            notes.append(f"built with real weights: on the meta device the factory raised {error_line(e, 120)}")
    else:
        raise InputError(f"{label!r} is a {type(fn).__name__}, not a factory or an nn.Module")
    example = None
    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module):
        made, example = made
    if not isinstance(made, torch.nn.Module):
        raise InputError(f"factory {label!r} returned a {type(made).__name__}, not a torch.nn.Module")
    return Built(made, example, notes)


def _callable_name(fn: Any) -> str:
    inner = getattr(fn, "func", fn)  # functools.partial
    return getattr(inner, "__qualname__", None) or getattr(inner, "__name__", None) or type(fn).__name__
