"""Encoder-decoder LLMs (T5, BART, Whisper) in ``graphroof llm``: the encoder once in the prefill, cached decode
steps over a growing self-attention cache and a fixed cross-attention cache, KV bytes per sequence, against hand
arithmetic on tiny configs."""

from __future__ import annotations

import pytest

pytest.importorskip("graphroof.frontends.torch.export", reason="needs the PyTorch frontend")
pytest.importorskip("transformers")

from graphroof.cli import main  # noqa: E402
from graphroof.errors import InputError  # noqa: E402
from graphroof.frontends.hf.encdec import EncDecSource  # noqa: E402
from graphroof.llm import Engine, Pricing, estimate  # noqa: E402
from graphroof.llm.kvcache import APPEND  # noqa: E402

D, HEADS, DKV, FF, V = 64, 4, 16, 128, 256
# T5: 2 encoder layers, 3 decoder layers (num_decoder_layers differs, so the decoder's count must be used)
T5 = dict(model_type="t5", architectures=["T5ForConditionalGeneration"], d_model=D, d_kv=DKV, d_ff=FF, num_layers=2,
          num_decoder_layers=3, num_heads=HEADS, vocab_size=V, feed_forward_proj="relu", is_encoder_decoder=True,
          decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, torch_dtype="float32")
BART = dict(model_type="bart", architectures=["BartForConditionalGeneration"], d_model=D, encoder_layers=2,
            decoder_layers=2, encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FF,
            decoder_ffn_dim=FF, vocab_size=V, max_position_embeddings=128, is_encoder_decoder=True,
            torch_dtype="float32")
# Whisper: 16 mel bins, 30 encoder positions (60 feature frames), decoder at most 64 tokens
WHISPER = dict(model_type="whisper", architectures=["WhisperForConditionalGeneration"], d_model=D, encoder_layers=2,
               decoder_layers=2, encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FF,
               decoder_ffn_dim=FF, vocab_size=V, num_mel_bins=16, max_source_positions=30, max_target_positions=64,
               decoder_start_token_id=1, pad_token_id=0, bos_token_id=1, eos_token_id=2, is_encoder_decoder=True,
               torch_dtype="float32")

