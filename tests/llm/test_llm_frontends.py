"""LLM estimates through the real frontends: transformers configs (KV-cache decode traced), ONNX decoders with
past_key_values inputs, plain modules without a cache, the CLI."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("graphroof.frontends.torch.export", reason="needs the PyTorch frontend")
pytest.importorskip("transformers")

from graphroof.cli import main  # noqa: E402
from graphroof.errors import InputError  # noqa: E402
from graphroof.graph import COST, Role  # noqa: E402
from graphroof.llm import estimate
from graphroof.llm.phases import Pipeline  # noqa: E402
from graphroof.report import render  # noqa: E402

L, H, HEADS, KVH, I, V = 2, 64, 4, 2, 128, 100
D = H // HEADS  # 16
TINY = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=H, intermediate_size=I,
            num_hidden_layers=L, num_attention_heads=HEADS, num_key_value_heads=KVH, vocab_size=V,
            max_position_embeddings=512, torch_dtype="bfloat16")
# parameters by hand: embed V*H = 6400; per layer q 64*64 + k 32*64 + v 32*64 + o 64*64 = 12288,
# gate/up/down 3 * 128 * 64 = 24576, two norms 128 -> 36992; final norm 64; lm_head 6400
PARAMS = 6400 + L * 36992 + 64 + 6400  # 86848


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory):
    p = tmp_path_factory.mktemp("tiny") / "config.json"
    p.write_text(json.dumps(TINY))
    return p


@pytest.fixture(scope="module")
def tiny(tiny_config):
    return estimate(str(tiny_config), hw="a100", prompt=16, gen=8, batch=[1, 2], ideal=True)


def test_decode_is_a_real_cached_step(tiny):
    c = tiny[2]
    g = c.decode.analysis.graph
    appends = [op for op in g.ops() if op.op == "kv_cache.append"]
    assert len(appends) == 2 * L and all(op.outputs[0].role is Role.KV_CACHE for op in appends)
    sdpa = [op for op in g.ops() if op.op == "aten.scaled_dot_product_attention"]
    # the decode step's query is one token; K and V come from the cache (GQA: 2 KV heads)
    assert len(sdpa) == L and all(op.inputs[0].shape[2] == 1 and op.inputs[1].role is Role.KV_CACHE for op in sdpa)
    t = c.decode.analysis.totals.cost
    B = 2
    # per step: one token per sequence written per layer, K and V: L * 2 * B * KVH * D * 2 bytes = 512
    assert t.kv_write_bytes == L * 2 * B * KVH * D * 2
    # attention reads the cache of past + 1 tokens; mean past over the 7 steps = 16 + 3 -> 20 tokens:
    # L * 2 * B * 20 * KVH * D * 2 = 10240 (the cache is read nowhere else)
    assert t.kv_read_bytes == pytest.approx(L * 2 * B * 20 * KVH * D * 2)
    assert c.weight_bytes == 2 * PARAMS
    assert c.kv_cache_bytes == B * (16 + 8) * L * 2 * KVH * D * 2
    assert tiny.spec.max_positions == 512 and tiny.kv_cache


def test_decode_costs_are_affine_in_the_context(tiny_config):
    """The exact sum relies on it: costs at a middle context equal the line through the two ends."""
    from graphroof.api import resolve_hardware
    from graphroof.frontends.sources import open_model

    pipe = Pipeline(open_model(str(tiny_config)), resolve_hardware("a100"))
    a, b = pipe.counted("decode", 2, 16).ops, pipe.counted("decode", 2, 40).ops
    mid = pipe.counted("decode", 2, 29)
    for (op, cost), (_, ca), (_, cb) in zip(mid.ops, a, b):
        # the line through past 16 and 40, at 29: a + (b - a) * 13 / 24
        want = [ca.flops + (cb.flops - ca.flops) * 13 / 24, ca.bytes + (cb.bytes - ca.bytes) * 13 / 24]
        assert [cost.flops, cost.bytes] == pytest.approx(want, rel=1e-12, abs=1e-9), op.name


def test_tp2_on_a_traced_model(tiny_config):
    c = estimate(str(tiny_config), hw="a100", prompt=16, gen=8, batch=[2], ideal=True, tp=2).configs[0]
    norms = (2 * L + 1) * H
    assert c.weight_bytes == (2 * PARAMS - 2 * norms) / 2 + 2 * norms
    names = {r["name"] for r in c.layer_rows("decode")}
    assert {"model.layers.*.self_attn_all_reduce", "model.layers.*.mlp_all_reduce", "lm_head_all_gather"} <= names
    comm = [op for op in c.decode.analysis.graph.ops() if op.op == "comm.all_reduce"]
    # embedding + 2 per layer; each all-reduces the [2, 1, 64] bf16 residual: 2 * (2-1)/2 * 256 = 256 bytes
    assert len(comm) == 2 * L + 1
    assert all(c.decode.analysis.graph.get(op.name, COST).net_bytes == 256 for op in comm)


def test_prompt_longer_than_max_positions(tiny_config):
    with pytest.raises(InputError, match=r"--prompt 600 is longer than .* maximum of 512 positions"):
        estimate(str(tiny_config), prompt=600, gen=8)


def test_plain_module_without_cache_explains_the_decode_estimate():
    from graphroof.errors import GraphroofWarning

    with pytest.warns(GraphroofWarning, match="plain nn.Module"):
        r = estimate("tests.llm.tinylm:TinyLM", hw="a100", prompt=8, gen=4, batch=[1], ideal=True)
    assert not r.kv_cache and r.configs[0].kv_cache_bytes == 0
    note = next(n for n in r.notes if "has no KV cache" in n)
    assert "plain nn.Module" in note and "full forward pass over the whole context" in note


def test_cli_json(tiny_config, tmp_path, capsys):
    out = tmp_path / "llm.json"
    assert main(["llm", str(tiny_config), "--prompt", "16", "--gen", "8", "--batch", "1,2", "--kv", "fp8",
                 "--format", "json", "-o", str(out)]) == 0
    d = json.loads(out.read_text())
    assert [c["batch"] for c in d["configs"]] == [1, 2] and d["dtypes"]["kv"] == "fp8"
    c = d["configs"][1]
    # fp8 KV cache: 1 byte per element
    assert c["kv_cache_bytes"] == 2 * (16 + 8) * L * 2 * KVH * D * 1
    assert c["tpot_s"] > c["tpot_ideal_s"] > 0 and c["fits"] is True
    assert main(["llm", str(tiny_config), "--prompt", "16", "--gen", "8"]) == 0
    text = capsys.readouterr().out
    assert "TTFT" in text and "model.layers.*.mlp" in text and "critical batch" in text


@pytest.mark.slow
def test_llama_2_70b_does_not_fit_one_a100():
    r = estimate("llama-2-70b", hw="a100", prompt=1024, gen=256, batch=[1])
    c = r.configs[0]
    # 69B parameters in fp16: 138 GB of weights alone > 80 GB
    assert c.weight_bytes == pytest.approx(137.96e9, rel=1e-3)
    assert c.fits is False and c.memory.min_tp == 2
    assert "does not fit; smallest TP that fits: --tp 2" in render(r)


def test_factory_errors_name_the_problem():
    with pytest.raises(InputError, match=r"cannot import 'tests.llm.nope' for 'tests.llm.nope:X'"):
        estimate("tests.llm.nope:X", gen=2)
    with pytest.raises(InputError, match=r"module 'tests.llm.tinylm' has no attribute 'Nope'"):
        estimate("tests.llm.tinylm:Nope", gen=2)
