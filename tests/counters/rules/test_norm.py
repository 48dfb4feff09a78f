"""Softmax and normalisation rules (per-element constants from counters.formulas)."""

from __future__ import annotations

import pytest

from graphroof.counters.cost import Cost
from tests.conftest import T, W, node
from tests.counters.rules._family import assert_frontends_agree, paired_members, run

X = T("bf16", 2, 3, 8)   # 48 elements


def cost(n):
    return run(n)


@pytest.mark.parametrize("op", ["aten.softmax", "aten._softmax", "aten._safe_softmax", "aten.log_softmax"])
def test_softmax(op):
    c = cost(node(op, [X], [X], dim=-1))
    assert c.vector_flops == 240          # 5 * 48
    assert c.act_read_bytes == 96 and c.act_write_bytes == 96


def test_layer_norm_affine_and_plain():
    c = cost(node("aten.layer_norm", [X, W("bf16", 8), W("bf16", 8)], [X], normalized_shape=(8,)))
    assert c.vector_flops == 336          # 7 * 48
    assert c.weight_bytes == 32           # gamma + beta, 16 bf16
    assert cost(node("aten.layer_norm", [X, None, None], [X])).vector_flops == 240     # 5 * 48 without affine
    # native_layer_norm also writes mean and rstd [2, 3, 1] fp32
    c = cost(node("aten.native_layer_norm", [X, W("bf16", 8), W("bf16", 8)], [X, T("fp32", 2, 3, 1), T("fp32", 2, 3, 1)]))
    assert c.act_write_bytes == 96 + 24 + 24


def test_rms_norm():
    assert cost(node("aten.rms_norm", [X, W("bf16", 8)], [X])).vector_flops == 192     # 4 * 48
    assert cost(node("aten.rms_norm", [X, None], [X])).vector_flops == 144             # 3 * 48


def test_group_and_instance_norm():
    x = T("fp32", 2, 4, 3, 3)   # 72
    assert cost(node("aten.group_norm", [x, W("fp32", 4), W("fp32", 4)], [x], num_groups=2)).vector_flops == 504
    assert cost(node("aten.instance_norm", [x, None, None, None, None], [x])).vector_flops == 360


def test_batch_norm_eval_uses_running_stats_training_computes_them():
    x = T("fp32", 2, 4, 3, 3)   # 72
    ins = [x, W("fp32", 4), W("fp32", 4), T("fp32", 4, role="const"), T("fp32", 4, role="const")]
    c = cost(node("aten.batch_norm", ins, [x], training=False))
    assert c.vector_flops == 288          # 4 * 72: subtract, scale by rstd, gamma, beta
    assert c.weight_bytes == 4 * 4 * 4   # gamma, beta, running mean and var: 16 fp32
    assert cost(node("aten.batch_norm", ins, [x], training=True)).vector_flops == 504   # 7 * 72
    c = cost(node("aten._native_batch_norm_legit_no_training", ins, [x, T("fp32", 0), T("fp32", 0)]))
    assert c.vector_flops == 288


# -- ONNX keys on literals ----------------------------------------------------------------------------------

def test_onnx_layer_norm_rms_norm_softmax():
    x = T("fp32", 2, 8)
    c = cost(node("onnx.LayerNormalization", [x, W("fp32", 8), W("fp32", 8)], [x], axis=-1))
    assert c == Cost(vector_flops=7 * 16, act_read_bytes=64, weight_bytes=64, act_write_bytes=64)
    # no B: the shift is not computed, 6 per element (as aten.layer_norm without bias)
    assert cost(node("onnx.LayerNormalization", [x, W("fp32", 8)], [x], axis=-1)).vector_flops == 6 * 16
    c = cost(node("onnx.RMSNormalization", [x, W("fp32", 8)], [x], axis=-1))
    assert c == Cost(vector_flops=4 * 16, act_read_bytes=64, weight_bytes=32, act_write_bytes=64)
    c = cost(node("onnx.Softmax", [T("fp32", 4, 10)], [T("fp32", 4, 10)], axis=-1))
    assert c == Cost(vector_flops=5 * 40, act_read_bytes=160, act_write_bytes=160)


