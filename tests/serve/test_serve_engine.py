"""The serving simulator's engine (graphroof.serve) on the toy decoder: static batches equal the engine's
estimate, continuous batching follows hand-derived steps of StepCost, queueing laws hold, KV blocks run out and
preempt only when scarce, runs are reproducible."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from graphroof.llm import Engine, Pricing
from graphroof.serving import serve
from tests.llm.toy import RULES, toy_source

TOY = dict(L=2, H=256, heads=4, kv_heads=2, I=512, V=1000)


def _src():
    return toy_source(**TOY)


def _run(**kw):
    kw.setdefault("pricing", Pricing(rules=RULES))
    kw.setdefault("hw", "h100")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return serve(_src(), **kw)


def _engine(**kw) -> Engine:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Engine(_src(), hw="h100", pricing=Pricing(rules=RULES, **kw))


def _trace(tmp_path, rows, name="t.csv"):
    p = tmp_path / name
    p.write_text("arrival_s,input_tokens,output_tokens\n" + "".join(f"{a},{i},{o}\n" for a, i, o in rows))
    return str(p)


def test_static_batch_equals_the_engine_estimate(tmp_path):
    """4 requests at t=0 of 64 + 8 tokens, batches of 4: one batch, whose TTFT / TPOT / e2e are estimate()'s."""
    trace = _trace(tmp_path, [(0, 64, 8)] * 4)
    r = _run(trace=trace, mode="static", max_num_seqs=4)
    cfg = _engine(max_batched_tokens=8192).estimate(prompt=64, gen=8, batch=4).configs[0]
    rec = r.records[0]
    assert rec["ttft_s"] == pytest.approx(np.full(4, cfg.ttft_s), rel=1e-9)
    assert rec["tpot_s"] == pytest.approx(np.full(4, cfg.tpot_s), rel=1e-9)
    assert rec["e2e_s"] == pytest.approx(np.full(4, cfg.e2e_s), rel=1e-9)
    # 8 requests in batches of 4: the second batch starts when the first ends (all arrived at 0)
    r = _run(trace=_trace(tmp_path, [(0, 64, 8)] * 8, "t8.csv"), mode="static", max_num_seqs=4)
    assert r.records[0]["first_token_s"][4:] == pytest.approx(np.full(4, cfg.e2e_s + cfg.ttft_s), rel=1e-9)


def test_continuous_vs_static_by_hand(tmp_path):
    """4 requests at t=0 of P = 64 prompt tokens and G = 8 outputs, ideal roofline.

    Budget 8192 >= 4 * 64: step 1 prefills the 4 prompts as 4 chunks in one pass, n = 256 tokens with attention
    work sum(2 o n_i + n_i^2) = 4 * 64^2; then 7 decode steps of m = 4 sequences with 64 + j cached tokens each
    (j = 0..6), the static batch's decode steps exactly: TPOT equal to static's.  The static prefill is the
    batch-4 graph of 64 tokens: the same FLOPs and bytes as the 256-token pass (GEMMs over 256 rows, attention
    4 x 64^2, weights read once), so on the ideal roofline the TTFTs are equal too.

    Budget 128 (chunked prefill): step 1 = chunks 64 (req 0) + 64 (req 1), first tokens of 0, 1 at t1;
    step 2 (decode-first) = 2 decodes (64 cached each) + chunk 64 of req 2 + 62 of req 3 (128 - 2 - 64);
    step 3 = 3 decodes (65, 65, 64 cached) + the last 2 tokens of req 3 after 62 cached (attention 2*62*2 + 2^2).
    Request 3's first token is at t1 + t2 + t3, request 2's at t1 + t2."""
    ideal = Pricing(rules=RULES, ideal=True)
    trace = _trace(tmp_path, [(0, 64, 8)] * 4)
    cont = _run(trace=trace, max_num_seqs=4, pricing=ideal).records[0]
    stat = _run(trace=trace, max_num_seqs=4, pricing=ideal, mode="static").records[0]
    assert cont["tpot_s"] == pytest.approx(stat["tpot_s"], rel=1e-9)
    assert cont["ttft_s"] == pytest.approx(stat["ttft_s"], rel=1e-9)
    eng = _engine(ideal=True, max_batched_tokens=128)
    sc = eng.step_cost(max_batch=4, max_context=72, max_chunk=128)
    t1 = float(sc(128, 0, 0, 0, prefill_attention=2 * 64**2, ideal=True))
    t2 = float(sc(126, 0, 2, 128, prefill_attention=64**2 + 62**2, ideal=True))
    t3 = float(sc(2, 62, 3, 65 + 65 + 64, ideal=True))
    chunked = _run(trace=trace, max_num_seqs=4, pricing=ideal, max_batched_tokens=128).records[0]
    assert chunked["first_token_s"] == pytest.approx([t1, t1, t1 + t2, t1 + t2 + t3], rel=1e-9)
    assert chunked["ttft_s"][3] > cont["ttft_s"][3]    # the token budget delays the last prompt by a step


def test_littles_law_on_a_poisson_run():
    r = _run(rate=(300.0,), requests=2000, prompt_len="uniform:16:256", gen_len="uniform:4:64", max_num_seqs=32,
             max_batched_tokens=512)
    law = r.points[0].littles_law
    assert law["ratio"] == pytest.approx(1.0, abs=0.03)
    assert law["mean_in_system"] > 0.5              # a loaded system, not an empty one


