"""Issue 14's smaller CLI items: one-line errors for --depth -1 and --dim batch=abc, --mem-bw alone on a100."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphroof.cli import main

CSV = str(Path(__file__).resolve().parents[1] / "gold" / "ops_table.csv")


@pytest.mark.parametrize("args, msg", [
    (["--depth", "-1"], "graphroof: error: --depth must be >= 1 (1 = the top-level modules), got -1"),
    (["--depth", "0"], "graphroof: error: --depth must be >= 1"),
    (["--dim", "batch=abc"], "graphroof: error: --dim batch: must be a non-negative integer, got 'abc'"),
])
def test_bad_model_options_are_one_line_errors(capsys, args, msg):
    assert main(["analyze", CSV, *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith(msg) and len(err.strip().splitlines()) == 1 and "4.6T" not in err


def test_mem_bw_alone_overrides_the_default_a100(capsys):
    assert main(["-q", "analyze", CSV, "--mem-bw", "1TB/s"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA A100" in out and "(bandwidth overridden); memory bandwidth 1.00 TB/s" in out


def test_profile_help_says_hw_is_required_and_has_no_rst(capsys):
    with pytest.raises(SystemExit):
        main(["profile", "--help"])
    out = capsys.readouterr().out
    assert "required: a profile of this machine" in out
    assert "``" not in out and ":class:" not in out and ":func:" not in out
