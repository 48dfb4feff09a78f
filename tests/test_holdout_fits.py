"""Issue 23: the hold-outs leave out the fits made on vision / trtllm / torch_gpu rows.

``--holdout engine``: preset constants fitted on one engine's rows (graphroof.validate.holdout_engine).
``--holdout gpu``: sustained matmul rates fitted on one GPU's own rows (graphroof.validate.holdout_rates).
"""

from __future__ import annotations

import pytest

from graphroof.fuse import get_runtime
from graphroof.fuse.runtimes import RUNTIMES
from graphroof.hardware import load_hardware
from graphroof.timing.precision import gemm_ceiling
from graphroof.validate import holdout_rates
from graphroof.validate.holdout import held_out_profile, holdout_notes
from graphroof.validate.holdout_engine import ENGINE_FITS, engine_holdout, fits_of, held_out_runtimes
from graphroof.validate.holdout_rates import fitted_rates, generic_ratio
from graphroof.validate.result import Row


def _fitted_preset_constants() -> set[tuple[str, str]]:
    """(preset, field) whose [sources] text says it was fitted on rows."""
    return {(n, k) for n, rt in RUNTIMES.items() for k, v in rt.sources.items()
            if v.strip().lower().startswith("fitted") or " fitted on " in v}


def test_every_fitted_preset_constant_is_held_out():
    declared = {(f.preset, k) for f in ENGINE_FITS for k in f.held_out}
    assert _fitted_preset_constants() <= declared
    assert ("tensorrt-llm-v0.5", "request_overhead_s") in declared
    assert ("fastertransformer", "host_overhead_per_kernel_s") in declared
    # each declared engine is named in the preset's [sources] (the rows the fit used)
    words = {"TensorRT-LLM": "rows 17, 21, 23", "FasterTransformer TF custom op": "TF-op row",
             "Paddle Inference + TensorRT": "row Paddle Inference + TensorRT",
             "PyTorch TorchScript": "TorchScript rows",
             "PyTorch 2.11": ("h100_session/models.csv", "h200_probe/stream_paths.csv"),
             "TensorFlow + XLA": "row TensorFlow + XLA", "NVIDIA NIM": "nim_llm_h100.csv",
             "TensorRT-LLM 1.0": "trtllm_perf_overview_fp8_hopper.csv", "llama.cpp": "llamacpp_tg.csv"}
    for f in ENGINE_FITS:
        assert all(hasattr(RUNTIMES[f.preset], k) for k in f.held_out), f.preset
        text = " ".join(RUNTIMES[f.preset].sources.get(k, "") for k in f.held_out)
        text += RUNTIMES[f.preset].sources.get("host_overhead_per_kernel_s", "")
        want = words[f.engine]
        assert any(w in text for w in ((want,) if isinstance(want, str) else want)), (f.preset, f.engine)


def test_held_out_preset_values_by_hand():
    by = {(f.engine, f.preset): f.held_out for f in ENGINE_FITS}
    # TensorRT-LLM: no other engine's rows fit a per-request time -> the unfitted default, 0 s
    assert by["TensorRT-LLM", "tensorrt-llm-v0.5"] == {"request_overhead_s": 0.0}
    # Paddle + TensorRT: likewise no other engine's rows fit a per-call host time -> 0 s
    assert by["Paddle Inference + TensorRT", "paddle-tensorrt"] == {"call_overhead_s": 0.0}
    # FT TF op held out: the FT PyTorch-op row less its wrapper's 9 PyTorch 1.8 ATen ops at 1.20 x (5 + 9) us each
    # (151.2 us), (1.31 ms - 151.2 us) / 84 kernels = 13.795 us, less V100's 5 us = 8.795 us
    ft = by["FasterTransformer TF custom op", "fastertransformer"]["host_overhead_per_kernel_s"]
    assert ft == pytest.approx((1.31e-3 - 9 * 1.20 * 14e-6) / 84 - 5e-6, abs=0.05e-6) and ft == 8.8e-6
    # torch_gpu held out: the TorchScript level alone, 6.785 ms / 237 launches = 28.629 us, less 5 us = 23.629 us
    tg = by["PyTorch 2.11", "pytorch-eager"]
    assert tg["host_overhead_per_kernel_s"] == pytest.approx(6.785e-3 / 237 - 5e-6, abs=0.05e-6)
    assert tg["host_overhead_per_library_call_s"] == 0.0
    # TorchScript held out: no preset constant was fitted on those rows (the level is the torch_gpu rows'); only
    # their host factors (PYTORCH18_HOST, FT_HOSTS) are dropped, by the swap itself
    assert by["PyTorch TorchScript", "pytorch-eager"] == by["PyTorch TorchScript", "pytorch-eager-amp"] == {}


