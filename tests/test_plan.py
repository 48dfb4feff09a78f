"""graphroof.plan: inputs checked before any model is built, memory rejections with reasons, analytic pruning,
points equal to the serving simulator's, the frontier and the cheapest pick, engine flags, renderers, and the same
result serially, over processes and over Ray."""

from __future__ import annotations

import dataclasses
import json
import math
import warnings

import pytest

from graphroof.errors import GraphroofError, InputError
from graphroof.llm import Engine, Pricing
from graphroof.planner import plan
from graphroof.planner.flags import flags_for
from graphroof.planner.result import pareto
from graphroof.planner.space import Config, parallel_axes
from graphroof.report import render
from tests.llm.toy import RULES, toy_source

TOY = dict(L=2, H=256, heads=4, kv_heads=2, I=512, V=1000)
#: small and fast: fixed lengths, few requests, rates around the toy's capacity on an H100
FAST = dict(hw=["h100"], rate=[400.0, 1600.0], slo_ttft_s=0.002, slo_tpot_s=0.0005, tp=[1, 2], max_num_seqs=[8, 32],
            max_batched_tokens=[256], prompt_len="fixed:64", gen_len="fixed:8", requests=40, search_requests=20)


def _plan(**kw):
    args = {**FAST, **kw}
    args.setdefault("pricing", Pricing(rules=RULES))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return plan(toy_source(**TOY), **args)


@pytest.fixture(scope="module")
def serial():
    return _plan(jobs=1)


# -- inputs: one line, before the model is built (the model name below does not exist) -------------------------
@pytest.mark.parametrize("kw, msg", [
    (dict(hw=[]), "needs at least one value"),
    (dict(hw=["no-such-gpu"]), "no-such-gpu"),
    (dict(slo_ttft_s=None), "needs a TTFT SLO"),
    (dict(slo_tpot_s=-1.0), "slo_tpot_s"),
    (dict(rate=[0.0]), "rate"),
    (dict(rate=[]), "at least one value"),
    (dict(engines=["tgi"]), "unknown engine 'tgi'"),
    (dict(gpu_budget=1, tp=[2, 4]), "below one replica"),
    (dict(weights=["int3"]), "int3"),
    (dict(max_num_seqs=[512], max_batched_tokens=[256]), "no configuration left"),
    (dict(jobs=0), "jobs"),
    (dict(arrival="closed:4"), "open arrival"),
])
def test_bad_input_is_one_line_before_any_model(kw, msg):
    args = {**FAST, **kw}
    with pytest.raises(GraphroofError, match=msg) as e:  # InputError; an unknown device: HardwareProfileError
        plan("no-such-model-anywhere", **args)
    assert "\n" not in str(e.value)


def test_parallel_axes_follow_pricing_fields():
    """PP / EP / DP are searched exactly when graphroof.llm.Pricing has the field; without it a degree above 1 is
    an InputError naming the field, and the result's notes say the axis was left out."""
    have = {f.name for f in dataclasses.fields(Pricing)}
    assert parallel_axes() == tuple(a for a in ("pp", "ep", "dp") if a in have)
    for a in ("pp", "ep", "dp"):
        if a not in have:
            with pytest.raises(InputError, match=f"no '{a}' field"):
                plan("no-such-model-anywhere", **{**FAST, a: [2]})


def test_disaggregated_pools_follow_serve():
    """x:y pools are an axis exactly when graphroof.serve takes disagg; a group of x + y replicas is simulated by
    serve itself and priced as (x + y) x TP GPUs."""
    from graphroof.planner.space import disagg_supported

    if not disagg_supported():
        with pytest.raises(InputError, match="no disaggregated pools"):
            plan("no-such-model-anywhere", **{**FAST, "disagg": ["1p1d"]})
        return
    r = _plan(jobs=1, tp=[1], max_num_seqs=[8], disagg=[None, "1p1d"])
    dis = [x for x in r.configs if x["disagg"]]
    assert len(r.configs) == 2 and len(dis) == 1 and dis[0]["gpus_per_replica"] == 2
    assert dis[0]["status"] in ("simulated", "rejected") and (dis[0]["status"] == "simulated" or dis[0]["reason"])
    for p in dis[0]["points"]:
        assert p["gpus"] == 2 * p["replicas"]


