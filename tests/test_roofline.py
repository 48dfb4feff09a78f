"""Roofline pass against hand arithmetic on a round-number device (conftest.round_hw):
matrix bf16 100 TFLOP/s, vector bf16 10 TFLOP/s, 1 TB/s -> matrix ridge point 100 FLOP/B exactly."""

from __future__ import annotations

import pytest

from graphroof import Cost
from graphroof.roofline import combine, compute_dtype, evaluate
from tests.conftest import T, W, node


def test_exactly_at_ridge_point_is_compute_bound_with_equal_times(round_hw):
    # 1e12 FLOPs / 100e12 = 10 ms; 1e10 B / 1e12 B/s = 10 ms; AI = 100 = ridge
    b = evaluate(Cost(matrix_flops=1e12, act_read_bytes=1e10), round_hw, "bf16")
    assert b.t_compute_s == pytest.approx(0.01) and b.t_memory_s == pytest.approx(0.01)
    assert b.t_s == pytest.approx(0.01) and b.intensity == 100
    assert b.bound == "compute"  # tie goes to compute: the op just reaches the flat roof
    assert b.attainable_flops_per_s == pytest.approx(100e12)
    assert round_hw.ridge_point("bf16") == 100


def test_far_memory_side(round_hw):
    # AI = 1e9 / 1e10 = 0.1 FLOP/B: Tm = 1e10/1e12 = 10 ms, Tc = 1e9/1e14 = 10 us
    b = evaluate(Cost(matrix_flops=1e9, act_read_bytes=1e10), round_hw, "bf16")
    assert b.bound == "memory" and b.t_s == pytest.approx(0.01) and b.t_compute_s == pytest.approx(1e-5)
    assert b.attainable_flops_per_s == pytest.approx(0.1 * 1e12)  # AI x bandwidth = 100 GFLOP/s
    # realistic: max(1e-5 / 0.5, 0.01 / 0.8) + 1 us launch = 12.5 ms + 1 us
    assert b.t_realistic_s == pytest.approx(0.0125 + 1e-6)


def test_far_compute_side_and_vector_peak(round_hw):
    # AI = 1e13 / 1e8 = 1e5: Tc = 1e13/1e14 = 100 ms, Tm = 1e8/1e12 = 0.1 ms
    b = evaluate(Cost(matrix_flops=1e13, weight_bytes=1e8), round_hw, "bf16")
    assert b.bound == "compute" and b.t_s == pytest.approx(0.1) and b.peak_used == "matrix.bf16"
    assert b.attainable_flops_per_s == pytest.approx(100e12)
    # vector FLOPs use the vector peak: 1e12 / 10e12 = 100 ms
    v = evaluate(Cost(vector_flops=1e12, act_read_bytes=1), round_hw, "bf16")
    assert v.t_compute_s == pytest.approx(0.1) and v.peak_used == "vector.bf16"
    # mixed: 1e12/1e14 + 1e11/1e13 = 10 ms + 10 ms = 20 ms; blended peak = 1.1e12 / 0.02 = 55 TFLOP/s
    m = evaluate(Cost(matrix_flops=1e12, vector_flops=1e11), round_hw, "bf16")
    assert m.t_compute_s == pytest.approx(0.02) and m.peak_flops_per_s == pytest.approx(55e12)
    assert m.peak_used == "matrix.bf16+vector.bf16"


def test_dtype_fallback_and_network(round_hw):
    # no fp8 in the profile: falls back to bf16's peak
    assert evaluate(Cost(matrix_flops=1e12), round_hw, "fp8_e4m3").peak_used == "matrix.bf16"
    assert evaluate(Cost(matrix_flops=1e12), round_hw, "fp32").t_compute_s == pytest.approx(0.02)  # 1e12/50e12
    # 1e9 net bytes over 100 GB/s = 10 ms, network-bound
    n = evaluate(Cost(net_bytes=1e9, act_read_bytes=1e6), round_hw, "bf16")
    assert n.bound == "network" and n.t_s == pytest.approx(0.01)


def test_free_op_has_no_time_and_no_launch(round_hw):
    b = evaluate(Cost(), round_hw, "bf16")
    assert b.t_s == 0 and b.t_realistic_s == 0 and b.bound == "memory"


def test_totals_lower_upper_realistic(round_hw):
    a = evaluate(Cost(matrix_flops=1e12, act_read_bytes=5e9), round_hw, "bf16")   # Tc 10 ms, Tm 5 ms
    b = evaluate(Cost(matrix_flops=1e11, act_read_bytes=2e10), round_hw, "bf16")  # Tc 1 ms, Tm 20 ms
    t = combine([a, b], Cost(), round_hw)
    assert t.t_lower_s == pytest.approx(0.03)      # 10 + 20 ms
    assert t.t_upper_s == pytest.approx(0.036)     # 10 + 5 + 1 + 20 ms
    # realistic: max(10/0.5, 5/0.8)=20 ms + 1us ; max(1/0.5, 20/0.8)=25 ms + 1 us
    assert t.t_realistic_s == pytest.approx(0.045 + 2e-6)
    assert t.bound == "memory"                     # Σ Tc 11 ms < Σ Tm 25 ms


def test_compute_dtype_activation_decides():
    # int8 weights with bf16 activations compute in bf16
    assert compute_dtype(node("x", [T("bf16", 4, 8), W("int8", 8, 8)], [T("bf16", 4, 8)])) == "bf16"
    # int8 x int8 (activation int8, weight int8, fp32 scale as weight) -> int8 peak
    assert compute_dtype(node("x", [T("int8", 4, 8), W("int8", 8, 8), W("fp32", 1)], [T("int32", 4, 8)])) == "int8"
    # integer index inputs do not set the peak: float wins
    assert compute_dtype(node("x", [T("int64", 4), T("fp16", 4)], [T("fp16", 4)])) == "fp16"
    assert compute_dtype(node("x", [], [], compute_dtype="fp8")) == "fp8"
