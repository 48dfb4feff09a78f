"""Folded blocks: the folded capture equals the unfolded one node for node (names, scopes, specs, attrs, edges,
costs), groups split where layers differ, and a block that traces differently is traced, not replicated."""

from __future__ import annotations

import pytest

pytest.importorskip("graphroof.frontends.torch.export", reason="needs the PyTorch frontend")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from graphroof.counters import count  # noqa: E402
from graphroof.frontends.torch.export import load_module  # noqa: E402
from graphroof.frontends.torch.fold import block_signature, fold_groups  # noqa: E402
from graphroof.graph import COST, IN_TENSORS, OP, OUT_TENSORS  # noqa: E402

H, V = 64, 100
SMALL = dict(hidden_size=H, intermediate_size=128, num_attention_heads=4, vocab_size=V, max_position_embeddings=512,
             torch_dtype="bfloat16")
LLAMA = dict(model_type="llama", architectures=["LlamaForCausalLM"], num_hidden_layers=6, num_key_value_heads=4,
             **SMALL)
GQA = dict(LLAMA, num_key_value_heads=2, num_hidden_layers=5)
MIXTRAL = dict(model_type="mixtral", architectures=["MixtralForCausalLM"], num_hidden_layers=5,
               num_key_value_heads=2, num_local_experts=8, num_experts_per_tok=2, **SMALL)
# Gemma-3: five sliding layers, one full, five sliding, one full: the sliding ten fold, the full two do not
GEMMA3 = dict(model_type="gemma3_text", architectures=["Gemma3ForCausalLM"], num_hidden_layers=12,
              num_key_value_heads=1, head_dim=16, sliding_window=8, **SMALL)
# DeepSeek-V3 (MLA + MoE): two dense layers first, then six MoE layers
DEEPSEEK3 = dict(model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"], num_hidden_layers=8,
                 num_key_value_heads=4, moe_intermediate_size=32, n_routed_experts=8, num_experts_per_tok=2,
                 n_group=2, topk_group=1, kv_lora_rank=16, q_lora_rank=24, qk_nope_head_dim=8, qk_rope_head_dim=8,
                 v_head_dim=8, first_k_dense_replace=2, n_shared_experts=1, **SMALL)


def _dump(g):
    """Everything a graph holds: nodes with their op data and tensor names in order, and the edges."""
    return ([(n, d[OP], d[IN_TENSORS], d[OUT_TENSORS]) for n, d in g.nx.nodes(data=True)],
            sorted(g.nx.edges(data=True)), g.meta.get("default_dims"))


def _costs(g):
    c = g.map_ops(lambda op: op)
    count(c)
    return [c.get(n, COST) for n in c.nx]


def _hf(data, **kw):
    pytest.importorskip("transformers")
    from graphroof.frontends.hf.build import load_config_data

    folded = load_config_data(dict(data), seq=12, batch=2, name="m", fold_blocks=True, **kw)
    plain = load_config_data(dict(data), seq=12, batch=2, name="m", fold_blocks=False, **kw)
    return folded, plain


@pytest.mark.parametrize("data, groups", [
    (LLAMA, [("model.layers.[0..5] (6 blocks)", 3)]),
    (GQA, [("model.layers.[0..4] (5 blocks)", 2)]),
    (MIXTRAL, [("model.layers.[0..4] (5 blocks)", 2)]),
    (GEMMA3, [("model.layers.[0..10] (10 blocks)", 7)]),
    (DEEPSEEK3, [("model.layers.[2..7] (6 blocks)", 3)]),
], ids=["llama", "gqa", "mixtral", "gemma3-sliding", "deepseek3-dense-first"])
def test_folded_equals_unfolded(data, groups):
    folded, plain = _hf(data)
    assert [(f["blocks"], f["replicated"]) for f in folded.meta["fold"]] == groups
    assert "fold" not in plain.meta
    assert _dump(folded) == _dump(plain)
    assert _costs(folded) == _costs(plain)


def test_groups_split_where_layers_differ():
    pytest.importorskip("transformers")
    from graphroof.frontends.hf.build import build_model

    model, cfg, _ = build_model(dict(GEMMA3))
    names = {id(m): n for n, m in model.named_modules()}
    (g,) = fold_groups(model, names)
    # layer_types: sliding x5, full, sliding x5, full -> the full layers 5 and 11 stay apart
    assert [m.position for m in g.members] == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]
    model, cfg, _ = build_model(dict(DEEPSEEK3))
    layers = model.model.layers
    assert block_signature(layers[0], 8, 0)[0] == block_signature(layers[1], 8, 1)[0]
    assert block_signature(layers[1], 8, 1)[0] != block_signature(layers[2], 8, 2)[0]  # dense vs MoE


def test_decode_with_cache_and_layout_probe_fold_identically():
    pytest.importorskip("transformers")
    from graphroof.frontends.hf.source import HFSource

    out = {}
    for on in (True, False):
        src = HFSource(dict(DEEPSEEK3), name="m", fold=on)
        layout = src.kv_layout()  # probes what each layer hands its cache: replicated layers too
        out[on] = (layout, _dump(src.prefill_graph(2, 10)), _dump(src.decode_graph(3, 17)))
        if on:
            assert src.decode_graph(1, 5).meta["fold"][0]["replicated"] == 3
    assert len(out[True][0]) == 8
    assert out[True] == out[False]


