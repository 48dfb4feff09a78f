"""The rooms a newcomer can see: which package may touch which library, and where the run-wide switches live.

* Only ``graphroof/frontends/`` and ``graphroof/measure/`` import torch, onnx, onnxruntime or transformers
  (function-level imports and ``importlib.import_module("torch")`` strings count; docstrings do not).
* Every ``GRAPHROOF_*`` environment variable is read through :func:`graphroof.options.env` (no other module reads
  ``os.environ`` / ``os.getenv`` for one), and the README's "Environment variables" table lists exactly
  :data:`graphroof.options.ENV`.
* No hidden state: the frontends hold no context variables; the switches are fields of the frozen
  :class:`graphroof.options.Options`, passed explicitly.

The checks walk the source with ``ast`` (as ``tests/test_layout.py`` does); each is first run on a small
synthetic package, so a checker that sees nothing fails.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from graphroof import options

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "graphroof"
LIBRARIES = {"torch", "onnx", "onnxruntime", "transformers"}
#: the packages allowed to import the libraries above
LIBRARY_ROOMS = ("graphroof/frontends/", "graphroof/measure/")


def _files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.py"))


def library_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, library)`` for every import of a library of :data:`LIBRARIES` in *path*, at any depth: ``import
    torch.nn``, ``from onnx import helper``, ``importlib.import_module("transformers")``, ``__import__("torch")``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            f = node.func
            fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if fname in ("import_module", "__import__", "find_spec"):
                names = [node.args[0].value]
        out += [(node.lineno, n.split(".")[0]) for n in names if n.split(".")[0] in LIBRARIES]
    return out


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` / ``environ`` / ``os.getenv`` / ``getenv`` (the expression itself)."""
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name in ("environ", "getenv", "environb")


def graphroof_env_reads(path: Path) -> list[tuple[int, str]]:
    """``(line, variable)`` for every read of a ``GRAPHROOF_*`` variable straight from the environment:
    ``os.environ.get("GRAPHROOF_X")``, ``os.environ["GRAPHROOF_X"]``, ``os.getenv("GRAPHROOF_X")``,
    ``"GRAPHROOF_X" in os.environ``."""
    out = []

    def named(args: list[ast.expr]) -> str | None:
        for a in args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("GRAPHROOF_"):
                return a.value
        return None

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        hit = None
        if isinstance(node, ast.Call):
            f = node.func
            if _is_environ(f) or (isinstance(f, ast.Attribute) and _is_environ(f.value)):
                hit = named(list(node.args))
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            hit = named([node.slice])  # type: ignore[list-item]
        elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
            hit = named([node.left])
        if hit:
            out.append((node.lineno, hit))
    return out


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


# --- the checkers themselves ----------------------------------------------------------------------------------

def test_the_checkers_see_every_spelling(tmp_path):
    (tmp_path / "a.py").write_text(
        "import importlib\n"
        "def f():\n"
        "    import torch.nn as nn\n"                              # lazy
        "    from onnx import helper\n"
        "    return importlib.import_module('transformers')\n"     # an import string
        "'''import onnxruntime: a docstring, not an import'''\n"
        "from .onnx import x\n"                                    # relative: graphroof's own package
        "import torchvision\n")                                    # not one of the four
    assert library_imports(tmp_path / "a.py") == [(3, "torch"), (4, "onnx"), (5, "transformers")]
    (tmp_path / "b.py").write_text(
        "import os\nfrom os import environ, getenv\n"
        "a = os.environ.get('GRAPHROOF_A')\n"
        "b = os.environ['GRAPHROOF_B']\n"
        "c = getenv('GRAPHROOF_C', '1')\n"
        "d = 'GRAPHROOF_D' in environ\n"
        "e = os.environ.get('HOME')\n"                             # not ours
        "f = env('GRAPHROOF_F')\n")                                # through options.env: fine
    assert graphroof_env_reads(tmp_path / "b.py") == [(3, "GRAPHROOF_A"), (4, "GRAPHROOF_B"), (5, "GRAPHROOF_C"),
                                                      (6, "GRAPHROOF_D")]


# --- the rules ------------------------------------------------------------------------------------------------

def test_only_frontends_and_measure_import_the_libraries():
    found = [f"{_rel(p)}:{line} imports {lib}" for p in _files(PKG) if not _rel(p).startswith(LIBRARY_ROOMS)
             for line, lib in library_imports(p)]
    assert found == [], "move the library code into graphroof/frontends/ (or measure/) behind a plain-data " \
                        f"function: {found}"


def test_the_frontends_do_import_them():
    """The rule above is not vacuous: the frontends' sub-packages are where the libraries are imported."""
    libs = {lib for sub in ("torch", "onnx", "hf") for p in _files(PKG / "frontends" / sub)
            for _, lib in library_imports(p)}
    assert {"torch", "onnx", "transformers"} <= libs


def test_frontend_sub_packages_import_no_library_when_imported():
    """``graphroof.frontends`` and its sub-packages' ``__init__`` stay library-free: classifying a model or reading
    a config never imports torch."""
    for init in [PKG / "frontends" / "__init__.py", *(PKG / "frontends" / s / "__init__.py" for s in
                                                       ("torch", "onnx", "hf"))]:
        assert library_imports(init) == [], _rel(init)


def test_graphroof_variables_are_read_only_through_options_env():
    found = [f"{_rel(p)}:{line} reads {name}" for p in _files(PKG) if _rel(p) != "graphroof/options.py"
             for line, name in graphroof_env_reads(p)]
    assert found == [], f"read GRAPHROOF_* variables with graphroof.options.env: {found}"


def test_every_variable_used_is_documented():
    """Every ``GRAPHROOF_*`` name the package passes to ``env(...)`` is in ENV (env refuses others at run time)."""
    used = set()
    for p in _files(PKG):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "env" \
                    and node.args and isinstance(node.args[0], ast.Constant):
                used.add(node.args[0].value)
    assert used and used <= set(options.ENV)
    with pytest.raises(KeyError, match="not a documented"):
        options.env("GRAPHROOF_NOT_A_VARIABLE")


def _readme_table() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(GRAPHROOF_\w+)` \|", section, flags=re.M)


def test_the_readme_table_lists_exactly_env():
    names = _readme_table()
    assert len(names) == len(set(names)), "a variable is listed twice"
    assert set(names) == set(options.ENV)


def test_options_is_a_frozen_library_free_value():
    o = options.Options()
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.fold = False  # type: ignore[misc]
    assert o.with_(fold=False) == options.Options(fold=False, store=True) and o.fold
    assert library_imports(PKG / "options.py") == []


def test_no_context_variables_hold_the_switches():
    """Folding and the store are Options fields passed explicitly: no ContextVar, no ``folding()`` /
    ``caching()`` context manager is left in the frontends or the CLI."""
    for p in _files(PKG / "frontends") + _files(PKG / "cli") + [PKG / "options.py", PKG / "api.py"]:
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                assert "contextvars" not in mods, _rel(p)
            if isinstance(node, ast.FunctionDef):
                assert node.name not in ("folding", "caching", "fold_enabled"), f"{_rel(p)}: {node.name}"
