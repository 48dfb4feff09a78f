"""The one model dispatcher (:func:`graphroof.frontends.resolve_model`), the one config parser
(:mod:`graphroof.frontends.hf.config`) and the one store key schema (:mod:`graphroof.frontends.stored`), with the
run-wide switches passed as :class:`graphroof.options.Options`."""

from __future__ import annotations

import json
import sys

import pytest

from graphroof.errors import FrontendError, InputError
from graphroof.frontends import ModelRef, Resolved, resolve_model, stored, trace_store, zoo
from graphroof.frontends.hf.config import read_config, spec_from_config, text_config
from graphroof.options import Options


def test_a_zoo_language_model_resolves_to_its_config_without_torch():
    before = "torch" in sys.modules
    res = resolve_model("llama-2-7b")
    assert res.kind == "zoo" and res.transformers and res.name == "llama-2-7b" and res.source == "zoo:llama-2-7b"
    assert res.config == read_config(zoo.config_path("llama-2-7b"))
    assert ("torch" in sys.modules) == before   # resolving reads JSON only


def test_a_vision_zoo_model_has_no_config():
    res = resolve_model("resnet-50")
    assert res.zoo.source == "torch" and res.config is None and not res.transformers and res.name == "resnet-50"


def test_a_config_file_resolves_to_its_content_and_folder_name(tmp_path):
    d = tmp_path / "my-model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    for given in (d, d / "config.json"):
        res = resolve_model(str(given))
        assert res.kind == "hf_config" and res.config == {"model_type": "llama", "hidden_size": 64}
        assert res.name == "my-model" and res.source == str(d / "config.json")
    (d / "config.json").write_text(json.dumps({"model_type": "llama", "_name_or_path": "org/named"}))
    assert resolve_model(str(d)).name == "org/named"


def test_implausible_configs_and_unknown_names_fail_at_resolution(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 10**9}))
    with pytest.raises(FrontendError, match="num_hidden_layers = 1000000000 is outside"):
        resolve_model(str(p))
    with pytest.raises(InputError, match="close: llama-2-7b"):
        resolve_model("llama-2-7c")


def test_other_kinds_pass_through(tmp_path):
    t = tmp_path / "ops.csv"
    t.write_text("name,op\n")
    res = resolve_model(str(t))
    assert res.kind == "table" and res.config is None and res.zoo is None
    assert resolve_model(res.ref) == res          # an already classified reference is not classified again


def test_one_parser_reads_every_spelling_from_a_dict():
    gpt2 = spec_from_config({"n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024, "vocab_size": 50257},
                            "gpt2")
    assert (gpt2.hidden, gpt2.heads, gpt2.kv_heads, gpt2.head_dim, gpt2.layers, gpt2.max_positions) == \
           (768, 12, 12, 64, 12, 1024)
    mqa = spec_from_config({"hidden_size": 64, "num_attention_heads": 8, "num_key_value_heads": 4,
                            "multi_query": True}, "m")
    assert mqa.kv_heads == 1
    bad = spec_from_config({"hidden_size": True, "num_attention_heads": 0, "intermediate_size": "x"}, "b")
    assert (bad.hidden, bad.heads, bad.intermediate) == (None, None, None)   # bools, zeros, strings: not facts
    assert text_config({"a": 1, "text_config": {"a": 2, "b": 3}}) == {"a": 2, "b": 3, "text_config": {"a": 2, "b": 3}}


@pytest.mark.parametrize("name", ["llama-2-7b", "gpt2", "mixtral-8x7b", "gemma-2-9b"])
def test_the_cli_precheck_and_the_built_source_read_the_same_facts(name):
    """The dict the CLI checks before anything is built and the transformers config object the source is built
    from give the same facts (the parser is one function)."""
    pytest.importorskip("transformers")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from graphroof.cli.precheck import config_of

    data = read_config(zoo.config_path(name))
    cfg = CONFIG_MAPPING[data["model_type"]](**{k: v for k, v in data.items() if k != "model_type"})
    facts = ("hidden", "heads", "kv_heads", "head_dim", "layers", "intermediate", "vocab", "max_positions")
    from_dict, from_object = spec_from_config(config_of(name), name), spec_from_config(cfg, name)
    assert [getattr(from_dict, f) for f in facts] == [getattr(from_object, f) for f in facts]


def test_graphs_and_llm_sources_share_one_key_schema(monkeypatch):
    monkeypatch.setenv("GRAPHROOF_CACHE", "on")   # keys only: nothing is read or written here
    res = resolve_model("llama-2-7b")
    req = stored.request(res, {"batch": 2})
    assert req == {"model": {"source": "zoo:llama-2-7b", "config": res.config}, "options": {"batch": 2}}
    graph, llm = trace_store.Entry("graph", req), trace_store.Entry("llm", req)
    assert graph and llm and graph.key != llm.key                         # same schema, kind told apart
    assert trace_store.Entry("graph", req, Options(fold=False)).key != graph.key   # folding is in the key
    assert not trace_store.Entry("graph", req, Options(store=False))      # store off: no key, nothing read
    monkeypatch.setenv("GRAPHROOF_CACHE", "off")
    assert not trace_store.Entry("graph", req)                            # and so does the environment


def test_load_goes_through_the_store_with_its_options(monkeypatch):
    """``load`` keys a zoo capture by :func:`stored.request` and passes ``options.fold`` to the capture."""
    from graphroof import frontends
    from graphroof.graph import OpGraph

    seen = []

    def fake_capture(entry, part, fn, expect=object):
        seen.append((entry.key is not None, part))
        return fn()

    class FakeZoo:
        @staticmethod
        def load_zoo(name, **opts):
            seen.append(opts)
            return OpGraph(name)

    monkeypatch.setattr(trace_store, "capture", fake_capture)
    monkeypatch.setattr(frontends, "frontend", lambda name: FakeZoo)
    g = frontends.load("llama-2-7b", options=Options(fold=False, store=False), seq=16)
    assert g.name == "llama-2-7b" and seen == [(False, "graph"), {"fold_blocks": False, "seq": 16}]
    seen.clear()
    frontends.load("llama-2-7b", seq=16, fold_blocks=True)   # an explicit option wins over options.fold
    assert seen[1] == {"fold_blocks": True, "seq": 16}


def test_open_model_refuses_what_is_not_a_language_model(tmp_path):
    from graphroof.frontends.sources import open_model

    with pytest.raises(InputError, match="resnet-50 is a vision model, not a language model"):
        open_model("resnet-50", options=Options())
    t = tmp_path / "ops.csv"
    t.write_text("name,op\n")
    with pytest.raises(InputError, match="don't know how to read"):
        open_model(str(t))


def test_resolved_is_plain_data():
    res = Resolved(ModelRef("zoo", "x"), config={"a": 1}, name="x", source="zoo:x")
    assert res.kind == "zoo" and res.transformers
    with pytest.raises(AttributeError):
        res.name = "y"  # type: ignore[misc]
