"""The persistent store of traced graphs: a second run reads what the first traced, with identical figures, and
never reads a graph traced under another request or other code."""

from __future__ import annotations

import json
import warnings

import pytest

pytest.importorskip("graphroof.frontends.torch.export", reason="needs the PyTorch frontend")
pytest.importorskip("transformers")

import graphroof  # noqa: E402
from graphroof.cli import main  # noqa: E402
from graphroof.errors import GraphroofWarning  # noqa: E402
from graphroof.frontends import sources as loaders  # noqa: E402
from graphroof.frontends import trace_store  # noqa: E402
from graphroof.frontends.hf import build as hf
from graphroof.frontends.stored import StoredSource  # noqa: E402
from graphroof.llm import estimate
from graphroof.options import Options  # noqa: E402

TINY = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=100,
            max_position_embeddings=512, torch_dtype="bfloat16")


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHROOF_CACHE", "on")
    monkeypatch.setenv("GRAPHROOF_CACHE_DIR", str(tmp_path / "store"))
    return tmp_path / "store"


def _config(tmp_path, **change):
    p = tmp_path / ("cfg-" + "-".join(f"{k}{v}" for k, v in change.items())) / "config.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({**TINY, **change}))
    return p


def _counting(monkeypatch):
    calls = []
    real = hf.load_config

    def load_config(*a, **k):
        calls.append(a)
        return real(*a, **k)

    monkeypatch.setattr(hf, "load_config", load_config)
    return calls


def _figures(a):
    t = a.totals
    return (t.as_dict(), [(r["name"], r["flops"], r["bytes"]) for r in a.ops])


def test_analyze_reads_back_the_traced_graph(store, tmp_path, monkeypatch):
    calls = _counting(monkeypatch)
    cfg = _config(tmp_path)
    first = graphroof.analyze(str(cfg), hw="a100", seq=32)
    second = graphroof.analyze(str(cfg), hw="a100", seq=32)
    assert len(calls) == 1                       # the second run traced nothing
    assert _figures(first) == _figures(second)   # and gives the same figures, to the last bit
    assert list(store.glob("*/*/graph.json.z"))
    graphroof.analyze(str(cfg), hw="a100", seq=64)     # another request: traced
    assert len(calls) == 2
    graphroof.analyze(str(cfg), hw="a100", seq=32, options=Options(fold=False))  # folding is part of the request
    assert len(calls) == 3
    graphroof.analyze(str(_config(tmp_path, hidden_size=128)), hw="a100", seq=32)  # another config
    assert len(calls) == 4


def test_other_code_is_another_key(store, monkeypatch):
    k = trace_store.key_of("zoo", {"zoo": "x"})
    monkeypatch.setattr(trace_store, "_FINGERPRINT", ["another version of graphroof"])
    assert trace_store.key_of("zoo", {"zoo": "x"}) != k
    assert trace_store.key_of("zoo", {"f": object()}) is None   # not plain data: never stored


def test_off_and_corrupt_entries(store, tmp_path, monkeypatch):
    calls = _counting(monkeypatch)
    cfg = _config(tmp_path)
    graphroof.analyze(str(cfg), hw="a100", seq=32, options=Options(store=False))
    assert len(calls) == 1 and not store.exists()
    graphroof.analyze(str(cfg), hw="a100", seq=32)
    (entry,) = store.glob("*/*/graph.json.z")
    entry.write_bytes(b"not a pickle")          # truncated / foreign: a miss, traced and written again
    a = graphroof.analyze(str(cfg), hw="a100", seq=32)
    assert len(calls) == 3 and a.totals.cost.flops > 0
    assert entry.read_bytes() != b"not a pickle"


def test_warnings_of_a_capture_are_raised_again_on_a_hit(store):
    entry = trace_store.Entry("test", {"n": 1})

    def fn():
        warnings.warn("value reads assumed", GraphroofWarning, stacklevel=1)
        return 42

    for _ in range(2):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            assert trace_store.capture(entry, "x", fn) == 42
        assert [str(w.message) for w in rec] == ["value reads assumed"]


