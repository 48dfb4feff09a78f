"""``graphroof validate``: the statistics and bands (hand-derived numbers), the exclusions (only with a reason),
bad input (one-line InputError, CLI exit 1, no file), and regression guards on a fast subset of the data.

The figures themselves are checked against the CLI in tests/test_validate_cli.py."""

from __future__ import annotations

import pytest

from graphroof.errors import InputError
from graphroof.validate import Row, ValidationResult, bands_of, lookup_band, validate
from graphroof.validate.data import DATA_DIR, excluded_reason, exclusions
from graphroof.validate.result import error_of, stats_of

#: Regression guards, NOT the targets: today's achieved |error| (2026-11-27, measured through
#: ``graphroof.validate(DATASET)``) plus a margin.  The issue's targets are median 8% / worst 20%; the timing
#: physics is being changed by other engineers, so the integrator updates these numbers here (one place) after
#: the physics lands: rerun ``graphroof validate --dataset kernels,vidur_allreduce -f json``.
GUARDS = {
    # dataset: (median |err| at most, worst |err| at most, scored rows at least)
    "kernels": (0.20, 1.30, 40),           # today: median 13.8%, worst 108.6%, 46 rows
    "vidur_allreduce": (0.10, 6.0, 9900),  # today: median 7.1%, worst 494% (multi-node small messages), 9940 rows
}


def _row(err: float, **kw) -> Row:
    base = dict(dataset="d", row_id="f.csv:2", engine="e", gpu="h100-sxm", vendor="NVIDIA", family="m", regime="r",
                figure="ttft", runtime="serving", metric="m", unit="s", inputs={}, measured=1.0)
    base.update(kw)
    return Row(**base, predicted=1.0 + err)


def test_error_convention_times_and_rates():
    # a time predicted 1.2 s against 1.0 s measured: +20%; a rate predicted 80 tok/s against 100 measured: the
    # implied time is 100/80 = 1.25x the measured one: +25%
    assert error_of(1.2, 1.0, False) == pytest.approx(0.2)
    assert error_of(80.0, 100.0, True) == pytest.approx(0.25)
    assert error_of(None, 1.0, False) is None
    assert error_of(0.0, 1.0, False) is None


def test_stats_hand_derived():
    # errors -0.1, 0.2, 0.05, -0.4, 0.3: |e| sorted 0.05 0.1 0.2 0.3 0.4 -> median 0.2; p90 at position
    # 0.9 * 4 = 3.6 -> 0.3 + 0.6 * (0.4 - 0.3) = 0.36; worst 0.4; signed median of (-0.4 -0.1 0.05 0.2 0.3) = 0.05
    s = stats_of([-0.1, 0.2, 0.05, -0.4, 0.3])
    assert s.n == 5
    assert s.median_abs == pytest.approx(0.2)
    assert s.p90_abs == pytest.approx(0.36)
    assert s.worst_abs == pytest.approx(0.4)
    assert s.signed_median == pytest.approx(0.05)
    assert stats_of([]) is None


def test_subsets_and_not_scored():
    rows = [_row(0.1), _row(-0.3), _row(0.2, regime="other"), _row(0.5, excluded="the source says so"),
            _row(0.0, not_covered="no profile")]
    r = ValidationResult(rows, ["d"])
    subs = {e["regime"]: e["stats"] for e in r.subsets()}
    assert subs["r"]["n"] == 2 and subs["r"]["median_abs"] == pytest.approx(0.2)   # |0.1|, |-0.3| -> 0.2
    assert subs["other"]["n"] == 1
    ns = {(e["kind"], e["reason"]): e["n"] for e in r.not_scored()}
    assert ns == {("excluded", "the source says so"): 1, ("not covered", "no profile"): 1}
    d = r.to_dict()
    assert d["n_rows"] == 5 and d["n_scored"] == 3


def test_bands_lookup_and_fallback():
    rows = [_row(0.1), _row(-0.2), _row(0.3, gpu="a100-80gb-sxm"), _row(0.4, figure="tflops", runtime="compiled")]
    b = bands_of(ValidationResult(rows, ["d"]))
    # ttft on h100-sxm under serving: errors 0.1, -0.2 -> median |e| 0.15, signed median -0.05
    hit = lookup_band(b, "ttft", "h100-sxm", "NVIDIA", "serving")
    assert hit["key"] == "ttft|h100-sxm|serving" and hit["n"] == 2
    assert hit["median_abs"] == pytest.approx(0.15) and hit["signed_median"] == pytest.approx(-0.05)
    # another runtime on that device: the device's band over every runtime
    assert lookup_band(b, "ttft", "h100-sxm", "NVIDIA", "eager")["key"] == "ttft|h100-sxm|*"
    # an unmeasured NVIDIA device: the vendor's band (three ttft rows: 0.1, -0.2, 0.3 -> median |e| 0.2)
    v = lookup_band(b, "ttft", "l4-24gb-pcie", "NVIDIA", "serving")
    assert v["key"] == "ttft|vendor:NVIDIA|serving" and v["median_abs"] == pytest.approx(0.2)
    # another vendor: the figure's band over every device; no data for the figure at all: the wider fallback
    assert lookup_band(b, "ttft", "mi300x-192gb-oam", "AMD", "serving")["key"] == "ttft|*|*"
    fb = lookup_band(b, "tpot", "h100-sxm", "NVIDIA", "serving")
    assert fb["key"] == "fallback" and fb["fallback"] is True
    assert fb["p90_abs"] >= 0.5 and fb["p90_abs"] > max(e["p90_abs"] for e in b["bands"].values())


