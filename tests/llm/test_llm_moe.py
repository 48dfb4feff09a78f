"""Mixture of experts: expected experts visited per step (uniform routing), the grouped-GEMM weight bytes of the
experts visited, FLOPs of the tokens routed, the --experts-touched override, the routing note."""

from __future__ import annotations

import json

import pytest

from graphroof.counters.rules.matmul import expected_experts, experts_visited, grouped_mm
from graphroof.graph import OpNode, Role, TensorSpec

# -- the expectation, by hand --------------------------------------------------------------------------------

def test_expected_experts_mixtral_and_qwen3_moe():
    # Mixtral: E=8, k=2.  T=1: 8*(1-(6/8)^1) = 8*0.25 = 2 (exactly k).
    assert expected_experts(8, 2, 1) == pytest.approx(2.0, abs=1e-12)
    # T=8: 0.75^8 = 6561/65536 = 0.100112915..., 8*(1-0.100112915) = 7.199096679...
    assert expected_experts(8, 2, 8) == pytest.approx(8 * (1 - 6561 / 65536), rel=1e-12)
    assert expected_experts(8, 2, 8) == pytest.approx(7.1990966796875, rel=1e-12)
    # T=64: 0.75^64 = 1.0089e-8 -> 8 - 8.07e-8
    assert expected_experts(8, 2, 64) == pytest.approx(8 - 8 * 0.75 ** 64, rel=1e-12)
    assert 7.9999999 < expected_experts(8, 2, 64) < 8
    # Qwen3-30B-A3B: E=128, k=8.  T=1: 128*(8/128) = 8.
    assert expected_experts(128, 8, 1) == pytest.approx(8.0, abs=1e-9)
    # T=8: (120/128)^8 = 0.9375^8 = 0.59673..., 128*(1-0.59673) = 51.619907...
    assert expected_experts(128, 8, 8) == pytest.approx(128 * (1 - 0.9375 ** 8), rel=1e-12)
    assert expected_experts(128, 8, 8) == pytest.approx(51.6199, abs=1e-4)
    # T=64: 0.9375^64 = 0.016130..., 128*(1-0.016130) = 125.9424
    assert expected_experts(128, 8, 64) == pytest.approx(125.9423, abs=1e-4)
    # no tokens, no experts; k >= E: all of them
    assert expected_experts(8, 2, 0) == 0
    assert expected_experts(4, 8, 1) == 4


def test_expected_experts_monotone_and_bounded():
    prev = 0.0
    for t in range(0, 200):
        e = expected_experts(64, 6, t)
        assert prev <= e <= 64
        prev = e
    with pytest.raises(ValueError):
        expected_experts(0, 2, 1)


def test_experts_visited_override_and_missing():
    assert experts_visited({}) is None
    assert experts_visited({"moe_experts": 8}) is None                       # router unknown
    assert experts_visited({"moe_experts": 8, "moe_top_k": 2, "moe_tokens": 1}) == pytest.approx(2)
    assert experts_visited({"moe_experts": 8, "moe_top_k": 2, "moe_tokens": 1, "moe_experts_touched": 5}) == 5
    assert experts_visited({"moe_experts": 8, "moe_experts_touched": 20}) == 8  # capped at E


# -- the rule on plain nodes ------------------------------------------------------------------------------------

def _gmm(rows: int, attrs: dict) -> OpNode:
    # a [S=rows, K=64] x b [E=8, K=64, N=256] bf16, offsets [8] int32 -> [rows, 256]
    a = TensorSpec((rows, 64), "bf16")
    b = TensorSpec((8, 64, 256), "bf16", Role.WEIGHT)
    offs = TensorSpec((8,), "int32")
    return OpNode("g", "aten._grouped_mm", (a, b, offs, None), (TensorSpec((rows, 256), "bf16"),), attrs, "moe")


def test_grouped_mm_reads_visited_experts_only():
    # no routing facts: the whole b, 8*64*256*2 B = 262,144 B
    full = grouped_mm(_gmm(2, {}))
    assert full.weight_bytes == 262_144
    # 1 token, top-2 of 8: 2 experts -> 262,144 * 2/8 = 65,536 B; FLOPs unchanged 2*S*N*K = 2*2*256*64 = 65,536
    c = grouped_mm(_gmm(2, {"moe_experts": 8, "moe_top_k": 2, "moe_tokens": 1}))
    assert c.weight_bytes == pytest.approx(65_536)
    assert c.matrix_flops == full.matrix_flops == 2 * 2 * 256 * 64
    # activations are unchanged: a 2*64*2 = 256 B + offsets 8*4 = 32 B read, out 2*256*2 = 1,024 B written
    assert c.act_read_bytes == full.act_read_bytes == 256 + 32
    assert c.act_write_bytes == full.act_write_bytes == 1_024
    # 8 tokens (S = 16 rows): 262,144 * 7.19909668/8
    c8 = grouped_mm(_gmm(16, {"moe_experts": 8, "moe_top_k": 2, "moe_tokens": 8}))
    assert c8.weight_bytes == pytest.approx(262_144 * 7.1990966796875 / 8)
    # override: 3 experts -> 262,144 * 3/8 = 98,304 B
    c3 = grouped_mm(_gmm(2, {"moe_experts": 8, "moe_top_k": 2, "moe_tokens": 1, "moe_experts_touched": 3.0}))
    assert c3.weight_bytes == pytest.approx(98_304)


