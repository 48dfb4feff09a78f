"""The PyTorch frontend: single-op modules by hand arithmetic through both captures, roles, scopes, inputs,
capture selection and fallback, no real math, and the Analysis object."""

from __future__ import annotations

import json

import networkx as nx
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import graphroof
from graphroof import GraphroofError, Role, TensorSpec
from graphroof.frontends.torch import export as torch_export
from graphroof.frontends.torch.export import load_module

CAPTURES = ["export", "dispatch"]


class Fn(nn.Module):
    """Wrap a function of the inputs (and optional parameters) as a module."""

    def __init__(self, fn, **params):
        super().__init__()
        self.fn = fn
        for k, v in params.items():
            self.register_parameter(k, nn.Parameter(v))

    def forward(self, *xs):
        return self.fn(self, *xs)


def one(graph, op):
    nodes = [n for n in graph.ops() if n.op == op]
    assert len(nodes) == 1, [n.op for n in graph.ops()]
    return nodes[0]


def cost(graph, **kw):
    a = graphroof.analyze(graph, hw="a100", **kw)
    return a.totals.cost


@pytest.mark.parametrize("capture", CAPTURES)
def test_linear(capture):
    g = load_module(nn.Linear(8, 16), [(4, 8)], capture=capture)
    n = one(g, "aten.linear")
    assert [t.role for t in n.inputs] == [Role.ACTIVATION, Role.WEIGHT, Role.WEIGHT]
    c = cost(g)
    assert c.matrix_flops == 1024          # 2 * 4 * 16 * 8
    assert c.vector_flops == 64            # bias, 4 * 16
    assert c.weight_bytes == (128 + 16) * 4 and c.act_read_bytes == 32 * 4 and c.act_write_bytes == 64 * 4


@pytest.mark.parametrize("capture", CAPTURES)
def test_sdpa_causal_gqa_whole(capture):
    m = Fn(lambda s, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True))
    g = load_module(m, [(1, 4, 6, 8), (1, 2, 6, 8), (1, 2, 6, 8)], capture=capture)
    n = one(g, "aten.scaled_dot_product_attention")
    assert n.attrs["is_causal"] is True and [t.shape for t in n.inputs[:3]] == [(1, 4, 6, 8), (1, 2, 6, 8), (1, 2, 6, 8)]
    c = cost(g)
    # 4 query heads, causal pairs 6*7/2 = 21: 2 * 4 * 21 * (8 + 8) = 2688; softmax+scale 6 * 4 * 21 = 504
    assert c.matrix_flops == 2688 and c.vector_flops == 504
    assert cost(g, causal="full").matrix_flops == 2 * 4 * 36 * 16
    # flash bytes: q 192 + k 96 + v 96 elements read, o 192 written, fp32
    assert c.act_read_bytes == 384 * 4 and c.act_write_bytes == 192 * 4


@pytest.mark.parametrize("capture", CAPTURES)
def test_conv_norm_softmax_embedding(capture):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(1000, 8)
            self.ln = nn.LayerNorm(8)
            self.conv = nn.Conv1d(8, 4, 3, padding=1)

        def forward(self, ids):
            x = self.ln(self.emb(ids))                   # [2, 5, 8]
            y = self.conv(x.transpose(1, 2))              # [2, 4, 5]
            return torch.softmax(y, dim=-1)

    g = load_module(M(), {"ids": (2, 5)}, capture=capture)
    emb = one(g, "aten.embedding")
    assert emb.inputs[1].dtype == "int64"                 # index-like input made int64
    c = cost(g)
    assert one(g, "aten.layer_norm").scope == "ln" and one(g, "aten.conv1d").scope == "conv"
    # conv: 2 * (2*4*5 = 40 outputs) * 8 * 3 = 1920
    assert c.matrix_flops == 1920
    # layer norm 7 * 80 + conv bias 40 + softmax 5 * 40
    assert c.vector_flops == 560 + 40 + 200
    # embedding reads 10 rows of 8 (not 8000 values); LN gamma/beta 16; conv 96 + 4
    assert c.weight_bytes == (80 + 16 + 100) * 4


@pytest.mark.parametrize("capture", CAPTURES)
def test_matmul_einsum_baddbmm(capture):
    m = Fn(lambda s, a, b, c: (a @ b, torch.einsum("bij,bjk->bik", a, b), torch.baddbmm(c, a, b)))
    g = load_module(m, [(3, 4, 5), (3, 5, 6), (3, 4, 6)], capture=capture)
    ops = sorted(n.op for n in g.ops())
    assert ops == ["aten.baddbmm", "aten.einsum", "aten.matmul"]
    c = cost(g)
    assert c.matrix_flops == 3 * 720       # each: 2 * 3 * 4 * 6 * 5 = 720
    assert c.vector_flops == 72            # baddbmm's add over 3*4*6 outputs


