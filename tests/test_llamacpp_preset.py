"""The ``llama.cpp`` runtime preset: ggml's matrix-vector decode kernels (graphroof.timing.gemm_plan.gemv_time_s),
the preset's keys, and its rows of ``graphroof validate`` (data/llamacpp_tg.csv) priced as the CLI prices them."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from graphroof.errors import InputError
from graphroof.fuse import get_runtime
from graphroof.fuse.preset_file import preset_fields
from graphroof.hardware import load_hardware
from graphroof.timing.gemm_plan import GemmPlan, gemv_time_s


def test_gemv_time_is_bytes_at_the_smaller_of_two_rates():
    a100 = load_hardware("a100-80gb-sxm")
    lat = a100.timing.gemm_latency_s
    plan = GemmPlan("fp16", gemv_sm_bw=10e9, gemv_eff=0.95, gemv_rows=8)
    # A100 SXM: 108 SMs x 10 GB/s = 1.08e12 B/s < 2.039e12 x 0.95 = 1.937e12: the bytes in flight bind;
    # 1e8 B / 1.08e12 B/s = 92.59 us, plus the GEMM's fixed time
    assert float(gemv_time_s(plan, 1, 1e8, a100)) == pytest.approx(lat + 1e8 / 1.08e12)
    # an RTX 3090 (82 SMs, 936.2 GB/s): 82 x 10 GB/s = 820 GB/s < 936.2 x 0.95 = 889.4 GB/s: still the SMs
    r3090 = load_hardware("rtx-3090-24gb")
    assert float(gemv_time_s(plan, 1, 1e8, r3090)) == pytest.approx(r3090.timing.gemm_latency_s + 1e8 / 820e9)
    # an RTX 4090 (128 SMs: 1.28 TB/s in flight) streams at 1008 GB/s x 0.95 = 957.6 GB/s
    r4090 = load_hardware("rtx-4090-24gb")
    want = r4090.timing.gemm_latency_s + 1e8 / (r4090.mem_bw_bytes_per_s * 0.95)
    assert r4090.mem_bw_bytes_per_s * 0.95 < 128 * 10e9
    assert float(gemv_time_s(plan, 8, 1e8, r4090)) == pytest.approx(want)
    # more rows than the mat-vec kernel takes, or a runtime without one: not priced here (NaN: the tile model)
    assert math.isnan(float(gemv_time_s(plan, 9, 1e8, a100)))
    assert math.isnan(float(gemv_time_s(GemmPlan("fp16"), 1, 1e8, a100)))
    t = gemv_time_s(plan, np.array([1, 4, 16]), np.array([1e8, 1e8, 1e8]), a100)
    assert t[0] == t[1] and math.isnan(t[2])


def test_preset_reads_and_checks_its_rates():
    rt = get_runtime("llama.cpp")
    assert get_runtime("llamacpp") is rt or get_runtime("llamacpp").name == "llama.cpp"
    assert rt.gemv_max_rows == 8 and rt.gemv_float_max_rows == 1 and 0 < rt.gemv_mem_bw_efficiency <= 1
    assert 0 < rt.gemv_sm_bw_bytes_per_s < rt.gemv_quant_sm_bw_bytes_per_s
    assert not rt.overlap_launch and not rt.cuda_graphs and not rt.gqa_shared_kv
    assert rt.weight_only_group_size == 32
    for key in ("gemv_sm_bw_bytes_per_s", "gemv_mem_bw_efficiency", "gemv_quant_sm_bw_bytes_per_s"):
        assert "fitted" in rt.sources[key]
    with pytest.raises(InputError, match="gemv_sm_bw_bytes_per_s must be a rate") as e:
        preset_fields({"name": "x", "kernels": {"gemv_sm_bw_bytes_per_s": -1.0}}, source="x.toml")
    assert "\n" not in str(e.value)
    with pytest.raises(InputError, match="gemv_mem_bw_efficiency must be a share in"):
        preset_fields({"name": "x", "kernels": {"gemv_mem_bw_efficiency": 1.5}}, source="x.toml")
    # a preset based on this one can switch the mat-vec kernels off
    assert preset_fields({"name": "x", "kernels": {"gemv_max_rows": 0}}, source="x.toml")["gemv_max_rows"] == 0


def test_quantized_weights_take_the_mmvq_rate():
    from graphroof.graph import Role, TensorSpec
    from graphroof.timing.gemm_plan import gemm_plan

    class Node:
        name, op, attrs, outputs = "g", "aten.mm", {}, ()

        def __init__(self, wdtype: str) -> None:
            self.inputs = (TensorSpec((1, 4096), "fp16", Role.ACTIVATION), TensorSpec((4096, 4096), wdtype, Role.WEIGHT))

    rt = get_runtime("llama.cpp")
    a100 = load_hardware("a100-80gb-sxm")
    f16 = gemm_plan(Node("fp16"), "fp16", a100, rt)
    q4 = gemm_plan(Node("int4"), "fp16", a100, rt)
    assert f16.bits is None and f16.gemv_sm_bw == rt.gemv_sm_bw_bytes_per_s and f16.gemv_rows == 1
    assert q4.bits == 4 and q4.group == 32 and q4.gemv_sm_bw == rt.gemv_quant_sm_bw_bytes_per_s and q4.gemv_rows == 8
    # F16 weights take ggml's dmmv at one row only (cuBLAS above): 2 rows are the tile model, not the mat-vec
    from graphroof.timing.gemm_plan import gemv_rows_of

    assert bool(gemv_rows_of(f16, 1, a100)) and not bool(gemv_rows_of(f16, 2, a100))
    # an MoE layer runs each visited expert's rows as a mat-vec of its own: 16 rows over 8 experts are 2 each
    assert bool(gemv_rows_of(q4, 16, a100, groups=8)) and not bool(gemv_rows_of(q4, 16, a100))


ROWS = ("llamacpp_tg.csv:66",)  # A100 SXM 8B Q4_K_M tg 512: the int4 mat-vec at its per-SM rate


def test_validate_rows_equal_the_cli(capsys):
    from graphroof.cli import main
    from graphroof.validate import validate

    r = validate("llamacpp", only=ROWS)
    rows = [x for x in r.rows if x.scored]
    assert len(rows) == len(ROWS)
    for row in rows:
        cmd = row.command.split(" -f json")[0].split()
        assert cmd[:2] == ["graphroof", "llm"]
        assert main([*cmd[1:], "-f", "json"]) == 0
        fig = json.loads(capsys.readouterr().out)["configs"][0]["tpot_s"]
        assert 1.0 / fig == pytest.approx(row.predicted, rel=1e-9)  # tokens/s = 1 / TPOT
        # these rows are within the dataset's spread (median 5.1%, worst 25.6% over the 88 rows)
        assert row.error is not None and abs(row.error) < 0.26


def test_vectorised_and_per_op_models_price_the_mat_vec_alike():
    """gemm_times (the llm engine's tables) equals gemm_kernel_time (analyze's per-op model) under llama.cpp: an
    int4 GEMM at 1 and 8 rows is the mat-vec (packed weights and scales, no dequant kernel), at 9 and 512 rows the
    dequantise-then-cuBLAS pair; an F16 one (plan of 8 rows here) the F16 mat-vec."""
    from graphroof.counters.cost import Cost
    from graphroof.timing.gemm_plan import gemm_kernel_time
    from graphroof.timing.vectorized import gemm_times

    hw = load_hardware("a100-80gb-sxm")
    n, k = 4096, 14336
    for bits, plan in ((4, GemmPlan("fp16", bits=4, group=32, variant="dequant_then_gemm", gemv_sm_bw=12.5e9,
                                    gemv_eff=0.95, gemv_rows=8)),
                       (16, GemmPlan("fp16", gemv_sm_bw=10e9, gemv_eff=0.95, gemv_rows=8))):
        ms = np.array([1, 8, 9, 512])
        wb = np.full(4, k * n * bits / 8)
        vt, _ = gemm_times(ms, np.full(4, n), np.full(4, k), hw, "fp16", wb, plan)
        for i, m in enumerate(ms):
            cost = Cost(matrix_flops=2.0 * m * n * k, weight_bytes=k * n * bits / 8, act_read_bytes=2.0 * m * k,
                        act_write_bytes=2.0 * m * n)
            assert vt[i] == pytest.approx(gemm_kernel_time(plan, (int(m), n, k), cost, hw), rel=1e-9)
        if bits == 4:
            # 1 row: 4 bits + 4 bytes of scale and minimum per 32 weights = 5 bits a weight, 36.7 MB, at the MMVQ
            # kernel's 108 SMs x 12.5 GB/s = 1.35 TB/s (< 2.039 TB/s x 0.95): 27.2 us + the GEMM's fixed time
            packed = k * n * 4 / 8 + 4 * k * n / 32
            want = hw.timing.gemm_latency_s + (packed + 2 * k + 2 * n) / 1.35e12
            assert vt[0] == pytest.approx(want)
            assert vt[2] > vt[1]  # 9 rows: the dequant kernel writes 2 bytes a weight before the GEMM


def test_moe_experts_run_as_mat_vecs_in_both_models():
    """An MoE grouped GEMM under llama.cpp (ggml_mul_mat_id: each visited expert's rows a mat-vec of its own): 16
    rows over the 8 experts of a step are 2 rows each, the mat-vec, in the per-op and the vectorised model alike."""
    from graphroof.counters.cost import Cost
    from graphroof.timing.gemm_plan import gemm_kernel_time
    from graphroof.timing.vectorized import gemm_times

    hw = load_hardware("rtx-3090-24gb")
    n, k, experts = 14336, 4096, 8
    one = k * n * 4 / 8  # one expert's packed int4 weights
    plan = GemmPlan("fp16", bits=4, group=32, variant="dequant_then_gemm", experts=experts, expert_bytes=one,
                    grouped=False, gemv_sm_bw=12.5e9, gemv_eff=0.95, gemv_rows=8)  # moe_grouped_gemm = false
    m = 16
    cost = Cost(matrix_flops=2.0 * m * n * k, weight_bytes=experts * one, act_read_bytes=2.0 * m * k,
                act_write_bytes=2.0 * m * n)
    t = gemm_kernel_time(plan, (m, n, k), cost, hw)
    vt, _ = gemm_times(np.array([m]), np.array([n]), np.array([k]), hw, "fp16", np.array([experts * one]), plan)
    assert vt[0] == pytest.approx(t, rel=1e-9)
    # 8 experts' packed weights and scales (5 bits a weight) at min(936.2 GB/s x 0.95 = 889.4 GB/s, 82 SMs x
    # 12.5 GB/s = 1.025 TB/s): the bandwidth share binds on the RTX 3090; one GEMM latency per expert (8 kernels)
    streamed = experts * (one + 4 * k * n / 32) + 2.0 * m * k + 2.0 * m * n
    rate = min(hw.mem_bw_bytes_per_s * 0.95, 82 * 12.5e9)
    assert t == pytest.approx(hw.timing.gemm_latency_s * experts + streamed / rate, rel=1e-6)


def test_a_gguf_type_name_says_which_dtype_prices_it():
    from graphroof.llm.quant import parse_quant_dtype

    for name in ("Q4_K_M", "q8_0", "IQ4_XS"):
        with pytest.raises(InputError, match="GGUF type is not a dtype: price Q4_. / IQ4_. as int4 and Q8_0 as int8") as e:
            parse_quant_dtype(name, "--weights")
        assert "\n" not in str(e.value)
    with pytest.raises(InputError) as e:
        parse_quant_dtype("int3", "--weights")
    assert "GGUF" not in str(e.value)