# fp32 K and V of one token over the decoder's layers: 2 * layers * heads * head_dim * 4 B
T5_KV_TOKEN = 2 * 3 * HEADS * DKV * 4       # 1536 B (self and cross entries have the same size)
BART_KV_TOKEN = 2 * 2 * HEADS * (D // HEADS) * 4   # 1024 B


@pytest.mark.parametrize("cfg, per_token, name", [(T5, T5_KV_TOKEN, "t5"), (BART, BART_KV_TOKEN, "bart")])
def test_kv_bytes_per_sequence_self_plus_cross(cfg, per_token, name):
    P, G = 40, 6
    r = estimate(EncDecSource(cfg, name=name), hw="h100", prompt=P, gen=G, batch=[1, 3])
    for c in r.configs:
        # self-attention: decoder prompt (1 start token) + 6 generated = 7 tokens; cross-attention: 40 encoder tokens
        assert c.kv_cache_bytes == c.batch * (per_token * (1 + G) + per_token * P)
        # paged in 16-token blocks: self 7 -> 16 tokens, cross 40 -> 48 tokens
        assert c.memory.kv_reserved_bytes == c.batch * per_token * (16 + 48)
        # decode past runs over the decoder's cache: 1 .. 1 + G - 2
        assert c.decode.context == (1, G - 1)


def test_prefill_writes_both_caches_decode_appends_self_only():
    P = 24
    eng = Engine(EncDecSource(T5, name="t5"), hw="h100")
    eng.estimate(prompt=P, gen=4, batch=2)
    pipe = eng.pipeline
    pre = pipe.counted("prefill", 2, P).ops
    # prefill: 2 sequences x (1 decoder token of self KV + 24 encoder tokens of cross KV)
    assert sum(c.kv_write_bytes for op, c in pre if op.op == APPEND) == 2 * T5_KV_TOKEN * (1 + P)
    dec = pipe.counted("decode", 2, 3).ops
    assert sum(c.kv_write_bytes for op, c in dec if op.op == APPEND) == 2 * T5_KV_TOKEN
    # the step reads 3 cached + its own self entries and the 24 cross entries, per sequence
    assert sum(c.kv_read_bytes for _, c in dec) == 2 * T5_KV_TOKEN * (3 + 1 + P)


def test_encoder_counted_once_in_prefill_not_in_decode():
    P, S = 32, EncDecSource(T5, name="t5")
    eng = Engine(S, hw="h100")
    eng.estimate(prompt=P, gen=4, batch=1)
    pre = eng.pipeline.counted("prefill", 1, P).ops
    enc = [(op, c) for op, c in pre if op.scope.startswith("encoder.")]
    # per encoder layer: q, k, v, o (2 * P * D * 64 each), relu MLP (2 * 2 * P * D * FF), bidirectional attention
    # over all P x P pairs, Q.K and P.V per head: 2 * HEADS * P * P * (DKV + DKV)
    layer = 4 * 2 * P * D * HEADS * DKV + 2 * 2 * P * D * FF + 2 * HEADS * P * P * 2 * DKV
    assert sum(c.matrix_flops for _, c in enc) == 2 * layer
    for x in (1, 3):
        assert not [op for op, _ in eng.pipeline.counted("decode", 1, x).ops if op.scope.startswith("encoder")]


def test_decode_weight_bytes_are_the_decoders_read_once():
    src = EncDecSource(BART, name="bart")
    eng = Engine(src, hw="h100")
    eng.estimate(prompt=16, gen=3, batch=2)
    params = dict(src.model.named_parameters())
    # the decoder layers' weights, except the cross-attention K / V projections: the encoder's keys and values
    # were projected once in the prefill and are read from the cross-attention cache
    cross_kv = (".encoder_attn.k_proj.", ".encoder_attn.v_proj.")
    dec_layers = sum(p.numel() * 4 for n, p in params.items()
                     if n.startswith("model.decoder.layers.") and not any(c in n for c in cross_kv))
    # per layer: self- and cross-attention q, k, v, o (8 linears of D x D + D), 3 layer norms (2 D each), fc1 and
    # fc2 (2 D FF + FF + D), less the cross k, v (2 (D x D + D)); 2 layers, fp32
    assert dec_layers == 2 * 4 * (8 * (D * D + D) - 2 * (D * D + D) + 3 * 2 * D + 2 * D * FF + FF + D)
    ops = eng.pipeline.counted("decode", 2, 1).ops
    assert not [op for op, _ in ops if op.scope.startswith("model.encoder")]  # no encoder op, no encoder weight
    assert sum(c.weight_bytes for op, c in ops if op.scope.startswith("model.decoder.layers.")) == dec_layers
    # + the tied lm_head over the whole table (V * D) + final_logits_bias (V) + layernorm_embedding (2 * D)
    # + 2 token rows (2 * D) + 1 position row shared by the batch (D), fp32
    assert sum(c.weight_bytes for _, c in ops) == dec_layers + 4 * (V * D + V + 2 * D + 2 * D + D)


def test_whisper_encoder_takes_mel_features_and_cross_kv_is_the_encoder_length():
    src = EncDecSource(WHISPER, name="whisper")
    assert src.features == (16, 60) and src.cross_tokens(999) == 30
    eng = Engine(src, hw="h100")
    r = eng.estimate(prompt=999, gen=5, batch=1)  # --prompt does not apply to a speech encoder
    g = eng.pipeline.raw("prefill", 1, 999)
    conv = [op for op in g.ops() if op.op == "aten.conv1d"]
    assert conv and conv[0].inputs[0].shape == (1, 16, 60)
    # self: (1 + 5) tokens, cross: 30 encoder positions; 2 layers x 4 heads x 16 fp32 K and V = 1024 B per token
    assert r.configs[0].kv_cache_bytes == 1024 * (6 + 30)


def test_decoder_prompt_option_and_limits():
    src = EncDecSource(BART, name="bart", decoder_prompt=4)
    r = estimate(src, hw="h100", prompt=20, gen=3, batch=1)
    assert r.configs[0].decode.context == (4, 5)
    assert r.configs[0].kv_cache_bytes == BART_KV_TOKEN * (4 + 3 + 20)
    with pytest.raises(InputError, match="encoder input"):
        estimate(EncDecSource(BART, name="bart"), hw="h100", prompt=200, gen=3)   # 128 encoder positions
    with pytest.raises(InputError, match="decoder maximum of 64"):
        estimate(EncDecSource(WHISPER, name="w"), hw="h100", prompt=1, gen=80)


def test_decode_mean_equals_every_step_evaluated():
    """Decode costs are affine in the self-attention past: the closed-form mean equals evaluating each step."""
    eng = Engine(EncDecSource(BART, name="bart"), hw="h100", pricing=Pricing(ideal=True))
    r = eng.estimate(prompt=16, gen=5, batch=1)
    steps = [eng.step("decode", 1, x).totals.t_lower_s for x in range(1, 5)]
    assert r.configs[0].tpot_s == pytest.approx(sum(steps) / 4, rel=1e-9)


def test_cli_encdec_and_decoder_prompt_on_a_decoder(tmp_path, capsys):
    import json

    p = tmp_path / "config.json"
    p.write_text(json.dumps(BART))
    assert main(["llm", str(p), "--prompt", "16", "--gen", "3", "--decoder-prompt", "2", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["configs"][0]["kv_cache_bytes"] == BART_KV_TOKEN * (2 + 3 + 16)
    q = tmp_path / "gpt2.json"
    q.write_text(json.dumps(dict(model_type="gpt2", architectures=["GPT2LMHeadModel"], n_embd=32, n_layer=1, n_head=2,
                                 vocab_size=64, n_positions=64)))
    assert main(["llm", str(q), "--prompt", "8", "--gen", "2", "--decoder-prompt", "2"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("graphroof: error: --decoder-prompt applies to encoder-decoder") and "\n" not in err


def test_sweep_refuses_encoder_decoders_in_one_line():
    from graphroof.sweeps import sweep

    with pytest.raises(InputError, match="encoder-decoder"):
        sweep(EncDecSource(BART, name="bart"), hw="h100", prompt=[8, 16], gen=[4], batch=[1])


@pytest.mark.parametrize("cfg, per_token", [(T5, T5_KV_TOKEN), (BART, BART_KV_TOKEN)])
def test_tensor_parallel_splits_self_and_cross_kv(cfg, per_token):
    # T5's q / k / v / o and wi / wo are split like Llama's q_proj ... o_proj: each device holds half the heads
    r = estimate(EncDecSource(cfg, name="m"), hw="h100", prompt=16, gen=3, batch=1, tp=2)
    assert r.configs[0].kv_cache_bytes == per_token * (1 + 3 + 16) / 2
