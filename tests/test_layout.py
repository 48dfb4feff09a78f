"""The package layout: no import cycles (function-level imports included), no module importing a private name from
another package, and only the pipeline's modules at the top level of ``graphroof/``.

The import graph is built with ``ast`` from the source files, so lazy imports inside functions count too, and so do
module names spelled as strings (``importlib.import_module("graphroof.x")``): a cycle hidden behind an import
string is still a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

PKG = Path(__file__).resolve().parents[1] / "graphroof"

#: What the top level of graphroof/ may hold (the pipeline; everything else lives in a sub-package).
TOP_LEVEL = {"__init__", "__main__", "_version", "graph", "hardware", "roofline", "layers", "analysis", "api",
             "units", "dtypes", "errors", "safe_read"}  # safe_read: bounded file reads, a leaf like units / errors


def _modules(root: Path = PKG) -> dict[str, Path]:
    out = {}
    for p in sorted(root.rglob("*.py")):
        parts = list(p.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


def import_graph(root: Path = PKG) -> tuple[nx.DiGraph, list[tuple[str, str]]]:
    """(module -> imported module edges, [(module, private name imported from another package)])."""
    mods = _modules(root)
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    private = []
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.split(".")[0] != "graphroof":
                    continue
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    dest = full if full in mods else target
                    g.add_edge(mod, dest)
                    if alias.name.startswith("_") and not alias.name.startswith("__") \
                            and dest.split(".")[:2] != mod.split(".")[:2]:
                        private.append((mod, full))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "graphroof":
                        g.add_edge(mod, alias.name)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in mods \
                    and node.value.startswith("graphroof."):
                g.add_edge(mod, node.value)
    return g, private


def test_the_checker_sees_cycles_and_private_imports(tmp_path):
    """The checker itself: a lazy import cycle, an import-string cycle and a private import are all found."""
    pkg = tmp_path / "graphroof"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from .b import g\n")                    # lazy: a -> b
    (pkg / "b.py").write_text("from .a import f\nfrom .sub import _hidden\n")        # b -> a, private
    (pkg / "sub" / "__init__.py").write_text("_hidden = 1\n")
    (pkg / "sub" / "c.py").write_text("import importlib\nM = 'graphroof.sub.d'\n")    # string: c -> d
    (pkg / "sub" / "d.py").write_text("from . import c\n")                           # d -> c
    g, private = import_graph(pkg)
    cycles = sorted(sorted(c) for c in nx.simple_cycles(g))
    assert cycles == [["graphroof.a", "graphroof.b"], ["graphroof.sub.c", "graphroof.sub.d"]]
    assert private == [("graphroof.b", "graphroof.sub._hidden")]


def test_no_import_cycles():
    g, _ = import_graph()
    cycles = sorted((sorted(c) for c in nx.simple_cycles(g)), key=len)
    assert cycles == [], f"import cycles: {cycles[:10]}"


def test_no_private_names_across_packages():
    _, private = import_graph()
    assert private == [], f"private names imported from another package: {private}"


@pytest.mark.parametrize("path", sorted(p.stem for p in PKG.glob("*.py")))
def test_top_level_holds_only_the_pipeline(path):
    assert path in TOP_LEVEL, f"graphroof/{path}.py belongs in a sub-package (measure/, report/, cli/, ...)"


def test_mypy_baseline_only_shrinks():
    """The modules exempted from mypy (pyproject's baseline override) never grow, and the core is checked:
    graph, errors, hardware, roofline and the counting core carry no exemption."""
    tomllib = pytest.importorskip("tomllib", reason="Python 3.10 has no tomllib")
    data = tomllib.loads((PKG.parent / "pyproject.toml").read_text(encoding="utf-8"))
    baseline = [m for o in data["tool"]["mypy"]["overrides"] if o.get("ignore_errors") for m in o["module"]]
    assert len(baseline) <= 35, f"the mypy baseline grew to {len(baseline)} modules; fix the new module's types"
    core = {"graphroof.graph", "graphroof.errors", "graphroof.hardware", "graphroof.roofline",
            "graphroof.counters.common", "graphroof.counters.cost", "graphroof.counters.count"}
    assert not core & set(baseline)