def test_host_dispatched_rows_stay_out_of_the_wildcard_bands():
    # a pytorch-eager row (host cost per kernel) at +150% and a serving row at +10% on the h100: the eager row makes
    # only its own runtime's band; the device's band over every runtime holds the serving row alone
    rows = [_row(1.5, runtime="pytorch-eager"), _row(0.1)]
    b = bands_of(ValidationResult(rows, ["d"]))
    assert b["bands"]["ttft|h100-sxm|pytorch-eager"]["n"] == 1
    wild = lookup_band(b, "ttft", "h100-sxm", "NVIDIA", "vllm")
    assert wild["key"] == "ttft|h100-sxm|*" and wild["n"] == 1 and wild["median_abs"] == pytest.approx(0.1)
    assert b["bands"]["ttft|*|*"]["n"] == 1


def test_exclusions_have_reasons_and_match_only_their_dataset():
    rules = exclusions()
    assert rules, "the exclusions file lists the source-given exclusions"
    assert all(len(r.reason) > 20 for r in rules)
    assert excluded_reason("gptfast", {"metric": "reported_weight_bandwidth_GBps (derived)"}, rules)
    assert not excluded_reason("gptfast", {"metric": "decode_tokens_per_s_per_user"}, rules)
    assert not excluded_reason("trtllm", {"metric": "reported_weight_bandwidth_GBps"}, rules)


def test_an_exclusion_without_reason_is_refused(tmp_path, monkeypatch):
    import graphroof.validate.data as data

    (tmp_path / "exclusions.csv").write_text("dataset,column,pattern,reason\nvision,framework,*,\n")
    monkeypatch.setattr(data, "DATA_DIR", tmp_path)
    with pytest.raises(InputError, match="needs a reason"):
        data.exclusions()


def test_bundled_data_and_citations_ship():
    names = {p.name for p in DATA_DIR.iterdir()}
    for n in ("README.md", "exclusions.csv", "gptfast_decode.csv", "kernels.csv", "trtllm_v05_v061_static.csv",
              "vision_encoder.csv", "vidur_a100_dgx_all_reduce.csv", "vidur_h100_Llama-2-7b-hf_ops.csv"):
        assert n in names
    assert "Vidur" in (DATA_DIR / "README.md").read_text()


@pytest.mark.parametrize("dataset", sorted(GUARDS))
def test_regression_guard_fast_subsets(dataset):
    r = validate(dataset)
    s = r.per_dataset()[0]["stats"]
    med, worst, n = GUARDS[dataset]
    assert s["n"] >= n
    assert s["median_abs"] <= med, f"{dataset}: median |error| {s['median_abs']:.1%} above the guard {med:.0%}"
    assert s["worst_abs"] <= worst, f"{dataset}: worst |error| {s['worst_abs']:.1%} above the guard {worst:.0%}"
    # every row left out says why
    assert all(row.scored or row.excluded or row.not_covered for row in r.rows)


def test_gpu_holdout_changes_only_fitted_gpus():
    from graphroof.hardware import load_hardware
    from graphroof.validate.holdout import held_out_profile

    a100, h100 = load_hardware("a100-80gb-sxm"), load_hardware("h100-sxm")
    ha = held_out_profile("a100-80gb-sxm")
    # with two fitted GPUs the A100's efficiencies are the H100's; its SM count and tile are its own
    assert ha.timing.gemm_matrix_efficiency == h100.timing.gemm_matrix_efficiency
    assert ha.timing.sm_count == a100.timing.sm_count and ha.timing.gemm_tile == a100.timing.gemm_tile
    # the L2 bandwidth moves as a fraction of the fp16 peak: H100's L2 bw / H100's fp16 peak x A100's fp16 peak
    # (a profile without the L2 term keeps none)
    if a100.timing.gemm_l2_bw_bytes_per_s and h100.timing.gemm_l2_bw_bytes_per_s:
        ratio = h100.timing.gemm_l2_bw_bytes_per_s / h100.matrix_peak_flops_per_s["fp16"]
        assert ha.timing.gemm_l2_bw_bytes_per_s == pytest.approx(ratio * a100.matrix_peak_flops_per_s["fp16"])
    else:
        assert ha.timing.gemm_l2_bw_bytes_per_s == a100.timing.gemm_l2_bw_bytes_per_s
    # a derived profile was never fitted on its own rows: unchanged
    l4 = load_hardware("l4-24gb-pcie")
    assert held_out_profile("l4-24gb-pcie").timing == l4.timing