# -- a real transformers MoE (Mixtral-like, built on meta) -------------------------------------------------------

L, H, HEADS, KVH, I, E, K, V = 2, 64, 4, 2, 128, 8, 2, 100
TINY_MIXTRAL = dict(model_type="mixtral", architectures=["MixtralForCausalLM"], hidden_size=H,
                    intermediate_size=I, num_hidden_layers=L, num_attention_heads=HEADS, num_key_value_heads=KVH,
                    num_local_experts=E, num_experts_per_tok=K, vocab_size=V, max_position_embeddings=256,
                    torch_dtype="bfloat16")
# One expert, bf16: gate+up [2I, H] = 256*64 and down [H, I] = 64*128 -> 24,576 params = 49,152 B.
EXPERT_BYTES = (2 * I * H + H * I) * 2
# Shared weights a decode step reads, bf16 (everything but the experts and the embedding table):
#   per layer q 64*64 + k 32*64 + v 32*64 + o 64*64 = 12,288, router 8*64 = 512, two norms 2*64 = 128
#   -> 12,928 params; 2 layers 25,856; final norm 64; lm_head 100*64 = 6,400 -> 32,320 params = 64,640 B,
#   + the rotary inv_freq buffer [head_dim/2 = 8] fp32 = 32 B.
SHARED_BYTES = 2 * (L * (12_288 + 512 + 128) + 64 + V * H) + 32


def _weight_bytes(graph) -> tuple[float, float]:
    """(grouped-GEMM weight bytes, all weight bytes) of a counted decode graph."""
    from graphroof.counters.count import count
    from graphroof.graph import COST
    from graphroof.llm.kvcache import mark_kv_cache

    g = mark_kv_cache(graph).map_ops(lambda op: op)
    count(g)
    grouped = total = 0.0
    for op in g.ops():
        wb = g.get(op.name, COST).weight_bytes
        total += wb
        if op.op == "aten._grouped_mm":
            grouped += wb
    return grouped, total


@pytest.fixture(scope="module")
def mixtral():
    pytest.importorskip("graphroof.frontends.torch.export", reason="needs the PyTorch frontend")
    pytest.importorskip("transformers")
    from graphroof.frontends.hf.source import HFSource

    return HFSource(TINY_MIXTRAL, name="tiny-mixtral")


def test_mixtral_decode_batch1_reads_shared_plus_k_experts(mixtral):
    grouped, total = _weight_bytes(mixtral.decode_graph(1, 16))
    # batch 1: one token, k = 2 experts per layer: 2 layers * 2 * 49,152 = 196,608 B
    assert grouped == pytest.approx(L * K * EXPERT_BYTES)
    # total = shared + k experts per layer + the one embedding row read (1 * 64 * 2 = 128 B)
    assert total == pytest.approx(SHARED_BYTES + L * K * EXPERT_BYTES + 1 * H * 2)


@pytest.mark.parametrize("batch", [1, 8, 64])
def test_mixtral_decode_experts_touched_by_batch(mixtral, batch):
    grouped, _ = _weight_bytes(mixtral.decode_graph(batch, 16))
    # batch B decode: T = B tokens per layer, E*(1-(1-k/E)^B) experts: 2, 7.1991, 8 - 8.1e-8
    assert grouped == pytest.approx(L * EXPERT_BYTES * E * (1 - (1 - K / E) ** batch))


def test_mixtral_prefill_visits_all_experts_at_long_prompts(mixtral):
    grouped, _ = _weight_bytes(mixtral.prefill_graph(1, 64))
    # 64 tokens: 8*(1 - 0.75^64) experts, within 1e-7 of all 8
    assert grouped == pytest.approx(L * E * EXPERT_BYTES, rel=1e-7)


def test_mixtral_override_and_note(mixtral):
    from graphroof.frontends.hf.source import HFSource

    src = HFSource(TINY_MIXTRAL, name="tiny-mixtral", experts_touched=8)
    grouped, _ = _weight_bytes(src.decode_graph(1, 16))
    assert grouped == pytest.approx(L * E * EXPERT_BYTES)        # every expert, as asked
    assert any("--experts-touched" in n and "8 experts" in n for n in src.notes)
    mixtral.decode_graph(1, 16)
    assert any("uniform routing" in n and "top-2" in n for n in mixtral.notes)


