"""Expert parallelism on a real transformers MoE (a tiny Mixtral on meta tensors): the dispatch / combine
all-to-all bytes by hand, the busiest rank's expert GEMMs, the expert weights per rank, the CLI flags and errors."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from graphroof.errors import InputError
from graphroof.graph import COST
from graphroof.llm import Engine, Pricing

pytest.importorskip("transformers")

L, H, HEADS, KVH, I, E, K, V = 2, 64, 4, 2, 128, 8, 2, 100
TINY_MIXTRAL = dict(model_type="mixtral", architectures=["MixtralForCausalLM"], hidden_size=H,
                    intermediate_size=I, num_hidden_layers=L, num_attention_heads=HEADS, num_key_value_heads=KVH,
                    num_local_experts=E, num_experts_per_tok=K, vocab_size=V, max_position_embeddings=256,
                    torch_dtype="bfloat16")
# one expert, bf16: gate+up [2I, H] + down [H, I] = 3 * 128 * 64 = 24,576 params = 49,152 B
EXPERT_BYTES = 3 * I * H * 2


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    p = tmp_path_factory.mktemp("moe") / "config.json"
    p.write_text(json.dumps(TINY_MIXTRAL))
    return str(p)


def _engine(cfg, **kw) -> Engine:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Engine(cfg, hw="h100", pricing=Pricing(**kw))


def _ops(eng, phase, b, x, pred):
    c = eng.pipeline.counted(phase, b, x).counted
    return [(op, c.get(op.name, COST)) for op in c.ops() if pred(op)]


def test_dispatch_and_combine_bytes_by_hand(cfg):
    # TP 2 x DP 2, EP 4: a DP rank's decode step of 4 sequences has T = 4 tokens; each of its 2 TP ranks sends
    # T / tp = 2 tokens to top-2 experts: 2 * 2 * 64 hidden * 2 B = 512 B of rows, 3/4 leave: 384 B each way
    eng = _engine(cfg, tp=2, dp=2, ep=4)
    a2a = _ops(eng, "decode", 4, 8, lambda op: op.op == "comm.all_to_all")
    assert len(a2a) == 2 * L                                     # dispatch + combine per MoE layer
    assert {c.net_bytes for _, c in a2a} == {384.0}
    assert all(op.attrs["world_size"] == 4 for op, _ in a2a)
    # no TP all-reduce after the experts any more (they are not tensor-split), one after attention per layer
    ar = _ops(eng, "decode", 4, 8, lambda op: op.op == "comm.all_reduce" and "layers" in op.scope)
    assert len(ar) == L


def test_busiest_rank_expert_gemms(cfg):
    # with a stated imbalance of 1.5, the busiest of 4 EP ranks computes 1.5 * (dp 2 * T * k) / 4 rows: its expert
    # GEMMs cost 1.5 * 2 / 4 = 0.75 x the FLOPs of the unsplit engine's (all T * k rows of one DP rank)
    plain = _engine(cfg)
    ep = _engine(cfg, tp=2, dp=2, ep=4, ep_imbalance=1.5)
    gm = lambda op: "grouped" in op.op  # noqa: E731
    f0 = sum(c.matrix_flops for _, c in _ops(plain, "decode", 4, 8, gm))
    f1 = sum(c.matrix_flops for _, c in _ops(ep, "decode", 4, 8, gm))
    assert f0 > 0 and f1 == pytest.approx(0.75 * f0, rel=1e-12)
    # weights: the rank holds E / ep = 2 experts; R = 0.75 * 4 tokens * 2 = 6 rows land on them, each expert missed
    # by a row with probability 1/2: 2 * (1 - 0.5^6) = 1.96875 experts read, per GEMM share of the expert bytes
    w0 = sum(c.weight_bytes for _, c in _ops(ep, "decode", 4, 8, gm))
    assert w0 == pytest.approx(L * 1.96875 * EXPERT_BYTES, rel=1e-9)


@pytest.mark.slow
def test_expert_weights_per_rank(cfg):
    # resident weights: EP 4 keeps 8 / 4 = 2 experts per layer per rank (2 * 49,152 B x 2 layers) instead of 8
    full = _engine(cfg).price(1, 16, 4).memory["weight_bytes"][0]
    ep = _engine(cfg, tp=2, dp=2, ep=4).price(4, 16, 4).memory["weight_bytes"][0]
    plain_tp2 = _engine(cfg, tp=2).price(1, 16, 4).memory["weight_bytes"][0]
    experts_full = L * E * EXPERT_BYTES
    # EP rank = the TP-2 rank's non-expert weights + 2 experts per layer (TP 2 held half of every expert)
    assert ep == pytest.approx(plain_tp2 - experts_full / 2 + L * 2 * EXPERT_BYTES, rel=1e-9)
    assert ep < full


def test_ep_must_divide_the_experts(cfg):
    with pytest.raises(InputError, match="--ep 3 does not divide the model's 8 experts; use one of: 1, 2, 4, 8"):
        _engine(cfg, dp=3, ep=3).price(3, 16, 4)


def test_cli_layout_json_and_errors(cfg, tmp_path, capsys):
    from graphroof.cli import main

    out = tmp_path / "r.json"
    assert main(["--quiet", "llm", cfg, "--prompt", "16", "--gen", "4", "--batch", "1,8", "--tp", "2", "--dp", "2",
                 "--ep", "4", "--pp", "2", "--system", "dgx-h100", "-f", "json", "-o", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["layout"]["world"] == 8 and r["layout"]["pp"] == 2 and r["layout"]["system"] == "dgx-h100"
    assert r["hardware_name"] == "h100-sxm"               # --system names the device when --hw is not given
    assert r["configs"][1]["layout"]["ep"] == 4
    assert main(["--quiet", "llm", cfg, "--prompt", "16", "--gen", "4", "--tp", "2", "--ep", "3"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--ep 3" in err and "--ep 2" in err
    bad = tmp_path / "bad.json"
    assert main(["--quiet", "llm", cfg, "--prompt", "16", "--gen", "4", "--pp", "9", "-f", "json", "-o", str(bad)]) == 1
    assert not bad.exists()


def test_default_imbalance_scales_the_whole_experts_module(cfg):
    # default imbalance at a DP rank's decode step of T = 4 tokens: n = dp 2 x 4 x k 2 = 16 rows on 4 ranks,
    # mu = 4, sigma = sqrt(16 x 1/4 x 3/4) = 1.7321, sqrt(2 ln 4) = 1.6651 -> E[max] = 6.8841, imbalance 1.7210;
    # every op of the experts module (GEMMs and the activation between them) costs 1.7210 x 2 / 4 = 0.8605 x
    # the unsplit engine's
    f = (4 + math.sqrt(3) * math.sqrt(2 * math.log(4))) / 4 * 2 / 4
    assert f == pytest.approx(0.8605, abs=1e-4)
    plain, ep = _engine(cfg), _engine(cfg, tp=2, dp=2, ep=4)
    gm = lambda op: "grouped" in op.op  # noqa: E731
    act = lambda op: op.scope.endswith("experts.act_fn")  # noqa: E731
    for pred, field in ((gm, "matrix_flops"), (act, "vector_flops")):
        a = sum(getattr(c, field) for _, c in _ops(plain, "decode", 4, 8, pred))
        b = sum(getattr(c, field) for _, c in _ops(ep, "decode", 4, 8, pred))
        assert a > 0 and b == pytest.approx(f * a, rel=1e-9), field


@pytest.mark.slow
def test_ep_all_to_all_across_nodes_costs_more(cfg, tmp_path):
    from graphroof.hardware.system import load_system

    with open(load_system("dgx-h100").path) as f:
        text = f.read()
    two = tmp_path / "two.toml"   # nodes of 2 GPUs: TP 2 stays inside a node, the EP-4 group spans 2 nodes
    two.write_text(text.replace('name = "dgx-h100"', 'name = "two-h100"').replace("gpus_per_node = 8", "gpus_per_node = 2")
                   .replace('aliases = ["hgx-h100", "8xh100"]', "aliases = []"))
    inside = _engine(cfg, tp=2, dp=2, ep=4, system="dgx-h100")
    across = _engine(cfg, tp=2, dp=2, ep=4, system=str(two))
    assert across.layout.ep_nodes() == 2 and across.layout.tp_nodes() == 1 and inside.layout.ep_nodes() == 1
    a, b = inside.price([4, 32], 16, 4), across.price([4, 32], 16, 4)
    assert np.all(b.tpot_s > a.tpot_s)
    # the kernel-level model prices the dispatch as an all-to-all (graphroof.timing.p2p), not as a collective
    kinds = {r["time_model"] for r in across.step("decode", 2, 8).kernel_rows if "comm.all_to_all" in r["op_keys"]}
    assert kinds == {"p2p:all_to_all"}


@pytest.mark.parametrize("layout", [dict(dp=2, ep=2), dict(tp=2, ep=2)])
def test_step_cost_under_ep_builds(cfg, layout):
    """The serving step cost under expert parallelism (graphroof serve --dp / --ep): the busiest rank's expert GEMM
    rows carry the multinomial maximum's sqrt term, not a polynomial of the step's tokens, and the grid's GEMM
    shapes are rounded as its tables' are; this raised NotPolynomial (a traceback from graphroof serve) before."""
    sc = _engine(cfg, **layout).step_cost(max_batch=16, max_context=256, max_chunk=128)
    t = [float(sc(n, 0, m, 50 * m)) for n, m in ((0, 1), (0, 8), (64, 0), (64, 4))]
    assert all(np.isfinite(t)) and all(x > 0 for x in t) and t[1] >= t[0] * (1 - 1e-3)  # launch-bound toy


