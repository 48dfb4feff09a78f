"""Names from a model never reach a CSV report as a spreadsheet formula."""

from __future__ import annotations

import csv
import io

import graphroof
from graphroof.report import render_text


def test_formula_like_names_are_quoted(tmp_path):
    p = tmp_path / "ops.csv"
    p.write_text("name,flops,bytes,layer\n\"=HYPERLINK(1)\",1G,1MB,@evil\nplain,1G,1MB,-minus\n")
    a = graphroof.analyze(str(p), hw="a100")
    rows = list(csv.DictReader(io.StringIO(render_text(a, "csv", ops=True))))
    names = {r["name"] for r in rows}
    assert "'=HYPERLINK(1)" in names and "plain" in names
    assert all(not str(v).startswith(("=", "+", "@")) for r in rows for v in r.values())
