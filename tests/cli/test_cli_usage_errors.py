"""Usage errors (an unknown flag, a missing required one, a bad choice) follow the CLI's error convention: one
line naming the problem and the sub-command's help, exit code 1 (argparse's own: the usage block and exit code 2)."""

from __future__ import annotations

import pytest

from graphroof.cli import main


def _code(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err.strip().splitlines()


def test_unknown_flag_names_the_sub_command(capsys):
    code, err = _code(["llm", "llama-3-8b", "--max-tpot", "5"], capsys)
    assert code == 1
    assert err == ["graphroof llm: error: unrecognized arguments: --max-tpot 5; see `graphroof llm --help`"]


def test_missing_required_flag_is_one_line(capsys):
    code, err = _code(["plan", "llama-3-8b"], capsys)
    assert code == 1 and len(err) == 1
    assert err[0].startswith("graphroof plan: error: the following arguments are required: --hw, --rate")
    assert err[0].endswith("see `graphroof plan --help`")


@pytest.mark.parametrize("argv", [["nope"], ["--bogus"]])
def test_top_level_errors(capsys, argv):
    code, err = _code(argv, capsys)
    assert code == 1 and len(err) == 1 and err[0].startswith("graphroof: error: ")
    assert err[0].endswith("see `graphroof --help`")
