"""Matmul family (ATen and ONNX keys) against hand arithmetic (2 FLOPs per multiply-add), on literals."""

from __future__ import annotations

import pytest

from graphroof.counters.cost import Cost
from graphroof.counters.formulas import einsum_flops
from graphroof.counters.rules.matmul import matmul_dims
from tests.conftest import T, W, node
from tests.counters.rules._family import assert_frontends_agree, paired_members, run


def cost(n):
    return run(n)


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
    ("ij->j", [(3, 4)], (0, 8)),                          # a reduction: 4 sums of 3 = 8 adds (12 - 4)
    ("ij->", [(3, 4)], (0, 11)),                          # full sum: 11 adds
    ("ii->i", [(4, 4)], (0, 0)),                          # a diagonal: nothing summed
    ("ij->ji", [(3, 4)], (0, 0)),                         # a transpose computes nothing
    # left to right: (ij,jk->ik) 2*2*3*4 = 48, then (ik,kl->il) 2*2*4*5 = 80
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], (128, 0)),
])
def test_einsum(eq, shapes, expected):
    assert einsum_flops(eq, shapes) == expected


def test_einsum_rule_reads_equation_attr():
    n = node("aten.einsum", [T("fp32", 4, 5), T("fp32", 5, 6)], [T("fp32", 4, 6)], equation="ij,jk->ik")
    assert cost(n).matrix_flops == 240


def test_einsum_three_operands_left_to_right_in_both_frontends():
    # ij,jk->ik: 2 * 8*16*32 = 8,192, then ik,kl->il: 2 * 8*32*4 = 2,048 -> 10,240 matrix FLOPs (torch.einsum
    # without opt_einsum and onnxruntime contract left to right; the old ONNX count 2 * 2 * 8*16*32*4 = 65,536
    # multiplied every index of all three operands as if in one step)
    ins, out = [T("fp32", 8, 16), T("fp32", 16, 32), T("fp32", 32, 4)], [T("fp32", 8, 4)]
    a = cost(node("aten.einsum", ins, out, equation="ij,jk,kl->il"))
    o = cost(node("onnx.Einsum", ins, out, equation="ij,jk,kl->il"))
    assert a == o and a.matrix_flops == 10_240 and not a.estimated
    # bytes: the three operands (128 + 512 + 128) * 4 read, 32 * 4 written
    assert a.act_read_bytes == 768 * 4 and a.act_write_bytes == 128


def test_matmul_dims():
    assert matmul_dims((5,), (5, 3)) == (1, 1, 3, 5)             # vector @ matrix
    assert matmul_dims((2, 1, 4, 5), (3, 5, 6)) == (6, 4, 6, 5)  # broadcast batch 2 x 3


# -- ONNX keys on literals ----------------------------------------------------------------------------------

def test_onnx_matmul_activation_times_weight_and_broadcast():
    c = cost(node("onnx.MatMul", [T("fp32", 2, 3, 4), W("fp32", 4, 5)], [T("fp32", 2, 3, 5)]))
    # 2 * batch 2 * m 3 * n 5 * k 4 = 240; A 24 fp32, W 20 fp32, Y 30 fp32
    assert c == Cost(matrix_flops=240, act_read_bytes=96, weight_bytes=80, act_write_bytes=120)
    # [3,1,4,8] @ [2,8,5] -> [3,2,4,5]: batch 6, 2 * 6 * 4 * 5 * 8 = 1920
    c = cost(node("onnx.MatMul", [T("fp16", 3, 1, 4, 8), T("fp16", 2, 8, 5)], [T("fp16", 3, 2, 4, 5)]))
    assert c.matrix_flops == 1920 and c.act_read_bytes == (96 + 80) * 2 and c.act_write_bytes == 120 * 2