def test_engine_holdout_reprices_a_torch_gpu_row_by_hand():
    # host = launches x (launch_overhead_s + k) + library calls x L (graphroof/timing/host.py); the host-bound eager
    # resnet-50 batch 1 on the H100 (h100_session/models.csv line 2) is 280 launches, 54 of them library calls.
    # torch_gpu held out: k 9 -> 23.6 us, L 24 -> 0 us: 280 x 14.6 - 54 x 24 = 4088 - 1296 = +2792 us
    from graphroof.validate import validate

    r = validate("torch_gpu", holdout="engine", only={"h100_session/models.csv:2"})
    (row,) = [x for x in r.rows if x.predicted is not None]
    assert row.holdout["engine"] - row.predicted == pytest.approx(2792e-6, rel=1e-6)


def test_held_out_runtimes_swap_and_restore():
    fits = fits_of("vision")["PyTorch TorchScript"]
    before = get_runtime("pytorch-eager")
    with held_out_runtimes(fits):
        for name in ("pytorch-eager", "torch-eager"):  # by name and by alias
            rt = get_runtime(name)
            # an equal copy: the constants stay, the swap drops the TorchScript rows' host factors
            assert rt is not before and rt == before
        assert get_runtime("fastertransformer").host_overhead_per_kernel_s == 8.5e-6  # not named by these fits
    assert get_runtime("pytorch-eager") is before and before.host_overhead_per_kernel_s == 9e-6


def _row(rid: str, engine: str, runtime: str, predicted: float | None = 1.0) -> Row:
    return Row("vision", rid, engine, "v100-sxm2-32gb", "NVIDIA", "bert", "small", "latency", runtime, "t", "s", {},
               1.0, predicted=predicted)


def test_engine_holdout_reprices_only_the_fitted_engines_rows():
    rows = [_row("a:1", "PyTorch TorchScript", "pytorch-eager"), _row("a:2", "PyTorch eager", "pytorch-eager"),
            _row("a:3", "PyTorch TorchScript", "pytorch-eager", predicted=None),
            _row("a:4", "FasterTransformer TF custom op", "fastertransformer"),
            _row("a:5", "FasterTransformer PyTorch custom extension", "fastertransformer"),
            _row("a:6", "TensorRT 8.5.1", "tensorrt")]
    asked: list[set[str]] = []

    def adapter(only):  # each row priced as its preset's host us per kernel + its V100 fp32 rate in TFLOP/s
        asked.append(set(only))
        return [_row(r.row_id, r.engine, r.runtime, get_runtime(r.runtime).host_overhead_per_kernel_s * 1e6
                     + load_hardware(r.gpu).timing.gemm_achievable_flops_per_s["fp32"] / 1e12)
                for r in rows if r.row_id in only]

    engine_holdout("vision", rows, adapter, lambda ids, share=True: ids)
    # one pass per engine with a fit, its rows only (TensorRT 7.2: a T4 rate, no V100 row here)
    assert sorted(map(sorted, asked)) == [["a:1"], ["a:4"], ["a:5"]]
    assert rows[0].holdout == {"engine": pytest.approx(9.0 + 13.5)}    # TorchScript: the preset as it is
    assert rows[3].holdout == {"engine": pytest.approx(8.8 + 13.5)}    # FT TF op: the FT PyTorch-op row's fit
    # FT PyTorch op: the V100 fp32 rate was fitted on its row, as were the T4's and A10's: none fitted on another
    # engine, so the generic ratio of the unfitted entries (MAMF table, 0.803) x 15.7 = 12.61 TFLOP/s
    assert rows[4].holdout == {"engine": pytest.approx(8.5 + 0.803 * 15.7, rel=1e-3)}
    assert rows[1].holdout == rows[2].holdout == rows[5].holdout == {}  # not fitted on: the plain figure later
    assert get_runtime("pytorch-eager").host_overhead_per_kernel_s == 9e-6
    assert load_hardware("v100-sxm2-32gb").timing.gemm_achievable_flops_per_s["fp32"] == 13.5e12


