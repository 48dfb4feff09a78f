"""The bundled zoo and transformers configs: full-size models on the meta device, no weights allocated."""

from __future__ import annotations

import json
import resource
import sys

import pytest
import torch

import graphroof
from graphroof.cli import main
from graphroof.errors import FrontendError, InputError
from graphroof.frontends import zoo
from graphroof.frontends.hf import build as hf

pytest.importorskip("transformers")

REQUIRED = ["llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "mistral-7b", "mixtral-8x7b",
            "gpt2", "bert-base", "vit-b-16", "resnet-50"]


def _params(model) -> int:
    assert all(p.is_meta for p in model.parameters())      # nothing allocated
    return sum(p.numel() for p in model.parameters())


def test_required_models_listed():
    assert set(REQUIRED) <= set(zoo.zoo_names())


@pytest.mark.parametrize("name, published", [
    ("llama-2-7b", 6_738_415_616), ("llama-2-13b", 13_015_864_320), ("llama-2-70b", 68_976_648_192),
    ("llama-3-8b", 8_030_261_248), ("llama-3-70b", 70_553_706_496), ("mistral-7b", 7_241_732_096),
    ("mixtral-8x7b", 46_702_792_704), ("gpt2", 124_439_808),
])
def test_hf_zoo_configs_match_published_sizes(name, published):
    model, _, _ = hf.build_model(hf.read_config(zoo.config_path(name)))
    assert _params(model) == published


@pytest.mark.parametrize("name, published", [("resnet-50", 25_557_032), ("vit-b-16", 86_567_656),
                                             ("resnet-18", 11_689_512)])
def test_vision_zoo_sizes(name, published):
    model, _ = zoo.build_zoo_module(name)
    assert _params(model) == published


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def test_llama_2_7b_full_size_no_weights():
    before = _peak_rss()
    a = graphroof.analyze("llama-2-7b", hw="a100", seq=1024)
    assert _peak_rss() - before < 1e9                       # fp16 weights would be 13.5 GB
    S, d, ff, V, L = 1024, 4096, 11008, 32000, 32
    c = a.totals.cost
    pairs = S * (S + 1) // 2
    # per layer: q, k, v, o (2*S*d*d each), gate/up/down (2*S*d*ff each), causal attention over 32 heads
    layer = 4 * 2 * S * d * d + 3 * 2 * S * d * ff + 2 * 32 * pairs * (128 + 128)
    assert c.matrix_flops == L * layer + 2 * S * d * V      # + lm_head
    # fp16 weights read once each; the embedding reads 1024 rows; rotary inv_freq (64 fp32)
    assert c.weight_bytes == 2 * (6_738_415_616 - V * d + S * d) + 64 * 4
    assert a.meta["capture"] == "dispatch (fake tensors)" and a.summary.n_unknown == 0


