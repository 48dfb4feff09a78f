"""One kernel-level timing model for every device: each shipped profile has [timing] (and the non-NVIDIA ones
[collectives]) with its origin (fitted / derived) and a source for every constant; the derived constants reproduce
the data they come from; the origin reaches the results and the reports.  Expected numbers derived by hand."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import tomllib

from graphroof.errors import HardwareProfileError
from graphroof.hardware import list_profiles, load_hardware
from graphroof.hardware.load import profile_from_dict
from graphroof.timing import allreduce_time, gemm_time

NON_NVIDIA = ("mi250x-128gb-oam", "mi300x-192gb-oam", "tpu-v4-32gb", "tpu-v5e-16gb", "tpu-v5p-95gb", "tpu-v6e-32gb",
              "gaudi2-96gb-oam", "gaudi3-128gb-oam", "xeon-platinum-8480plus")


def test_every_profile_has_the_kernel_model_and_an_origin():
    for hw in list_profiles():
        assert hw.timing is not None, hw.name
        assert hw.origin in ("fitted", "derived"), hw.name
        assert hw.as_dict()["timing_origin"] == hw.origin
    assert load_hardware("a100-80gb-sxm").origin == "fitted"
    assert load_hardware("h100-sxm").origin == "fitted"
    assert load_hardware("mi300x").origin == "derived"


@pytest.mark.parametrize("name", NON_NVIDIA)
def test_non_nvidia_sections_name_a_source_for_every_constant(name):
    hw = load_hardware(name)
    assert hw.timing_origin == "derived" and hw.collectives is not None
    data = tomllib.loads(Path(hw.path).read_text())
    for section in ("timing", "collectives"):
        src = hw.sources[section]
        for key in data[section]:
            assert key in src, f"{name}: sources.{section} does not say where {key} comes from"


def test_mamf_rows_are_reproduced():
    # MI300X: bf16 MAMF 668.4 TFLOP/s at 10240 x 15360 x 8192 (kernels.csv).  Tiles 256 x 256: 40 x 60 = 2,400 tiles
    # over 304 CUs = 7.89 -> 8 waves, so the model reaches at most 2400 / (8 * 304) = 98.7% of the ceiling (the
    # efficiency solved for the row is capped at 1.0): ~660 TFLOP/s, about -1%
    hw = load_hardware("mi300x")
    g = gemm_time(10240, 15360, 8192, hw, "bf16")
    assert 2 * 10240 * 15360 * 8192 / g.t_s == pytest.approx(668.4e12 * 2400 / 2432, rel=0.01)
    # Gaudi 2 / 3: the efficiency (and the compute / memory overlap) solved so that the model gives the row back;
    # Gaudi 3's K = 768 row stays 5.8% under even at efficiency 1 with full overlap: 1.03e14 FLOPs at 1243 TFLOP/s
    # = 82.9 us, + the 5.07 us fixed GEMM time = 87.9 us -> 1,172 TFLOP/s
    for name, (m, n, k, tflops, rel) in {"gaudi2": (14336, 15360, 2048, 418.7, 0.01),
                                         "gaudi3": (16384, 4096, 768, 1243.0, 0.06)}.items():
        hw = load_hardware(name)
        g = gemm_time(m, n, k, hw, "bf16")
        assert 2 * m * n * k / g.t_s == pytest.approx(tflops * 1e12, rel=rel), name
        assert "solved so that the model reproduces the bf16 row" in hw.sources["timing"]


def test_tpu_gemm_tiles_and_waves():
    # TPU v5e: 4 MXUs, 128 x 128 tiles, 75% of 197 TFLOP/s.  1024^3 bf16: 8 x 8 = 64 tiles over 4 MXUs = 16 waves of
    # 2*128*128*1024 FLOPs at 197e12 * 0.75 / 4 per MXU: 16 * 33,554,432 / 3.69375e13 = 14.534 us; memory
    # 3 * 1024^2 * 2 B / (819e9 * 0.85) = 9.036 us; overlap p-norm 2: sqrt(14.534^2 + 9.036^2) = 17.114 us; + 1 us
    hw = load_hardware("tpu-v5e")
    tc = 16 * 2 * 128 * 128 * 1024 / (197e12 * 0.75 / 4)
    tm = 3 * 1024 * 1024 * 2 / (819e9 * 0.85)
    assert gemm_time(1024, 1024, 1024, hw, "bf16").t_s == pytest.approx((tc ** 2 + tm ** 2) ** 0.5 + 1e-6, rel=1e-6)
    # 64 columns fill half of a 128-wide tile: the same time as 128 columns (the MXU's quantisation)
    assert gemm_time(1024, 64, 1024, hw, "bf16").t_s > 0.5 * gemm_time(1024, 128, 1024, hw, "bf16").t_s * 1.5


def test_mi300x_allreduce_has_a_latency_term():
    # the sweep priced an MI300X TP 8 all-reduce at bandwidth only (2.7 us); now RCCL has NCCL's latency terms and
    # protocols (LL for a small buffer: half the bandwidth): 16 KB at TP 8 host-launched = 38.7 us + 14 hops * 0.47 us
    # + 2*7/8*16384 B / (0.5 * 336 GB/s) (170.7 ns) = 45.451 us
    hw = load_hardware("mi300x")
    assert hw.collectives is not None and hw.collectives.library == "rccl"
    assert allreduce_time(16384, 8, hw).t_s == pytest.approx(45.28e-6 + 28672 / 168e9)
    # inside a graph: NCCL's 6.6 us + 14 * 0.6 us + 170.7 ns = 15.171 us; custom one-shot: 3.85 us + 7 * 16384 / 336e9 = 3.85 + 0.341 us
    assert allreduce_time(16384, 8, hw, cuda_graphs=True).t_s == pytest.approx(15.0e-6 + 28672 / 168e9)
    assert allreduce_time(16384, 8, hw, implementation="custom").t_s == pytest.approx(3.85e-6 + 7 * 16384 / 336e9)
    # TPU: XLA collectives have no host part and no NCCL protocols (full bandwidth): 5 us + 14 * 1 us + 14,336 B /
    # 160 GB/s for 8 KB over 8 chips
    tpu = load_hardware("tpu-v5e")
    assert allreduce_time(8192, 8, tpu).t_s == allreduce_time(8192, 8, tpu, cuda_graphs=True).t_s
    assert allreduce_time(8192, 8, tpu).t_s == pytest.approx(19e-6 + 14336 / 160e9)


def test_timing_origin_is_validated(tmp_path: Path):
    base = {"name": "x", "matrix_peak_flops_per_s": {"bf16": 1e14}, "memory": {"bw_bytes_per_s": 1e12},
            "timing": {"sm_count": 10}, "sources": {"timing": "derived: by hand"}}
    assert profile_from_dict({**base, "timing_origin": "derived"}, tmp_path / "x.toml").origin == "derived"
    with pytest.raises(HardwareProfileError, match="timing_origin must be"):
        profile_from_dict({**base, "timing_origin": "guessed"}, tmp_path / "x.toml")
    with pytest.raises(HardwareProfileError, match="no \\[timing\\] section"):
        profile_from_dict({k: v for k, v in base.items() if k != "timing"} | {"timing_origin": "fitted"},
                          tmp_path / "x.toml")
    with pytest.raises(HardwareProfileError, match="needs sources.timing"):
        profile_from_dict({**base, "sources": {}, "timing_origin": "fitted"}, tmp_path / "x.toml")
    # no field: read from sources.timing; no [timing]: the efficiency factors are assumptions
    assert profile_from_dict({**base, "sources": {"timing": "fitted by me"}}, tmp_path / "x.toml").origin == "fitted"
    assert replace(load_hardware("a100"), timing=None).origin == "assumed"


def test_compare_marks_origins_and_explains_a_flipped_ranking():
    from graphroof import compare, render

    c = compare("examples/textbook_ops.csv", hw=["a100", "tpu-v5e"])
    assert [r["timing_origin"] for r in c.rows] == ["fitted", "derived"]
    win = min(c.rows, key=lambda r: r["time_realistic_s"])
    assert "differ in origin" in win["rank_note"]
    assert sum("rank_note" in r for r in c.rows) == 1
    flipped = (c.rows[0]["time_s"] - c.rows[1]["time_s"]) * (c.rows[0]["time_realistic_s"]
                                                            - c.rows[1]["time_realistic_s"]) < 0
    assert flipped == any("realistically but" in n for n in c.notes)
    text = render(c, "terminal")
    assert "fitted" in text and "derived" in text
    assert '"timing_origin": "derived"' in render(c, "json")


def test_sweep_pick_says_when_origins_differ():
    from graphroof.report.sweep import render_sweep
    from graphroof.sweeps import sweep
    from tests.llm.toy import RULES, toy_source

    r = sweep(toy_source(), hw=["a100", "mi300x"], batch=[1, 8], prompt=[16], gen=[4], rules=RULES,
              usd_per_hour={"a100": 1.5, "mi300x": 1.85}, max_tpot_s=1.0)
    assert r.hw_origins == {"a100-80gb-sxm": "fitted", "mi300x-192gb-oam": "derived"}
    top = r.best_overall()
    assert top is not None and top.tokens_per_s_per_gpu == max(p.tokens_per_s_per_gpu for p in r.best().values() if p)
    note = r.origin_note(top)
    assert note is not None and "differ in origin" in note and "fitted: a100-80gb-sxm" in note
    d = r.to_dict()
    assert d["hardware_timing_origin"]["mi300x-192gb-oam"] == "derived" and d["best_overall_origin_note"] == note
    text = render_sweep(r, "terminal")
    assert "a100-80gb-sxm [fitted]" in text and "most tok/s/GPU under the SLO" in text
    # one origin only: nothing to say
    same = sweep(toy_source(), hw=["a100", "h100"], batch=[1], prompt=[16], gen=[4], rules=RULES, max_tpot_s=1.0)
    assert same.origin_note() is None


def test_report_headers_name_the_origin():
    from graphroof import analyze, render

    a = analyze("examples/textbook_ops.csv", hw="mi300x")
    assert a.header()["hardware_timing_origin"] == "derived"
    assert "(derived timing constants)" in render(a, "terminal")
    assert "derived timing constants" in render(a, "markdown")
    assert '"hardware_timing_origin": "derived"' in render(a, "json")


def test_sustained_rates_explain_rankings():
    from graphroof.timing.profile import sustained_note, sustained_rates

    # MI300X: the MAMF row 668.4 TFLOP/s x efficiency 1.0; weights 5.3 TB/s x 0.8 = 4.24 TB/s
    r = sustained_rates(load_hardware("mi300x"))
    assert r["matmul_flops_per_s"] == pytest.approx(668.4e12) and r["weights_bw_bytes_per_s"] == pytest.approx(4.24e12)
    # TPU v5e (no row): 197 TFLOP/s x 0.75 = 147.75; 819 GB/s x 0.85 = 696.15 GB/s
    r = sustained_rates(load_hardware("tpu-v5e"))
    assert r["matmul_flops_per_s"] == pytest.approx(147.75e12) and r["weights_bw_bytes_per_s"] == pytest.approx(696.15e9)
    note = sustained_note([load_hardware("mi300x"), load_hardware("tpu-v5e")])
    assert "mi300x-192gb-oam (derived): matmul 668 TFLOP/s of 1.31 PFLOP/s" in note