def test_llm_estimate_from_the_store_without_building_the_model(store, tmp_path, monkeypatch):
    cfg = _config(tmp_path)
    kw = dict(hw="h100", prompt=16, gen=8, batch=[1, 3])
    first = estimate(str(cfg), **kw)

    def no_build(*a, **k):
        raise AssertionError("the model was built although every graph is stored")

    monkeypatch.setattr(loaders, "_hf_source", no_build)
    src = loaders.open_model(str(cfg))
    assert isinstance(src, StoredSource) and src.kind == "HFSource"
    second = estimate(src, **kw)
    for a, b in zip(first.configs, second.configs):
        assert (a.ttft_s, a.tpot_s, a.memory.total_bytes, a.kv_cache_bytes) == \
               (b.ttft_s, b.tpot_s, b.memory.total_bytes, b.kv_cache_bytes)
    assert first.notes == second.notes and first.spec == second.spec
    with pytest.raises(AssertionError, match="was built"):    # a graph not stored needs the model
        estimate(str(cfg), hw="h100", prompt=16, gen=8, batch=[5, 7])


def test_cli_no_cache_writes_nothing(store, tmp_path, capsys):
    cfg = _config(tmp_path)
    assert main(["--no-cache", "analyze", str(cfg), "--seq", "16", "--format", "json"]) == 0
    assert not store.exists()
    assert main(["analyze", str(cfg), "--seq", "16", "--format", "json"]) == 0
    assert list(store.glob("*/*/graph.json.z"))


def test_cli_cache_info_and_clear(store, tmp_path, capsys):
    trace_store.store(trace_store.key_of("test", {"n": 2}), "graph", list(range(1000)))
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert str(store) in out and "entries: 1 (1 files" in out
    assert main(["cache", "clear"]) == 0
    assert "removed 1 stored graph files" in capsys.readouterr().out
    assert trace_store.usage() == (0, 0, 0) and not list(store.iterdir())


def test_store_is_pruned_to_its_limit(store, monkeypatch):
    monkeypatch.setenv("GRAPHROOF_CACHE_MB", "0.002")   # 2,000 bytes: room for one ~1.2 kB entry at a time
    import os

    for n in range(3):
        trace_store.store(trace_store.key_of("test", {"n": n}), "graph", os.urandom(1200))
    entries, files, size = trace_store.usage()
    assert files == 1 and size <= 2000
    assert trace_store.load(trace_store.key_of("test", {"n": 2}), "graph") is not None   # the newest is kept


def test_encoder_decoder_from_the_store(store, tmp_path, monkeypatch):
    """An encoder-decoder's decode graph depends on the encoder length of the request: stored under it, and a
    request with another prompt traces its own."""
    from tests.llm.test_llm_encdec import BART, WHISPER

    for cfg_data in (BART, WHISPER):
        p = tmp_path / cfg_data["model_type"] / "config.json"
        p.parent.mkdir()
        p.write_text(json.dumps(cfg_data))
        kw = dict(hw="h100", prompt=24, gen=6, batch=[1, 2], decoder_prompt=2)
        first = estimate(str(p), **kw)
        real = loaders._hf_source
        monkeypatch.setattr(loaders, "_hf_source", lambda *a, **k: (_ for _ in ()).throw(AssertionError("built")))
        src = loaders.open_model(str(p), decoder_prompt=2)
        assert isinstance(src, StoredSource) and src.kind == "EncDecSource" and src.encoder_decoder
        second = estimate(src, **kw)
        for a, b in zip(first.configs, second.configs):
            assert (a.ttft_s, a.tpot_s, a.memory.total_bytes, a.kv_cache_bytes) == \
                   (b.ttft_s, b.tpot_s, b.memory.total_bytes, b.kv_cache_bytes)
        assert first.notes == second.notes
        if "num_mel_bins" not in cfg_data:  # a text encoder: another prompt is another encoder length
            with pytest.raises(AssertionError, match="built"):
                estimate(str(p), **{**kw, "prompt": 30})
            with pytest.raises(graphroof.InputError, match="longer than"):   # the stored limits still apply
                estimate(src, **{**kw, "prompt": 500})
        monkeypatch.setattr(loaders, "_hf_source", real)
