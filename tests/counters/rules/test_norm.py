"""Softmax and normalisation rules (per-element constants from counters.formulas)."""

from __future__ import annotations

import pytest

from graphroof.counters.registry import REGISTRY
from tests.conftest import T, W, node

X = T("bf16", 2, 3, 8)   # 48 elements


def cost(n):
    return REGISTRY.lookup(n.op)(n)


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
