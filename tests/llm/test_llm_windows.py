"""KV bytes per token for MHA / GQA / MQA, sliding-window and hybrid (sliding + full) attention: the cache each
layer keeps, the decode reads, the prefill pairs and the memory fit, against hand arithmetic."""

from __future__ import annotations

import pytest

pytest.importorskip("graphroof.frontends.torch_export", reason="needs the PyTorch frontend")
pytest.importorskip("transformers")

from graphroof.counters.count import count  # noqa: E402
from graphroof.graph import COST  # noqa: E402
from graphroof.llm import estimate  # noqa: E402
from graphroof.llm.hf import HFSource  # noqa: E402
from graphroof.llm.kvcache import mark_kv_cache  # noqa: E402
from graphroof.llm.source import ModelSpec  # noqa: E402

H, HEADS, HD, V = 64, 4, 16, 100


def _llama(kv_heads: int, layers: int = 2) -> dict:
    return dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=H, intermediate_size=128,
                num_hidden_layers=layers, num_attention_heads=HEADS, num_key_value_heads=kv_heads, vocab_size=V,
                max_position_embeddings=512, torch_dtype="bfloat16")


MISTRAL = dict(model_type="mistral", architectures=["MistralForCausalLM"], hidden_size=H, intermediate_size=128,
               num_hidden_layers=2, num_attention_heads=HEADS, num_key_value_heads=2, sliding_window=32,
               vocab_size=V, max_position_embeddings=512, torch_dtype="bfloat16")
# Gemma-3: five sliding layers then one full (sliding_window_pattern 6), MQA (1 KV head), head_dim 16
GEMMA3 = dict(model_type="gemma3_text", architectures=["Gemma3ForCausalLM"], hidden_size=H, intermediate_size=128,
              num_hidden_layers=6, num_attention_heads=HEADS, num_key_value_heads=1, head_dim=HD, sliding_window=32,
              vocab_size=V, max_position_embeddings=512, torch_dtype="bfloat16")


def _kv(src: HFSource, phase: str, batch: int, x: int) -> tuple[float, float, float]:
    """(KV read bytes, KV write bytes, attention matrix FLOPs) of a counted step."""
    g = src.decode_graph(batch, x) if phase == "decode" else src.prefill_graph(batch, x)
    c = mark_kv_cache(g).map_ops(lambda op: op)
    count(c)
    costs = [(op, c.get(op.name, COST)) for op in c.ops()]
    return (sum(k.kv_read_bytes for _, k in costs), sum(k.kv_write_bytes for _, k in costs),
            sum(k.matrix_flops for op, k in costs if "attention" in op.op))


@pytest.mark.parametrize("kv_heads", [4, 2, 1])  # MHA, GQA, MQA
def test_kv_bytes_per_token_mha_gqa_mqa(kv_heads):
    src = HFSource(_llama(kv_heads), name="tiny")
    assert src.spec.windows is None
    # one decoded token writes K and V per layer: 2 * 2 layers * kv_heads * 16 * 2 B = 128 * kv_heads B
    per_token = 2 * 2 * kv_heads * HD * 2
    assert src.spec.kv_bytes_per_token(16) == per_token
    read, write, _ = _kv(src, "decode", 1, 40)
    assert write == per_token
    # the step reads the 40 cached tokens and its own (41 keys and values per layer)
    assert read == 41 * per_token


def test_sliding_window_decode_reads_the_window():
    src = HFSource(MISTRAL, name="tiny-mistral")
    assert src.spec.windows == (32, 32)
    per_token = 2 * 2 * 2 * HD * 2  # K+V, 2 layers, 2 KV heads, 16, bf16 = 256 B
    # past 16 < window: 17 keys per layer; past 100: the cache holds W - 1 = 31, the step reads 32
    assert _kv(src, "decode", 1, 16)[:2] == (17 * per_token, per_token)
    assert _kv(src, "decode", 1, 100)[:2] == (32 * per_token, per_token)
    assert src.spec.kv_cache_tokens(100) == 32 and src.spec.kv_cache_tokens(20) == 20
    assert any("attention windows: 2 of 2 layers" in n for n in src.notes)


def test_hybrid_gemma3_kv_reads_and_prefill_pairs():
    src = HFSource(GEMMA3, name="tiny-gemma3")
    assert src.spec.windows == (32, 32, 32, 32, 32, None)
    layer_tok = 2 * 1 * HD * 2   # K+V, 1 KV head (MQA), 16, bf16 = 64 B per layer and token
    read, write, _ = _kv(src, "decode", 1, 100)
    # five sliding layers read 32 keys, the full layer 101: (5 * 32 + 101) * 64 = 16,704 B
    assert read == (5 * 32 + 101) * layer_tok == 16_704
    assert write == 6 * layer_tok
    # cache held at context 100: mean over layers (5 * 32 + 100) / 6 tokens
    assert src.spec.kv_cache_tokens(100) == pytest.approx((5 * 32 + 100) / 6)
    # prefill of 100 tokens: a sliding layer computes sum_p min(p, 32) = 32*33/2 + 68*32 = 528 + 2,176 = 2,704
    # pairs, the full layer 100*101/2 = 5,050; FLOPs 2 * 4 heads * pairs * (16 + 16)
    _, _, flops = _kv(src, "prefill", 1, 100)
    assert flops == 2 * 4 * (5 * 2_704 + 5_050) * (HD + HD)


def test_kv_cache_tokens_by_hand():
    spec = ModelSpec(layers=4, windows=(8, None, 8, None))
    assert spec.kv_cache_tokens(100) == (8 + 100 + 8 + 100) / 4
    assert spec.kv_cache_tokens(4) == 4
    assert ModelSpec(layers=2).kv_cache_tokens(77) == 77


def test_memory_fit_honours_windows(tmp_path):
    import json

    p = tmp_path / "config.json"
    p.write_text(json.dumps(GEMMA3))
    r = estimate(str(p), hw="a100", prompt=100, gen=28, batch=[2], ideal=True)
    # context 128: sliding layers hold 32 tokens, the full layer 128; 64 B per layer and token, batch 2:
    # 2 * (5 * 32 + 128) * 64 = 36,864 B (the full context everywhere would be 2 * 6 * 128 * 64 = 98,304 B)
    assert r.configs[0].memory.kv_cache_bytes == pytest.approx(2 * (5 * 32 + 128) * 64)