def test_onnx_gemm_trans_b_with_bias_and_scales():
    ins = [T("fp32", 3, 4), W("fp32", 5, 4), W("fp32", 5)]
    c = cost(node("onnx.Gemm", ins, [T("fp32", 3, 5)], transB=1))
    # 2 * 3 * 5 * 4 = 120; the bias add over Y [3,5] = 15; W and C are weights
    assert c == Cost(matrix_flops=120, vector_flops=15, weight_bytes=(20 + 5) * 4, act_read_bytes=48,
                     act_write_bytes=60)
    # alpha = 2 and beta = 3: the product and C each scaled, one multiply per output element each: 15 + 15 + 15
    assert cost(node("onnx.Gemm", ins, [T("fp32", 3, 5)], transB=1, alpha=2.0, beta=3.0)).vector_flops == 45


def test_onnx_fused_matmul():
    n = node("com.microsoft.FusedMatMul", [T("fp32", 2, 4, 3), T("fp32", 2, 4, 5)], [T("fp32", 2, 3, 5)], transA=1)
    assert cost(n).matrix_flops == 2 * 2 * 3 * 5 * 4


@pytest.mark.parametrize("eq, shapes, mat, vec", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)], 2 * 2 * 3 * 4 * 5, 0),   # batched matmul: 240
    ("ij->", [(3, 4)], 0, 12 - 1),                                      # full sum: 11 adds
    ("i,j->ij", [(3,), (4,)], 0, 12),                                   # outer product: 12 multiplies
    ("...ij,...jk", [(2, 3, 4), (2, 4, 5)], 240, 0),                    # ellipsis, implicit output
])
def test_onnx_einsum(eq, shapes, mat, vec):
    c = cost(node("onnx.Einsum", [T("fp32", *s) for s in shapes], [T("fp32", 1)], equation=eq))
    assert (c.matrix_flops, c.vector_flops) == (mat, vec)


# -- ATen and ONNX keys of one row give the same Cost -------------------------------------------------------

def test_det_by_lu():
    # X [2,4,4]: LU steps j = 1..3 update 3^2 + 2^2 + 1^2 = 14 trailing entries (a MAC each): 2 * 14 = 28 matrix;
    # divides 3 + 2 + 1 = 6 and the diagonal product 3 multiplies: 9 vector; two matrices: 56, 18
    c = run(node("onnx.Det", [T("fp32", 2, 4, 4)], [T("fp32", 2)]))
    assert c == Cost(matrix_flops=56, vector_flops=18, act_read_bytes=128, act_write_bytes=8)
    assert run(node("onnx.Det", [T("fp32", 1, 1)], [T("fp32")])).matrix_flops == 0   # 1x1: the entry itself


_CASES = {
    "det": lambda key: node(key, [T("fp32", 3, 5, 5)], [T("fp32", 3)]),
    "matmul": (node("aten.matmul", [T("fp32", 3, 1, 4, 8), T("fp32", 2, 8, 5)], [T("fp32", 3, 2, 4, 5)]),
               node("onnx.MatMul", [T("fp32", 3, 1, 4, 8), T("fp32", 2, 8, 5)], [T("fp32", 3, 2, 4, 5)])),
    # beta * C + alpha * (A @ B) with C [5], A [3, 4], B [4, 5], alpha 2, beta 3 (ATen inputs: C, A, B)
    "gemm": (node("aten.addmm", [W("fp32", 5), T("fp32", 3, 4), W("fp32", 4, 5)], [T("fp32", 3, 5)],
                  alpha=2.0, beta=3.0),
             node("onnx.Gemm", [T("fp32", 3, 4), W("fp32", 4, 5), W("fp32", 5)], [T("fp32", 3, 5)],
                  alpha=2.0, beta=3.0)),
    "einsum": lambda key: node(key, [T("fp32", 8, 16), T("fp32", 16, 32), T("fp32", 32, 4)], [T("fp32", 8, 4)],
                               equation="ij,jk,kl->il"),
}


@pytest.mark.parametrize("member", paired_members("matmul"))
def test_aten_and_onnx_keys_agree(member):
    assert_frontends_agree("matmul", member, _CASES)
