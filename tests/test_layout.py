"""The package layout: no import cycles (function-level imports included), packages importing only packages below
them in the spine (:data:`LEVELS`), no module importing a private name from another package, and only the
pipeline's modules at the top level of ``graphroof/``.

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
TOP_LEVEL = {"__init__", "__main__", "_version", "_lazy", "graph", "hardware", "roofline", "layers", "memory", "analysis", "comparison", "api",
             "units", "dims", "dtypes", "errors", "safe_read", "options", "scopes"}  # safe_read: bounded file reads, a leaf like units / errors


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


#: The spine, bottom to top.  A package of graphroof (a sub-package, or a module at the top level) imports only
#: packages on a LOWER level; packages on one level import none of each other.  ``__init__`` is graphroof's own
#: ``__init__.py``: importing a name from it (``from . import render``) reaches whatever it loads lazily, so it is
#: the top.  A new package gets a level here before it is imported.
LEVELS: tuple[tuple[str, ...], ...] = (
    ("errors",),                                              # the exception types: every level raises them
    ("_version", "_lazy", "units", "dims", "dtypes", "options", "safe_read"),  # leaves: they import errors at most
    ("graph",),       # the OpGraph
    ("scopes",),      # the scope hierarchy of a graph's ops (layer depth, repeated blocks)
    ("hardware",),    # device profiles: plain data, [timing] / [collectives] sections included
    ("counters",),    # FLOPs / bytes per op
    ("fuse",),        # kernels under an engine preset; op classification and compute dtype
    ("timing",),      # the kernel-level time model of a profile
    ("roofline",),    # bounds per op / kernel
    ("layers", "memory"),  # the layer rollup; a graph's parameters, activation peak and device fit
    ("analysis",),    # one graph on one device: the Analysis result
    ("comparison",),  # one graph on several devices: the DeviceComparison result
    ("advice",),      # next steps of a result (fit, fusion), computed by the engines, stored on the results
    ("frontends",),   # model -> OpGraph (torch, onnx, hf, op tables, the trace store)
    ("api",),         # the single-model pipeline: analyze / capture / compare (frontend -> ... -> Analysis)
    ("llm",),         # LLM serving estimates, built on analyze
    ("sweeps",),      # batch / device sweeps
    ("serving",),     # serving simulation: engine steps under a request stream
    ("planner",),     # configuration search: memory fit, bounds, simulations fanned out over processes / Ray
    ("validate",),    # graphroof validate: the bundled measured data through analyze / llm / serving, scored
    ("measure",),     # measured runs compared with the estimate
    ("report",),      # rendering
    ("diff",),        # comparing two reports
    ("cli",),
    ("__main__", "__init__"),
)

def package_of(module: str) -> str:
    """``graphroof.fuse.group`` -> ``fuse``; ``graphroof.roofline`` -> ``roofline``; ``graphroof`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def level_violations(g: nx.DiGraph, levels: tuple[tuple[str, ...], ...]) -> tuple[list[tuple[str, str]], set[str]]:
    """([(module, imported module) whose package is not on a lower level], {packages without a level})."""
    placed = [p for tier in levels for p in tier]
    assert len(placed) == len(set(placed)), f"a package on two levels: {sorted({p for p in placed if placed.count(p) > 1})}"
    level = {p: i for i, tier in enumerate(levels) for p in tier}
    unplaced = {package_of(m) for m in g.nodes} - set(level)
    bad = sorted((a, b) for a, b in g.edges
                 if package_of(a) != package_of(b) and package_of(a) in level and package_of(b) in level
                 and level[package_of(b)] >= level[package_of(a)])
    return bad, unplaced


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


def test_the_level_checker_sees_upward_and_sideways_imports(tmp_path):
    """An import up the spine (lazy or as a string), one between two packages of one level, and a package without
    a level are found; an import down the spine and one inside a package are not."""
    pkg = tmp_path / "graphroof"
    for sub in ("low", "mid", "side", "high"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "a.py").write_text("def f():\n    from ..high import x\n")            # up, lazy
    (pkg / "low" / "b.py").write_text("from . import a\nM = 'graphroof.mid.c'\n")      # inside; up, as a string
    (pkg / "mid" / "c.py").write_text("from ..low import a\nfrom ..side import d\n")   # down; sideways
    (pkg / "side" / "d.py").write_text("from ..low.b import M\n")                       # down
    (pkg / "high" / "__init__.py").write_text("from ..mid.c import *\n")               # down
    (pkg / "loose.py").write_text("")                                                  # no level
    g, _ = import_graph(pkg)
    bad, unplaced = level_violations(g, (("low",), ("mid", "side"), ("high", "__init__")))
    assert bad == [("graphroof.low.a", "graphroof.high"), ("graphroof.low.b", "graphroof.mid.c"),
                   ("graphroof.mid.c", "graphroof.side.d")]
    assert unplaced == {"loose"}
    with pytest.raises(AssertionError, match="a package on two levels: \\['low'\\]"):
        level_violations(g, (("low",), ("mid", "side"), ("high", "low")))


def test_packages_import_only_lower_levels():
    """Every package has a level, and imports only packages below it (:data:`LEVELS`)."""
    g, _ = import_graph()
    bad, unplaced = level_violations(g, LEVELS)
    assert not unplaced, f"packages without a level in LEVELS (place them in the spine): {sorted(unplaced)}"
    assert not bad, "imports against the spine (a package may import only lower levels, see LEVELS): " + \
        ", ".join(f"{a} -> {b} ({package_of(a)} -> {package_of(b)})" for a, b in bad)


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


#: Modules exempted from mypy (pyproject's baseline override) at most: the project's target; lower it as modules get
#: clean, never raise it.
BASELINE_LIMIT = 2
#: Packages / modules that are type-checked as a whole: neither they nor any module under them is in the baseline.
CORE = ("graphroof.graph", "graphroof.errors", "graphroof.counters", "graphroof.hardware", "graphroof.roofline")


def test_mypy_baseline_only_shrinks():
    """The modules exempted from mypy (pyproject's baseline override) never grow, and the core is checked:
    graph, errors, hardware, roofline and every module of counters carry no exemption."""
    tomllib = pytest.importorskip("tomllib", reason="Python 3.10 has no tomllib")
    data = tomllib.loads((PKG.parent / "pyproject.toml").read_text(encoding="utf-8"))
    baseline = [m for o in data["tool"]["mypy"]["overrides"] if o.get("ignore_errors") for m in o["module"]]
    assert len(baseline) <= BASELINE_LIMIT, (f"the mypy baseline grew to {len(baseline)} modules (limit "
                                             f"{BASELINE_LIMIT}); fix the new module's types")
    exempt_core = [m for m in baseline if any(m == c or m.startswith(c + ".") for c in CORE)]
    assert not exempt_core, f"the core is type-checked, never in the mypy baseline: {exempt_core}"