def test_cli_experts_touched(tmp_path, capsys):
    pytest.importorskip("transformers")
    from graphroof.cli import main

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(TINY_MIXTRAL))
    out = tmp_path / "r.json"
    assert main(["--quiet", "llm", str(cfg), "--prompt", "8", "--gen", "2", "--ideal", "-f", "json", "-o", str(out),
                 "--experts-touched", "4"]) == 0
    assert "--experts-touched" in out.read_text()
    assert main(["--quiet", "llm", str(cfg), "--prompt", "8", "--gen", "2", "--experts-touched", "0"]) == 1
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "experts-touched" in err


def _expert_gemm(batch: int, top_k: int = 2, experts: int = 8, d: int = 4096, f: int = 4096):
    """Decode step of one routed expert GEMM: ``B*k`` rows of ``[., d]`` x ``[E, d, f]`` bf16 weights."""
    from graphroof.counters.rules.matmul import grouped_mm

    rows = batch * top_k
    a = TensorSpec((rows, d), "bf16")
    b = TensorSpec((experts, d, f), "bf16", role=Role.WEIGHT)
    op = OpNode("g", "aten._grouped_mm", (a, b, TensorSpec((experts,), "int32"), None),
                (TensorSpec((rows, f), "bf16"),),
                {"moe_experts": experts, "moe_top_k": top_k, "moe_tokens": batch}, "model.layers.0.moe")
    return [(op, grouped_mm(op))]


def test_moe_critical_batch_is_per_expert():
    """One routed expert GEMM, E = 8, k = 2, experts [4096, 4096] bf16, on an ideal device P = 200 TFLOP/s,
    BW = 2 TB/s.

    At decode batch B: FLOPs 2 * (2B) * 4096^2; bytes = rows in/out 2 * (2B * 4096 * 2) + offsets 8 * 4 = 32 +
    weights 8 * 4096^2 * 2 * v(B)/8 with v(B) = 8 (1 - 0.75^B) experts visited.  Compute-bound where
    67.108864e6 B / 200e12 >= (32,768 B + 32 + 268.435456e6 (1 - 0.75^B)) / 2e12, i.e. (after * 2e12)
    671,088.64 B >= 32,768 B + 32 + 268,435,456 (1 - 0.75^B).  Long before that every expert is visited
    (0.75^100 = 3e-13), so B* = (268,435,456 + 32) / (671,088.64 - 32,768) = 420.54: 420.54 * 2 / 8 = 105.1
    tokens per expert, about the dense critical point of one [4096, 4096] bf16 expert
    (D P / (D BW - 2 P) = 4096 * 200e12 / (4096 * 2e12 - 400e12) = 105.13; the expert here also moves its
    offsets).  A linear fit through B = 1 and 2
    (the dense method, visiting 2 and 3.5 experts) would instead say 'compute-bound from about 2' (wrong).
    """
    import math

    from graphroof.hardware import HardwareProfile
    from graphroof.llm.critical import critical_table

    hw = HardwareProfile(name="ideal", matrix_peak_flops_per_s={"bf16": 200e12}, vector_peak_flops_per_s={"bf16": 200e12},
                         mem_bw_bytes_per_s=2e12)
    [row] = critical_table(_expert_gemm(1), _expert_gemm(2), 1, 2, hw, lambda op: op.scope)
    bstar = row["critical_batch_exact"]

    def gap(b):  # compute minus memory time in units of 1/2e12 s
        return 671_088.64 * b - (32_768 * b + 32 + 268_435_456 * (1 - 0.75 ** b))

    assert gap(bstar) == pytest.approx(0, abs=1e-3 * 671_088.64)
    assert bstar == pytest.approx(268_435_488 / 638_320.64, rel=1e-6)  # 420.54
    assert row["critical_batch"] == math.ceil(bstar)
    assert row["tokens_per_expert"] == pytest.approx(bstar * 2 / 8)
    assert "each of 8 experts" in row["reason"]
    # dense expert check: [4096, 4096] bf16 turns compute-bound at D P / (D BW - 2 P) tokens
    assert 4096 * 200e12 / (4096 * 2e12 - 400e12) == pytest.approx(105.13, abs=0.01)
    # the roofline agrees on either side of the critical batch
    from graphroof.roofline import evaluate

    for b, bound in ((math.floor(bstar), "memory"), (math.ceil(bstar), "compute")):
        [(_, c)] = _expert_gemm(b)
        assert evaluate(c, hw, "bf16").bound == bound