def test_rate_fits_name_their_engine():
    from graphroof.validate.holdout_rates import RATE_FITS

    fitted = {(hw.name, d) for hw in map(load_hardware, ("t4-16gb-pcie", "a10-24gb-pcie", "v100-sxm2-32gb"))
              for d in fitted_rates(hw)}
    assert fitted == set(RATE_FITS)
    words = {"TensorRT 7.2": "row TensorRT 7.2.3.4", "FasterTransformer PyTorch": "row FasterTransformer PyTorch op"}
    for (name, _), (dataset, engine) in RATE_FITS.items():
        assert dataset == "vision" and words[engine] in load_hardware(name).sources["timing"]
    # engine hold-out, T4 fp16 (TensorRT 7.2 row): the A10's rate (fitted on an FT row), power-limited (0.632 of
    # peak < 0.803): 79 / 150 W = 0.52667 TFLOP/J x 70 W = 36.867 TFLOP/s (< the 0.803 x 65 = 52.2 cap);
    # A10 bf16 (FT PyTorch row): the T4's (a TensorRT row) 31 / 70 W = 0.44286 TFLOP/J x 150 W = 66.429 TFLOP/s
    from graphroof.validate.holdout_rates import engine_held_profile

    t4 = engine_held_profile(load_hardware("t4-16gb-pcie"), "vision", "TensorRT 7.2")
    assert t4.timing.gemm_achievable_flops_per_s == {"fp16": pytest.approx(36.867e12, rel=1e-4), "fp32": 4.6e12}
    a10 = engine_held_profile(load_hardware("a10-24gb-pcie"), "vision", "FasterTransformer PyTorch")
    assert a10.timing.gemm_achievable_flops_per_s["bf16"] == pytest.approx(66.429e12, rel=1e-4)


def test_engine_notes_name_each_replacement():
    text = " ".join(holdout_notes("engine"))
    assert "request_overhead_s = 0 us" in text and "host_overhead_per_kernel_s = 8.8 us" in text
    assert "23.6 us" in text and "no constant replaced" in text and "PYTORCH18_HOST" in text and "gpt-fast" in text


def test_fitted_rates_read_from_sources():
    assert fitted_rates(load_hardware("t4-16gb-pcie")) == {"fp16": 31e12, "fp32": 4.6e12}
    a10 = fitted_rates(load_hardware("a10-24gb-pcie"))
    assert a10 == {"bf16": 79e12, "fp32": 12.1e12}
    assert fitted_rates(load_hardware("v100-sxm2-32gb")) == {"fp32": 13.5e12}
    # MAMF-table measurements and the rates derived from them are not fits on validation rows
    for name in ("a100-80gb-sxm", "h100-sxm", "l4-24gb-pcie", "h200-sxm"):
        assert fitted_rates(load_hardware(name)) == {}


