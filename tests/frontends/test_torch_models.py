"""Whole-model totals through the PyTorch frontend against hand-derived totals (GEMMs + attention +
elementwise), for a small CNN, GPT-2, BERT-base and a small Llama.

Conventions: 2 FLOPs per multiply-add; causal attention counts the S(S+1)/2 pairs a causal kernel computes;
softmax 5 + scale 1 per score; layer norm 7 / element; GELU (erf) 5; SiLU 5; elementwise ops 1 per output.
torch's FlopCounterMode is not the oracle (it counts 0 for attention over CPU / fake tensors).
"""

from __future__ import annotations

import pytest
import torch

import graphroof
from graphroof.frontends.hf.build import load_config_data
from tests.frontends.torch_models import SmallCNN

pytest.importorskip("transformers")


def totals(model, inputs=None, **kw):
    a = graphroof.analyze(model, inputs, hw="a100", runtime="eager", **kw)  # counts: every op its own kernel
    assert a.summary.n_unknown == 0, a.summary.coverage_line()
    return a.totals.cost


@pytest.mark.parametrize("capture", ["export", "dispatch"])
def test_small_cnn_every_number(capture):
    c = totals(SmallCNN(), [torch.randn(2, 3, 16, 16)], capture=capture)
    # conv1 [2,8,16,16] = 4096 outputs: 2*4096*3*9 = 221184; conv2 [2,16,8,8] = 2048: 2*2048*8*9 = 294912;
    # fc [2,16]x[16,10]: 2*2*10*16 = 640
    assert c.matrix_flops == 221184 + 294912 + 640
    # conv1 bias 4096, BN (eval) 4*4096, ReLU 4096, maxpool 2x2: 1024 outputs * 3 compares, conv2 bias 2048,
    # ReLU 2048, global average over 32 maps of 64: 63 adds + 1 divide each = 2048, fc bias 20
    assert c.vector_flops == 4096 + 16384 + 4096 + 3072 + 2048 + 2048 + 2048 + 20
    # parameters + BN running stats: conv1 216+8, BN 4*8, conv2 1152+16, fc 160+10 = 1594 fp32
    assert c.weight_bytes == 1594 * 4
    # activations read: x 1536, conv1 out 4096 (BN), BN out (ReLU), ReLU out (pool), pool 1024 (conv2),
    # conv2 out 2048 (ReLU), ReLU out (pool), 32 (fc);  written: 4096*3, 1024, 2048*2, 32, 20
    assert c.act_read_bytes == (1536 + 4096 * 3 + 1024 + 2048 * 2 + 32) * 4
    assert c.act_write_bytes == (4096 * 3 + 1024 + 2048 * 2 + 32 + 20) * 4


def test_gpt2_small_totals():
    S, d, V, L, H = 64, 768, 50257, 12, 12
    c = totals("gpt2", seq=S)
    pairs = S * (S + 1) // 2                       # causal kernel, 2080
    per_layer_mm = (2 * S * d * 3 * d              # c_attn (addmm)
                    + 2 * S * d * d                # attn c_proj
                    + 2 * S * d * 4 * d            # mlp c_fc
                    + 2 * S * 4 * d * d            # mlp c_proj
                    + 2 * H * pairs * (64 + 64))   # QK^T and PV
    assert c.matrix_flops == L * per_layer_mm + 2 * S * d * V    # + lm_head
    per_layer_vec = (S * 3 * d + S * d + S * 4 * d + S * d       # addmm bias adds
                     + 6 * H * pairs                             # softmax + scale
                     + 2 * 7 * S * d                             # ln_1, ln_2
                     + 8 * S * 4 * d                             # gelu_new written out: 8 elementwise ops
                     + 2 * S * d)                                # residual adds
    # embeddings: position ids arange + offset (2S), wte + wpe add (S d); final ln_f
    assert c.vector_flops == L * per_layer_vec + 2 * S + S * d + 7 * S * d
    params = V * d + 1024 * d + L * (2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d)
                                     + (4 * d * d + d)) + 2 * d
    assert params == 124_439_808                   # GPT-2 small, published
    # every weight read once, except: wte/wpe read S rows each, and the tied lm_head reads all of wte
    assert c.weight_bytes == 4 * (params - V * d - 1024 * d + 2 * S * d + V * d)