@pytest.mark.parametrize("capture", CAPTURES)
def test_transposed_grouped_conv(capture):
    m = nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2, bias=False)
    g = load_module(m, [(1, 4, 5, 5)], capture=capture)
    # weight [4, 3, 3, 3]; each of 100 input pixels scatters Cout/groups * 9 = 27 MACs: 2 * 100 * 27 = 5400
    assert cost(g).matrix_flops == 5400


def test_captures_agree_on_a_block_with_views_and_casts():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(16, 48)
            self.out = nn.Linear(16, 16)
            self.norm = nn.LayerNorm(16)

        def forward(self, x):
            b, n, d = x.shape
            q, k, v = self.qkv(self.norm(x)).reshape(b, n, 3, 2, 8).permute(2, 0, 3, 1, 4).unbind(0)
            o = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, d)
            return (x + self.out(o)).to(torch.bfloat16)

    ce, cd = (cost(load_module(Block(), [(2, 7, 16)], capture=c)) for c in CAPTURES)
    assert ce.flops == cd.flops and ce.weight_bytes == cd.weight_bytes
    assert ce.bytes == cd.bytes


def test_roles_scopes_and_edges():
    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)
            self.register_buffer("scale", torch.ones(4))

        def forward(self, x):
            return self.proj(x) * self.scale

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Inner(), Inner()])

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return x

    for capture in CAPTURES:
        g = load_module(Outer(), [(2, 4)], capture=capture)
        lin = [n for n in g.ops() if n.op == "aten.linear"]
        assert [n.scope for n in lin] == ["blocks.0.proj", "blocks.1.proj"]
        muls = [n for n in g.ops() if n.op == "aten.mul"]
        assert [n.scope for n in muls] == ["blocks.0", "blocks.1"]
        assert muls[0].inputs[1].role is Role.CONST
        # data edges: linear -> mul -> linear -> mul
        order = list(nx.topological_sort(g.nx))
        assert nx.has_path(g.nx, lin[0].name, muls[1].name) and order.index(lin[1].name) > order.index(muls[0].name)


class Append(nn.Module):
    def forward(self, k_new, k_cache):
        return torch.cat([k_cache, k_new], dim=2)


def test_kv_inputs_marked_and_cache_growth_counts_as_kv():
    m = Append()
    for capture in CAPTURES:
        g = load_module(m, {"k_new": (1, 2, 1, 8), "k_cache": (1, 2, 10, 8)}, capture=capture, kv_inputs=["k_cache"])
        n = one(g, "aten.cat")
        assert [t.role for t in n.inputs] == [Role.KV_CACHE, Role.ACTIVATION]
        c = cost(g)
        assert c.kv_read_bytes == 160 * 4 and c.act_read_bytes == 16 * 4 and c.kv_write_bytes == 176 * 4


def test_input_forms_and_dims():
    m = nn.Linear(8, 3)
    ref = cost(load_module(m, [(5, 8)]))
    for inputs in ([torch.randn(5, 8)], torch.randn(5, 8), (5, 8), [((5, 8), "fp32")], {"input": (5, 8)},
                   [TensorSpec((5, 8), "fp32")], [torch.empty(5, 8, device="meta")]):
        assert cost(load_module(m, inputs)) == ref, inputs
    g = load_module(m, [("batch", 8)], dims={"batch": 5})
    assert cost(g) == ref
    g = load_module(m, [((5, 8), "bf16")], capture="dispatch")
    assert one(g, "aten.linear").inputs[0].dtype == "bf16"
    with pytest.raises(graphroof.UnboundDimError, match="batch"):
        load_module(m, [("batch", 8)])
    with pytest.raises(graphroof.InputError, match="needs example inputs"):
        load_module(m, None)


def test_real_weights_analysed_without_real_math():
    m = nn.Linear(64, 64)
    w_before = m.weight.detach().clone()
    x = torch.zeros(3, 64)

    def bump(s, x):
        x.add_(1.0)                       # real math would change the caller's tensor
        s.lin.weight.data.mul_(0)         # and the weights
        return s.lin(x)

    mod = Fn(bump)
    mod.lin = m
    for capture in CAPTURES:
        g = load_module(mod, [x], capture=capture)
        assert len(g) > 0
    assert torch.equal(x, torch.zeros(3, 64)) and torch.equal(m.weight, w_before)
    # a real-weight model and its meta twin count the same
    with torch.device("meta"):
        meta = nn.Linear(64, 64)
    assert cost(load_module(m, [(3, 64)])) == cost(load_module(meta, [torch.randn(3, 64)]))


