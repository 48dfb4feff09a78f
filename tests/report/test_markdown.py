"""Markdown report: gold file, chart image beside it, escaping."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import graphroof
from graphroof.cli import main
from graphroof.report import chart_image_path, render_text, write_report
from graphroof.report.markdown import md_escape
from tests._report_models import analyse, evil_graph, tiny_graph

ROOT = Path(__file__).resolve().parents[2]
GOLD = ROOT / "tests" / "gold"


def scrub(text: str) -> str:
    """Version and date change every release / run; nothing else may."""
    return re.sub(r"graphroof \d+\.\d+[^,\s]*, \d{4}-\d\d-\d\d \d\d:\d\d UTC", "graphroof VERSION, DATE", text)


def check_gold(name: str, text: str) -> None:
    path = GOLD / name
    if os.environ.get("GRAPHROOF_UPDATE_GOLD"):
        path.write_text(scrub(text), encoding="utf-8")
    assert scrub(text) == path.read_text(encoding="utf-8"), f"{name} changed; rerun with GRAPHROOF_UPDATE_GOLD=1 if intended"


def test_markdown_gold_textbook(round_hw):
    a = graphroof.analyze(GOLD / "ops_table.csv", hw=round_hw)  # the 10-op textbook table, kept with the gold
    check_gold("ops_table.md", render_text(a, "markdown", ops=True, top=3))


def test_markdown_gold_two_phases(round_hw):
    pre, dec = analyse(tiny_graph("m"), round_hw), analyse(tiny_graph("m"), round_hw)
    check_gold("tiny_two_phases.md", render_text([("prefill", pre), ("decode", dec)], "markdown"))


def test_markdown_carries_the_report_sections(round_hw):
    md = render_text(analyse(tiny_graph(), round_hw), "markdown")
    for heading in ("## Totals", "## Roofline", "## Where the time goes", "### By bound", "### By kernel",
                    "## Layers", "## Assumptions"):
        assert heading in md
    assert "unknown: custom.Mystery×1" in md
    # by bound: memory 2 + 0.5 + 0.004 ms = 2.504 / 4.504 = 55.6 %
    assert re.search(r"\| memory\s+\| 3\s+\| 2.5 ms\s+\| 55.6%", md)


def test_markdown_file_gets_chart_png_beside_it(round_hw, tmp_path):
    out = tmp_path / "report.md"
    written = write_report(analyse(tiny_graph(), round_hw), "markdown", out)
    img = chart_image_path(out)
    assert img == tmp_path / "report_roofline.png" and written == [str(out), str(img)]
    assert img.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = out.read_text(encoding="utf-8")
    assert "](report_roofline.png)" in md  # relative link, works wherever the pair is copied


def test_markdown_escapes_model_strings(round_hw):
    md = render_text(analyse(evil_graph(), round_hw), "markdown", ops=True)
    assert "<script>" not in md and "<img" not in md and "&lt;script&gt;" in md
    # a pipe in a name must not add a column: every table row has the header's cell count
    for table in re.findall(r"(?:^\|.*\n)+", md, re.M):
        lines = table.strip().splitlines()
        counts = {len(re.findall(r"(?<!\\)\|", ln)) for ln in lines}
        assert len(counts) == 1, lines


def test_md_escape():
    assert md_escape("a|b") == r"a\|b"
    assert md_escape("<b>x</b>") == "&lt;b&gt;x&lt;/b&gt;"
    assert md_escape("self_attn") == "self_attn"          # intraword underscores stay readable
    assert md_escape("_orig_mod") == r"\_orig_mod"
    assert md_escape("two\nlines") == "two lines"


def test_cli_markdown_to_missing_directory(tmp_path, capsys):
    out = tmp_path / "nope" / "r.md"
    code = main(["analyze", str(GOLD / "ops_table.csv"), "-f", "markdown", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("graphroof: error: cannot write") and err.count("\n") == 1
    assert not out.parent.exists()


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_failed_write_leaves_nothing(fmt, round_hw, tmp_path, monkeypatch):
    """The final rename fails (unwritable target): no report, no image, no temp file stays behind."""
    import graphroof.report as rep

    real_replace = os.replace

    def failing_replace(src, dst):
        if str(dst).endswith((".md", ".html")):
            raise PermissionError(13, "Permission denied")
        return real_replace(src, dst)

    monkeypatch.setattr(rep.os, "replace", failing_replace)
    out = tmp_path / f"r.{'md' if fmt == 'markdown' else 'html'}"
    with pytest.raises(graphroof.ReportError, match="cannot write .*Permission denied"):
        write_report(analyse(tiny_graph(), round_hw), fmt, out)
    assert list(tmp_path.iterdir()) == []


def test_second_file_failing_removes_the_first(round_hw, tmp_path, monkeypatch):
    """Markdown is written first, then its PNG; if the PNG fails, the markdown goes too."""
    import graphroof.report as rep

    real_replace = os.replace

    def failing_replace(src, dst):
        if str(dst).endswith(".png"):
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(rep.os, "replace", failing_replace)
    with pytest.raises(graphroof.ReportError, match="No space left"):
        write_report(analyse(tiny_graph(), round_hw), "markdown", tmp_path / "r.md")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can write anywhere")
def test_cli_unwritable_directory(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        code = main(["analyze", str(GOLD / "ops_table.csv"), "-f", "html", "-o", str(ro / "r.html")])
        err = capsys.readouterr().err
        assert code == 1 and err.startswith("graphroof: error: cannot write") and err.count("\n") == 1
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o700)
