"""Kernels priced end to end: precision policy, kernel-level realistic time and its parts."""

from __future__ import annotations

import pytest

from graphroof.api import count_graph, resolve_hardware
from graphroof.graph import BOUND
from graphroof.timing import gemm_time, stream_time
from graphroof.timing.kernel import stream_kind
from tests.fuse.test_fuse import G, act, rmsnorm, wt


def test_fp32_matmul_uses_tf32_unless_highest():
    a100 = resolve_hardware("a100")
    assert a100.peak("matrix", "fp32") == (156e12, "matrix.tf32")  # A100 dense TF32: 156 TFLOP/s
    highest = resolve_hardware("a100", matmul_precision="highest")
    assert highest.peak("matrix", "fp32") == (19.5e12, "vector.fp32")  # fp32 on CUDA cores
    assert resolve_hardware("a100").peak("matrix", "tf32")[1] == "matrix.tf32"
    # a device without TF32 units keeps fp32 math under "high": one rule for every vendor
    t4 = resolve_hardware("t4")
    assert t4.peak("matrix", "fp32")[1] != "matrix.tf32"


def _mlp_block():
    b = G()
    T, H = 256, 1024
    b.op("mm", "aten.mm", [("x", act(T, H)), ("W", wt(H, H))], [("h", act(T, H))])
    b.op("res", "aten.add", [("h", act(T, H)), ("r", act(T, H))], [("s", act(T, H))])
    return b.g


def test_gemm_kernel_priced_by_the_tile_model_and_parts_add_up():
    hw = resolve_hardware("a100")
    a = count_graph(_mlp_block(), hw, runtime="compiled")
    assert len(a.timed_graph) == 1  # the residual add is the GEMM's epilogue
    k = next(iter(a.timed_graph.ops()))
    b = a.timed_graph.get(k.name, BOUND)
    assert b.time_model == "gemm"
    g = gemm_time(256, 1024, 1024, hw, "fp16", weight_bytes=1024 * 1024 * 2)
    # the epilogue's residual operand (256 * 1024 * 2 = 524288 B) streams at the GEMM's bandwidth on top
    extra = 256 * 1024 * 2
    assert b.t_realistic_s - b.t_launch_s == pytest.approx(g.t_s + extra / (hw.mem_bw_bytes_per_s
                                                                        * hw.timing.gemm_mem_bw_efficiency))
    p = a.time_parts()
    assert p["time_roofline_s"] + p["time_derating_s"] + p["time_launch_s"] == pytest.approx(p["time_realistic_s"])
    assert p["time_launch_s"] == hw.timing.launch_overhead_s and p["n_kernels"] == 1


def test_norm_kernel_streams_at_the_norm_bandwidth():
    hw = resolve_hardware("h100")
    b = G()
    rmsnorm(b, "x", "y")
    a = count_graph(b.g, hw, runtime="compiled")
    (k,) = list(a.timed_graph.ops())
    bd = a.timed_graph.get(k.name, BOUND)
    assert stream_kind(k.attrs["op_keys"]) == "norm" and bd.time_model == "stream:norm"
    nbytes = a.timed_graph.get(k.name, "cost").bytes
    assert bd.t_realistic_s - bd.t_launch_s == pytest.approx(stream_time(nbytes, hw, "norm").t_s)


def test_ideal_profile_has_no_kernel_model_or_launch():
    hw = resolve_hardware("a100", ideal=True)
    a = count_graph(_mlp_block(), hw, runtime="compiled")
    assert a.totals.t_realistic_s == pytest.approx(a.totals.t_lower_s)


def test_eager_runtime_equals_the_op_graph():
    hw = resolve_hardware("a100")
    a = count_graph(_mlp_block(), hw, runtime="eager")
    assert a.totals.t_realistic_s == pytest.approx(a.eager_totals.t_realistic_s)
    assert a.totals.cost == a.eager_totals.cost


def test_stream_kinds_from_op_keys():
    assert stream_kind(["aten.silu", "aten.mul"]) == "act_mul"
    assert stream_kind(["aten.mul", "aten.neg", "aten.cat", "aten.add"]) == "rotary"
    assert stream_kind(["aten.pow", "aten.mean", "aten.rsqrt", "aten.mul"]) == "norm"
    assert stream_kind(["aten.embedding"]) == "gather"
    assert stream_kind(["aten.add"]) == "elementwise"
