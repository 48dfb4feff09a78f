"""PEP 562 lazy attributes of a package, written once for every package that defers its imports.

``__getattr__ = lazy_getattr(__name__, {"serve": "compare", ...})`` in a package's ``__init__``: the first access
to a public name imports the submodule that defines it (``graphroof.serving.compare`` for ``serve``) and stores the
value in the package's namespace, so later accesses are plain attribute reads; an unknown name raises the
``AttributeError`` Python would.  Importing the package itself loads none of the submodules.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of *package*: public name -> the submodule (relative to *package*) defining it."""

    def __getattr__(name: str) -> Any:
        mod = table.get(name)
        if mod is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{mod}", package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
