"""Issue 27 (D5): `graphroof diff before.json after.json`: totals, layers and kernels before and after, added and
removed rows, terminal / markdown / json; one-line errors for files that are not analysis JSON."""

from __future__ import annotations

import json

import pytest

from graphroof.cli import main
from graphroof.diff import diff_analyses, load_analysis_json
from graphroof.errors import InputError

# an ad-hoc device of 100 TFLOP/s and 1 TB/s: a.gemm Tc = 1e12 / 1e14 = 10 ms (Tm 1 ms); a stream of N GB = N ms
BEFORE = """name,flops,bytes,kind,dtype,layer
a.gemm,1T,1GB,matrix,fp16,attn
b.stream,0,2GB,vector,fp16,mlp
c.old,0,1GB,vector,fp16,old
"""
AFTER = """name,flops,bytes,kind,dtype,layer
a.gemm,1T,1GB,matrix,fp16,attn
b.stream,0,1GB,vector,fp16,mlp
d.new,0,3GB,vector,fp16,new
"""
DEVICE = ["--peak-flops", "100T", "--mem-bw", "1TB/s"]


@pytest.fixture
def files(tmp_path):
    out = []
    for name, text in (("before", BEFORE), ("after", AFTER)):
        csv = tmp_path / f"{name}.csv"
        csv.write_text(text)
        js = tmp_path / f"{name}.json"
        assert main(["-q", "analyze", str(csv), *DEVICE, "-f", "json", "-o", str(js)]) == 0
        out.append(str(js))
    return out


def test_diff_json_figures(files, tmp_path, capsys):
    out = tmp_path / "d.json"
    assert main(["diff", *files, "-f", "json", "-o", str(out)]) == 0
    d = json.loads(out.read_text())
    totals = {r["figure"]: r for r in d["totals"]}
    # before 10 + 2 + 1 = 13 ms, after 10 + 1 + 3 = 14 ms: +1 ms = +7.69 %
    assert totals["time_s"]["before"] == pytest.approx(13e-3) and totals["time_s"]["after"] == pytest.approx(14e-3)
    assert totals["time_s"]["delta"] == pytest.approx(1e-3) and totals["time_s"]["pct"] == pytest.approx(100 / 13)
    # bytes 1 + 2 + 1 = 4 GB -> 1 + 1 + 3 = 5 GB: +25 %
    assert totals["bytes"]["delta"] == pytest.approx(1e9) and totals["bytes"]["pct"] == pytest.approx(25.0)
    layers = {r["name"]: r for r in d["layers"]}
    assert {n: r["status"] for n, r in layers.items()} == {"attn": "same", "mlp": "changed", "old": "removed",
                                                           "new": "added"}
    mlp = layers["mlp"]  # 2 GB -> 1 GB: 2 ms -> 1 ms, -50 %
    assert mlp["delta_time_s"] == pytest.approx(-1e-3) and mlp["pct_time_s"] == pytest.approx(-50.0)
    assert mlp["delta_bytes"] == pytest.approx(-1e9) and mlp["pct_bytes"] == pytest.approx(-50.0)
    assert layers["new"]["before_time_s"] is None and layers["new"]["delta_time_s"] == pytest.approx(3e-3)
    assert layers["old"]["after_bytes"] is None and layers["old"]["delta_bytes"] == pytest.approx(-1e9)
    assert [r["name"] for r in d["layers"]][:2] == ["new", "mlp"]   # largest |time change| first: 3 ms, 1 ms
    assert d["counts"]["kernels"] == {"same": 1, "changed": 1, "removed": 1, "added": 1}
    assert {r["name"] for r in d["kernels"] if r["status"] == "added"} == {"d.new"}


def test_diff_terminal_and_markdown(files, capsys):
    assert main(["diff", *files]) == 0
    text = capsys.readouterr().out
    assert "Layers: 1 changed, 1 added, 1 removed, 1 unchanged" in text
    assert "time (roofline)      13 ms" in text and "+1 ms" in text and "+7.7%" in text
    mlp = next(ln for ln in text.splitlines() if ln.startswith("mlp "))
    assert "-1 ms" in mlp and "-50.0%" in mlp and "-1.00 GB" in mlp
    assert "added" in next(ln for ln in text.splitlines() if ln.startswith("new "))
    assert main(["diff", *files, "-f", "markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("# graphroof diff:") and "## Kernels: 1 changed, 1 added, 1 removed, 1 unchanged" in md
    assert "| mlp " in md


def test_top_limits_the_rows_shown(files, capsys):
    assert main(["diff", *files, "--top", "1"]) == 0
    text = capsys.readouterr().out
    assert "... 2 more changed rows (--top 0 lists them all)" in text   # 3 rows changed, added or removed


@pytest.mark.parametrize("content, msg", [
    ("name,flops\nx,1\n", "not valid JSON"),
    ("[1, 2]", "not a graphroof analysis JSON (a JSON list, not an object)"),
    ('{"schema_version": 1, "kind": "profile", "totals": {}}', "a graphroof profile JSON, not an analysis"),
    ('{"schema_version": 1, "model": "m"}', "not a graphroof analysis JSON (no 'totals' field)"),
    ('{"schema_version": 7, "totals": {}, "layers": [], "kernels": []}', "schema_version 7"),
    ('{"schema_version": 1, "totals": {"time_s": "fast"}, "layers": [], "kernels": []}',
     "totals.time_s is 'fast', not a number"),
])
def test_not_an_analysis_json_is_a_one_line_error(files, tmp_path, capsys, content, msg):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    out = tmp_path / "out.md"
    assert main(["diff", files[0], str(bad), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("graphroof: error: ") and len(err.strip().splitlines()) == 1 and msg in err
    assert "graphroof analyze MODEL -f json" in err or "schema_version" in err
    assert not out.exists()


def test_diff_api_and_notes_on_different_devices(files):
    before = load_analysis_json(files[0])
    after = dict(load_analysis_json(files[1]), hardware_name="other")
    d = diff_analyses(before, after)
    assert any("different hardware profiles" in n for n in d.notes)
    with pytest.raises(InputError, match="cannot read analysis JSON"):
        load_analysis_json(files[0] + ".missing")
