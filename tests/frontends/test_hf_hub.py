"""Issue 27 (C4): Hugging Face model ids read their config.json from the local hub cache (laid out here), never
the network; a local path still wins and ``pkg.module:factory`` stays a factory."""

from __future__ import annotations

import json

import pytest

from graphroof.cli import main
from graphroof.errors import InputError
from graphroof.frontends import classify
from graphroof.frontends.hf import hub as hf_hub

TINY = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=100,
            max_position_embeddings=512, torch_dtype="bfloat16")


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """An HF_HOME whose hub cache holds org/tiny-llama (models--org--tiny-llama/snapshots/<rev>/config.json and
    refs/main), offline."""
    repo = tmp_path / "hf" / "hub" / "models--org--tiny-llama"
    (repo / "snapshots" / "0123abcd").mkdir(parents=True)
    (repo / "snapshots" / "0123abcd" / "config.json").write_text(json.dumps(TINY))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    return repo


def test_a_cached_id_resolves_to_its_config(hub):
    ref = classify("org/tiny-llama")
    assert ref.kind == "hf_config" and ref.repo_id == "org/tiny-llama"
    assert ref.path == hub / "snapshots" / "0123abcd" / "config.json" and ref.label == "org/tiny-llama"


def test_a_local_path_wins_and_a_factory_stays_a_factory(hub, tmp_path):
    (tmp_path / "org" / "tiny-llama").mkdir(parents=True)
    (tmp_path / "org" / "tiny-llama" / "config.json").write_text(json.dumps(TINY))
    ref = classify("org/tiny-llama")  # relative to the working directory: the local folder
    assert ref.kind == "hf_config" and ref.repo_id == "" and ref.path == (tmp_path / "org" / "tiny-llama" /
                                                                           "config.json").relative_to(tmp_path)
    assert classify("pkg.module:factory").kind == "factory"
    assert classify("llama-2-7b").kind == "zoo"


def test_offline_and_not_cached_says_what_to_do(hub):
    with pytest.raises(InputError) as e:
        classify("meta-llama/Llama-3.1-8B")
    msg = str(e.value)
    assert msg.startswith("meta-llama/Llama-3.1-8B: no config.json for it in ") and "HF_HUB_OFFLINE=1" in msg
    assert "hf download meta-llama/Llama-3.1-8B config.json" in msg


def test_online_fetches_config_json_only(hub, monkeypatch, tmp_path):
    import huggingface_hub

    asked = []

    def download(repo_id, filename, **kw):
        asked.append((repo_id, filename))
        p = tmp_path / "fetched.json"
        p.write_text(json.dumps(TINY))
        return str(p)

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.setattr(hf_hub, "_reachable", lambda endpoint, timeout_s=5.0: True)
    assert classify("Qwen/Qwen2.5-7B").path == tmp_path / "fetched.json"
    assert asked == [("Qwen/Qwen2.5-7B", "config.json")]  # never the weights
    monkeypatch.setattr(hf_hub, "_reachable", lambda endpoint, timeout_s=5.0: False)
    with pytest.raises(InputError, match=r"Qwen/Qwen2.5-1.5B: no config.json .* cannot be reached \(no network\)"):
        classify("Qwen/Qwen2.5-1.5B")
    assert len(asked) == 1


def test_cli_analyze_and_llm_take_a_hub_id(hub, capsys):
    assert main(["-q", "analyze", "org/tiny-llama", "--seq", "16", "-f", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["model"] == "org/tiny-llama" and d["totals"]["flops"] > 0
    assert main(["-q", "llm", "org/tiny-llama", "--prompt", "16", "--gen", "4"]) == 0
    assert capsys.readouterr().out.startswith("model: org/tiny-llama")
    assert main(["analyze", "org/tiny-llama", "--seq", "600"]) == 1  # the config's 512 positions
    assert "--seq 600 is longer than tiny-llama's maximum of 512 positions" in capsys.readouterr().err
    assert main(["analyze", "meta-llama/Llama-3.1-8B"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("graphroof: error: meta-llama/Llama-3.1-8B: no config.json") and len(err.splitlines()) == 1
