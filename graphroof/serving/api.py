"""``serve()``: a serving simulation of an LLM on one engine replica at one or more request rates."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InputError
from .disagg import simulate_replicas
from .inputs import check_choice, parse_arrivals, parse_lengths, positive, rates_of, read_trace, whole
from .metrics import rate_point, records_of, serve_bands, timeline_of
from .result import ServeResult
from .search import max_rate, replicas_for
from .sim import EngineModel, simulate
from .static import simulate_static
from .workload import Draws, draw, workload_at

__all__ = ["serve_one"]


def _settings(**kw: Any) -> dict[str, Any]:
    """Every input checked (one-line InputErrors, before any model is built) and normalised."""
    s = dict(kw)
    s["rate"] = rates_of(kw["rate"])
    s["requests"] = whole("requests", kw["requests"], 1)
    s["seed"] = whole("seed", kw["seed"], 0)
    s["mode"] = check_choice("mode", kw["mode"], ("continuous", "static"))
    s["policy"] = check_choice("policy", kw["policy"], ("decode-first", "prefill-first"))
    s["admission"] = check_choice("admission", kw["admission"], ("on-demand", "reserve"))
    s["max_batched_tokens"] = whole("max_batched_tokens", kw["max_batched_tokens"], 1)
    s["max_num_seqs"] = whole("max_num_seqs", kw["max_num_seqs"], 1)
    if s["mode"] == "continuous" and s["max_batched_tokens"] < s["max_num_seqs"]:
        raise InputError(f"max_batched_tokens ({s['max_batched_tokens']}) must be >= max_num_seqs "
                         f"({s['max_num_seqs']}): every running sequence's decode token fits one step")
    ps = kw["prefix_share"]
    if isinstance(ps, bool) or not isinstance(ps, (int, float)) or not (0.0 <= float(ps) < 1.0):
        raise InputError(f"prefix_share must be a fraction in [0, 1) of each prompt, got {ps!r}")
    s["prefix_share"] = float(ps)
    for name in ("slo_ttft_s", "slo_tpot_s", "target_rate", "usd_per_hour"):
        s[name] = positive(name, kw[name], allow_none=True)
    pct = kw["slo_percentile"]
    if isinstance(pct, bool) or not isinstance(pct, (int, float)) or not (0 < float(pct) <= 100):
        raise InputError(f"slo_percentile must be in (0, 100], got {pct!r}")
    s["slo_percentile"] = float(pct)
    slos = s["slo_ttft_s"] is not None or s["slo_tpot_s"] is not None
    fm = kw["find_max_rate"]
    if fm is not None and not isinstance(fm, bool):
        raise InputError(f"find_max_rate must be True, False or None, got {fm!r}")
    s["find_max_rate"] = slos if fm is None else fm
    if s["find_max_rate"] and not slos:
        raise InputError("find_max_rate needs an SLO: give slo_ttft_s and / or slo_tpot_s")
    if kw["trace"] is not None:
        s["trace"] = read_trace(kw["trace"])
        s["arrival"] = s["prompt_len"] = s["gen_len"] = None
    else:
        s["arrival"] = parse_arrivals(kw["arrival"])
        s["prompt_len"] = parse_lengths("prompt_len", kw["prompt_len"])
        s["gen_len"] = parse_lengths("gen_len", kw["gen_len"])
        if s["mode"] == "static" and s["arrival"].kind == "closed":
            raise InputError("arrival closed:N drives a continuous engine; use mode='continuous' or an open "
                             "arrival process (poisson, gamma:CV, constant)")
    return s


def _shown(s: dict[str, Any]) -> dict[str, Any]:
    out = dict(s)
    out["rate"] = list(s["rate"])
    out["trace"] = s["trace"].path if s["trace"] is not None else None
    for k in ("prompt_len", "gen_len"):
        out[k] = s[k].spec if s[k] is not None else None
    a = s["arrival"]
    out["arrival"] = None if a is None else {"poisson": "poisson", "constant": "constant", "gamma": f"gamma:{a.cv:g}",
                                             "closed": f"closed:{a.users}"}[a.kind]
    return out


def _engine_model(eng: Any, s: dict[str, Any], d: Draws) -> tuple[EngineModel, list[str]]:
    """The replica's step cost and KV blocks: blocks = (usable - weights - one chunk's activations) / bytes per
    block, every term from the engine's memory figures."""
    p = eng.pricing
    block, mbt = p.kv_block, s["max_batched_tokens"]
    ref = int(np.median(d.prompt))
    figs = eng.price(1, ref, 2)
    mem = {k: float(v[0]) for k, v in figs.memory.items()}
    kv_tok = float(eng.priced([1], [ref], [2]).memory_inputs(1, ref)[1])
    notes = []
    if math.isnan(mem["usable_bytes"]) or kv_tok <= 0:
        blocks = 10**12
        notes.append(f"{eng.hw.name} has no memory capacity (or the model no KV bytes): KV blocks are not limited")
    else:
        act_chunk = mem["activation_peak_bytes"] * mbt / min(ref, mbt)  # the chunk of the peak scaled to mbt tokens
        blocks = int(math.floor((mem["usable_bytes"] - mem["weight_bytes"] - act_chunk) / (kv_tok * block) + 1e-9))
        if blocks < 1:
            raise InputError(f"{eng.source.name} on {eng.hw.name}: the weights and one chunk's activations leave no "
                             "room for KV blocks; raise gpu_mem_util, use tp > 1 or quantize the weights")
    longest = max(int(d.prompt.max()) + int(d.gen.max()), 2)
    dp = p.layout.dp  # each DP rank is an engine core with its own scheduler: the limits are a rank's (of_ranks)
    seqs = s["max_num_seqs"] * dp
    sc = eng.step_cost(max_batch=max(2, seqs), max_context=longest, max_chunk=max(2, mbt * dp))
    attn = "prefill_attention" in inspect.signature(sc.__call__).parameters
    spec = getattr(eng, "spec", None)
    if dp > 1:
        notes.append(f"attention data parallelism: each of the {dp} DP ranks schedules its own max_num_seqs "
                     f"({s['max_num_seqs']}) and max_batched_tokens ({mbt}), as vLLM runs one engine core per DP rank: "
                     f"the replica runs up to {seqs} sequences and {mbt * dp} tokens a step, a prompt's chunk at "
                     f"most {mbt} tokens")
    em = EngineModel.of_ranks(sc, blocks, block, mbt, s["max_num_seqs"], dp, policy=s["policy"], ideal=p.ideal,
                              attention_arg=attn, admission=s["admission"],
                              tokens=spec.tokens if spec is not None else 1.0,
                              request_s=0.0 if p.ideal else float(eng.runtime.request_overhead_s))
    if spec is not None:
        notes.append(f"speculative decoding: a decode step emits E = {spec.tokens:.4g} tokens per sequence on average "
                     "(the expected value, carried as whole tokens; no random acceptance draws) and costs the verify "
                     "pass plus the drafts")
    return em, notes