def test_bad_input_is_one_line():
    with pytest.raises(InputError, match="unknown dataset") as e:
        validate("vidur_ops,nope")
    assert "\n" not in str(e.value)
    with pytest.raises(InputError, match="--holdout 'cpu'") as e:
        validate("kernels", holdout="cpu")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("argv,needle", [(["--dataset", "nope"], "unknown dataset"),
                                         (["--holdout", "cpu"], "--holdout"),
                                         (["--dataset", "kernels", "--rows", "/no/such/dir/r.csv"], "does not exist"),
                                         (["--dataset", "kernels", "--jobs", "0"], "--jobs 0")])
def test_cli_bad_input_exits_1_without_output(argv, needle, tmp_path, capsys):
    from graphroof.cli import main

    out = tmp_path / "report.md"
    assert main(["validate", *argv, "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and err[0].startswith("graphroof: error:")
    assert not out.exists()


def test_render_dispatches_to_the_validation_renderer():
    from graphroof import render
    from graphroof.report.validate import render_validation

    r = ValidationResult([_row(0.1), _row(-0.3, excluded="the source says so")], ["d"], holdout="engine")
    assert render(r, "json") == r.to_json() + "\n"
    md = render(r, "markdown")
    assert md == render_validation(r, "markdown")
    assert "| d " in md and "the source says so" in md and "Hold-out: engine" in md
    csv = render(r, "csv").splitlines()
    assert csv[0].startswith("dataset,row,") and len(csv) == 3


def test_gpt_fast_preset_copy_stays_equal_to_the_example():
    """data/presets/gpt-fast.toml is a copy of examples/gpt-fast-runtime.toml (the wheel ships no examples/)."""
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "gpt-fast-runtime.toml"
    if not example.exists():
        pytest.skip("no examples/ in this checkout")
    mine = (DATA_DIR / "presets" / "gpt-fast.toml").read_text().splitlines()
    assert [x for x in mine if not x.startswith("# Copy") and not x.startswith("# the validation")] == \
        example.read_text().splitlines()


def test_readme_section_regenerates_from_saved_json(tmp_path):
    """tools/update_accuracy.py: the section between the markers is replaced by the markdown report; a result
    read back from ``-f json`` renders as the result itself."""
    import json

    from graphroof.report.validate import render_validation
    from tools.update_accuracy import END, START, replace_section, section

    r = ValidationResult([_row(0.1), _row(-0.3)], ["d"], holdout="gpu", wall_s=12.0)
    saved = json.loads(r.to_json())
    assert render_validation(saved, "markdown") == render_validation(r, "markdown")
    path = tmp_path / "r.json"
    path.write_text(r.to_json())
    new = section(None, from_json=path)
    assert new.startswith(START) and new.endswith(END) and "--dataset d --holdout gpu" in new
    text = f"# x\n\n{START}\nOLD-SECTION\n{END}\n\n## after\n"
    out = replace_section(text, new)
    assert "OLD-SECTION" not in out and out.startswith("# x\n\n") and out.endswith("\n\n## after\n")
    assert "| d " in out and "wall time" not in out
    # another saved run (an engine hold-out) joins a per-dataset table: rows d: plain |errors| 0.1, 0.3 -> median
    # 20.0%; the engine run's held-out figures are the same rows (a row's hold-out defaults to its plain figure)
    r2 = ValidationResult([_row(0.1), _row(-0.3)], ["d"], holdout="engine", wall_s=1.0)
    other = tmp_path / "e.json"
    other.write_text(r2.to_json())
    both = section(None, from_json=path, also=[other])
    assert "| dataset | n | median | p90 | leave-one-gpu-out median | leave-one-engine-out median |" in both
    assert "--holdout engine" in both.splitlines()[1]


def test_engine_holdout_leaves_profiles():
    """No profile constant is fitted per engine (the CUDA-graph all-reduce latencies are NCCL's tuning-model figures,
    6.6 / 0.6 us, not a gpt-fast fit): the engine hold-out leaves every profile as it is (the preset constants fitted
    per engine are held out by graphroof.validate.holdout_engine: tests/test_holdout_fits.py)."""
    from graphroof.hardware import load_hardware
    from graphroof.validate.holdout import held_out_profile

    a100 = load_hardware("a100-80gb-sxm")
    assert held_out_profile(a100, "engine", "gptfast") == a100
    assert (a100.collectives.device_latency_s, a100.collectives.device_hop_latency_s) == (6.6e-6, 0.6e-6)
    assert held_out_profile(a100, "engine", "trtllm") == a100
    assert held_out_profile(a100, "model", "vidur_ops") == a100