def test_experts_view_holds_the_expert_ops_alone(cfg):
    eng = _engine(cfg, dp=2, ep=2)
    g = eng.pipeline.stage_view(0).ep_view().counted("prefill", 1, 64).counted
    ops = list(g.ops())
    assert ops and all(op.attrs.get("ep") for op in ops)
    assert sum(op.op == "aten._grouped_mm" for op in ops) == 2 * L  # gate+up and down per MoE layer
    assert not any("attn" in op.scope or op.op == "comm.all_to_all" for op in ops)


def test_a_lone_chunk_makes_a_heavy_dp_rank_under_ep(cfg):
    """DP 2, EP 2, one 64-token chunk (ParallelStepCost's class doc): its rank runs the attention and dense layers
    on all 64 tokens (attention work 64^2 = 4,096), while the expert ops follow the group's mean, 32 tokens a rank:
    t(64) - t_experts(64) + t_experts(32).  The even spread (both ranks 32 tokens) was what it cost before; chunks no
    larger than the even share keep it, and so do DP ranks without EP (not coupled)."""
    sc = _engine(cfg, dp=2, ep=2).step_cost(max_batch=16, max_context=256, max_chunk=128)
    st, ex = sc.stages[0], sc.experts()[0]
    want = float(st._step(64, 0, 0, 0, 4096.0, False) - ex._step(64, 0, 0, 0, 4096.0, False)
                 + ex._step(32, 0, 0, 0, 2048.0, False))
    got = float(sc(64, 0, 0, 0, prefill_attention=4096.0, prefill_chunks=1, prefill_largest=64))
    assert got == pytest.approx(want, rel=1e-9)
    assert got != pytest.approx(float(sc(64, 0, 0, 0, prefill_attention=4096.0)), rel=1e-6)
    # two chunks of 32: the even share, the old price
    assert float(sc(64, 0, 0, 0, prefill_attention=2048.0, prefill_chunks=2, prefill_largest=32)) == pytest.approx(
        float(sc(64, 0, 0, 0, prefill_attention=2048.0)), rel=1e-12)
    # with 4 decodes beside it (2 a rank): the same rule at m = 2 per rank, 2 x 50 cached tokens
    want = float(st._step(64, 0, 2, 100, 4096.0, False) - ex._step(64, 0, 2, 100, 4096.0, False)
                 + ex._step(32, 0, 2, 100, 2048.0, False))
    got = float(sc(64, 0, 4, 200, prefill_attention=4096.0, prefill_chunks=1, prefill_largest=64))
    assert got == pytest.approx(want, rel=1e-9)
    # a vector of steps prices each as alone (the heavy rank is decided per step): 65 tokens in 2 chunks (largest 33,
    # the even share) beside a lone 64-token chunk
    steps = dict(prefill_attention=np.array([4225.0, 4096.0]), prefill_chunks=np.array([2, 1]),
                 prefill_largest=np.array([33, 64]))
    both = sc(np.array([65, 64]), 0, 0, 0, **steps)
    alone = [float(sc(n, 0, 0, 0, prefill_attention=a, prefill_chunks=c, prefill_largest=b))
             for n, a, c, b in zip((65, 64), *steps.values())]
    assert both.tolist() == pytest.approx(alone, rel=1e-12)
    plain_dp = _engine(cfg, dp=2).step_cost(max_batch=16, max_context=256, max_chunk=128)
    assert float(plain_dp(64, 0, 0, 0, prefill_chunks=1, prefill_largest=64)) == pytest.approx(
        float(plain_dp(64, 0, 0, 0)), rel=1e-12)