def _check_fits(em: EngineModel, d: Draws, prefix_share: float) -> None:
    wl = workload_at(d, 1.0, prefix_share, em.block)
    need = -(-(wl.prompt + wl.gen) // em.block) - wl.prefix // em.block
    room = em.rank_blocks - int((wl.prefix // em.block).max())  # a request lives on one DP rank
    if int(need.max()) > room:
        i = int(np.argmax(need))
        who = "a DP rank of the replica holds" if em.rank_blocks < em.blocks else "the replica holds"
        raise InputError(f"a request of {int(wl.prompt[i])} + {int(wl.gen[i])} tokens needs {int(need[i])} KV blocks; "
                         f"{who} {room}: raise gpu_mem_util, use tp > 1, or shorten prompt_len / gen_len")


def serve_one(model: Any, *, hw: Any = "a100", rate: Any = (1.0,), requests: int = 1000, arrival: str = "poisson",
          prompt_len: Any = "fixed:1024", gen_len: Any = "fixed:256", trace: Any = None, prefix_share: float = 0.0,
          seed: int = 0, mode: str = "continuous", max_batched_tokens: int = 8192, max_num_seqs: int = 256,
          policy: str = "decode-first", admission: str = "on-demand", slo_ttft_s: float | None = None, slo_tpot_s: float | None = None,
          slo_percentile: float = 99.0, find_max_rate: bool | None = None, target_rate: float | None = None,
          usd_per_hour: float | None = None, pricing: Any = None, progress: Callable[[str], None] | None = None,
          options: Any = None, replicas: int = 1, **frontend_opts: Any) -> ServeResult:
    """Simulate serving *model* on one engine replica (``pricing.layout.world`` = tp x pp x dp GPUs of *hw*) at each *rate*.

    Continuous mode is iteration-level scheduling with chunked prefill and paged KV blocks (vLLM v1); static mode
    runs batches of *max_num_seqs* in lockstep.  With SLOs, the max sustainable rate is searched; with
    *target_rate*, the replicas it needs.  See :mod:`graphroof.serving.sim` and :mod:`graphroof.serving.static`.
    *replicas* > 1: that many replicas share the traffic, requests dealt round robin in arrival order (continuous
    mode, open arrivals); the figures are the group's (per GPU: over ``replicas x tp``).
    """
    replicas = whole("replicas", replicas, 1)
    if replicas > 1 and (mode != "continuous" or str(arrival).startswith("closed")):
        raise InputError("replicas > 1 deals an open arrival stream over continuous-batching replicas: use "
                         "mode='continuous' and poisson, gamma:CV or constant arrivals")
    s = _settings(hw=hw, rate=rate, requests=requests, arrival=arrival, prompt_len=prompt_len, gen_len=gen_len,
                  trace=trace, prefix_share=prefix_share, seed=seed, mode=mode, max_batched_tokens=max_batched_tokens,
                  max_num_seqs=max_num_seqs, policy=policy, admission=admission, slo_ttft_s=slo_ttft_s,
                  slo_tpot_s=slo_tpot_s, slo_percentile=slo_percentile, find_max_rate=find_max_rate, target_rate=target_rate,
                  usd_per_hour=usd_per_hour)
    from ..llm import Engine, Pricing

    if pricing is not None and not isinstance(pricing, Pricing):
        raise InputError(f"pricing must be a graphroof.llm.Pricing, got {type(pricing).__name__}")
    pr = (pricing or Pricing()).with_(max_batched_tokens=s["max_batched_tokens"])
    eng = Engine(model, hw=hw, pricing=pr, options=options, progress=progress, **frontend_opts)
    d = draw(s["seed"], s["requests"], s["arrival"], s["prompt_len"], s["gen_len"], s["trace"],
             eng.source.spec.max_positions)
    em, notes = _engine_model(eng, s, d)
    _check_fits(em, d, s["prefix_share"])
    if progress:
        progress(f"simulating {len(d.prompt)} requests at {len(s['rate'])} rate(s)")

    def run(rate: float) -> tuple[Any, dict[str, np.ndarray], list[str]]:
        wl = workload_at(d, rate, s["prefix_share"], em.block)
        if s["mode"] == "static":
            out, extra = simulate_static(eng, wl, em.max_seqs, em.blocks, em.block)  # a batch per DP rank
            return out, records_of(out, wl), extra
        out = simulate(em, wl, progress) if replicas == 1 else simulate_replicas(em, wl, replicas, progress)[0]
        return out, records_of(out, wl), []

    rates: tuple[float, ...] = s["rate"] if d.trace_rate is None else (d.trace_rate,)  # a trace: its own rate
    if s["arrival"] is not None and s["arrival"].kind == "closed":
        rates = (math.nan,)  # closed loop: the rate is what the users make of it
        u = s["arrival"].users
        notes.append(f"closed loop of {u} users: they start spread over one request's time (a steady state, not "
                     "a burst); rate_rps is the measured throughput" + (
                         f"; the figures are the steady state: requests {u + 1}-{len(d.prompt) - u} (each user's "
                         "first and last left out), throughput = users / mean e2e" if len(d.prompt) >= 3 * u else
                         f"; with fewer than {3 * u} requests every request is counted"))
    points, records, timeline = [], [], {}
    for r in rates:
        out, rec, extra = run(r if math.isfinite(r) else 1.0)
        users = s["arrival"].users if s["arrival"] is not None and s["arrival"].kind == "closed" else 0
        pt = rate_point(r, out, rec, pr.layout.world * replicas, s["slo_ttft_s"], s["slo_tpot_s"], users)
        pt.kv_used_mean /= replicas  # the steps of every replica: the sum of their means (simulate_replicas)
        if not math.isfinite(r):
            pt.rate_rps = pt.throughput_rps
        points.append(pt)
        records.append(rec)
        timeline = timeline_of(out)
        notes.extend(n for n in extra if n not in notes)
    best = None
    if s["find_max_rate"]:
        if s["arrival"] is not None and s["arrival"].kind == "closed":
            raise InputError("find_max_rate needs an open arrival process (poisson, gamma:CV, constant) or a trace")
        start = max(p.rate_rps for p in points)
        best = max_rate(lambda r: run(r)[1], start, s["slo_percentile"], s["slo_ttft_s"], s["slo_tpot_s"])
    reps = None
    if s["target_rate"] is not None:
        price = s["usd_per_hour"] or eng.hw.usd_per_hour
        if best is not None and best["rate_rps"]:
            cap, basis = best["rate_rps"], "max sustainable rate under the SLOs"
        else:
            cap, basis = max(p.throughput_rps for p in points), "highest simulated throughput (no SLO given)"
        reps = replicas_for(s["target_rate"], cap, pr.layout.world * replicas, price, float(np.mean(d.gen)), basis)
    notes.extend(n for n in eng.notes() if n not in notes)
    if s["prefix_share"] > 0:
        notes.append("prefix caching: the shared prefix is warm from the start (its blocks held once, never "
                     "prefilled)")
    settings = _shown(s)
    if replicas > 1:
        notes.append(f"{replicas} replicas share the traffic, requests dealt round robin in arrival order; KV use: "
                     "the replicas' mean, and the fullest replica's peak; 'replicas needed' counts groups of them")
    settings.update(replicas=replicas, gpus=pr.layout.world * replicas, tp=pr.tp, pp=pr.pp, dp=pr.dp, ep=pr.ep, kv_block=em.block, kv_blocks=em.blocks, gpu_mem_util=pr.gpu_mem_util,
                    weights=pr.weights, kv=pr.kv, runtime=pr.runtime, ideal=pr.ideal,
                    hw=eng.hw.name, step_prefill_attention=em.attention_arg)
    res = ServeResult(model=eng.source.name, hw=eng.hw.name, hw_label=eng.hw.label, settings=settings,
                      points=points, max_rate=best, replicas=reps, timeline=timeline, records=records, notes=notes)
    res.attach_bands(serve_bands(eng.hw, eng.hw, eng.runtime.name, pr.ideal))
    return res