def test_onnx_batch_group_instance_norm():
    x, p = T("fp32", 1, 4, 2, 2), W("fp32", 4)
    c = cost(node("onnx.BatchNormalization", [x, p, p, p, p], [x]))
    assert c.vector_flops == 4 * 16 and c.weight_bytes == 4 * 16
    # training_mode: the statistics are computed from the batch, as a layer norm (7)
    assert cost(node("onnx.BatchNormalization", [x, p, p, p, p], [x], training_mode=1)).vector_flops == 7 * 16
    assert cost(node("onnx.InstanceNormalization", [x, p, p], [x])).vector_flops == 7 * 16
    assert cost(node("onnx.GroupNormalization", [x, p, p], [x], num_groups=2)).vector_flops == 7 * 16


def test_ms_skip_layer_norm():
    x, g = T("fp32", 1, 4, 32), W("fp32", 32)
    # LayerNorm (7) + the skip add (1) over 128 elements; with a bias, + 1 more
    assert cost(node("com.microsoft.SkipLayerNormalization", [x, x, g, g], [x])).vector_flops == 8 * 128
    assert cost(node("com.microsoft.SkipLayerNormalization", [x, x, g, g, g], [x])).vector_flops == 9 * 128


def test_embed_layer_norm_reads_rows():
    ids = T("int32", 2, 3)
    n = node("com.microsoft.EmbedLayerNormalization",
             [ids, ids, W("fp32", 1000, 8), W("fp32", 512, 8), W("fp32", 2, 8), W("fp32", 8), W("fp32", 8)],
             [T("fp32", 2, 3, 8), T("int32", 2)])
    c = cost(n)
    # 3 tables summed (2 adds) + LayerNorm (7) on 48 elements; rows: 48 fp32 from each of word and position,
    # and the whole 16-element segment table (smaller than 48)
    assert c.vector_flops == 9 * 48
    assert c.weight_bytes == 48 * 4 * 2 + 16 * 4 + 2 * 8 * 4
    assert c.act_read_bytes == 2 * 6 * 4 and c.act_write_bytes == 48 * 4 + 8


# -- ATen and ONNX keys of one row give the same Cost -------------------------------------------------------

X4 = T("fp32", 2, 4, 3, 3)
_P = W("fp32", 4)


def _norm(*params, **attrs):
    return lambda key: node(key, [X4, *params], [X4], **attrs)


_CASES = {
    "softmax": _norm(dim=-1), "log_softmax": _norm(dim=-1),
    "layer_norm": _norm(W("fp32", 3), W("fp32", 3)),
    "rms_norm": _norm(W("fp32", 3)),
    "group_norm": _norm(_P, _P),
    "instance_norm": _norm(_P, _P),
    "batch_norm": _norm(_P, _P, _P, _P, training=False),
}


@pytest.mark.parametrize("member", paired_members("norm"))
def test_aten_and_onnx_keys_agree(member):
    assert_frontends_agree("norm", member, _CASES)


def test_layer_norm_without_bias_agrees():
    # a norm without shift drops its add in both frontends: 7 - 1 = 6 per element
    a = cost(node("aten.layer_norm", [X4, W("fp32", 3), None], [X4]))
    o = cost(node("onnx.LayerNormalization", [X4, W("fp32", 3)], [X4]))
    assert a == o and a.vector_flops == 6 * 72


def test_lrn_alexnet_layer():
    # AlexNet LRN, X [1,96,55,55] = 290,400 elements, size 5: 5 + 4 = 9 per element -> 2,613,600
    x = T("fp32", 1, 96, 55, 55)
    c = run(node("onnx.LRN", [x], [x], size=5, alpha=1e-4, beta=0.75, bias=1.0))
    assert c == Cost(vector_flops=2_613_600, act_read_bytes=290_400 * 4, act_write_bytes=290_400 * 4)
    assert run(node("onnx.LRN", [T("fp32", 1, 4, 2, 2)], [T("fp32", 1, 4, 2, 2)], size=3)).vector_flops == 16 * 7
