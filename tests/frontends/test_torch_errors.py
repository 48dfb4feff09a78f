"""Bad inputs to the PyTorch frontend: one line on stderr naming the problem, exit 1, no output file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from graphroof.cli import main

ROOT = Path(__file__).resolve().parents[2]
MODELS = "tests/frontends/torch_models.py"


def _fails(capsys, tmp_path, *args) -> str:
    out = tmp_path / "report.txt"
    assert main(["analyze", *args, "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("graphroof: error: ") and "\n" not in err and "Traceback" not in err
    assert not out.exists()
    return err


def test_forward_raises(capsys, tmp_path):
    err = _fails(capsys, tmp_path, f"{MODELS}:make_raises", "--input", "2x4")
    assert "could not trace" in err and "ValueError: forward is broken on purpose" in err
    assert "torch_models.py:" in err          # where the model's code raised


def test_factory_does_not_import(capsys, tmp_path):
    err = _fails(capsys, tmp_path, "no_such_pkg.models:build", "--input", "1x3")
    assert "cannot import 'no_such_pkg.models'" in err and "No module named 'no_such_pkg'" in err
    err = _fails(capsys, tmp_path, "tests.frontends.torch_models:make_cnnn", "--input", "1x3")
    assert "has no attribute 'make_cnnn'; did you mean make_cnn" in err
    err = _fails(capsys, tmp_path, "tests.frontends.torch_models:not_a_module", "--input", "1x3")
    assert "returned a int, not a torch.nn.Module" in err


def test_wrong_input_shape(capsys, tmp_path):
    err = _fails(capsys, tmp_path, f"{MODELS}:make_cnn", "--input", "1x3x16")
    assert "x=fp32[1,3,16]" in err and "expected input" in err and "check the input shapes" in err
    err = _fails(capsys, tmp_path, f"{MODELS}:make_cnn")
    assert "needs example inputs" in err


def test_data_dependent_forward_is_traced_with_an_assumed_value(tmp_path):
    # `if x.sum() > 0` reads a value graphroof does not have: assumed false (value_0), stated, bindable
    def run(*extra):
        out = tmp_path / "r.json"
        assert main(["analyze", f"{MODELS}:ReadsValues", "--input", "2x4", "-f", "json", "-o", str(out),
                     *extra]) == 0
        return json.loads(out.read_text())

    r = run()
    assert any("value_0 (a truth value read at torch_models.py:" in n for n in r["notes"])
    assert r["totals"]["matrix_flops"] == 0                 # the branch with the Linear not taken
    r = run("--dim", "value_0=1")
    assert r["totals"]["matrix_flops"] == 2 * 2 * 4 * 4     # fc on [2, 4] x [4, 4]: 64


def test_unknown_zoo_name(capsys, tmp_path):
    err = _fails(capsys, tmp_path, "mistral-8b")
    assert "close: mistral-7b" in err and "graphroof zoo list" in err


def test_unknown_architecture(capsys, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "frobnicator", "hidden_size": 8}))
    err = _fails(capsys, tmp_path, str(cfg))
    assert "model_type 'frobnicator' is not a transformers architecture" in err


def test_factory_cli_end_to_end_in_a_subprocess(tmp_path):
    out = tmp_path / "cnn.json"
    r = subprocess.run([sys.executable, "-m", "graphroof", "analyze", "tests.frontends.torch_models:make_cnn_with_inputs",
                        "--hw", "a100", "--format", "json", "-o", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    assert d["model"] == "tests.frontends.torch_models:make_cnn_with_inputs"
    # the factory's example input [2, 3, 16, 16]: the figures of test_torch_models.test_small_cnn_every_number
    assert d["totals"]["matrix_flops"] == 221184 + 294912 + 640


@pytest.mark.parametrize("bad", ["--batch=0", "--seq=0"])
def test_bad_sizes(capsys, tmp_path, bad):
    err = _fails(capsys, tmp_path, "gpt2", bad)
    assert "must be >= 1" in err
