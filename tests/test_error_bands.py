"""Error bands: the lookup order of a bands table, and the ranges every realistic figure carries (llm, analyze,
sweep, serve, plan).  A time t with band half-width factor f = 1 + p90_abs lies in [t / f, t * f]; a rate takes the
reciprocal."""

from __future__ import annotations

import json
import math

import pytest

import graphroof
from graphroof.hardware import bands as bands_module
from graphroof.hardware.bands import ErrorBand, band_for, band_keys, lookup_band
from graphroof.llm import Pricing, estimate
from graphroof.planner import plan
from graphroof.report.serve import render_serve
from graphroof.serving import serve
from graphroof.serving.compare import ServeComparison
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


def test_a_device_without_rows_takes_the_gpu_holdout_band():
    """A table with ``unseen`` bands (the GPU hold-out's errors at the vendor / '*' levels): a device with rows of
    the figure keeps its in-sample band; one without takes the unseen band before the in-sample vendor one, says so,
    and falls back to the in-sample bands where the unseen table has no key."""
    table = dict(TABLE, unseen={"ttft|vendor:NVIDIA|*": {"n": 9, "median_abs": 0.12, "p90_abs": 0.30,
                                                          "signed_median": 0.05}})
    assert lookup_band(table, "ttft", "h100-sxm", "NVIDIA", "serving")["key"] == "ttft|h100-sxm|serving"
    b = band_for("ttft", "rtx-3090-24gb", "NVIDIA", "serving", table=table)
    assert b.unseen and not b.fallback and b.p90_abs == 0.30 and b.key == "ttft|vendor:NVIDIA|*"
    assert "GPU hold-out" in b.describe() and "no measured rows of it for this device and runtime" in b.describe()
    assert ErrorBand.from_dict(b.as_dict()) == b
    # h100 under another runtime: no key of its own for it, so the unseen vendor band too
    assert band_for("ttft", "h100-sxm", "NVIDIA", "eager", table=table).unseen
    # no unseen key for tpot: the in-sample '*' band, not marked unseen
    t = band_for("tpot", "rtx-3090-24gb", "NVIDIA", "serving", table=table)
    assert t.key == "tpot|*|*" and not t.unseen


def test_the_bands_file_holds_the_holdout_bands_of_its_validation():
    """The shipped table was written by ``graphroof validate --holdout gpu --bands``: its unseen bands sit at the
    vendor / '*' levels only, over as many rows as the in-sample band of the same key."""
    from graphroof.hardware.bands import load_bands

    t = load_bands()
    assert t["unseen"] and all(k.split("|")[1] == "*" or k.split("|")[1].startswith("vendor:") for k in t["unseen"])
    for k, v in t["unseen"].items():
        assert v["n"] == t["bands"][k]["n"], k


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


# -- serve and plan, under TABLE (monkeypatched in as the shipped table) ---------------------------------------
# On h100-sxm under the serving preset: TTFT takes ttft|h100-sxm|serving (p90 0.10: factor 1.1), TPOT tpot|*|*
# (0.25: factor 1.25), throughput no key at all: the fallback (1.0: factor 2, "no measured data").
SERVE = dict(rate=[200.0], requests=30, prompt_len="fixed:32", gen_len="fixed:8", seed=1)


def _quiet(fn, *a, **kw):
    import warnings

    with warnings.catch_warnings(), pytest.MonkeyPatch.context() as mp:
        warnings.simplefilter("ignore")
        mp.setattr(bands_module, "load_bands", lambda path=None: TABLE)
        return fn(*a, **kw)


@pytest.fixture(scope="module")
def served():
    return _quiet(serve, toy_source(), hw="h100", pricing=Pricing(rules=RULES), slo_ttft_s=0.01, slo_tpot_s=0.001,
                  target_rate=1e6, **SERVE)


def test_serve_percentiles_carry_their_ranges(served):
    p = served.points[0]
    for q in ("p50", "p90", "p99"):
        assert p.ttft_low_s[q] == pytest.approx(p.ttft_s[q] / 1.1) and p.ttft_high_s[q] == pytest.approx(p.ttft_s[q] * 1.1)
        assert p.tpot_low_s[q] == pytest.approx(p.tpot_s[q] / 1.25)
        assert p.e2e_high_s[q] == pytest.approx(p.e2e_s[q] * 2.0)  # e2e: the throughput band (fallback: x2)
    assert p.output_tokens_per_s_per_gpu_low == pytest.approx(p.output_tokens_per_s_per_gpu / 2.0)
    m = served.max_rate
    assert (m["rate_rps_low"], m["rate_rps_high"]) == pytest.approx((m["rate_rps"] / 2, m["rate_rps"] * 2))
    # replicas for 1e6 req/s: ceil(1e6 / capacity) at the capacity's high end (fewest) and low end (most)
    rep = served.replicas
    cap = rep["capacity_rps_per_replica"]
    assert (rep["replicas_needed_low"], rep["replicas_needed_high"]) == (math.ceil(1e6 / (2 * cap)),
                                                                         math.ceil(1e6 / (cap / 2)))
    d = json.loads(served.to_json())
    assert d["error_bands"]["ttft"]["key"] == "ttft|h100-sxm|serving" and d["error_bands"]["throughput"]["fallback"]
    assert d["points"][0]["ttft_high_s"]["p99"] == pytest.approx(p.ttft_s["p99"] * 1.1)


