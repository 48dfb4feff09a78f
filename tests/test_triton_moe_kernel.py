"""vLLM / SGLang's Triton fused-MoE kernel (``moe_grouped_gemm = "triton"``, kernel family ``triton_moe``,
graphroof.timing.moe): the tuned tile of benchmark_moe.py's search space with the least compute time, whole waves
(a plain grid), the profile's overlap exponent, each tile at ``triton_mma_efficiency`` of the cuBLAS rate; the
token gather inside the kernel's A loads (graphroof.fuse.group); and the ``fused_moe`` validation rows priced
through the ``graphroof llm`` / ``analyze`` path."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from graphroof.cli import main
from graphroof.fuse.runtimes import get_runtime
from graphroof.hardware import load_hardware
from graphroof.timing import gemm_time
from graphroof.timing.gemm_plan import gemm_plan
from graphroof.timing.moe import TRITON_BLOCK_M, TRITON_BLOCK_N, grouped_gemm_on
from graphroof.validate import validate
from graphroof.validate.data import DATA_DIR
from graphroof.validate.moe import config_name, moe_block_kernel

ONE_LAYER = DATA_DIR / "models" / "moe-e128-h2048-n768-k8" / "config.json"


def test_search_space_is_benchmark_moe_py():
    # vLLM benchmarks/kernels/benchmark_moe.py get_configs_compute_bound: block_m_range [16, 32, 64, 128, 256],
    # block_n_range [32, 64, 128, 256]
    assert TRITON_BLOCK_M == (16, 32, 64, 128, 256) and TRITON_BLOCK_N == (32, 64, 128, 256)


def test_tile_waves_and_rate_by_hand():
    hw = load_hardware("h100-sxm")
    t = hw.timing
    assert t.triton_mma_efficiency == 0.70 and t.gemm_matrix_efficiency == 0.902 and t.gemm_overlap_exponent == 3.0
    # 4 experts x 256 rows each (split evenly), N = 33 x 256 = 8448, K = 4096, bf16
    g = gemm_time(1024, 8448, 4096, hw, "bf16", groups=4.0, library="triton_moe", balanced=True)
    # L2 starvation: I_l2 = 989.4e12 / 20.6e12 = 48.03 FLOP/B; a tile is starved below it:
    #   64 x 256: 2*64*256 / (320 * 2) = 51.2 (fed); 64 x 128: 42.7, 32 x 256: 28.4 (starved)
    # every fed tile does the same whole-wave work here (256 x 256: 4 x 33 = 132 tiles, 1 wave; 128 x 256: 264, 2;
    # 64 x 256: 528, 4 waves of a quarter the work): the first in the search order with the least time, 64 x 256
    assert (g.tile, g.tiles, g.waves, g.split_k) == ((64, 256), 528, 4, 1)
    rate_sm = 7.945e14 * 0.902 * 0.70 / 132
    tc = 4 * 2 * 64 * 256 * 4096 / rate_sm
    assert g.t_compute_s == pytest.approx(tc, rel=1e-12)
    # bytes: A 1024 x 4096 x 2 + C 1024 x 8448 x 2 + B (one expert's, batch 1: no weight_bytes given) 4096 x 8448 x 2
    nbytes = 1024 * 4096 * 2 + 1024 * 8448 * 2 + 4096 * 8448 * 2
    tm = nbytes / (3.35e12 * 0.886)
    assert g.t_memory_s == pytest.approx(tm, rel=1e-9)
    # loads overlap the math as in a whole-wave kernel: the p-norm, p = 3; plus one GEMM's fixed time
    assert g.t_s == pytest.approx((tc ** 3 + tm ** 3) ** (1 / 3) + 4.71e-6, rel=1e-9)


def test_whole_waves_no_stream_k():
    hw = load_hardware("h100-sxm")
    # M 256, K 8192, one group; N = 132 x 256: 132 tiles of 256 x 256, one whole wave (any fed tile: the same work)
    one = gemm_time(256, 256 * 132, 8192, hw, "bf16", groups=1.0, library="triton_moe", balanced=True)
    # N = 133 x 256: 256 x 256 -> 133 tiles, 2 waves; 128 x 256 -> 266, 3 waves of half the work (1.5); 64 x 256 or
    # 128 x 128 -> 532, 5 waves of a quarter (1.25, the least; 64 x 128 is starved: 42.7 < 48.03 FLOP/B); stream-K
    # would take 133 / 132 = 1.008
    more = gemm_time(256, 256 * 133, 8192, hw, "bf16", groups=1.0, library="triton_moe", balanced=True)
    assert more.t_compute_s / one.t_compute_s == pytest.approx(1.25, rel=1e-12)


def test_efficiency_one_is_the_cublas_rate_per_tile():
    hw = load_hardware("h100-sxm")
    full = replace(hw, timing=replace(hw.timing, triton_mma_efficiency=1.0))
    a = gemm_time(1024, 8448, 4096, full, "bf16", groups=4.0, library="triton_moe", balanced=True)
    b = gemm_time(1024, 8448, 4096, hw, "bf16", groups=4.0, library="triton_moe", balanced=True)
    assert b.t_compute_s == pytest.approx(a.t_compute_s / 0.70, rel=1e-12)
    # Ampere / Ada profiles keep the cuBLAS rate (no fit: their cuBLAS also runs mma.sync from cp.async)
    assert load_hardware("a100-80gb-sxm").timing.triton_mma_efficiency == 1.0


def test_plan_picks_the_family_under_triton_presets_only():
    from graphroof.llm import open_source
    from graphroof.llm.engine import Engine, Pricing

    hw = load_hardware("h100-sxm")
    assert grouped_gemm_on("triton", hw) and grouped_gemm_on("triton", load_hardware("mi300x"))
    for preset in ("vllm", "sglang", "serving"):
        assert get_runtime(preset).moe_grouped_gemm == "triton"
    eng = Engine(open_source(str(ONE_LAYER), dtype="bf16"), hw=hw, pricing=Pricing(runtime="vllm"))
    g = eng.step("prefill", 1, 1024).timed_graph
    grouped = [op for op in g.ops() if "aten._grouped_mm" in tuple(op.attrs.get("op_keys") or ())]
    assert len(grouped) == 2
    assert {gemm_plan(op, "bf16", hw, get_runtime("vllm")).library for op in grouped} == {"triton_moe"}
    assert {gemm_plan(op, "bf16", hw, get_runtime("compiled")).library for op in grouped} == {"torch_grouped"}


def test_gather_joins_the_first_grouped_gemm_under_vllm_only():
    from graphroof.llm import open_source
    from graphroof.llm.engine import Engine, Pricing

    src = open_source(str(ONE_LAYER), dtype="bf16")
    t, h, k, n, e = 1024, 2048, 8, 768, 128

    def gate_up(runtime):
        a = Engine(src, hw="h100-sxm", pricing=Pricing(runtime=runtime)).step("prefill", 1, t)
        return next(r for r in a.kernel_rows if r["kind"] == "gemm" and "_grouped_mm" in r["name"]
                    and "_grouped_mm_1" not in r["name"])

    v = gate_up("vllm")
    assert "index" in v["ops"] and v["name"] == "_grouped_mm+1"
    # reads the hidden states once, T x H bf16, not the T k gathered rows; writes T k x 2N
    visited = e * (1 - (1 - k / e) ** t)                 # all 128 (to 1e-27)
    weights = visited * h * 2 * n * 2                    # 128 x 2048 x 1536 x 2 = 805,306,368
    assert v["act_read_bytes"] == pytest.approx(t * h * 2, rel=0.02)   # + the int index (64 kB) and offsets
    assert v["weight_bytes"] == pytest.approx(weights, rel=1e-9)
    assert v["act_write_bytes"] == pytest.approx(t * k * 2 * n * 2, rel=1e-9)
    c = gate_up("compiled")                              # torch._grouped_mm: the gather is a kernel before it
    assert "index" not in c["ops"]
    assert c["act_read_bytes"] == pytest.approx(t * k * h * 2, rel=0.02)


def test_block_kernels_leave_out_the_router_linear():
    assert moe_block_kernel({"scope": "model.layers.0.mlp.experts", "ops": ["_grouped_mm"]})
    assert moe_block_kernel({"scope": "model.layers.0", "ops": ["mul_16", "index_2", "sum_1", "add_8"]})
    assert not moe_block_kernel({"scope": "model.layers.0.mlp.gate", "ops": ["linear_4"]})
    assert not moe_block_kernel({"scope": "model.layers.0", "ops": ["add_6"]})
    assert config_name(8, 4096, 7168, 2) == "moe-e8-h4096-n7168-k2"


def test_every_row_has_its_one_layer_model():
    import csv

    rows = list(csv.DictReader((DATA_DIR / "fused_moe_triton.csv").read_text().splitlines()))
    assert len(rows) == 53
    for r in rows:
        path = DATA_DIR / "models" / config_name(*(int(r[c]) for c in ("experts", "hidden", "n_per_gpu", "top_k")))
        cfg = json.loads((path / "config.json").read_text())
        assert (cfg["num_experts"], cfg["hidden_size"], cfg["moe_intermediate_size"], cfg["num_experts_per_tok"]) \
            == tuple(int(r[c]) for c in ("experts", "hidden", "n_per_gpu", "top_k"))
        assert cfg["num_hidden_layers"] == 1 and r["source_url"].startswith("https://github.com/")


def test_validation_row_equals_the_cli(tmp_path, capsys):
    r = validate("fused_moe")
    s = r.per_dataset()[0]["stats"]
    # regression guard (not the target): 2026-11-28, 48 scored rows, median 4.6%, worst 19.1%
    assert s["n"] >= 48 and s["median_abs"] <= 0.06 and s["worst_abs"] <= 0.22
    # 1536 tokens: a point the shape's rows are traced at (2, 1024, 1536); 96: interpolated from those traces; 1: a
    # one-token prefill, outside their polynomial (no causal flag), traced on its own
    for tokens in (1536, 96, 1):
        row = next(x for x in r.rows if x.gpu == "h100-sxm" and x.inputs["tokens"] == tokens)
        out = tmp_path / f"a{tokens}.json"
        rc = main(["analyze", str(DATA_DIR / "models" / row.family / "config.json"), "--hw", "h100-sxm", "--seq",
                   str(tokens), "--runtime", "vllm", "--kernels", "-f", "json", "-o", str(out), "-q"])
        assert rc in (0, None)
        kernels = json.loads(out.read_text())["kernels"]
        cli = sum(k["time_realistic_s"] - k["t_launch_s"] for k in kernels if moe_block_kernel(k))
        assert row.predicted == pytest.approx(cli, rel=1e-9)
