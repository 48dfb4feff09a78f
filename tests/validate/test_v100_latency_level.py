"""The V100's latency level (hw_profiles/v100-sxm2-32gb.toml [sources].timing): the derived latencies x 1.98, fitted
on its four TensorRT 7.2 batch-1 vision rows, and held out under --holdout gpu / engine
(graphroof.validate.holdout_rates.latency_held_out)."""

from __future__ import annotations

import pytest

from graphroof.hardware import load_hardware
from graphroof.validate.holdout import fitted_profiles, held_out_profile
from graphroof.validate.holdout_rates import LATENCY_FITS, engine_held_profile, latency_level


def test_level_and_latencies_by_hand():
    v = load_hardware("v100-sxm2-32gb")
    assert latency_level(v) == 1.98
    # derived: the A100 fits 5.34 / 1.95 us x 1410 / 1530 MHz = 4.921 / 1.797 us; x 1.98 = 9.744 / 3.558 us
    assert 5.34e-6 * 1410 / 1530 == pytest.approx(4.921e-6, rel=1e-3)
    assert v.timing.gemm_latency_s == pytest.approx(4.921e-6 * 1.98, rel=1e-3)
    assert v.timing.stream_latency_s == pytest.approx(1.797e-6 * 1.98, rel=1e-3)
    # the profile stays derived: its other [timing] constants are the A100's, so it is no fitted GPU of the gpu
    # hold-out (it does not enter the A100 / H100 transfers)
    assert v.origin == "derived" and "v100-sxm2-32gb" not in {p.name for p in fitted_profiles("timing")}
    assert latency_level(load_hardware("t4-16gb-pcie")) is None
    assert LATENCY_FITS == {"v100-sxm2-32gb": ("vision", "TensorRT 7.2")}


def test_gpu_holdout_drops_the_level():
    held = held_out_profile("v100-sxm2-32gb", "gpu")
    # 9.744 / 1.98 = 4.921 us, 3.558 / 1.98 = 1.797 us: the derived latencies, no V100 row in them
    assert held.timing.gemm_latency_s == pytest.approx(4.921e-6, rel=1e-3)
    assert held.timing.stream_latency_s == pytest.approx(1.797e-6, rel=1e-3)


def test_engine_holdout_drops_it_for_the_tensorrt_rows_only():
    v = load_hardware("v100-sxm2-32gb")
    trt = engine_held_profile(v, "vision", "TensorRT 7.2")
    assert trt.timing.gemm_latency_s == pytest.approx(4.921e-6, rel=1e-3)
    assert trt.timing.gemm_achievable_flops_per_s == v.timing.gemm_achievable_flops_per_s  # fp32 fit: FT's rows
    ft = engine_held_profile(v, "vision", "FasterTransformer PyTorch")
    assert ft.timing.gemm_latency_s == v.timing.gemm_latency_s  # not fitted on FT's rows: kept


def test_fit_rows_at_the_fitted_level():
    # the four rows the level was fitted on (least squared log error): within 5% each, errors -0.3, +3.6, -0.8,
    # -2.1% when fitted (README#L450 1.23 ms, 1.97 ms, 3.05 ms, 5.66 ms)
    from graphroof.validate import validate

    rows = {"vision_encoder.csv:707", "vision_encoder.csv:727", "vision_encoder.csv:747", "vision_encoder.csv:767"}
    r = validate("vision", only=rows)
    got = [x for x in r.rows if x.predicted is not None]
    assert len(got) == 4 and all(x.engine.startswith("TensorRT 7.2") and x.gpu == "v100-sxm2-32gb" for x in got)
    assert all(abs(x.predicted / x.measured - 1) < 0.05 for x in got)
