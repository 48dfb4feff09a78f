"""State-space and hybrid LLMs (Mamba, Jamba; tiny configs): whole-scan capture, recurrent-state decode, state
bytes per sequence, memory, exact against hand arithmetic."""

from __future__ import annotations

import pytest

pytest.importorskip("graphroof.frontends.torch.export", reason="needs the PyTorch frontend")
pytest.importorskip("transformers")

import torch  # noqa: E402

from graphroof.frontends.hf.ssm_source import STATE_OPS, SSMSource, hf_source  # noqa: E402
from graphroof.graph import Role  # noqa: E402
from graphroof.llm import estimate  # noqa: E402

# d_inner = expand * hidden = 128, d_state 8, conv kernel 4, 2 layers, bf16
MAMBA = {"model_type": "mamba", "architectures": ["MambaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
         "state_size": 8, "expand": 2, "conv_kernel": 4, "vocab_size": 128, "time_step_rank": 4,
         "torch_dtype": "bfloat16"}
# 4 layers: attention at 1 and 3 (period 2, offset 1), Mamba at 0 and 2; MoE (4 experts, top 2) at 1 and 3;
# GQA 4 / 2 heads of 16
JAMBA = {"model_type": "jamba", "architectures": ["JambaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "attn_layer_period": 2,
         "attn_layer_offset": 1, "num_experts": 4, "num_experts_per_tok": 2, "expert_layer_period": 2,
         "expert_layer_offset": 1, "mamba_d_state": 8, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": 8,
         "vocab_size": 128, "torch_dtype": "bfloat16"}

# per Mamba layer: conv state 128 * 4 * 2 B (bf16) = 1,024 B + SSM state 128 * 8 * 4 B (fp32) = 4,096 B
STATE_PER_LAYER = 128 * 4 * 2 + 128 * 8 * 4
# Jamba's attention layers: 2 layers * (K + V) * 2 KV heads * 16 * 2 B = 256 B per token
JAMBA_KV_PER_TOKEN = 2 * 2 * 2 * 16 * 2


@pytest.fixture(scope="module")
def mamba():
    return hf_source(MAMBA, name="tiny-mamba")


@pytest.fixture(scope="module")
def jamba():
    return hf_source(JAMBA, name="tiny-jamba")


def _sum(g, field, ops=None):
    from graphroof.counters.count import count
    from graphroof.graph import COST

    c = g.map_ops(lambda op: op)
    count(c, warn=False)
    return sum(getattr(c.get(op.name, COST), field) for op in c.ops() if ops is None or op.op in ops)


def test_capture_has_no_per_token_loop(mamba):
    small, large = mamba.prefill_graph(1, 8), mamba.prefill_graph(1, 96)
    # the same nodes at 8 and 96 tokens: one whole scan per layer, no per-token ops
    assert [op.op for op in small.ops()] == [op.op for op in large.ops()]
    assert sum(op.op == "graphroof.selective_scan" for op in large.ops()) == 2


def test_state_layout_and_bytes_per_sequence(mamba, jamba):
    assert isinstance(mamba, SSMSource) and isinstance(jamba, SSMSource)
    assert mamba.state_layout() == {i: ((128, 4), "bf16", (128, 8), "fp32") for i in (0, 1)}
    assert mamba.state_bytes_per_seq() == 2 * STATE_PER_LAYER == 10_240
    # --kv fp8 re-types the states: (128 * 4 + 128 * 8) * 1 B per layer
    assert mamba.state_bytes_per_seq("fp8_e4m3") == 2 * 1_536
    # hybrid: the two Mamba layers (0, 2) keep states, the two attention layers (1, 3) a KV cache per token
    assert sorted(jamba.state_layout()) == [0, 2] and sorted(jamba.kv_layout()) == [1, 3]
    assert jamba.state_bytes_per_seq() == 10_240
    assert jamba.spec.kv_bytes_per_token(16) == JAMBA_KV_PER_TOKEN
    assert (mamba.spec.state_layers, jamba.spec.state_layers) == (2, 2)


def test_mamba_decode_bytes_are_weights_plus_state(mamba):
    b = 3
    g1, g2 = mamba.decode_graph(b, 10), mamba.decode_graph(b, 1000)
    # the step has its states as cache inputs: conv [3, 128, 4] bf16 and SSM [3, 128, 8] fp32 per layer
    kv_inputs = [t for op in g1.ops() for t in op.inputs if t is not None and t.role is Role.KV_CACHE]
    assert {(t.shape, t.dtype) for t in kv_inputs} == {((3, 128, 4), "bf16"), ((3, 128, 8), "fp32")}
    # state read once and written once per step: 3 sequences * 10,240 B each way, all in the state ops
    assert _sum(g1, "kv_read_bytes") == _sum(g1, "kv_read_bytes", STATE_OPS) == b * 10_240
    assert _sum(g1, "kv_write_bytes") == _sum(g1, "kv_write_bytes", STATE_OPS) == b * 10_240
    # weights: params 135,424 B (tied embedding [128, 64] bf16 read whole by the head) + the gathered rows
    # 3 * 64 * 2 B = 384 B
    params = sum(p.numel() * p.element_size() for p in mamba.model.parameters())
    assert _sum(g1, "weight_bytes") == params + b * 64 * 2
    # the rest (activations) does not depend on the context: decode is O(1) per token
    for f in ("act_read_bytes", "act_write_bytes", "vector_flops", "matrix_flops"):
        assert _sum(g1, f) == _sum(g2, f)


def test_decode_time_independent_of_context_and_memory(mamba):
    short = estimate(mamba, hw="h100", prompt=16, gen=4, batch=[1, 4])
    long = estimate(mamba, hw="h100", prompt=512, gen=4, batch=[1, 4])
    assert short.kv_cache and short.configs[0].tpot_s == pytest.approx(long.configs[0].tpot_s, rel=1e-12)
    # the "KV cache" of a pure Mamba is its state: 10,240 B per sequence at any context
    for r in (short, long):
        assert [c.kv_cache_bytes for c in r.configs] == [10_240, 4 * 10_240]
    assert short.spec.state_layers == 2


def test_jamba_memory_is_kv_per_token_plus_state(jamba):
    r = estimate(jamba, hw="h100", prompt=16, gen=4, batch=[2])
    c = r.configs[0]
    # 2 sequences * (256 B per token * 20 tokens + 10,240 B of state)
    assert c.kv_cache_bytes == 2 * (JAMBA_KV_PER_TOKEN * 20 + 10_240)
    # paged blocks of 16 tokens: 20 tokens hold 32 token slots
    assert c.memory.kv_reserved_bytes == 2 * (JAMBA_KV_PER_TOKEN * 32 + 10_240)
    assert c.memory.state_bytes == 2 * 10_240
    import graphroof

    text = graphroof.render(r, "terminal")
    assert "recurrent-state decode (2 state-space layers; KV cache on 2 attention layers)" in text
    assert "(recurrent state 20.5 kB of it)" in text
    assert any(n.startswith("recurrent state: 2 of 4 layers") for n in r.notes)


def test_whole_scan_ops_compute_what_transformers_computes():
    """The replacement ops' reference implementations give transformers' own outputs (tiny real model)."""
    from transformers import MambaConfig, MambaForCausalLM

    from graphroof.frontends.hf.compat import cache_argument
    from graphroof.frontends.hf.ssm_kernels import ssm_kernels

    torch.manual_seed(0)
    cfg = MambaConfig(**{k: v for k, v in MAMBA.items() if k not in ("model_type", "architectures", "torch_dtype")})
    model = MambaForCausalLM(cfg).eval()
    ids = torch.randint(0, 128, (2, 7))
    nxt = torch.randint(0, 128, (2, 1))
    with torch.no_grad():
        ref = model(ids, use_cache=True)
        arg = cache_argument(model.forward)  # 5.24: `cache`; 5.23: `cache_params` (argument and output)
        ref_step = model(nxt, **{arg: getattr(ref, arg)}, use_cache=True).logits
        with ssm_kernels():
            from transformers.models.mamba import modeling_mamba as mm

            swapped = [getattr(mm, f).__module__ for f in ("mamba_selective_scan", "mamba_selective_state_update",
                                                            "causal_conv1d_update")]
            assert swapped == ["graphroof.frontends.hf.ssm_kernels"] * 3
            out = model(ids, use_cache=True)
            step = model(nxt, **{arg: getattr(out, arg)}, use_cache=True).logits
    torch.testing.assert_close(out.logits, ref.logits, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(step, ref_step, rtol=1e-4, atol=1e-4)


# Mamba-2: hidden 64 -> d_inner 128 = 8 heads of 16, 2 groups of state 8, chunk 4 (a 7-token prompt is padded)
MAMBA2 = {"model_type": "mamba2", "architectures": ["Mamba2ForCausalLM"], "hidden_size": 64, "num_heads": 8,
          "head_dim": 16, "state_size": 8, "n_groups": 2, "num_hidden_layers": 2, "vocab_size": 128, "chunk_size": 4,
          "expand": 2, "conv_kernel": 4, "torch_dtype": "bfloat16"}


def test_mamba2_chunked_scan_capture_and_state():
    src = hf_source(MAMBA2, name="tiny-mamba2")
    # conv over x, B and C: 128 + 2 groups * 2 * 8 = 160 channels * 4 taps * 2 B = 1,280 B; SSM state
    # [8 heads, 16, 8] fp32 = 4,096 B; per layer 5,376 B, 2 layers
    assert src.state_layout() == {i: ((160, 4), "bf16", (8, 16, 8), "fp32") for i in (0, 1)}
    assert src.state_bytes_per_seq() == 10_752
    small, large = src.prefill_graph(1, 8), src.prefill_graph(1, 64)
    assert [op.op for op in small.ops()] == [op.op for op in large.ops()]
    assert sum(op.op == "graphroof.ssd_chunk_scan" for op in large.ops()) == 2
    g = src.decode_graph(2, 30)
    assert _sum(g, "kv_read_bytes") == _sum(g, "kv_write_bytes") == 2 * 10_752


def test_mamba2_reference_ops_match_transformers():
    from transformers import Mamba2Config, Mamba2ForCausalLM

    from graphroof.frontends.hf.compat import cache_argument
    from graphroof.frontends.hf.ssm_kernels import ssm_kernels

    torch.manual_seed(0)
    cfg = Mamba2Config(**{k: v for k, v in MAMBA2.items() if k not in ("model_type", "architectures", "torch_dtype")})
    model = Mamba2ForCausalLM(cfg).eval()
    ids, nxt = torch.randint(0, 128, (2, 7)), torch.randint(0, 128, (2, 1))
    with torch.no_grad():
        ref = model(ids, use_cache=True)
        arg = cache_argument(model.forward)  # 5.24: `cache`; 5.23: `cache_params` (argument and output)
        ref_step = model(nxt, **{arg: getattr(ref, arg)}, use_cache=True).logits
        with ssm_kernels():
            from transformers.models.mamba2 import modeling_mamba2 as mm

            assert mm.mamba2_chunk_scan.__module__ == "graphroof.frontends.hf.ssm_kernels"
            out = model(ids, use_cache=True)
            step = model(nxt, **{arg: getattr(out, arg)}, use_cache=True).logits
    torch.testing.assert_close(out.logits, ref.logits, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(step, ref_step, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_zoo_mamba_jamba_state_and_kv():
    from graphroof.frontends.sources import open_model

    m = open_model("mamba-2.8b")
    # 64 layers * (conv 5120 * 4 + SSM 5120 * 16) * 4 B (fp32 checkpoint) = 64 * 409,600 = 26,214,400 B
    assert m.state_bytes_per_seq() == 26_214_400 and m.spec.kv_bytes_per_token(16) is None
    j = open_model("jamba-v0.1")
    # attention at layers 4, 12, 20, 28: 4 * (K + V) * 8 KV heads * 128 * 2 B = 16,384 B per token
    assert sorted(j.kv_layout()) == [4, 12, 20, 28] and j.spec.kv_bytes_per_token(16) == 16_384
    # the 28 Mamba layers: conv 8192 * 4 * 2 B + SSM 8192 * 16 * 4 B = 589,824 B each = 16,515,072 B
    assert j.state_bytes_per_seq() == 28 * 589_824


def test_sweep_memory_counts_the_state(mamba):
    from graphroof.sweeps import sweep

    point = sweep(mamba, hw="h100", batch=2, prompt=16, gen=4).points[0]
    c = estimate(mamba, hw="h100", prompt=16, gen=4, batch=[2]).configs[0]
    # weights + 2 sequences * 10,240 B of state + the prefill's activation peak, as estimate() has it
    assert point.memory_bytes == pytest.approx(c.memory.total_bytes, rel=1e-12)
    assert c.memory.kv_reserved_bytes == 2 * 10_240


@pytest.mark.parametrize("data, scan", [(MAMBA, "graphroof.selective_scan"), (MAMBA2, "graphroof.ssd_chunk_scan")])
def test_both_captures_keep_the_scan_whole(data, scan):
    from graphroof.counters.count import count
    from graphroof.frontends.hf import build as hf
    from graphroof.graph import COST

    totals = []
    for capture in ("dispatch", "export"):
        g = hf.load_config_data(data, seq=16, name="t", capture=capture)
        assert sum(op.op == scan for op in g.ops()) == 2
        assert count(g, warn=False).n_unknown == 0
        totals.append([sum(getattr(g.get(op.name, COST), f) for op in g.ops()) for f in ("flops", "bytes")])
    assert totals[0] == totals[1]


def test_zoo_mamba_2_8b_parameters_by_hand():
    from graphroof.frontends import zoo
    from graphroof.frontends.hf import build as hf

    model, _, _ = hf.build_model(hf.read_config(zoo.config_path("mamba-2.8b")))
    # per layer: in_proj 2560 * 10240 = 26,214,400; conv 5120 * 4 + bias 5120 = 25,600; x_proj 5120 * (160 + 2 *
    # 16) = 983,040; dt_proj 160 * 5120 + 5120 = 824,320; A_log 5120 * 16 = 81,920; D 5120; out_proj 5120 * 2560 =
    # 13,107,200; norm 2560 -> 41,244,160; * 64 + tied embedding 50280 * 2560 + final norm 2560 = 2,768,345,600
    assert sum(p.numel() for p in model.parameters()) == 64 * 41_244_160 + 50_280 * 2_560 + 2_560 == 2_768_345_600


@pytest.mark.slow
def test_zoo_jamba_parameters_by_hand():
    from graphroof.frontends import zoo
    from graphroof.frontends.hf import build as hf

    model, _, _ = hf.build_model(hf.read_config(zoo.config_path("jamba-v0.1")))
    # Mamba mixer: in_proj 4096 * 16384 + conv 8192 * 4 + 8192 + x_proj 8192 * (256 + 32) + dt_proj 256 * 8192 + 8192
    # + A_log 8192 * 16 + D 8192 + out_proj 8192 * 4096 + dt/B/C norms 256 + 16 + 16 = 105,308,448
    mamba = 67_108_864 + 40_960 + 2_359_296 + 2_105_344 + 131_072 + 8_192 + 33_554_432 + 288
    attn = 2 * 4096 * 4096 + 2 * 4096 * 1024              # q, o + GQA k, v (8 KV heads of 128)
    mlp = 3 * 4096 * 14336                                # gate, up, down
    moe = 16 * mlp + 4096 * 16                            # 16 experts + router
    total = 28 * mamba + 4 * attn + 16 * moe + 16 * mlp + 32 * 2 * 4096 + 2 * 65536 * 4096 + 4096
    assert sum(p.numel() for p in model.parameters()) == total == 51_570_323_328


def test_state_memory_follows_kv_dtype_and_tp(mamba):
    # --kv fp8: (128 * 4 + 128 * 8) * 1 B per layer, 2 layers, per sequence
    c = estimate(mamba, hw="h100", prompt=16, gen=4, batch=[1], kv="fp8").configs[0]
    assert c.memory.state_bytes == 2 * 1_536
    # --tp 2: the decode graph splits the mixers' state ops, so each device holds half of the state
    c = estimate(mamba, hw="h100", prompt=16, gen=4, batch=[1], tp=2).configs[0]
    assert c.memory.state_bytes == 10_240 / 2
