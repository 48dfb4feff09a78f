"""CSV / JSON outputs, `analyze --format html|csv`, `plot`, `compare`, and progress on stderr."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

import graphroof
from graphroof.api import analyze_on_profiles
from graphroof.cli import main
from graphroof.cli.compare import split_profiles
from graphroof.cli.progress import Progress
from graphroof.report import render_text
from tests._report_models import analyse, tiny_graph

ROOT = Path(__file__).resolve().parents[2]
TEXTBOOK = str(ROOT / "tests" / "gold" / "ops_table.csv")  # 10 ops; a copy, so examples/ may change

DOUBLE_A100 = """
name = "a100-doubled"
display_name = "A100 with every rate doubled"
[matrix_peak_flops_per_s]
fp16 = 624e12
bf16 = 624e12
[vector_peak_flops_per_s]
fp16 = 156e12
bf16 = 78e12
[memory]
bw_bytes_per_s = 4.078e12
[efficiency]
matrix = 0.75
vector = 0.7
mem_bw = 0.85
launch_overhead_s = 2e-6
"""


# -- csv / json ------------------------------------------------------------------------------------------

def test_csv_layers_and_ops(round_hw):
    a = analyse(tiny_graph(), round_hw)
    rows = list(csv.DictReader(io.StringIO(render_text(a, "csv"))))
    assert [r["name"] for r in rows] == ["emb", "blk.mlp", "blk.attn"]
    mlp = rows[1]
    assert mlp["phase"] == "model" and float(mlp["flops"]) == 201e9 and float(mlp["time_s"]) == pytest.approx(4e-3)
    assert mlp["op_kinds"] == "table.op:3" and "ops" not in mlp
    ops = list(csv.DictReader(io.StringIO(render_text(a, "csv", ops=True))))
    assert [r["name"] for r in ops] == ["embed", "up", "act", "view", "mystery"]
    assert ops[4]["estimated"] == "True" and ops[4]["inputs"] == "bf16[1000,1000]"


def test_json_several_phases(round_hw):
    from graphroof.report.tables import render_json

    pre, dec = analyse(tiny_graph(), round_hw), analyse(tiny_graph(), round_hw)
    data = json.loads(render_json([("prefill", pre), ("decode", dec)]))
    assert [p["phase"] for p in data["phases"]] == ["prefill", "decode"]
    assert data["phases"][0]["totals"]["time_s"] == pytest.approx(4.504e-3)
    one = json.loads(render_json(pre))
    assert one["schema_version"] == 1 and "phases" not in one   # one analysis keeps the analyze schema


def test_cli_analyze_html_and_csv(tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["analyze", TEXTBOOK, "--hw", "a100", "-f", "html", "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "ops_table" in html
    assert main(["analyze", TEXTBOOK, "-f", "csv", "--ops"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 10 and rows[-1]["name"] == "decode.lm_head_gemv"


def test_cli_unknown_format(capsys):
    assert main(["analyze", TEXTBOOK, "-f", "pdf"]) == 1
    err = capsys.readouterr().err
    assert err == "graphroof: error: unknown format 'pdf'; use one of: terminal, markdown, json, csv, html\n"


# -- plot ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("suffix,magic", [(".png", b"\x89PNG"), (".svg", b"<?xml")])
def test_cli_plot(tmp_path, suffix, magic, capsys):
    out = tmp_path / f"roofline{suffix}"
    assert main(["-q", "plot", TEXTBOOK, "--hw", "a100", "-o", str(out)]) == 0
    data = out.read_bytes()
    assert data.startswith(magic) and len(data) > 10_000
    if suffix == ".svg":
        assert data.decode().rstrip().endswith("</svg>")


def test_plot_static_chart_has_the_ceilings_and_points(round_hw):
    """The matplotlib drawing gets the same data as the HTML chart: 2 roofs + slope, 1 layer / 2 op points."""
    from graphroof.report.chart import chart_data
    from graphroof.report.content import as_phases

    cd = chart_data(as_phases(analyse(tiny_graph(), round_hw)))
    assert [(c.key, c.peak_flops_per_s, c.ridge) for c in cd.ceilings] == [
        ("matrix.bf16", 100e12, 100.0), ("vector.bf16", 10e12, 10.0)]  # 100e12 / 1e12, 10e12 / 1e12
    assert [p.name for p in cd.points if p.level == "layer"] == ["blk.mlp"]
    assert sorted(p.name for p in cd.points if p.level == "op") == ["act", "up"]
    up = next(p for p in cd.points if p.name == "up")
    assert up.intensity == 200 and up.perf == pytest.approx(100e12)  # 200e9 FLOP / 2 ms: on the matrix roof
    assert cd.skipped[(0, "layer")] == (2, pytest.approx((0.5 + 0.004) / 4.504))


def test_cli_plot_bad_suffix(tmp_path, capsys):
    assert main(["plot", TEXTBOOK, "-o", str(tmp_path / "r.jpg")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("graphroof: error: -o") and ".png or .svg" in err
    assert list(tmp_path.iterdir()) == []


# -- compare ---------------------------------------------------------------------------------------------

def test_split_profiles():
    assert split_profiles(" a100, h100 ,mi300x,") == ["a100", "h100", "mi300x"]
    with pytest.raises(graphroof.InputError, match="listed twice"):
        split_profiles("a100,a100")
    with pytest.raises(graphroof.InputError):
        split_profiles(" , ")


def test_compare_loads_once_and_matches_separate_runs(tmp_path, monkeypatch):
    prof = tmp_path / "double.toml"
    prof.write_text(DOUBLE_A100, encoding="utf-8")
    import graphroof.api as api

    calls = []
    real_load = api.load
    monkeypatch.setattr(api, "load", lambda *a, **k: calls.append(a) or real_load(*a, **k))
    hws = [graphroof.api.resolve_hardware("a100"), graphroof.api.resolve_hardware(str(prof))]
    both = analyze_on_profiles(TEXTBOOK, hws)
    assert len(calls) == 1
    monkeypatch.undo()
    for a, hw in zip(both, hws, strict=True):
        ref = graphroof.analyze(TEXTBOOK, hw=hw)
        assert a.totals.t_lower_s == pytest.approx(ref.totals.t_lower_s)
        assert [r["time_s"] for r in a.ops] == pytest.approx([r["time_s"] for r in ref.ops])
        assert len(a.graph) == 10
    # every rate doubled: each op's max(F / P, B / W) halves, so the roofline time halves exactly
    assert both[1].totals.t_lower_s == pytest.approx(both[0].totals.t_lower_s / 2)


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "json", "csv", "html"])
def test_cli_compare_formats(tmp_path, fmt, capsys):
    prof = tmp_path / "double.toml"
    prof.write_text(DOUBLE_A100, encoding="utf-8")
    out = tmp_path / f"cmp.{fmt}"
    assert main(["compare", TEXTBOOK, "--hw", f"a100,{prof}", "-f", fmt, "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    if fmt == "json":
        rows = json.loads(text)["devices"]
        assert [r["profile"] for r in rows] == ["a100-80gb-sxm", "a100-doubled"]
        assert rows[0]["speedup"] == 1.0 and rows[1]["speedup"] == pytest.approx(2.0)
    elif fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(text)))
        assert float(rows[1]["speedup"]) == pytest.approx(2.0) and rows[1]["bound"] == "compute"
    else:
        assert "A100 with every rate doubled" in text and "2.00x" in text and "1.00x" in text
        if fmt == "html":
            assert text.startswith("<!DOCTYPE html>") and 'class="compare sortable"' in text


def test_cli_compare_unknown_profile(capsys):
    assert main(["compare", TEXTBOOK, "--hw", "a100,no-such-gpu"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("graphroof: error:") and err.count("\n") == 1


# -- progress --------------------------------------------------------------------------------------------

class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal():
    tty, pipe = FakeTTY(), io.StringIO()
    Progress(stream=tty)("counting 12 ops")
    Progress(stream=pipe)("counting 12 ops")
    Progress(quiet=True, stream=FakeTTY())("counting 12 ops")
    assert tty.getvalue().startswith("graphroof: counting 12 ops… (") and pipe.getvalue() == ""


def test_analyze_reports_stages(round_hw):
    seen: list[str] = []
    graphroof.analyze(TEXTBOOK, hw=round_hw, progress=seen.append)
    assert seen == [f"loading {TEXTBOOK}", "counting 10 ops on round"]


def test_cli_is_silent_when_not_a_terminal(tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["analyze", TEXTBOOK, "-f", "html", "-o", str(out)]) == 0
    # no progress lines; only the one line saying what was written (gone with --quiet)
    assert capsys.readouterr().err == f"wrote {out} ({out.stat().st_size / 1e3:.3g} kB)\n"
    assert main(["-q", "analyze", TEXTBOOK, "-f", "html", "-o", str(out)]) == 0
    assert capsys.readouterr().err == ""


def test_written_files_are_readable_like_open_would_make_them(tmp_path):
    import os

    from graphroof.report import write_output

    old = os.umask(0o022)
    try:
        write_output("x", tmp_path / "a.html")
        assert (tmp_path / "a.html").stat().st_mode & 0o777 == 0o644   # 0666 & ~0022
        (tmp_path / "b.html").write_text("old")
        (tmp_path / "b.html").chmod(0o600)
        write_output("new", tmp_path / "b.html")
        assert (tmp_path / "b.html").stat().st_mode & 0o777 == 0o600   # an existing file keeps its mode
    finally:
        os.umask(old)


def test_map_ops_copy_has_the_same_nodes():
    """Core fix: OpGraph.map_ops used to read the graph-attribute dict as an adjacency (bogus nodes)."""
    from graphroof.frontends import load

    g = load(TEXTBOOK)
    h = g.map_ops(lambda n: n)
    assert list(h.nx.nodes) == list(g.nx.nodes) and h.nx.graph == g.nx.graph
    assert list(h.nx.edges) == list(g.nx.edges)
