"""The report package only renders (issue 22): it imports no engine (llm, fuse, roofline, layers), rendering a
result runs no counting or fusing, and every result's JSON is its ``to_dict()`` (next steps included, computed
once by the engine that built it)."""

from __future__ import annotations

import ast
import json
import sys
import warnings
from pathlib import Path

import pytest

import graphroof.counters.count  # noqa: F401 - loaded, so sys.modules holds it
import graphroof.fuse.group  # noqa: F401
from graphroof.api import count_graph
from graphroof.graph import bind
from graphroof.llm import estimate
from graphroof.llm.kvcache import mark_kv_cache
from graphroof.report import render
from tests.llm.toy import RULES, toy_graph, toy_source

REPORT = Path(__file__).resolve().parents[1] / "graphroof" / "report"
#: What report/ may not import: the engines whose results it renders.
ENGINES = ("graphroof.llm", "graphroof.fuse", "graphroof.roofline", "graphroof.layers")


def engine_imports(root: Path, package: str = "graphroof.report") -> list[tuple[str, str]]:
    """(file, imported module) for every import of an :data:`ENGINES` module anywhere in *root*'s files:
    module level, inside functions, ``TYPE_CHECKING`` blocks, relative (``from ..llm import x``) or absolute."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).with_suffix("").parts
        mod_pkg = ".".join([package, *rel[:-1]])  # the package the module's relative imports start from
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod_pkg.split(".")[: len(mod_pkg.split(".")) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for t in targets:
                if any(t == e or t.startswith(e + ".") for e in ENGINES):
                    out.append((path.name, t))
                    break
    return out


def test_the_checker_sees_every_kind_of_engine_import(tmp_path):
    (tmp_path / "a.py").write_text("def f():\n    from ..llm.result import LLMEstimate\n")   # lazy, relative
    (tmp_path / "b.py").write_text("import graphroof.roofline as r\n")                      # absolute
    (tmp_path / "c.py").write_text("from .. import layers\n")                               # a module by name
    (tmp_path / "d.py").write_text("from ..units import fmt_time\nfrom .columns import x\n")  # allowed
    (tmp_path / "e.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from graphroof.fuse import fuse\n")                 # typing-only counts
    found = engine_imports(tmp_path)
    assert found == [("a.py", "graphroof.llm.result"), ("b.py", "graphroof.roofline"),
                     ("c.py", "graphroof.layers"), ("e.py", "graphroof.fuse")]


def test_report_imports_no_engine():
    assert engine_imports(REPORT) == []


# -- JSON = to_dict; rendering computes nothing --------------------------------------------------------------

SHAPE = dict(L=2, H=1024, heads=8, kv_heads=4, I=4096, V=1000)


def _est(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimate(toy_source(**SHAPE), hw="a100", prompt=64, gen=8, batch=[1, 4], rules=RULES, ideal=True,
                        **kw)


def _analysis(round_hw):
    g = mark_kv_cache(bind(toy_graph(), {"batch": 1, "seq": 8}))
    return count_graph(g, round_hw, rules=RULES, runtime="eager")


@pytest.fixture
def no_engine(monkeypatch):
    """Counting and fusing raise while this is active (every name they are imported under)."""
    def boom(*a, **k):
        raise AssertionError("rendering ran the engine")

    import graphroof.advice as advice_mod
    import graphroof.api as api_mod
    import graphroof.fuse as fuse_pkg
    import graphroof.llm.phases as phases_mod

    count_mod = sys.modules["graphroof.counters.count"]  # the module (the package's ``count`` is the function)
    group_mod = sys.modules["graphroof.fuse.group"]

    def arm():
        for mod, name in ((count_mod, "count"), (api_mod, "count"), (phases_mod, "count"), (group_mod, "fuse"),
                          (fuse_pkg, "fuse"), (advice_mod, "fuse"), (phases_mod, "fuse"), (api_mod, "fuse")):
            monkeypatch.setattr(mod, name, boom, raising=False)
    return arm


def test_llm_json_is_to_dict_and_render_computes_nothing(no_engine):
    r = _est()
    kinds = {it["kind"] for it in r.next_steps}
    assert {"quantize", "batch"} <= kinds                 # computed by estimate() and stored
    want = r.to_dict()
    assert json.loads(r.to_json()) == want and want["next_steps"] == json.loads(json.dumps(r.next_steps))
    no_engine()
    for fmt in ("terminal", "markdown", "html"):
        render(r, fmt)
    assert json.loads(render(r, "json")) == want


def test_analysis_json_is_to_dict_and_render_computes_nothing(no_engine, round_hw):
    import dataclasses

    a = count_graph(mark_kv_cache(bind(toy_graph(**SHAPE), {"batch": 1, "seq": 8})),
                    dataclasses.replace(round_hw, mem_capacity_bytes=1e6), rules=RULES, runtime="eager")
    assert [it["kind"] for it in a.next_steps][:1] == ["fit"]   # weights 65 MB on a 1 MB device
    want = a.to_dict()
    assert json.loads(a.to_json()) == want and want["next_steps"][0]["kind"] == "fit"
    no_engine()
    for fmt in ("terminal", "markdown", "csv", "html"):
        render(a, fmt)
    assert json.loads(render(a, "json")) == want


def test_sweep_json_is_to_dict(no_engine):
    from graphroof.sweeps import sweep

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = sweep(toy_source(), hw="a100", batch=[1, 4], prompt=[16], gen=[4], rules=RULES)
    want = r.to_dict()
    no_engine()
    assert json.loads(render(r, "json")) == json.loads(json.dumps(want)) == json.loads(r.to_json())


# -- the fold policy: a folded row's bytes are the sum of its byte fields --------------------------------------

SPLIT = ("weight_bytes", "act_read_bytes", "act_write_bytes", "kv_read_bytes", "kv_write_bytes")


def test_folded_op_row_bytes_equal_their_split(round_hw):
    a = _analysis(round_hw)
    rows = {r["module"]: r for r in a.op_table() if r["op"] == "toy.linear"}
    q = rows["model.layers.*.self_attn.q_proj"]
    # toy q_proj (H 64, bf16, batch 1 x seq 8): reads x 8 x 64 x 2 B = 1,024 B and W 64 x 64 x 2 B = 8,192 B,
    # writes y 1,024 B: 10,240 B per block; two blocks fold: 20,480 B = weights 16,384 + reads 2,048 + writes
    # 2,048 (the split fields used to keep the first block's 1,024 + 1,024: 18,432 B beside a 20,480 B total)
    assert q["repeat"] == 2 and q["bytes"] == 20_480
    assert (q["weight_bytes"], q["act_read_bytes"], q["act_write_bytes"]) == (16_384, 2_048, 2_048)
    for table in (a.op_table(), a.kernel_table(), a.layer_table(),
                  _analysis(round_hw).op_table(fold=False)):
        for r in table:
            assert sum(r[k] for k in SPLIT) == pytest.approx(r["bytes"]), r["name"]


def test_one_fold_policy_for_analyze_and_llm_tables(round_hw):
    """The LLM layer tables and analyze's fold the same rows under the same names (graphroof.layers)."""
    from graphroof.llm.tables import layer_rows

    a = _analysis(round_hw)
    llm = [(r["name"], r["repeat"], r["bytes"]) for r in layer_rows(a, a.depth)]
    ana = [(r["name"], r["repeat"], r["bytes"]) for r in a.layer_table()]
    assert sorted(llm) == sorted(ana)
    # depth 3 (one below the block): each block's attention = q, k, v, o projections + 2 cache cats + attention
    assert ("model.layers.*.self_attn", 2) in {(n, rep) for n, rep, _ in llm}
