"""ATen matrix-product rules against hand arithmetic (2 FLOPs per multiply-add)."""

from __future__ import annotations

import pytest

from graphroof.counters.registry import REGISTRY
from graphroof.counters.formulas import einsum_flops
from tests.conftest import T, W, node


def cost(n):
    return REGISTRY.lookup(n.op)(n)


def test_mm_flops_and_bytes():
    n = node("aten.mm", [T("fp32", 4, 5), T("fp32", 5, 6)], [T("fp32", 4, 6)])
    c = cost(n)
    assert c.matrix_flops == 240          # 2 * 4 * 6 * 5 = 240
    assert c.vector_flops == 0
    assert c.act_read_bytes == (20 + 30) * 4 and c.act_write_bytes == 24 * 4   # 200 B read, 96 B written


def test_bmm_and_broadcast_matmul():
    n = node("aten.bmm", [T("bf16", 3, 4, 5), T("bf16", 3, 5, 6)], [T("bf16", 3, 4, 6)])
    assert cost(n).matrix_flops == 720    # 2 * 3 * 4 * 6 * 5 = 720
    # matmul broadcasting a [2, 1, 4, 5] batch against [3, 5, 6]: out [2, 3, 4, 6]
    n = node("aten.matmul", [T("bf16", 2, 1, 4, 5), T("bf16", 3, 5, 6)], [T("bf16", 2, 3, 4, 6)])
    assert cost(n).matrix_flops == 1440   # 2 * (2*3*4*6 = 144 outputs) * 5 = 1440
    # vector @ matrix: [5] @ [5, 6] -> [6]
    n = node("aten.matmul", [T("fp32", 5), T("fp32", 5, 6)], [T("fp32", 6)])
    assert cost(n).matrix_flops == 60     # 2 * 6 * 5


def test_linear_with_and_without_bias_weight_bytes():
    x, w, b = T("fp16", 2, 3, 8), W("fp16", 16, 8), W("fp16", 16)
    c = cost(node("aten.linear", [x, w, b], [T("fp16", 2, 3, 16)]))
    assert c.matrix_flops == 1536         # 2 * (2*3 rows) * 16 * 8 = 1536
    assert c.vector_flops == 96           # bias: one add per output, 2*3*16 = 96
    assert c.weight_bytes == (128 + 16) * 2   # W 16*8 + b 16, fp16
    assert c.act_read_bytes == 48 * 2 and c.act_write_bytes == 96 * 2
    c = cost(node("aten.linear", [x, w, None], [T("fp16", 2, 3, 16)]))
    assert c.vector_flops == 0 and c.weight_bytes == 256


def test_addmm_beta_alpha():
    ins = [W("fp32", 6), T("fp32", 4, 5), W("fp32", 5, 6)]
    out = [T("fp32", 4, 6)]
    c = cost(node("aten.addmm", ins, out))
    assert c.matrix_flops == 240 and c.vector_flops == 24        # + bias add: 24 outputs
    c = cost(node("aten.addmm", ins, out, beta=0.5, alpha=2.0))
    assert c.vector_flops == 72                                   # add + beta scale + alpha scale: 3 * 24
    c = cost(node("aten.addmm", ins, out, beta=0))
    assert c.vector_flops == 0                                    # beta = 0 ignores self
    # baddbmm: [2,4,6] + [2,4,5] @ [2,5,6]
    c = cost(node("aten.baddbmm", [T("fp32", 2, 4, 6), T("fp32", 2, 4, 5), T("fp32", 2, 5, 6)], [T("fp32", 2, 4, 6)]))
    assert c.matrix_flops == 480 and c.vector_flops == 48        # 2*2*4*6*5 = 480; 48 adds
    # addbmm sums the batch into [4, 6]: contraction 2 * 5
    c = cost(node("aten.addbmm", [T("fp32", 4, 6), T("fp32", 2, 4, 5), T("fp32", 2, 5, 6)], [T("fp32", 4, 6)]))
    assert c.matrix_flops == 480                                  # 2 * 24 * (2 * 5) = 480


