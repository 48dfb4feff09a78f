"""``--holdout model``: the A100 / H100 kernel constants refit without one model's rows (graphroof.validate.refit,
graphroof.validate.holdout_model)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from graphroof.hardware import load_hardware
from graphroof.timing import gemm_time_with
from graphroof.timing.precision import gemm_ceiling
from graphroof.validate.holdout import held_out_profile
from graphroof.validate.holdout_model import FITTED_MODELS, model_held_profile, model_key
from graphroof.validate.refit import OpsRow, kernels_of, refit_gemm, refit_stream


def _rows(hw, measure) -> list[OpsRow]:
    """Llama-2-7B-shaped layers (h 4096, 32 heads, FFN 11008) at TP 1 / 2 and 1 .. 4096 tokens, each kernel's
    'measured' time given by *measure(kernel)*."""
    out = []
    for tp in (1, 2):
        for t in (1, 4, 16, 64, 200, 512, 1000, 2048, 4096):
            ks = kernels_of(4096, 32, 32, 11008, t, tp)
            out.append(OpsRow("h100", "llama-2-7b", t, tp, ks, {c: measure(k) for c, k in ks.items()}))
    return out


def test_refit_gemm_recovers_the_constants_that_made_the_rows():
    """Rows timed by the GEMM model itself at efficiency 0.8, bandwidth efficiency 0.85 and a 6 us fixed time
    (the profile's tiles and p = 3): the refit finds those three again (a fit, not a lookup: it starts from the
    profile's 0.902 / 0.886 / 4.71 us)."""
    hw = load_hardware("h100-sxm")
    true = replace(hw.timing, gemm_matrix_efficiency=0.8, gemm_mem_bw_efficiency=0.85, gemm_latency_s=6e-6)
    peak = hw.matrix_peak_flops_per_s["fp16"]
    ceiling = gemm_ceiling(hw, peak, "matrix.fp16")[0]

    def gemm_s(k):
        if not k.gemm:
            return 1e-5
        m, n, kk = k.gemm
        return gemm_time_with(m, n, kk, timing=true, peak_flops_per_s=peak, mem_bw_bytes_per_s=hw.mem_bw_bytes_per_s,
                              in_bytes=2.0, out_bytes=2.0, achievable_flops_per_s=ceiling,
                              l2_bytes=hw.onchip_cache_bytes, schedule="auto").t_s

    got, loss = refit_gemm(hw, _rows(hw, gemm_s))
    assert got["gemm_matrix_efficiency"] == pytest.approx(0.8, rel=2e-3)
    assert got["gemm_mem_bw_efficiency"] == pytest.approx(0.85, rel=2e-3)
    assert got["gemm_latency_s"] == pytest.approx(6e-6, rel=2e-2)
    assert loss < 1e-3


def test_refit_stream_recovers_latency_and_capped_efficiencies():
    """Streaming rows at 2 us + bytes / (3.35 TB/s x e_kind), e_norm 0.4 and e_gather 0.2 (the other kinds 0.6): the
    refit finds them; every kind stays under the profile's elementwise (copy) efficiency, 0.905 on the H100."""
    hw = load_hardware("h100-sxm")
    eff = {"norm": 0.4, "rotary": 0.6, "act_mul": 0.6, "elementwise": 0.6, "gather": 0.2}

    def stream_s(k):
        return 2e-6 + k.stream_bytes / (hw.mem_bw_bytes_per_s * eff[k.stream_kind]) if k.stream_kind else 1e-5

    got, loss = refit_stream(hw, _rows(hw, stream_s))
    assert got["stream_latency_s"] == pytest.approx(2e-6, rel=1e-2)
    for kind, e in eff.items():
        assert got["stream_bw_efficiency"][kind] == pytest.approx(e, rel=1e-2)
    assert max(got["stream_bw_efficiency"].values()) <= hw.timing.stream_bw_efficiency["elementwise"]
    assert loss < 1e-3


def test_model_names_as_the_fitted_sets_spell_them():
    assert model_key("Llama-2-70b-hf") == "llama-2-70b"
    assert model_key("llama3-8b.qkv") == "llama-3-8b"          # a torch_gpu GEMM row's shape
    assert model_key("llama-3-70b-tp8") == "llama-3-70b"        # measure_gemm.csv's model column
    # NIM's rows name a bundled config: its folder; Llama 3.1 / 3.3 have Llama 3's layer shapes
    assert model_key("graphroof/validate/data/models/llama-3.3-70b/config.json") == "llama-3-70b"
    assert model_key("qwen2.5-7b.qkv") == "qwen2.5-7b"
    assert model_key("llama-3.2-1b") == "llama-3.2-1b"          # other shapes: not Llama 3's
    assert model_key("phi-3-mini-4k-instruct") == "phi-3-mini"
    assert model_key("odd.5120x3000") == "odd.5120x3000"


def test_held_out_profile_per_model():
    """A fitted model's rows get constants refit on the other Llama-2 model's Vidur rows: the 70B ones on the
    A100 move (the plain fit saw both), the GEMM tile, SM count and overlap exponent stay; a model no constant
    saw, and any derived profile, keep the plain profile."""
    a100 = load_hardware("a100-80gb-sxm")
    held = held_out_profile(a100, "model", "vidur_ops", "llama-2-70b")
    assert held.timing.gemm_matrix_efficiency != a100.timing.gemm_matrix_efficiency
    assert held.timing.stream_latency_s != a100.timing.stream_latency_s
    assert (held.timing.gemm_tile, held.timing.sm_count, held.timing.gemm_overlap_exponent) == \
        (a100.timing.gemm_tile, a100.timing.sm_count, a100.timing.gemm_overlap_exponent)
    assert held.collectives == a100.collectives
    # the 7B rows alone (the refit left the 70B out): its constants are each within a few % of the joint fit's
    assert math.isclose(held.timing.gemm_matrix_efficiency, a100.timing.gemm_matrix_efficiency, rel_tol=0.05)
    assert held_out_profile(a100, "model", "gptfast", "llama-3-8b") is a100       # not in the A100's fit
    h100 = load_hardware("h100-sxm")
    assert "llama-3-8b" in FITTED_MODELS["h100-sxm"]                             # the H100's 2026 GEMM rows
    assert model_held_profile(h100, "llama-3-8b") != h100
    # a profile derived from a fitted one moves by the refit's ratios: the H200 copies the H100's constants, the
    # L40S scales the A100's latency by its clock; an AMD profile borrows a few constants only: unchanged
    h200, held_h100 = load_hardware("h200-sxm"), model_held_profile(h100, "llama-2-7b")
    assert model_held_profile(h200, "llama-2-7b").timing.gemm_latency_s == pytest.approx(
        held_h100.timing.gemm_latency_s, rel=1e-12)
    l40s = load_hardware("l40s-48gb-pcie")
    held_l40s = held_out_profile(l40s, "model", "trtllm", "llama-2-7b")
    assert held_l40s.timing.gemm_latency_s / l40s.timing.gemm_latency_s == pytest.approx(
        model_held_profile(a100, "llama-2-7b").timing.gemm_latency_s / a100.timing.gemm_latency_s, rel=1e-12)
    # every moved constant, efficiencies and streaming kinds included, keeps its ratio to the parent
    held_h200 = model_held_profile(h200, "llama-2-7b")
    assert held_h200.timing.gemm_matrix_efficiency == pytest.approx(held_h100.timing.gemm_matrix_efficiency)
    assert held_h200.timing.stream_bw_efficiency == pytest.approx(held_h100.timing.stream_bw_efficiency)
    # the H100 PCIe copies an older, Vidur-only H100 fit: its Llama-2 rows move (by the refit's ratio to the same
    # refit on both Llama-2 models), its Llama-3 rows, which that fit never saw, do not
    pcie = load_hardware("h100-pcie")
    assert model_held_profile(pcie, "llama-3-8b") is pcie
    assert model_held_profile(pcie, "llama-2-7b").timing.gemm_latency_s != pcie.timing.gemm_latency_s
    mi300x = load_hardware("mi300x-192gb-oam")
    assert held_out_profile(mi300x, "model", "trtllm", "llama-2-7b") is mi300x


def test_validate_holdout_model_reprices_the_fitted_models_rows():
    """Through graphroof validate's own path: a Llama-2-7B TensorRT-LLM row on the A100 (its GEMM constants saw
    the 7B Vidur rows) and on the L40S (derived from the A100's), a NIM Llama-3.1-8B row on the H100 (whose GEMM
    fit saw our Llama-3-8B GEMMs) and an H100 GEMM of Llama-3-8B's QKV (priced by profile name, so priced again:
    model_holdout) all move under --holdout model."""
    from graphroof.validate import validate

    a100_7b, l40s_7b = "trtllm_v05_v061_static.csv:23", "trtllm_v05_v061_static.csv:21"
    r = validate("trtllm", holdout="model", only={a100_7b, l40s_7b})
    by = {row.row_id: row for row in r.rows if row.predicted is not None}
    assert set(by) == {a100_7b, l40s_7b}
    for row in by.values():
        assert row.holdout["model"] != pytest.approx(row.predicted, rel=1e-6)
    r = validate("nim", holdout="model", only={"nim_llm_h100.csv:2"})
    (row,) = [x for x in r.rows if x.predicted is not None]
    assert row.holdout["model"] != pytest.approx(row.predicted, rel=1e-6)
    qkv = "h100_session/gemm.csv:16"          # llama3-8b.qkv, bf16, M 128
    r = validate("torch_gpu", holdout="model", only={qkv})
    (row,) = [x for x in r.rows if x.predicted is not None]
    assert row.inputs["shape"].startswith("llama3-8b.")
    assert row.holdout["model"] != pytest.approx(row.predicted, rel=1e-6)
    assert "refit" in " ".join(r.holdout_notes)