class _Block(nn.Module):
    """A residual MLP block; ``odd`` / ``last`` make some layers trace differently with equal structure."""

    def __init__(self, dim: int, layer_idx: int, mode: str = ""):
        super().__init__()
        self.layer_idx = layer_idx
        self.mode = mode
        self.up = nn.Linear(dim, 2 * dim)
        self.down = nn.Linear(2 * dim, dim)
        self.calls = 0

    def forward(self, x):
        y = self.down(torch.relu(self.up(x)))
        if (self.mode == "odd" and self.layer_idx % 2) or (self.mode == "last" and self.layer_idx == 5):
            y = y * 2.0  # one op more in these layers
        if self.mode == "stateful":
            self.calls = self.calls + 1
        return x + y


class _Stack(nn.Module):
    def __init__(self, mode: str = "", n: int = 6, dim: int = 16):
        super().__init__()
        self.layers = nn.ModuleList(_Block(dim, i, mode) for i in range(n))
        self.head = nn.Linear(dim, 4)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def _module(mode: str):
    with torch.device("meta"):
        m = _Stack(mode)
    folded = load_module(m, [(3, 16)], capture="dispatch", fold_blocks=True)
    plain = load_module(m, [(3, 16)], capture="dispatch", fold_blocks=False)
    assert _dump(folded) == _dump(plain)
    return folded


def test_plain_module_blocks_fold():
    g = _module("")
    assert g.meta["fold"] == [{"blocks": "layers.[0..5] (6 blocks)", "traced": 3, "replicated": 3}]
    assert g.node("linear_10").scope == "layers.5.up"  # replicated layer 5, named as a trace names it


def test_blocks_tracing_differently_are_traced():
    g = _module("odd")  # layers 0 and 1 differ: nothing replicated
    assert g.meta["fold"][0]["replicated"] == 0 and "trace differently" in g.meta["fold"][0]["not_folded"]
    assert sum(op.op == "aten.mul" for op in g.ops()) == 3


def test_last_block_differing_retraces_everything():
    g = _module("last")  # 0 and 1 agree, 2..4 replicated, 5 differs: the check fails, every block is traced
    assert "fold" not in g.meta
    assert sum(op.op == "aten.mul" for op in g.ops()) == 1


def test_block_with_side_effects_is_not_replicated():
    g = _module("stateful")
    assert g.meta["fold"][0]["replicated"] == 0
    assert "changes its own attributes" in g.meta["fold"][0]["not_folded"]


def test_api_and_cli_switch(tmp_path, capsys):
    pytest.importorskip("transformers")
    import json

    import graphroof
    from graphroof.cli import main

    with torch.device("meta"):
        m = _Stack("")
    a = graphroof.analyze(m, [(3, 16)], hw="a100", fold_blocks=False)
    b = graphroof.analyze(m, [(3, 16)], hw="a100")
    assert a.totals.cost == b.totals.cost and a.ops == b.ops
    cfg = tmp_path / "tiny" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps(GQA))
    outs = {}
    for cmd in (["analyze", str(cfg), "--seq", "8"], ["llm", str(cfg), "--prompt", "8", "--gen", "3"]):
        for extra in ([], ["--no-fold-blocks"]):
            capsys.readouterr()
            assert main([*cmd, "-f", "json", *extra]) == 0
            outs[(cmd[0], bool(extra))] = capsys.readouterr().out
    assert outs[("analyze", True)] == outs[("analyze", False)]
    assert outs[("llm", True)] == outs[("llm", False)]
    assert main(["analyze", "examples/textbook_ops.csv", "--no-fold-blocks"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("graphroof: error: --no-fold-blocks does not apply") and "Traceback" not in err


def test_replicated_nodes_share_bounds_equal_to_their_own_evaluation():
    from graphroof.graph import BOUND
    from graphroof.hardware import load_hardware
    from graphroof.roofline import _peaks, compute_dtype, evaluate, evaluate_graph

    g = _module("").map_ops(lambda op: op)
    count(g)
    hw = load_hardware("h100")
    evaluate_graph(g, hw)
    bounds = {id(g.get(n, BOUND)) for n in g.nx}
    assert len(bounds) < len(g)  # layers 1..5 reuse the evaluation of layer 0's ops
    for op in g.ops():
        dt = compute_dtype(op)
        assert g.get(op.name, BOUND) == evaluate(g.get(op.name, COST), hw, dt, _peaks(hw, dt), op)


@pytest.mark.parametrize("kind", ["bart", "whisper", "t5"])
def test_encoder_decoder_folds_both_caches(kind):
    """Each decoder layer of an encoder-decoder updates two caches (self and cross attention, held by one
    ``EncoderDecoderCache``): replicated layers replay both, so the layout probe, the prefill (which writes the
    cross-attention cache) and a decode step equal the unfolded traces."""
    pytest.importorskip("transformers")
    from graphroof.frontends.hf.encdec import EncDecSource
    from tests.llm.test_llm_encdec import BART, T5, WHISPER

    # T5: block 0 holds the relative position bias, blocks 1-4 fold (a T5 block holds one ModuleList)
    cfg = (dict(T5, num_layers=5, num_decoder_layers=5) if kind == "t5" else
           dict(BART if kind == "bart" else WHISPER, encoder_layers=5, decoder_layers=5))
    replicated = [1, 1] if kind == "t5" else [2, 2]
    out = {}
    for on in (True, False):
        src = EncDecSource(cfg, name=kind, decoder_prompt=2, fold=on)
        src.check_context(20, 4)
        pre, dec = src.prefill_graph(2, 20), src.decode_graph(3, 7)
        out[on] = (src.layouts(), _dump(pre), _dump(dec))
        if on:
            assert [f["replicated"] for f in pre.meta["fold"]] == replicated   # encoder and decoder layers
            assert [f["replicated"] for f in dec.meta["fold"]][-1] == replicated[-1]
    assert len(out[True][0]["cross"]) == 5
    assert out[True] == out[False]