def test_grouped_mm_counts_each_row_once_reads_every_expert():
    # 12 token-expert rows of K=8 through experts [4, 8, 16]: 2 * 12 * 16 * 8 = 3072
    a, b, offs = T("bf16", 12, 8), W("bf16", 4, 8, 16), T("int32", 4)
    c = cost(node("aten._grouped_mm", [a, b, offs], [T("bf16", 12, 16)]))
    assert c.matrix_flops == 3072
    assert c.weight_bytes == 4 * 8 * 16 * 2                       # every expert read: 1024 B
    c = cost(node("transformers.grouped_mm_fallback", [a, b, offs], [T("bf16", 12, 16)]))
    assert c.matrix_flops == 3072


@pytest.mark.parametrize("eq, shapes, expected", [
    ("ij,jk->ik", [(4, 5), (5, 6)], (240, 0)),             # 2 * 4*5*6
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 5, 8)], (2 * 2 * 3 * 4 * 5 * 8, 0)),   # 1920
    ("...ij,...jk", [(7, 4, 5), (7, 5, 6)], (2 * 7 * 4 * 5 * 6, 0)),                 # implicit output, 1680
    ("i,j->ij", [(3,), (4,)], (0, 12)),                   # outer product: 12 multiplies
    ("ij->j", [(3, 4)], (0, 12)),                         # a reduction: 12 adds
    ("ij->ji", [(3, 4)], (0, 0)),                         # a transpose computes nothing
    # left to right: (ij,jk->ik) 2*2*3*4 = 48, then (ik,kl->il) 2*2*4*5 = 80
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], (128, 0)),
])
def test_einsum(eq, shapes, expected):
    assert einsum_flops(eq, shapes) == expected


def test_einsum_rule_reads_equation_attr():
    n = node("aten.einsum", [T("fp32", 4, 5), T("fp32", 5, 6)], [T("fp32", 4, 6)], equation="ij,jk->ik")
    assert cost(n).matrix_flops == 240


def test_lstm_two_layers_bidirectional():
    # T=5, B=2, I=16, H=32, 2 layers, bidirectional: layer 0 w_ih [128, 16], layer 1 w_ih [128, 64]
    x, h0, c0 = T("fp32", 5, 2, 16), T("fp32", 4, 2, 32), T("fp32", 4, 2, 32)
    params = []
    for i in (16, 16, 64, 64):
        params += [W("fp32", 128, i), W("fp32", 128, 32), W("fp32", 128), W("fp32", 128)]
    n = node("aten.lstm", [x, h0, c0, *params], [T("fp32", 5, 2, 64), h0, c0], n_hx=2, n_params=16,
             has_biases=True, num_layers=2, bidirectional=True, batch_first=False)
    c = cost(n)
    steps = 5 * 2
    # layer 0 (per direction): 2 * 128 * (16 + 32) per step; layer 1: 2 * 128 * (64 + 32)
    assert c.matrix_flops == 2 * steps * (2 * 128 * 48 + 2 * 128 * 96)
    # per step and direction: bias adds 2 * 128, cell math 18 * 32
    assert c.vector_flops == 4 * steps * (256 + 18 * 32)
    assert c.weight_bytes == sum(p.nbytes for p in params)


def test_gru_batch_first_and_mkldnn_layer():
    x, h0 = T("fp32", 2, 5, 16), T("fp32", 1, 2, 32)
    w_ih, w_hh = W("fp32", 96, 16), W("fp32", 96, 32)
    n = node("aten.gru", [x, h0, w_ih, w_hh], [T("fp32", 2, 5, 32), h0], n_params=2, has_biases=False,
             num_layers=1, bidirectional=False, batch_first=True)
    c = cost(n)
    assert c.matrix_flops == 10 * 2 * 96 * 48 and c.vector_flops == 10 * 13 * 32
    n = node("aten.mkldnn_rnn_layer", [x, W("fp32", 128, 16), W("fp32", 128, 32), W("fp32", 128), W("fp32", 128),
                                       h0, h0], [T("fp32", 2, 5, 32)], hidden_size=32, batch_first=True,
             has_biases=True)
    c = cost(n)
    assert c.matrix_flops == 10 * 2 * 128 * 48 and c.vector_flops == 10 * (256 + 18 * 32)