def test_serve_reports_show_the_ranges_and_the_regimes(served):
    text = graphroof.render(served, "terminal")
    assert "TTFT p99 range" in text and "error band" in text
    assert "ttft on h100-sxm under serving" in text and "validated on 4 measured rows (ttft|h100-sxm|serving)" in text
    assert "no measured data in this regime (wide fallback)" in text  # the throughput band
    assert "TTFT p99 range" in graphroof.render(served, "markdown")
    page = graphroof.render(served, "html")
    assert "TTFT p99 range" in page and 'class="muted bands"' in page
    # a result read back from JSON renders the same ranges and line
    assert render_serve(json.loads(served.to_json())) == render_serve(served)
    row = ServeComparison(served.model, [served]).rows()[0]
    assert row["max_rate_rps_high"] == pytest.approx(served.max_rate["rate_rps"] * 2)
    assert "max rate range" in graphroof.render(ServeComparison(served.model, [served]), "terminal")


def test_serve_ideal_and_disaggregated_bands():
    ideal = _quiet(serve, toy_source(), hw="h100", pricing=Pricing(rules=RULES, ideal=True), **SERVE)
    d = json.loads(ideal.to_json())
    assert d["error_bands"] == {} and "ttft_low_s" not in d["points"][0]  # the ideal roofline is a bound: no band
    assert "error bands" not in graphroof.render(ideal, "terminal")
    # disaggregated: TTFT is the prefill pool's (h100: factor 1.1), TPOT the decode pool's (a100: tpot|*|*, 1.25)
    dis = _quiet(serve, toy_source(), hw="h100", pricing=Pricing(rules=RULES), disagg="1p1d", decode_hw="a100",
                 **SERVE)
    assert dis.bands["ttft"].device == "h100-sxm" and dis.bands["tpot"].device == "a100-80gb-sxm"
    p = dis.points[0]
    assert p.ttft_high_s["p50"] == pytest.approx(p.ttft_s["p50"] * 1.1)
    assert p.tpot_high_s["p50"] == pytest.approx(p.tpot_s["p50"] * 1.25)


def test_plan_points_carry_their_ranges():
    r = _quiet(plan, toy_source(L=2, H=256, heads=4, kv_heads=2, I=512, V=1000), hw=["h100"], rate=[400.0],
               slo_ttft_s=0.002, slo_tpot_s=0.0005, tp=[1], max_num_seqs=[8], max_batched_tokens=[256],
               prompt_len="fixed:64", gen_len="fixed:8", requests=20, search_requests=20, jobs=1,
               pricing=Pricing(rules=RULES))
    pick = r.cheapest[0]["by_gpus"]
    assert r.frontier and pick is not None
    for p in (*r.frontier, pick):
        assert (p["ttft_low_s"], p["ttft_high_s"]) == pytest.approx((p["ttft_s"] / 1.1, p["ttft_s"] * 1.1))
        assert p["tpot_high_s"] == pytest.approx(p["tpot_s"] * 1.25)
        # tok/s per user = 1 / median TPOT: the TPOT band, reciprocal (the same pair of factors)
        assert p["tokens_per_s_per_user_low"] == pytest.approx(p["tokens_per_s_per_user"] / 1.25)
        assert p["output_tokens_per_s_per_gpu_high"] == pytest.approx(p["output_tokens_per_s_per_gpu"] * 2.0)
    d = json.loads(r.to_json())
    assert d["error_bands"]["h100-sxm"]["ttft"]["key"] == "ttft|h100-sxm|serving"
    assert d["frontier"][0]["ttft_high_s"] == pytest.approx(r.frontier[0]["ttft_s"] * 1.1)
    for fmt in ("terminal", "markdown", "html"):
        out = graphroof.render(r, fmt)
        assert "TTFT p99 range" in out and "wide fallback" in out and "ttft|h100-sxm|serving" in out