def test_bert_base_totals():
    S, d, ff, V, L, H = 128, 768, 3072, 30522, 12, 12
    c = totals("bert-base", seq=S)
    per_layer_mm = 4 * 2 * S * d * d + 2 * S * d * ff * 2 + 2 * H * S * S * (64 + 64)   # non-causal
    assert c.matrix_flops == L * per_layer_mm + 2 * S * d * d + 2 * S * d * V            # + MLM head
    per_layer_vec = (4 * S * d + S * ff + S * d                 # linear biases
                     + 6 * H * S * S                            # softmax + scale
                     + 2 * S * d + 2 * 7 * S * d                # residual adds, 2 layer norms
                     + 5 * S * ff)                              # GELU
    head_vec = S * d + 5 * S * d + 7 * S * d + S * V            # dense bias, GELU, LN, decoder bias
    assert c.vector_flops == L * per_layer_vec + 2 * S * d + 7 * S * d + head_vec   # + embedding adds, LN
    emb = (V + 512 + 2) * d + 2 * d
    layer = 4 * (d * d + d) + 2 * 2 * d + (d * ff + ff) + (ff * d + d)
    head = d * d + d + 2 * d + V                                # decoder weight tied to word embeddings
    # embeddings read S rows of the word and position tables, and of the 2-row token-type table at most its 2
    # rows (a lookup never reads more than its table: min(S * d, 2 * d)); the decoder reads the whole word table.
    # Buffers count with the weights: the token_type_ids buffer is gathered at S positions taken from the
    # position_ids buffer, whose S entries also index the position table: 3 * S int64 (8 B each)
    assert c.weight_bytes == 4 * (L * layer + 2 * d + head + 2 * S * d + 2 * d + V * d) + 3 * 8 * S
    assert emb + L * layer + head == 109_514_298                # BertForMaskedLM, published size


TINY_LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
              "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "vocab_size": 1000, "max_position_embeddings": 256, "torch_dtype": "bfloat16"}


def test_small_llama_totals():
    S, d, ff, V, L, H, KV, hd = 16, 64, 176, 1000, 2, 4, 2, 16
    g = load_config_data(TINY_LLAMA, seq=S, name="tiny-llama")
    c = totals(g)
    pairs = S * (S + 1) // 2                                     # 136
    per_layer_mm = (2 * S * d * d * 2                            # q_proj, o_proj
                    + 2 * S * d * KV * hd * 2                    # k_proj, v_proj (GQA: 2 KV heads)
                    + 2 * S * d * ff * 3                         # gate, up, down
                    + 2 * H * pairs * (hd + hd))                 # attention over 4 query heads
    assert c.matrix_flops == L * per_layer_mm + 2 * S * d * V
    rms = 4 * S * d + 2 * S          # pow, mean (S rows of d: d-1 adds + a divide), +eps, rsqrt, x*rstd, *gamma
    rope = (3 * S * H * hd + S * H * hd // 2) + (3 * S * KV * hd + S * KV * hd // 2)   # q and k: 2 mul, add, neg
    per_layer_vec = 2 * rms + rope + 6 * H * pairs + 2 * S * d + 5 * S * ff + S * ff   # residuals, SiLU, gate*up
    cos_sin = S * hd // 2 + 4 * S * hd     # positions x inv_freq, cos, sin, 2 attention-scaling multiplies
    assert c.vector_flops == L * per_layer_vec + 2 * S + cos_sin + rms
    params_no_embed = L * (2 * d * d + 2 * d * KV * hd + 3 * d * ff + 2 * d) + d + V * d   # + untied lm_head
    # bf16 weights; the embedding reads S rows; rotary inv_freq buffer fp32 [8] read once
    assert c.weight_bytes == 2 * (params_no_embed + S * d) + 4 * hd // 2
