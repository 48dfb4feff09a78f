"""The zoo's MoE / MLA / sliding-window LLMs (configs only): KV bytes per token and the cache each layer holds,
exact against the published configs' arithmetic."""

from __future__ import annotations

import pytest

pytest.importorskip("graphroof.frontends.torch.export", reason="needs the PyTorch frontend")
pytest.importorskip("transformers")

from graphroof.frontends.sources import open_model  # noqa: E402


@pytest.mark.parametrize("name, per_token", [
    # Qwen3-30B-A3B: 48 layers * K+V * 4 KV heads * 128 * 2 B = 98,304 B
    ("qwen3-30b-a3b", 48 * 2 * 4 * 128 * 2),
    # DeepSeek-V2-Lite (MLA): 27 layers * (kv_lora_rank 512 + rope 64) * 2 B = 31,104 B
    ("deepseek-v2-lite", 31_104),
    # Gemma-2-9B: 42 * 2 * 8 * 256 * 2 = 344,064 B
    ("gemma-2-9b", 344_064),
    # Gemma-3-1B (MQA): 26 * 2 * 1 * 256 * 2 = 26,624 B
    ("gemma-3-1b", 26_624),
    # Mistral-7B v0.1: 32 * 2 * 8 * 128 * 2 = 131,072 B
    ("mistral-7b", 131_072),
])
def test_zoo_kv_bytes_per_token(name, per_token):
    src = open_model(name)
    src.kv_layout()
    assert src.spec.kv_bytes_per_token(16) == per_token


def test_zoo_windows_gemma3_gemma2_mistral():
    g3 = open_model("gemma-3-1b")
    # every 6th layer is full (5, 11, 17, 23), the 22 others slide over 512 tokens
    assert [i for i, w in enumerate(g3.spec.windows) if w is None] == [5, 11, 17, 23]
    # at 4096 + 128 = 4224 tokens: (22 * 512 + 4 * 4224) / 26 tokens per layer; * 26,624 B = 28,835,840 B
    # (28.8 MB, against 4224 * 26,624 = 112.5 MB with every layer full)
    assert g3.spec.kv_cache_tokens(4224) * 26_624 == pytest.approx(28_835_840)
    g2 = open_model("gemma-2-9b")
    # Gemma 2 alternates: even layers slide over 4096, odd layers full
    assert g2.spec.windows == tuple(4096 if i % 2 == 0 else None for i in range(42))
    # Gemma 2 has no SDPA path in transformers (logit soft-capping): its eager attention is said, not hidden
    assert any("no SDPA path" in n and "soft-capping" in n for n in g2.notes)
    assert not any("no SDPA path" in n for n in g3.notes)
    assert open_model("mistral-7b").spec.windows == (4096,) * 32
    # Mistral v0.1 at 8192 tokens: every layer holds 4096 -> half the full-context KV
    assert open_model("mistral-7b").spec.kv_cache_tokens(8192) == 4096


@pytest.mark.slow
def test_zoo_deepseek_v3_mla_kv_bytes():
    # 61 layers * (512 latent + 64 rope) * 2 B = 70,272 B per token (vs 61 * 2 * 128 * 128 * 2 = 3,997,696 B
    # from kv_heads x head_dim)
    src = open_model("deepseek-v3")
    src.kv_layout()
    assert src.spec.kv_bytes_per_token(16) == 70_272
