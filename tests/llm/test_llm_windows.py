"""KV bytes per token for MHA / GQA / MQA, sliding-window and hybrid (sliding + full) attention: the cache each
layer keeps, the decode reads, the prefill pairs and the memory fit, against hand arithmetic."""

from __future__ import annotations

import pytest

pytest.importorskip("graphroof.frontends.torch.export", reason="needs the PyTorch frontend")
pytest.importorskip("transformers")

from graphroof.counters.count import count  # noqa: E402
from graphroof.frontends.hf.source import HFSource  # noqa: E402
from graphroof.frontends.source import ModelSpec  # noqa: E402
from graphroof.graph import COST  # noqa: E402
from graphroof.llm import estimate  # noqa: E402
from graphroof.llm.kvcache import mark_kv_cache  # noqa: E402

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


# -- MLA: the cache holds the compressed latent ----------------------------------------------------------------

DEEPSEEK_V2 = dict(model_type="deepseek_v2", architectures=["DeepseekV2ForCausalLM"], hidden_size=H,
                   intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2, num_attention_heads=HEADS,
                   num_key_value_heads=HEADS, kv_lora_rank=32, q_lora_rank=None, qk_nope_head_dim=16,
                   qk_rope_head_dim=8, v_head_dim=16, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
                   first_k_dense_replace=1, topk_method="greedy", n_group=1, topk_group=1, vocab_size=V,
                   max_position_embeddings=512, torch_dtype="bfloat16")


def test_mla_kv_layout_is_the_latent():
    src = HFSource(DEEPSEEK_V2, name="tiny-deepseek-v2")
    # each layer caches the latent [1, kv_lora_rank = 32] and the rope key [1, 8]: 40 elements per layer and
    # token, 2 layers -> 80 elements = 160 B in bf16 (not 2 * 2 * 4 heads * 24 = 384 elements from the config)
    assert src.kv_layout() == {0: ((1, 32), (1, 8)), 1: ((1, 32), (1, 8))}
    assert src.spec.kv_bytes_per_token(16) == 2 * (32 + 8) * 2 == 160
    read, write, attn = _kv(src, "decode", 1, 40)
    # one token writes 160 B; the absorbed decode (frontends/hf/mla.py, as engines run it) reads the 41 cached latent +
    # rope rows once: 41 * 160 B
    assert write == 160 and read == 41 * 160
    assert any("KV cache layout read from" in n for n in src.notes)
    assert any("MLA decode attends in the latent space" in n for n in src.notes)


def test_mla_decode_absorbed_vs_transformers_expansion():
    """Tiny DeepSeek-V2 (4 heads, rank 32, rope 8, nope 16, v 16), decode at past 40 (41 keys), batch 1.

    Absorbed, per layer: query absorption 2 * 4 * 16 * 32 = 4,096; latent attention 2 * 4 * 41 * (40 + 32) =
    23,616; value up-projection 2 * 4 * 32 * 16 = 4,096.  transformers' form instead runs kv_b_proj over all 41
    latents every step: 2 * 41 * 32 * (4 * (16 + 16)) = 335,872 per layer, then SDPA over 41 keys of width 24.
    """
    from graphroof.counters.count import count as count_graph

    def attention_flops(absorbed: bool) -> tuple[float, float]:
        src = HFSource(DEEPSEEK_V2, name="tiny-deepseek-v2", mla_absorbed=absorbed)
        g = mark_kv_cache(src.decode_graph(1, 40)).map_ops(lambda op: op)
        count_graph(g)
        attn = [(op, g.get(op.name, COST)) for op in g.ops() if ".self_attn" in op.scope]
        return (sum(c.matrix_flops for op, c in attn if op.op == "graphroof.mla_decode"),
                sum(c.matrix_flops for _, c in attn))

    latent, total_absorbed = attention_flops(True)
    assert latent == 2 * 2 * 4 * 41 * (40 + 32)          # 2 layers x 23,616
    _, total_expanded = attention_flops(False)
    # the absorbed step drops kv_b_proj over the cache (2 x 335,872) and adds 2 x (4,096 + 4,096) of absorption;
    # its attention over width 72 instead of 24 + 16 changes the SDPA term: 2 x (23,616 - 2*4*41*(24+16))
    sdpa_expanded = 2 * 2 * 4 * 41 * (24 + 16)
    assert total_expanded - total_absorbed == pytest.approx(
        2 * 335_872 - 2 * (4_096 + 4_096) + sdpa_expanded - latent)


def test_latent_attention_rule_literal():
    from graphroof.counters.formulas import SOFTMAX_FLOPS_PER_ELEMENT
    from graphroof.counters.rules.attention import latent_attention
    from graphroof.graph import OpNode, TensorSpec

    q = TensorSpec((2, 4, 1, 40), "bf16")
    latent, rope = TensorSpec((2, 1, 41, 32), "bf16"), TensorSpec((2, 1, 41, 8), "bf16")
    out = TensorSpec((2, 4, 1, 32), "bf16")
    c = latent_attention(OpNode("m", "graphroof.mla_decode", (q, latent, rope), (out,), {}, "attn"))
    # B*H = 8 query rows, 41 keys: scores 2 * 8 * 41 * 40 + weighted latents 2 * 8 * 41 * 32 = 47,232
    assert c.matrix_flops == 2 * 8 * 41 * (40 + 32) == 47_232
    assert c.vector_flops == (SOFTMAX_FLOPS_PER_ELEMENT + 1) * 8 * 41
    # read once: q 8*40*2 = 640, latent 2*41*32*2 = 5,248, rope 2*41*8*2 = 1,312 B; out 8*32*2 = 512 B
    assert c.bytes == 640 + 5_248 + 1_312 + 512


def test_mla_full_size_kv_bytes_per_token_v2_lite_and_v3():
    from graphroof.frontends.source import ModelSpec as M

    # the figures the layout gives for the published configs: L * (kv_lora_rank + rope_dim) * 2 B
    assert M(kv_elems_per_token=27 * (512 + 64)).kv_bytes_per_token(16) == 31_104     # DeepSeek-V2-Lite
    assert M(kv_elems_per_token=61 * (512 + 64)).kv_bytes_per_token(16) == 70_272     # DeepSeek-V3


def test_failed_trace_is_one_line(tmp_path, capsys, monkeypatch):
    import json

    import graphroof.frontends.torch.export as te
    from graphroof.cli import main

    def boom(*args, **kwargs):  # a trace failing deep in torch, with a long multi-line message
        raise RuntimeError("Sizes of tensors must match except in dimension 2.\n" + "x" * 5000)

    monkeypatch.setattr(te, "load_module", boom)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(_llama(2)))
    assert main(["--quiet", "llm", str(p), "--prompt", "8", "--gen", "2"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("graphroof: error:"), err
    # names the model, the phase and the cause; no traceback, no dump of every input
    assert p.parent.name in err and "prefill" in err and "could not be traced" in err
    assert "Sizes of tensors must match" in err
    assert "Traceback" not in err and "past_key_0" not in err and len(err) < 700


def test_prefill_computes_last_position_logits_only():
    src = HFSource(_llama(2), name="tiny")
    c = mark_kv_cache(src.prefill_graph(3, 40)).map_ops(lambda op: op)
    count(c)
    head = [c.get(op.name, COST).matrix_flops for op in c.ops() if op.scope == "lm_head"]
    # logits_to_keep=1: the lm_head multiplies one position per sequence, 2 * 3 * 1 * 64 * 100 = 38,400 FLOPs
    # (every position would be 40 times that)
    assert head == [2 * 3 * 1 * H * V]
    assert any("last prompt position only" in n for n in src.notes)