def test_gpu_holdout_transfers_fitted_rates_by_hand():
    t4, a10, v100 = (held_out_profile(n) for n in ("t4-16gb-pcie", "a10-24gb-pcie", "v100-sxm2-32gb"))
    # held-out rate = min(board W x FLOP/J of the other power-limited fits, peak x full-clock ratio); a fit is
    # power-limited when under the generic (MAMF) 0.803 x its peak.
    # fp16 / bf16 tensor, two fitted GPUs, both power-limited: T4 31 / 65 = 0.477, A10 79 / 125 = 0.632 (< 0.803)
    #   T4 held out: 79e12 / 150 W = 0.52667 TFLOP/J (1.899 pJ/FLOP) x 70 W = 36.867 (< 0.803 x 65 = 52.2) TFLOP/s
    #   A10 held out: 31e12 / 70 W = 0.44286 TFLOP/J (2.258 pJ/FLOP) x 150 W = 66.429 (< 0.803 x 125 = 100.4)
    assert t4.timing.gemm_achievable_flops_per_s["fp16"] == pytest.approx(36.867e12, rel=1e-4)
    assert a10.timing.gemm_achievable_flops_per_s["bf16"] == pytest.approx(66.429e12, rel=1e-4)
    # the A10's TF32 ceiling follows its bf16 ratio (gemm_ceiling): 62.5 x 66.429 / 125 = 33.214 TFLOP/s
    assert gemm_ceiling(a10, 62.5e12, "matrix.tf32")[0] == pytest.approx(33.214e12, rel=1e-4)
    # fp32 SGEMM, three fitted GPUs: T4 4.6 / 8.1 = 0.568 and A10 12.1 / 31.2 = 0.388 power-limited (4.6 / 70 W =
    # 0.065714, 12.1 / 150 W = 0.080667 TFLOP/J); V100 13.5 / 15.7 = 0.85987 (>= 0.803) at full clock:
    #   T4: min(70 x 0.080667 = 5.6467, 0.85987 x 8.1 = 6.965) = 5.6467 TFLOP/s
    #   V100: min(300 x (0.065714 + 0.080667) / 2 = 21.957, no full-clock other: 0.803 x 15.7 = 12.607) = 12.607
    #   A10: min(150 x 0.065714 = 9.857, 0.85987 x 31.2 = 26.828) = 9.857 TFLOP/s
    assert t4.timing.gemm_achievable_flops_per_s["fp32"] == pytest.approx(5.6467e12, rel=1e-4)
    assert v100.timing.gemm_achievable_flops_per_s["fp32"] == pytest.approx(12.607e12, rel=1e-3)
    assert a10.timing.gemm_achievable_flops_per_s["fp32"] == pytest.approx(9.857e12, rel=1e-4)
    # the V100's fp16 entry (MAMF-derived, not fitted on its rows) stays
    assert v100.timing.gemm_achievable_flops_per_s["fp16"] == 100.4e12
    # nothing else of their [timing] moves (derived from the A100 fit, not fitted on their rows)
    own = load_hardware("t4-16gb-pcie").timing
    assert t4.timing.gemm_matrix_efficiency == own.gemm_matrix_efficiency and t4.timing.sm_count == own.sm_count
    assert held_out_profile("l4-24gb-pcie") == load_hardware("l4-24gb-pcie")


def test_rate_without_another_fitted_gpu_takes_the_generic_ratio(monkeypatch):
    t4, h100 = load_hardware("t4-16gb-pcie"), load_hardware("h100-sxm")
    monkeypatch.setattr(holdout_rates, "list_profiles", lambda: [t4, h100])
    # the only unfitted entries: H100 bf16 794.5 / 989.4 = 0.80301 (fp8 is another kind); fp32 has none -> the fp16
    # kind's: 0.80301 x 65 = 52.196, x 8.1 = 6.5044 TFLOP/s
    ratio = 794.5e12 / h100.matrix_peak_flops_per_s["bf16"]
    assert generic_ratio("fp16", "t4-16gb-pcie") == pytest.approx(ratio)
    held = held_out_profile(t4).timing.gemm_achievable_flops_per_s
    assert held["fp16"] == pytest.approx(ratio * 65e12) and held["fp32"] == pytest.approx(ratio * 8.1e12)


def test_gpu_notes_list_the_rate_transfers():
    text = " ".join(holdout_notes("gpu"))
    assert "t4-16gb-pcie fp16 31 -> 36.9 TFLOP/s (70 W / 1.9 pJ per FLOP" in text
    assert "a10-24gb-pcie bf16 79 -> 66.4 TFLOP/s (150 W / 2.26 pJ per FLOP" in text
    assert "v100-sxm2-32gb fp32 13.5 -> 12.6 TFLOP/s (0.803 x peak: the generic ratio" in text
    assert "FLOP per joule" in text