# -- the search ---------------------------------------------------------------------------------------------------
def test_every_configuration_is_accounted_for(serial):
    r = serial
    c = r.counts
    # 1 device x 2 TP x 2 max_num_seqs x 1 max_batched_tokens = 4
    assert c["configurations"] == 4 == len(r.configs)
    assert c["simulated"] + c["pruned"] + c["rejected"] == 4
    order = [(x["hw"], x["tp"], x["max_num_seqs"]) for x in r.configs]
    assert order == sorted(order)  # the stable key: device, TP, ..., batch limits
    for x in r.configs:
        assert x["status"] in ("simulated", "pruned", "rejected")
        if x["status"] != "simulated":
            assert x["reason"]
        for engine in ("vllm", "sglang", "trtllm"):
            assert engine in x["flags"]
    assert c["simulations"] == sum(x["simulations"] for x in r.configs) > 0
    assert any(p["meets_slo"] for p in r.points())


def test_point_equals_the_serving_simulator(serial):
    """A plan point is graphroof.serve's simulation of one replica at rate / replicas on the same seeded requests
    (same engine settings, same KV blocks): TTFT / TPOT percentiles and throughput agree."""
    from graphroof.serving.api import serve_one

    c = next(x for x in serial.configs if x["status"] == "simulated" and x["points"])
    p = c["points"][0]
    lam = p["rate_rps"] / p["replicas"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = serve_one(toy_source(**TOY), hw="h100", rate=[lam], requests=FAST["search_requests"],
                      prompt_len="fixed:64", gen_len="fixed:8", max_num_seqs=c["max_num_seqs"],
                      max_batched_tokens=c["max_batched_tokens"], slo_ttft_s=FAST["slo_ttft_s"],
                      slo_tpot_s=FAST["slo_tpot_s"], pricing=Pricing(rules=RULES, tp=c["tp"]))
    sp = s.points[0]
    assert s.settings["kv_blocks"] == c["memory"]["kv_blocks"]
    assert p["ttft_p50_s"] == pytest.approx(sp.ttft_s["p50"], rel=1e-9)
    assert p["tpot_p50_s"] == pytest.approx(sp.tpot_s["p50"], rel=1e-9)
    assert p["output_tokens_per_s_per_gpu"] == pytest.approx(sp.output_tokens_per_s_per_gpu, rel=1e-9)


def test_memory_rejections_carry_the_figures():
    """A device share too small for the weights: TP 1 is rejected (out of memory, with the figures), not dropped.
    KV blocks where it fits = floor((usable - weights - one chunk's activations) / (KV bytes per token x 16))."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eng = Engine(toy_source(**TOY), hw="h100", pricing=Pricing(rules=RULES, tp=1))
        m = {k: float(v[0]) for k, v in eng.price(1, 64, 2).memory.items()}
    # usable between the TP-2 and the TP-1 weights: (weights / 2 .. weights) + a little for activations and KV
    util = (0.75 * m["weight_bytes"]) / m["capacity_bytes"]
    r = _plan(jobs=1, gpu_mem_util=util, refine=False)
    by_tp = {x["tp"]: x for x in r.configs if x["max_num_seqs"] == 8}
    assert by_tp[1]["status"] == "rejected"
    assert by_tp[1]["reason"].startswith("out of memory")
    assert "GB" in by_tp[1]["reason"]
    two = by_tp[2]["memory"]
    if by_tp[2]["status"] != "rejected":
        want = math.floor((two["usable_bytes"] - two["weight_bytes"] - two["activation_bytes"])
                          / (two["kv_bytes_per_token"] * 16) + 1e-9)
        assert two["kv_blocks"] == want
    assert r.counts["by_reason"].get("rejected: out of memory", 0) >= 1


def test_analytic_pruning_skips_the_simulator():
    """A TPOT SLO below one sequence's decode step alone: every configuration pruned, no simulation run."""
    r = _plan(jobs=1, slo_tpot_s=1e-7)
    assert r.counts["pruned"] == 4 and r.counts["simulations"] == 0
    assert all("TPOT of one sequence alone" in x["reason"] for x in r.configs)
    assert r.frontier == [] and all(row["by_gpus"] is None for row in r.cheapest)


def test_gpu_budget_prunes_points_over_it():
    r = _plan(jobs=1, gpu_budget=1, refine=False)
    for x in r.configs:
        for p in x["points"]:
            assert p["gpus"] <= 1 or p["over_budget"]
        if x["tp"] == 2:
            assert x["status"] == "simulated" and not x["points"]  # 2 GPUs per replica > budget 1: every rate
            assert all("budget" in q["reason"] for q in x["pruned_points"])


def test_cheapest_is_the_fewest_gpus_meeting_the_slos(serial):
    for row in serial.cheapest:
        ok = [p for p in serial.points() if p["rate_rps"] == row["rate_rps"] and p["meets_slo"]]
        if not ok:
            assert row["by_gpus"] is None
            continue
        assert row["by_gpus"]["meets_slo"]
        assert row["by_gpus"]["gpus"] <= min(p["gpus"] for p in ok) + 4  # full size may add replicas


def test_pareto_by_hand():
    pts = [{"tokens_per_s_per_user": 10, "output_tokens_per_s_per_gpu": 100},   # frontier (most per GPU)
           {"tokens_per_s_per_user": 20, "output_tokens_per_s_per_gpu": 80},    # frontier
           {"tokens_per_s_per_user": 15, "output_tokens_per_s_per_gpu": 70},    # beaten by (20, 80)
           {"tokens_per_s_per_user": 30, "output_tokens_per_s_per_gpu": 10},    # frontier (fastest per user)
           {"tokens_per_s_per_user": float("nan"), "output_tokens_per_s_per_gpu": 999}]  # no figure: left out
    f = pareto(pts)
    assert [(p["tokens_per_s_per_user"], p["output_tokens_per_s_per_gpu"]) for p in f] == [(10, 100), (20, 80), (30, 10)]


def test_flags_by_hand():
    c = Config("h100-sxm", 4, "fp8", "fp8", 128, 8192)
    f = flags_for(c, "meta-llama/Meta-Llama-3-70B", ["vllm", "sglang", "trtllm"])
    assert f["vllm"] == ("vllm serve meta-llama/Meta-Llama-3-70B --tensor-parallel-size 4 --max-num-seqs 128 "
                         "--max-num-batched-tokens 8192 --quantization fp8 --kv-cache-dtype fp8 "
                         "--gpu-memory-utilization 0.9 --block-size 16")
    assert f["sglang"] == ("python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3-70B --tp 4 "
                           "--max-running-requests 128 --chunked-prefill-size 8192 --quantization fp8 "
                           "--kv-cache-dtype fp8_e4m3 --mem-fraction-static 0.9")
    assert f["trtllm"].startswith("trtllm-serve meta-llama/Meta-Llama-3-70B --tp_size 4 --max_batch_size 128 "
                                  "--max_num_tokens 8192 --kv_cache_free_gpu_memory_fraction ")
    assert any("kv_cache_config: {dtype: fp8}" in n for n in f["notes"])
    # TensorRT-LLM's fraction is of the memory left after weights and activations: (72 - 40 - 2) / (80 - 40 - 2)
    mem = {"capacity_bytes": 80e9, "usable_bytes": 72e9, "weight_bytes": 40e9, "activation_bytes": 2e9}
    g = flags_for(dataclasses.replace(c, pp=2, ep=4, dp=2), "M", ["vllm", "trtllm"], memory=mem)
    assert "--kv_cache_free_gpu_memory_fraction 0.79" in g["trtllm"]  # 30 / 38 = 0.789
    assert "--pipeline-parallel-size 2 --data-parallel-size 2 --enable-expert-parallel" in g["vllm"]
    assert "--pp_size 2 --ep_size 4" in g["trtllm"]


def test_renderers(serial, tmp_path):
    r = serial
    assert render(r, "json") == r.to_json() + "\n"
    d = json.loads(r.to_json())
    assert d["kind"] == "plan" and len(d["configs"]) == 4
    text = render(r, "terminal")
    assert "cheapest configuration per rate" in text and "Pareto frontier" in text
    assert "vllm serve" in text or "no configuration meets" in text
    md = render(r, "markdown")
    assert md.startswith("# plan: toy-llama")
    csv = render(r, "csv").splitlines()
    assert csv[0].startswith("config_index,label,hw,tp")
    assert len(csv) - 1 == sum(max(1, len(x["points"])) for x in r.configs)
    page = render(r, "html")
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "http" not in page.split("<body>")[1][:0]


# -- fan-out: the same values whichever way -------------------------------------------------------------------
def test_processes_equal_serial(serial):
    par = _plan(jobs=2)
    assert par.settings["fanout"]["jobs"] == 2
    assert par.values() == serial.values()


def test_ray_equals_serial(serial):
    pytest.importorskip("ray")
    r = _plan(jobs=2, ray="local")
    assert r.settings["fanout"]["ray"] == "local"
    assert r.values() == serial.values()


def test_ray_missing_is_one_line(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_ray(name, *a, **k):
        if name == "ray":
            raise ImportError("no ray")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(InputError, match=r"pip install 'graphroof\[ray\]'"):
        plan("no-such-model-anywhere", **FAST, ray="local")





def test_origin_note_names_picks_on_derived_constants():
    from types import SimpleNamespace

    from graphroof.planner.api import _origin_notes

    fitted, derived = SimpleNamespace(name="h100-sxm", origin="fitted"), SimpleNamespace(name="mi300x", origin="derived")
    pick = {"config": "mi300x tp1 w=fp8 kv=fp8 seqs=16 tokens=2048"}
    rows = [{"rate_rps": 1.0, "by_gpus": pick, "by_usd": None}]
    (note,) = _origin_notes([fitted, derived], rows)
    assert "h100-sxm fitted, mi300x derived" in note and "cheapest picks on mi300x" in note
    assert _origin_notes([fitted], rows) == []  # one origin: nothing to say
    (note,) = _origin_notes([fitted, derived], [{"rate_rps": 1.0, "by_gpus": {"config": "h100-sxm tp8"},
                                                 "by_usd": None}])
    assert "cheapest picks" not in note  # the pick rests on fitted constants


# -- trials stop once TTFT is decided -------------------------------------------------------------------------------
def test_stop_rule_by_hand():
    """p99 over 100 requests interpolates between the 99th and 100th smallest (index 0.99 x 99 = 98.01): once 2
    requests are certain to wait longer than the SLO it is above it; p50 over 100 (index 49.5): 100 - 49 = 51; p100
    over 10 (index 9, taken a hair low: 8): 2; the limit gets a 1e-9 relative margin for rounding."""
    from graphroof.planner.search import stop_rule

    assert stop_rule(2.0, 99.0, 100) == (2.0 * (1 + 1e-9), 2)
    assert stop_rule(2.0, 50.0, 100)[1] == 51
    assert stop_rule(1.0, 100.0, 10)[1] == 2
    assert stop_rule(1.0, 99.0, 1) is None and stop_rule(None, 99.0, 100) is None  # one request; no TTFT SLO


def test_a_stopped_trial_gives_the_whole_runs_verdict():
    """The capacity search's trials stop once the TTFT percentile is certain to miss the SLO: at rates from far
    below to far above the toy's capacity, the verdict equals the whole run's, a stopped trial ran fewer steps, and a
    rate run whole after its trial stopped is counted as one simulation."""
    from graphroof.planner.search import Simulator
    from graphroof.planner.space import Config, Settings
    from graphroof.serving.inputs import parse_arrivals, parse_lengths
    from graphroof.serving.sim import simulate
    from graphroof.serving.workload import draw, workload_at

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eng = Engine(toy_source(**TOY), hw="h100", pricing=Pricing(rules=RULES))
        sc = eng.step_cost(max_batch=32, max_context=512, max_chunk=256)
    st = Settings(model=None, frontend_opts=(), options=None, rates=(1.0,), arrival="poisson", prompt_len="fixed:64",
                  gen_len="fixed:8", seed=0, search_requests=60, requests=60, slo_ttft_s=0.002, slo_tpot_s=0.0005,
                  slo_percentile=99.0, tolerance=0.05, policy="decode-first", admission="on-demand",
                  runtime="serving", gpu_mem_util=0.9, kv_block=16, activations=None, prices=(), gpu_budget=None)
    d = draw(0, 60, parse_arrivals("poisson"), parse_lengths("prompt_len", "fixed:64"),
             parse_lengths("gen_len", "fixed:8"), None, None)
    c = Config("h100", 1, None, None, 32, 256)
    verdicts, stopped = [], 0
    for lam in (100.0, 1000.0, 3000.0, 10000.0, 1e5):
        fast, whole = (Simulator(sc, True, c, 10_000, st, d, False) for _ in range(2))
        why = fast.verdict(lam)
        verdicts.append(why)
        assert why == whole.run(lam)["binding"]
        if lam in fast.missed:
            stopped += 1
            wl = workload_at(d, lam, 0.0, 16)
            part, full = simulate(fast.em, wl, ttft_stop=(0.002 * (1 + 1e-9), 2)), simulate(fast.em, wl)
            assert part.stopped and not full.stopped and len(part.steps["dur_s"]) < len(full.steps["dur_s"])
            assert why == "ttft" and fast.run(lam) == whole.run(lam) and fast.count == whole.count == 1
    assert None in verdicts and stopped >= 1