def test_training_flag_restored():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    m.train()
    g = load_module(m, [(2, 4)], capture="dispatch")
    assert m.training and m[1].training
    assert all("dropout" not in n.op for n in g.ops())      # analysed in eval mode: dropout returns its input


class CustomOut:
    def __init__(self, t):
        self.t = t


def test_auto_tries_dispatch_first_then_export(monkeypatch):
    g = load_module(nn.Linear(4, 4), [(2, 4)])
    assert g.meta["capture"] == "dispatch (fake tensors)" and not g.meta["notes"]

    def broken(*a, **k):
        raise RuntimeError("dispatch broke on purpose")

    monkeypatch.setattr(torch_export, "capture_dispatch", broken)
    g = load_module(nn.Linear(4, 4), [(2, 4)])
    assert g.meta["capture"] == "torch.export (non-strict)"
    assert any("dispatch (fake tensors) capture failed" in n and "broke on purpose" in n for n in g.meta["notes"])
    assert one(g, "aten.linear")


def test_export_failure_is_reported_when_forced():
    m = Fn(lambda s, x: CustomOut(s.lin(x)))
    m.lin = nn.Linear(4, 4)
    assert one(load_module(m, [(2, 4)]), "aten.linear")          # dispatch takes any Python output
    g = load_module(nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4)), [(2, 4)], capture="export")
    assert g.meta["capture"] == "torch.export (non-strict)"


def test_grouped_mm_any_dtype_in_dispatch():
    # the meta kernel of _grouped_mm only takes bf16; shapes do not depend on dtype
    m = Fn(lambda s, a, offs: torch._grouped_mm(a, s.w, offs=offs), w=torch.empty(4, 8, 16, device="meta"))
    g = load_module(m, [((12, 8), "fp32"), ((4,), "int32")], capture="dispatch")
    n = one(g, "aten._grouped_mm")
    assert n.inputs[0].dtype == "fp32" and n.outputs[0].shape == (12, 16)
    assert cost(g).matrix_flops == 2 * 12 * 16 * 8


def test_analysis_object():
    a = graphroof.analyze(nn.Sequential(nn.Linear(8, 8), nn.GELU()), [(4, 8)], hw="h100")
    assert isinstance(a.graph.nx, nx.DiGraph) and a.graph.nx.number_of_edges() == 1
    assert [r["op"] for r in a.ops] == ["aten.linear", "aten.gelu"] and a.layers
    r = repr(a)
    assert r.startswith("<Analysis Sequential on h100") and "FLOP" in r
    d = json.loads(a.to_json())
    assert d["capture"] == "dispatch (fake tensors)" and d["totals"]["flops"] == 2 * 4 * 8 * 8 + 32 + 5 * 32
    assert "| " in graphroof.render(a, "markdown")
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(GraphroofError, match="pandas"):
            a.to_dataframe()
    else:
        assert len(a.to_dataframe()) == len(a.layers)


def test_module_built_under_fake_tensor_mode():
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    with FakeTensorMode():
        m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    assert isinstance(m[0].weight, FakeTensor)
    for capture in CAPTURES:
        # 2*3*8*4 + 2*3*2*8 = 288 matrix; biases 24 + 6, ReLU 24
        c = cost(load_module(m, [(3, 4)], capture=capture))
        assert c.matrix_flops == 288 and c.vector_flops == 54


@pytest.mark.parametrize("capture", CAPTURES)
def test_lstm_whole_or_per_layer(capture):
    # export keeps aten.lstm whole; on CPU the dispatch capture sees one aten.mkldnn_rnn_layer per layer and
    # direction.  10 (step, row) pairs; layer 0: 2 directions * 2*128*(16+32), layer 1: 2 * 2*128*(64+32)
    m = nn.LSTM(16, 32, num_layers=2, bidirectional=True, batch_first=True)
    c = cost(load_module(m, [(2, 5, 16)], capture=capture))
    assert c.matrix_flops == 10 * (2 * 2 * 128 * 48 + 2 * 2 * 128 * 96)
    assert c.vector_flops == 10 * 4 * (2 * 128 + 18 * 32)     # bias adds + LSTM cell math per direction/layer
