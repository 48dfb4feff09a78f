"""Issue 14's smaller CLI items: one-line errors for --depth -1 and --dim batch=abc, --mem-bw alone on a100."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphroof.cli import main

CSV = str(Path(__file__).resolve().parents[1] / "gold" / "ops_table.csv")


@pytest.mark.parametrize("args, msg", [
    (["--depth", "-1"], "graphroof: error: --depth must be >= 1 (1 = the top-level modules), got -1"),
    (["--depth", "0"], "graphroof: error: --depth must be >= 1"),
    (["--dim", "batch=abc"], "graphroof: error: --dim batch: must be a positive integer, got 'abc'"),
    (["--dim", "batch=-2"], "graphroof: error: --dim batch: must be a positive integer, got '-2'"),
    (["--dim", "batch=0"], "graphroof: error: --dim batch=0: a dimension must be a positive integer"),
])
def test_bad_model_options_are_one_line_errors(capsys, args, msg):
    assert main(["analyze", CSV, *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith(msg) and len(err.strip().splitlines()) == 1 and "4.6T" not in err


def test_mem_bw_alone_overrides_the_default_a100(capsys):
    assert main(["-q", "analyze", CSV, "--mem-bw", "1TB/s"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA A100" in out and "(bandwidth overridden)" in out and "memory bandwidth 1.00 TB/s" in out


def test_profile_help_says_hw_is_required_and_has_no_rst(capsys):
    with pytest.raises(SystemExit):
        main(["profile", "--help"])
    out = capsys.readouterr().out
    assert "required: a profile of this machine" in out
    assert "``" not in out and ":class:" not in out and ":func:" not in out


def test_zero_dim_on_an_onnx_model_is_an_error_not_an_empty_report(tmp_path, capsys):
    """`analyze model.onnx --dim batch=0` exited 0 with an all-zero report; the API refuses it too."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    import graphroof
    from graphroof.errors import InputError

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])])
    path = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    out = tmp_path / "r.json"
    assert main(["analyze", str(path), "--dim", "batch=0", "-f", "json", "-o", str(out)]) == 1
    assert "--dim batch=0: a dimension must be a positive integer" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(InputError, match="--dim batch=0"):
        graphroof.analyze(str(path), dims={"batch": 0})
    assert graphroof.analyze(str(path), dims={"batch": 3}).totals.cost.vector_flops == 24  # relu: 1 x 3 x 8


@pytest.mark.parametrize("argv", [["analyze", CSV, "--no-cache", "-q"], ["--no-cache", "-q", "analyze", CSV],
                                  ["-q", "analyze", CSV, "--no-cache"]])
def test_global_flags_work_after_the_sub_command(capsys, argv, monkeypatch):
    """`graphroof analyze MODEL --no-cache` was refused (unrecognized arguments)."""
    from graphroof.cli import build_parser

    args = build_parser().parse_args(argv)
    assert args.cache is False and args.quiet is True
    assert main(argv) == 0
    assert capsys.readouterr().err == ""


def test_global_flags_default_when_absent():
    from graphroof.cli import build_parser

    args = build_parser().parse_args(["analyze", CSV])
    assert args.cache is True and args.quiet is False
