"""The one resolver (frontends.resolve) and the one factory importer (frontends.factory)."""

from __future__ import annotations

import json

import pytest

import graphroof
from graphroof.errors import InputError
from graphroof.frontends import check_options, classify
from graphroof.frontends.torch.factory import import_target
from graphroof.graph import OpGraph


def test_classify_each_kind(tmp_path):
    (tmp_path / "m.onnx").write_bytes(b"")
    (tmp_path / "t.csv").write_text("name,flops,bytes\na,1,1\n")
    (tmp_path / "t.json").write_text(json.dumps([{"name": "a", "flops": 1, "bytes": 1}]))
    cfg = tmp_path / "cfgdir"
    cfg.mkdir()
    (cfg / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert classify(OpGraph("g")).kind == "graph"
    assert classify(tmp_path / "m.onnx").kind == "onnx"
    assert classify(str(tmp_path / "t.csv")).kind == "table"
    assert classify(str(tmp_path / "t.json")).kind == "table"
    assert classify(str(cfg / "config.json")).kind == "hf_config"
    ref = classify(str(cfg))  # a folder holding a config.json resolves to the file
    assert ref.kind == "hf_config" and ref.path == cfg / "config.json"
    assert classify("mypkg.models:build").kind == "factory"
    assert classify("llama-2-7b").kind == "zoo"


def test_existing_path_wins_over_factory_syntax(tmp_path):
    # "dir:name" would parse as a factory, but an existing file of that name is a file
    f = tmp_path / "a:b.csv"
    f.write_text("name,flops,bytes\na,1,1\n")
    assert classify(str(f)).kind == "table"


@pytest.mark.parametrize("bad", ["missing.onnx", "missing.csv", "missing.json"])
def test_missing_file_is_one_clear_error(bad):
    with pytest.raises(InputError, match="not found; check the path"):
        classify(bad)


def test_misspelled_option_names_the_valid_ones():
    with pytest.raises(InputError) as e:
        graphroof.analyze("examples/textbook_ops.csv", sequence_length=4096)
    assert "unknown option 'sequence_length'" in str(e.value)
    assert "valid options here: dims, name" in str(e.value)


def test_close_misspelling_gets_a_suggestion():
    with pytest.raises(InputError, match="did you mean input_shapes"):
        check_options(classify("llama-2-7b"), {"input_shape": [(1, 8)]})


def test_option_of_another_kind_says_what_to_use(tmp_path):
    (tmp_path / "m.onnx").write_bytes(b"")
    with pytest.raises(InputError, match=r"^--seq does not apply to an ONNX model.*--dim NAME=VALUE") as e:
        check_options(classify(tmp_path / "m.onnx"), {"seq": 4})
    assert "dims" not in str(e.value) and "input_shapes" not in str(e.value)  # flags, not Python keywords
    # None means "not given" (the CLI passes unset flags as None); ONNX takes --batch (issue 27)
    check_options(classify(tmp_path / "m.onnx"), {"seq": None, "batch": 4, "dims": {"batch": 4}})


def test_import_target_errors(tmp_path):
    with pytest.raises(InputError, match="file .* not found"):
        import_target(str(tmp_path / "nope.py") + ":f")
    (tmp_path / "mod.py").write_text("def build():\n    return 1\n")
    with pytest.raises(InputError, match="did you mean build"):
        import_target(str(tmp_path / "mod.py") + ":buidl")
    assert import_target(str(tmp_path / "mod.py") + ":build")() == 1
    (tmp_path / "broken.py").write_text("raise ValueError('boom')\n")
    with pytest.raises(InputError, match="raised ValueError: boom"):
        import_target(str(tmp_path / "broken.py") + ":f")