def test_ttft_far_below_capacity_is_the_prefill_time():
    """At 1 request/s each request finds the engine idle (its e2e is ~ms): TTFT = the batch-1 prefill."""
    r = _run(rate=(1.0,), requests=50, prompt_len="fixed:200", gen_len="fixed:4")
    want = _engine(max_batched_tokens=8192).estimate(prompt=200, gen=4, batch=1).configs[0].ttft_s
    assert r.points[0].ttft_s["mean"] == pytest.approx(want, rel=0.03)
    assert r.points[0].queue_s["p99"] == pytest.approx(0.0, abs=1e-12)


def _util_for_blocks(blocks: int, prompt: int) -> float:
    """gpu_mem_util that leaves *blocks* KV blocks: usable = weights + one 8192-token chunk's activations +
    blocks x 16 tokens x KV bytes per token (the engine's own figures)."""
    eng = _engine(max_batched_tokens=8192)
    m = eng.price(1, prompt, 2).memory
    kv_tok = eng.priced([1], [prompt], [2]).memory_inputs(1, prompt)[1]
    act = float(m["activation_peak_bytes"][0]) * 8192 / prompt
    need = float(m["weight_bytes"][0]) + act + (blocks + 0.5) * 16 * kv_tok
    return need / float(m["capacity_bytes"][0])


def test_preemption_only_when_blocks_are_scarce():
    kw = dict(rate=(2000.0,), requests=200, prompt_len="fixed:100", gen_len="fixed:60", max_num_seqs=64)
    plenty = _run(**kw)
    assert plenty.points[0].preemptions == 0
    # 40 blocks of 16 tokens: one request holds ceil(160 / 16) = 10 at its end, so 4 fit at once
    util = _util_for_blocks(40, 100)
    scarce = _run(pricing=Pricing(rules=RULES, gpu_mem_util=util), **kw)
    assert scarce.settings["kv_blocks"] == 40
    assert scarce.points[0].preemptions > 0
    assert scarce.points[0].kv_used_max <= 1.0
    assert np.all(np.isfinite(scarce.records[0]["finish_s"]))  # every request still finishes
    assert scarce.points[0].e2e_s["mean"] > plenty.points[0].e2e_s["mean"]


def test_a_seed_reproduces_a_run():
    kw = dict(rate=(200.0,), requests=300, prompt_len="lognormal:128:64", gen_len="uniform:2:40",
              arrival="gamma:2")
    a, b, c = _run(seed=3, **kw), _run(seed=3, **kw), _run(seed=4, **kw)
    for f in ("arrival_s", "input_tokens", "finish_s"):
        assert np.array_equal(a.records[0][f], b.records[0][f])
    assert not np.array_equal(a.records[0]["input_tokens"], c.records[0]["input_tokens"])


def test_prefill_first_and_closed_loop_and_prefix_sharing():
    kw = dict(requests=300, prompt_len="fixed:256", gen_len="fixed:16", max_num_seqs=16, max_batched_tokens=512)
    r = _run(arrival="closed:8", **kw)
    assert (r.timeline["running"] + r.timeline["waiting"]).max() == 8     # 8 users: never more than 8 in the system
    pf = _run(rate=(400.0,), policy="prefill-first", **kw)
    df = _run(rate=(400.0,), **kw)
    assert pf.points[0].ttft_s["mean"] <= df.points[0].ttft_s["mean"]    # prompts do not wait for decodes
    shared = _run(rate=(400.0,), prefix_share=0.5, **kw)              # 128 of 256 tokens cached: less prefill
    assert shared.points[0].ttft_s["p50"] < df.points[0].ttft_s["p50"]


def test_trace_replay(tmp_path):
    rows = [(0.0, 30, 5), (0.001, 40, 3), (0.5, 20, 1)]
    r = _run(trace=_trace(tmp_path, rows))
    rec = r.records[0]
    assert rec["arrival_s"].tolist() == [0.0, 0.001, 0.5]
    assert rec["input_tokens"].tolist() == [30, 40, 20] and rec["output_tokens"].tolist() == [5, 3, 1]
    assert np.isnan(rec["tpot_s"][2])                     # one output token: no TPOT
    # 3 arrivals over 0.5 s: the trace's own rate, (3 - 1) / 0.5 = 4 requests/s
    assert r.points[0].rate_rps == pytest.approx(4.0)
    jl = tmp_path / "t.jsonl"
    jl.write_text("".join(f'{{"arrival_s": {a}, "input_tokens": {i}, "output_tokens": {o}}}\n' for a, i, o in rows))
    assert np.array_equal(_run(trace=str(jl)).records[0]["finish_s"], rec["finish_s"])


def test_reserve_admission_never_preempts_where_on_demand_does():
    """Scarce KV blocks (40 of 16 tokens; a request holds ceil(160 / 16) = 10 at its end): on-demand admission
    (vLLM) admits on the prompt's blocks, runs out mid-decode and preempts by recompute; reserve admission
    (TensorRT-LLM's guaranteed-no-evict) admits a request only with blocks for its prompt and whole output, so at
    most 4 run at once and none is ever preempted."""
    kw = dict(rate=(2000.0,), requests=200, prompt_len="fixed:100", gen_len="fixed:60", max_num_seqs=64,
              pricing=Pricing(rules=RULES, gpu_mem_util=_util_for_blocks(40, 100)))
    lazy, held = _run(admission="on-demand", **kw), _run(admission="reserve", **kw)
    assert lazy.points[0].preemptions > 0
    assert held.points[0].preemptions == 0
    assert np.all(np.isfinite(held.records[0]["finish_s"]))               # every request still finishes
    assert max(held.timeline["running"]) <= 4
