"""What a GEMM kernel is priced as: the shape a tensor-parallel shard runs, and the dtype of the D it writes.

* TP (graphroof.fuse.classify.gemm_mnk on ops marked by graphroof.llm.tp): op shapes stay unsharded and the
  counted cost is per device; the tile / wave model needs the device's own (M, N, K): a column-parallel linear
  computes N / world output features over the full K, a row-parallel one the full N over K / world (partial sums).
* D's dtype (graphroof.timing.gemm_plan): an fp8 GEMM writing bf16 (torch._scaled_mm, W8A8 serving) stores 2 bytes
  per output element inside the kernel, overlapped with its loads, not as extra epilogue bytes after it.
"""

from __future__ import annotations

from graphroof.counters.cost import Cost
from graphroof.fuse.classify import gemm_mnk
from graphroof.graph import TensorSpec
from graphroof.hardware import load_hardware
from graphroof.timing.gemm import gemm_time
from graphroof.timing.gemm_plan import gemm_kernel_time, gemm_plan
from tests.conftest import T, W, node

M, HID, QKV = 776, 4096, 12288  # Llama-2-7B: 776 tokens, hidden 4096, fused QKV 3 x 4096 output features


def _linear(out_features: int, in_features: int, world: int, column: bool):
    x, w, y = T("fp16", M, in_features), W("fp16", out_features, in_features), T("fp16", M, out_features)
    shard = {"world_size": world, "replicated_inputs": (0,) if column else (),
             "replicated_outputs": () if column else (0,)}
    return node("aten.linear", [x, w], [y], tp_shard=shard)


def test_column_parallel_shard_splits_n_not_k():
    # per device: 2 * 776 * 12288 * 4096 / 8 FLOPs = 2 * 776 * 1536 * 4096, i.e. N = 12288 / 8 = 1536, K = 4096
    per_dev = Cost(matrix_flops=2 * M * QKV * HID / 8)
    assert gemm_mnk(_linear(QKV, HID, 8, column=True), per_dev) == (M, 1536, 4096)


def test_row_parallel_shard_splits_k():
    # o_proj: 2 * 776 * 4096 * 4096 / 8 per device, the full N = 4096 over K = 4096 / 8 = 512
    per_dev = Cost(matrix_flops=2 * M * HID * HID / 8)
    assert gemm_mnk(_linear(HID, HID, 8, column=False), per_dev) == (M, 4096, 512)


def test_unsharded_linear_unchanged():
    full = Cost(matrix_flops=2 * M * QKV * HID)
    x, w, y = T("fp16", M, HID), W("fp16", QKV, HID), T("fp16", M, QKV)
    assert gemm_mnk(node("aten.linear", [x, w], [y]), full) == (M, QKV, HID)


def test_column_shard_tiles_as_the_device_runs_it():
    # H100 (128 x 128 tiles as N tiles): the shard's 1536 features are 12 column tiles of 128, not the 96 the
    # unsharded N = 12288 would give; same FLOPs, fewer tiles
    hw = load_hardware("h100-sxm")
    dev = gemm_time(M, 1536, 4096, hw, "fp16")
    wrong = gemm_time(M, 12288, 512, hw, "fp16")
    assert dev.flops == wrong.flops
    assert dev.tiles < wrong.tiles and dev.tiles % 12 == 0


def test_fp8_gemm_writes_bf16_inside_the_kernel():
    # B200 MAMF best fp8 shape (kernels.csv row MLENG_MAMF L372): M 15360, N 4096, K 3072, bf16 out
    # bytes = A 15360 * 3072 * 1 + B 3072 * 4096 * 1 + D 15360 * 4096 * 2
    #       = 47,185,920 + 12,582,912 + 125,829,120 = 185,597,952
    m, n, k = 15360, 4096, 3072
    hw = load_hardware("b200-sxm")
    mm = node("aten.mm", [TensorSpec((m, k), "fp8"), TensorSpec((k, n), "fp8")], [TensorSpec((m, n), "bf16")])
    plan = gemm_plan(mm, "fp8", hw)
    assert plan.dtype == "fp8" and plan.out_dtype == "bf16"
    cost = Cost(matrix_flops=2 * m * n * k, act_read_bytes=m * k + k * n, act_write_bytes=2 * m * n)
    g = gemm_time(m, n, k, hw, "fp8", out_dtype="bf16")
    assert g.bytes == 185_597_952
    # no epilogue bytes left over: the kernel is the GEMM itself (before: D counted as 1 byte, the other
    # 62,914,560 bytes streamed after it at 8e12 * 0.914 B/s, +8.6 us)
    assert gemm_kernel_time(plan, (m, n, k), cost, hw) == g.t_s
    # an fp16 GEMM writing fp16 keeps no out dtype (the compute dtype's bytes)
    mm16 = node("aten.mm", [TensorSpec((m, k), "fp16"), TensorSpec((k, n), "fp16")], [TensorSpec((m, n), "fp16")])
    assert gemm_plan(mm16, "fp16", hw).out_dtype == ""


def test_vectorized_prices_the_out_dtype_as_the_scalar_model():
    import numpy as np

    from graphroof.timing.gemm_plan import GemmPlan
    from graphroof.timing.vectorized import gemm_times

    hw = load_hardware("h100-sxm")
    plan = GemmPlan("fp8", out_dtype="bf16")
    m, n, k = np.array([1, 256, 777, 4096]), np.array([4096, 8192, 14336, 1024]), np.array([4096, 8192, 1024, 4096])
    vec, _ = gemm_times(m, n, k, hw, "fp8", None, plan)
    for j in range(len(m)):
        a, b, c = int(m[j]), int(n[j]), int(k[j])
        cost = Cost(matrix_flops=2 * a * b * c, weight_bytes=b * c, act_read_bytes=a * c, act_write_bytes=2 * a * b)
        assert abs(vec[j] / gemm_kernel_time(plan, (a, b, c), cost, hw) - 1) < 1e-12


def test_replicated_weight_keeps_the_full_n():
    # a linear outside the TP plan fed by a sharded activation: its weight is replicated (not split), so the
    # device computes every output feature; N stays 12288 and K = 2 * 776 * 12288 * 4096 / 8 / (2 * 776 * 12288)
    x, w, y = T("fp16", M, HID), W("fp16", QKV, HID), T("fp16", M, QKV)
    lin = node("aten.linear", [x, w], [y],
               tp_shard={"world_size": 8, "replicated_inputs": (1,), "replicated_outputs": ()})
    assert gemm_mnk(lin, Cost(matrix_flops=2 * M * QKV * HID / 8)) == (M, QKV, 512)