@pytest.mark.slow
def test_llama_2_70b_full_size_no_weights():
    before = _peak_rss()
    a = graphroof.analyze("llama-2-70b", hw="a100", seq=256)
    assert _peak_rss() - before < 1e9                       # fp16 weights would be 138 GB
    S, d, ff, V, L, kv = 256, 8192, 28672, 32000, 80, 1024  # GQA: 8 KV heads of 128
    layer = 2 * 2 * S * d * d + 2 * 2 * S * d * kv + 3 * 2 * S * d * ff + 2 * 64 * (S * (S + 1) // 2) * 256
    assert a.totals.cost.matrix_flops == L * layer + 2 * S * d * V


def test_mixtral_counts_top2_experts_and_reads_visited():
    a = graphroof.analyze("mixtral-8x7b", hw="a100", seq=128)
    S, d, ff = 128, 4096, 14336
    moe = [r for r in a.ops if r["scope"] == "model.layers.0.mlp.experts" and r["matrix_flops"]]
    # every token goes through 2 of 8 experts: gate+up (2*ff rows) and down, 2 * (S*2) * d * 3ff
    assert sum(r["matrix_flops"] for r in moe) == 2 * (S * 2) * d * 3 * ff
    # ... and the weights of the experts visited are read (bf16): 128 tokens routed uniformly to 2 of 8 visit
    # 8 * (1 - 0.75^128) experts on average, 8 within 1e-15 (see graphroof.frontends.moe)
    assert sum(r["weight_bytes"] for r in moe) == pytest.approx(8 * 3 * d * ff * 2 * (1 - 0.75 ** 128), rel=1e-12)
    assert sum(r["weight_bytes"] for r in moe) == pytest.approx(8 * 3 * d * ff * 2, rel=1e-12)
    assert any("uniform routing" in n for n in a.notes())


def test_vit_b16_hand_flops():
    a = graphroof.analyze("vit-b-16", hw="a100")
    n, d = 197, 768
    block = 2 * n * d * 3 * d + 2 * n * d * d + 2 * 2 * n * d * 4 * d + 2 * 12 * n * n * 128
    # patch embedding conv: 196 patches x 768 outputs, each a 3*16*16 dot product; head on the class token
    assert a.totals.cost.matrix_flops == 2 * 196 * d * 768 + 12 * block + 2 * d * 1000


def test_batch_and_seq_scale():
    a1 = graphroof.analyze("gpt2", seq=32)
    a2 = graphroof.analyze("gpt2", seq=32, batch=3)
    assert a2.graph.meta["inputs"] == "input_ids=int64[3,32]"
    assert a2.totals.cost.matrix_flops == 3 * a1.totals.cost.matrix_flops
    b = graphroof.analyze("bert-base")                      # default 1024 capped at BERT's 512 positions
    assert b.graph.meta["inputs"] == "input_ids=int64[1,512]"
    assert any("512" in n for n in b.graph.meta["notes"])
    with pytest.raises(InputError, match="at most 512 tokens"):
        graphroof.analyze("bert-base", seq=1024)


def test_unknown_zoo_name_lists_close_names():
    with pytest.raises(InputError, match=r"close: llama-2-7b"):
        zoo.load_zoo("lama-2-7b")


def test_zoo_list_cli(capsys):
    assert main(["zoo", "list"]) == 0
    out = capsys.readouterr().out
    for name in REQUIRED:
        assert name in out


TINY = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
        "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 1000, "max_position_embeddings": 256, "torch_dtype": "bfloat16"}


def test_config_json_cli(tmp_path, capsys):
    p = tmp_path / "tiny" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps(TINY))
    assert main(["analyze", str(p), "--seq", "16", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["model"] == "tiny" and d["capture"] == "dispatch (fake tensors)"
    # 2 layers; lm_head 2*16*64*1000 = 2,048,000; attention 2*4*136*32 = 34,816 per layer
    assert d["totals"]["matrix_flops"] == 2 * (2 * 16 * 64 * 64 * 2 + 2 * 16 * 64 * 32 * 2 + 2 * 16 * 64 * 176 * 3
                                              + 34816) + 2_048_000
    # same with capture="export": transformers builds an explicit causal mask there, counted as causal
    g = hf.load_config(p, seq=16, capture="export")
    assert g.meta["capture"] == "torch.export (non-strict)"
    assert any("counted as causal" in n for n in g.meta["notes"])
    a = graphroof.analyze(g)
    assert a.totals.cost.matrix_flops == d["totals"]["matrix_flops"]


def test_unknown_architecture_config(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"model_type": "llamma", "hidden_size": 8}))
    with pytest.raises(FrontendError, match=r"model_type 'llamma' is not a transformers architecture.*close: llama"):
        graphroof.analyze(str(p))


def test_missing_transformers_is_a_clear_error(tmp_path, monkeypatch):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(TINY))
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(FrontendError, match=r"pip install 'graphroof\[hf\]'"):
        graphroof.analyze(str(p))


def test_meta_params_untouched_by_analysis():
    model, _ = zoo.build_zoo_module("resnet-18")
    g = graphroof.frontends.torch.export.load_module(model, [(1, 3, 224, 224)])
    assert all(p.is_meta for p in model.parameters()) and len(g) > 50
    assert torch.device("meta") == next(model.parameters()).device


def test_decode_step_with_a_transformers_cache_counts_kv_bytes():
    from transformers import DynamicCache

    from graphroof.frontends.hf.compat import cache_argument
    from graphroof.frontends.torch.export import load_module

    model, cfg, _ = hf.build_model(TINY)
    cache = DynamicCache(config=cfg)
    for i in range(2):                                       # 15 cached tokens, 2 KV heads of 16, bf16
        k = torch.empty(1, 2, 15, 16, device="meta", dtype=torch.bfloat16)
        cache.update(k, k.clone(), i)
    arg = cache_argument(model.forward)  # transformers 5.24: `cache`; before: `past_key_values`
    with hf.eager_prompt():
        g = load_module(model, {"input_ids": (1, 1), arg: cache, "use_cache": True}, capture="dispatch")
    c = graphroof.analyze(g).totals.cost
    # per layer, K and V (rows of 2 heads x 16 = 32 values): the cache grows by concatenation (read 15 cached
    # rows, write 16), then attention reads the 16 rows.  2 layers * 2 * (15 + 16) * 32 * 2 B = 7936 B read,
    # 2 layers * 2 * 16 * 32 * 2 B = 4096 B written
    assert c.kv_read_bytes == 2 * 2 * (15 + 16) * 32 * 2 and c.kv_write_bytes == 2 * 2 * 16 * 32 * 2
    # one query over 16 keys (no causal reduction for a single query), 4 query heads: 2 * 4 * 16 * 32 per layer
    sdpa = [n for n in g.ops() if n.op == "aten.scaled_dot_product_attention"]
    assert len(sdpa) == 2 and not sdpa[0].attrs["is_causal"]


def test_missing_torch_is_a_clear_error(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "torch" else real(n, *a))
    with pytest.raises(FrontendError, match=r"pip install 'graphroof\[torch\]'"):
        zoo.load_zoo("resnet-50")
