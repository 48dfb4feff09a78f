"""Error bands: the lookup order of a bands table, and the ranges every realistic figure carries (llm, analyze,
sweep).  A time t with band half-width factor f = 1 + p90_abs lies in [t / f, t * f]; a rate takes the reciprocal."""

from __future__ import annotations

import json

import pytest

import graphroof
from graphroof.hardware.bands import band_for, band_keys, lookup_band
from graphroof.llm import estimate
from graphroof.sweeps import sweep
from tests.llm.toy import RULES, toy_source

TABLE = {
    "bands": {
        "ttft|h100-sxm|serving": {"n": 4, "median_abs": 0.05, "p90_abs": 0.10, "signed_median": 0.01},
        "ttft|vendor:NVIDIA|*": {"n": 9, "median_abs": 0.08, "p90_abs": 0.20, "signed_median": 0.0},
        "tpot|*|*": {"n": 30, "median_abs": 0.04, "p90_abs": 0.25, "signed_median": -0.02},
    },
    "fallback": {"n": 0, "median_abs": 0.5, "p90_abs": 1.0, "signed_median": 0.0, "fallback": True},
}


def test_lookup_goes_from_the_most_specific_key_to_the_fallback():
    assert band_keys("ttft", "h100-sxm", "NVIDIA", "serving") == [
        "ttft|h100-sxm|serving", "ttft|h100-sxm|*", "ttft|vendor:NVIDIA|serving", "ttft|vendor:NVIDIA|*", "ttft|*|*"]
    assert lookup_band(TABLE, "ttft", "h100-sxm", "NVIDIA", "serving")["key"] == "ttft|h100-sxm|serving"
    # another runtime on the same device: no device key matches, the vendor's does
    assert lookup_band(TABLE, "ttft", "h100-sxm", "NVIDIA", "eager")["key"] == "ttft|vendor:NVIDIA|*"
    assert lookup_band(TABLE, "tpot", "mi300x", "AMD", "serving")["key"] == "tpot|*|*"
    b = band_for("throughput", "mi300x", "AMD", "serving", table=TABLE)
    assert b.fallback and b.n == 0 and b.p90_abs == 1.0
    # the range: 10 ms with p90 0.10 -> [10 / 1.1, 10 * 1.1] = [9.0909, 11.0] ms
    b = band_for("ttft", "h100-sxm", "NVIDIA", "serving", table=TABLE)
    assert (b.low(0.010), b.high(0.010)) == pytest.approx((0.010 / 1.1, 0.011), rel=1e-12)


def test_llm_figures_carry_their_ranges():
    est = estimate(toy_source(), hw="h100", batch=[1, 4], prompt=32, gen=8, rules=RULES)
    d = json.loads(est.to_json())
    assert set(d["error_bands"]) == {"ttft", "tpot", "throughput"}
    for c, cd in zip(est.configs, d["configs"]):
        f = 1 + c.bands["ttft"].p90_abs
        assert cd["ttft_low_s"] == pytest.approx(cd["ttft_s"] / f) and cd["ttft_high_s"] == pytest.approx(cd["ttft_s"] * f)
        f = 1 + c.bands["throughput"].p90_abs  # a rate: the reciprocal band of its time
        assert cd["output_tokens_per_s_low"] == pytest.approx(cd["output_tokens_per_s"] / f)
        assert cd["e2e_high_s"] == pytest.approx(cd["e2e_s"] * f)
    assert "TTFT range" in graphroof.render(est, "markdown")
    ideal = estimate(toy_source(), hw="h100", batch=[1], prompt=32, gen=8, ideal=True, rules=RULES)
    assert "ttft_low_s" not in json.loads(ideal.to_json())["configs"][0]  # the ideal roofline is a bound: no band


def test_analysis_and_sweep_ranges():
    a = estimate(toy_source(), hw="h100", batch=[1], prompt=32, gen=8, rules=RULES).configs[0].prefill.analysis
    t = a.to_dict()["totals"]
    f = 1 + a.band.p90_abs
    assert a.band_figure == "layer-kernel"  # no op named attention or conv in the toy (toy.attn): generic kernels
    assert t["time_realistic_low_s"] == pytest.approx(t["time_realistic_s"] / f)
    r = sweep(toy_source(), hw=["h100"], batch=[1, 2], prompt=[16], gen=[4], rules=RULES)
    d = json.loads(r.to_json())
    p, b = d["points"][0], d["error_bands"]["h100-sxm"]
    assert p["tpot_high_s"] == pytest.approx(p["tpot_s"] * (1 + b["tpot"]["p90_abs"]))
    assert "error bands" in graphroof.render(r, "terminal")
