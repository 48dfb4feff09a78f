"""Issue 27 (A): `graphroof plot MODEL --phase prefill|decode` draws one serving phase of an LLM."""

from __future__ import annotations

import json

import pytest

from graphroof.cli import main

TINY = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=100,
            max_position_embeddings=512, torch_dtype="bfloat16")


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory):
    p = tmp_path_factory.mktemp("tiny") / "config.json"
    p.write_text(json.dumps(TINY))
    return p


def test_plot_one_phase(tiny_config, tmp_path):
    pytest.importorskip("matplotlib")
    for phase, words in (("prefill", "prefill (batch 2, seq 16)"), ("decode", "decode step (batch 2, past 16..19")):
        out = tmp_path / f"{phase}.svg"
        assert main(["plot", str(tiny_config), "--hw", "a100", "--phase", phase, "--batch", "2", "--seq", "16",
                     "--gen", "5", "-o", str(out), "-q"]) == 0
        svg = out.read_text()
        assert svg.startswith("<?xml") and words in svg  # the title names the phase


def test_plot_phase_errors_are_one_line(tiny_config, tmp_path, capsys):
    assert main(["plot", str(tiny_config), "--phase", "decode", "--gen", "1", "-o", str(tmp_path / "x.png")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--gen 2 or more" in err
    assert not (tmp_path / "x.png").exists()