def test_gpu_holdout_reprices_rows_an_adapter_left_without_one():
    # an adapter pricing by profile name (torch_gpu): each row here priced as its profile's gemm_matrix_efficiency.
    # The H100 is a fitted GPU: with two fitted GPUs its held-out efficiency is the A100's; the H200 is derived
    # (never fitted on its rows): not priced again, its hold-out is the plain figure (set later by validate).
    from graphroof.validate.holdout import gpu_holdout

    rows = [_row("g:1", "PyTorch 2.11", "compiled"), _row("g:2", "PyTorch 2.11", "compiled"),
            _row("g:3", "PyTorch 2.11", "compiled")]
    rows[0].gpu, rows[1].gpu, rows[2].gpu = "h100-sxm", "h200-sxm", "h100-sxm"
    rows[2].holdout["gpu"] = 7.0  # the adapter gave one: kept
    asked: list[set[str]] = []

    def adapter(only):
        asked.append(set(only))
        return [_row(r.row_id, r.engine, r.runtime, load_hardware(r.gpu).timing.gemm_matrix_efficiency)
                for r in rows if r.row_id in only]

    gpu_holdout(rows, adapter, lambda ids: ids)
    assert asked == [{"g:1"}]
    assert rows[0].holdout == {"gpu": load_hardware("a100-80gb-sxm").timing.gemm_matrix_efficiency}
    assert rows[1].holdout == {} and rows[2].holdout == {"gpu": 7.0}
    assert load_hardware("h100-sxm").timing.gemm_matrix_efficiency != rows[0].holdout["gpu"]  # restored


def test_held_out_rate_ignores_the_devices_own_fit():
    # honesty: the T4's held-out fp16 rate comes from the A10's fit and the T4's datasheet (70 W, 65 TFLOP/s peak)
    # only: its own fitted 31 TFLOP/s replaced by 50 leaves it at 70 W x 79e12 / 150 W = 36.867 TFLOP/s
    from dataclasses import replace

    t4 = load_hardware("t4-16gb-pcie")
    own = dict(t4.timing.gemm_achievable_flops_per_s, fp16=50e12)
    other = replace(t4, timing=replace(t4.timing, gemm_achievable_flops_per_s=own))
    held = held_out_profile(other).timing.gemm_achievable_flops_per_s
    assert held["fp16"] == held_out_profile(t4).timing.gemm_achievable_flops_per_s["fp16"]
    assert held["fp16"] == pytest.approx(70 * 79e12 / 150, rel=1e-9)


def test_without_board_power_the_full_clock_cap_holds():
    # no board_power_w: no power term; T4 fp16: the one other fp16-kind fit at full clock, the A40's (138 TFLOP/s of
    # its 149.7 peak, fitted on Vidur's A40 rows: a40-48gb-pcie), 0.92184 x 65 = 59.920 TFLOP/s;
    # fp32: the V100's full-clock ratio 13.5 / 15.7 = 0.85987 x 8.1 = 6.965 TFLOP/s
    from dataclasses import replace

    t4 = replace(load_hardware("t4-16gb-pcie"), board_power_w=None)
    held = held_out_profile(t4).timing.gemm_achievable_flops_per_s
    assert held["fp16"] == pytest.approx(138 / 149.7 * 65e12, rel=1e-4)
    assert held["fp32"] == pytest.approx(13.5 / 15.7 * 8.1e12, rel=1e-9)


def test_full_clock_fit_is_consistent_with_the_others_energy_per_flop():
    # the V100's fp32 fit counts as full clock (0.86 >= 0.803 of peak), and its power agrees: 13.5 TFLOP/s at the
    # T4's 70 / 4.6 = 15.217 pJ/FLOP draws 205.4 W, at the A10's 150 / 12.1 = 12.397 pJ/FLOP 167.4 W: both under
    # its 300 W, so its rate is not set by power; the T4's and A10's fp16 fits (0.477, 0.632 < 0.803) are
    # power-limited
    v100 = load_hardware("v100-sxm2-32gb")
    rate = v100.timing.gemm_achievable_flops_per_s["fp32"]
    assert rate / holdout_rates.peak_of(v100, "fp32") >= generic_ratio("fp32", v100.name)
    draws = [rate * o.board_power_w / o.timing.gemm_achievable_flops_per_s["fp32"]
             for o in map(load_hardware, ("t4-16gb-pcie", "a10-24gb-pcie"))]
    assert draws == [pytest.approx(205.43, rel=1e-4), pytest.approx(167.36, rel=1e-4)]
    assert max(draws) < v100.board_power_w
    for name, dtype in (("t4-16gb-pcie", "fp16"), ("a10-24gb-pcie", "bf16")):
        hw = load_hardware(name)
        ratio = hw.timing.gemm_achievable_flops_per_s[dtype] / holdout_rates.peak_of(hw, dtype)
        assert ratio < generic_ratio("fp16", name)
