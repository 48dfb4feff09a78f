"""Pages go to a file, never to the terminal, and -o says what it wrote: llm, compare, sweep and profile as
analyze (issue 27: `-f html` without `-o` flooded the terminal with 12k lines; `-o FILE` never said what it wrote)."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphroof.cli import build_parser, main

CSV = str(Path(__file__).resolve().parents[2] / "examples" / "textbook_ops.csv")


def test_compare_page_without_o_goes_to_a_file_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["compare", CSV, "--hw", "a100,h100", "-f", "html"]) == 0
    cap = capsys.readouterr()
    page = tmp_path / "textbook_ops-report.html"
    assert page.is_file() and "<html" in page.read_text(encoding="utf-8")[:2000].lower()
    assert cap.out == "" and cap.err.startswith("wrote textbook_ops-report.html (")
    # a second run replaces graphroof's own page; a foreign file of that name is never replaced
    assert main(["compare", CSV, "--hw", "a100", "-f", "html", "-q"]) == 0
    page.write_text("my notes", encoding="utf-8")
    assert main(["compare", CSV, "--hw", "a100", "-f", "html"]) == 1
    assert "graphroof did not write it" in capsys.readouterr().err
    assert page.read_text(encoding="utf-8") == "my notes"


def test_text_formats_still_go_to_stdout_and_o_dash_sends_a_page_there(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["compare", CSV, "--hw", "a100", "-f", "markdown"]) == 0
    cap = capsys.readouterr()
    assert "| " in cap.out and cap.err == ""
    assert main(["compare", CSV, "--hw", "a100", "-f", "html", "-o", "-"]) == 0
    assert "<html" in capsys.readouterr().out.lower() and not list(tmp_path.iterdir())


@pytest.mark.parametrize("cmd", ["llm", "compare", "sweep", "profile"])
def test_every_page_command_defaults_to_a_file(cmd):
    # -o is None unless given: the command resolves it (a page to MODEL-report.html, text to stdout)
    assert build_parser().parse_args([cmd, "m", "--hw", "a100"]).output is None
