"""``graphroof.plan()``: search deployment configurations of an LLM for request rates under SLOs.

Steps: every input checked (one-line InputErrors, before any model is built) -> the configurations
(:mod:`.space`) -> the source opened and the first engine built here, so its traces are in the trace store (and,
forked, in every worker) -> one task per pipeline group fanned out (:mod:`.fanout`, :mod:`.worker`: memory fit,
analytic pruning, simulation at ``search_requests`` requests) -> each group's frontier and cheapest points per rate
re-simulated at ``requests`` requests on the same engines (their replicas raised if the SLOs no longer hold) -> the
frontier and the cheapest configuration per rate ->
:class:`~graphroof.planner.result.PlanResult`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

from ..errors import InputError
from .fanout import check_fanout, ray_session, run_tasks
from .flags import check_engines, flags_for
from .result import PlanResult, pareto, plan_bands
from .space import Config, Settings, by_gpus, by_usd, check_list, expand
from .worker import clear_cache, run_group

__all__ = ["plan"]

def _prices(hws: list[Any], usd_per_hour: Any) -> tuple[tuple[str, float], ...]:
    out = {}
    for prof in hws:
        if isinstance(usd_per_hour, dict):
            v = usd_per_hour.get(prof.name, usd_per_hour.get(prof.label))
        else:
            v = usd_per_hour
        if v is None:
            v = prof.usd_per_hour
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise InputError(f"usd_per_hour for {prof.name} must be a number > 0, got {v!r}")
            out[prof.name] = float(v)
    return tuple(sorted(out.items()))


def _check(model: Any, hw: Any, rate: Any, slo_ttft_s: Any, slo_tpot_s: Any, slo_percentile: Any, engines: Any,
           gpu_budget: Any, requests: Any, search_requests: Any, tolerance: Any) -> dict[str, Any]:
    from ..hardware import load_hardware
    from ..serving.inputs import positive, rates_of, whole

    hws = check_list("hw", hw)
    if hws == [None]:
        raise InputError("plan needs at least one device: hw=['h100', ...] (--hw h100,h200)")
    profs = [load_hardware(h) for h in hws]
    rates = rates_of(rate)
    if len(set(rates)) != len(rates):
        raise InputError("rate: every request rate must be given once")
    ttft = positive("slo_ttft_s", slo_ttft_s, allow_none=True)
    tpot = positive("slo_tpot_s", slo_tpot_s, allow_none=True)
    if ttft is None:
        raise InputError("plan needs a TTFT SLO (slo_ttft_s, --slo-ttft 2s): without one an overloaded replica's "
                         "queue grows without bound and still meets a TPOT SLO")
    pct = slo_percentile
    if isinstance(pct, bool) or not isinstance(pct, (int, float)) or not (0 < float(pct) <= 100):
        raise InputError(f"slo_percentile must be in (0, 100], got {pct!r}")
    budget = None if gpu_budget is None else whole("gpu_budget", gpu_budget, 1)
    tol = tolerance
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not (0 < float(tol) <= 0.5):
        raise InputError(f"tolerance must be a fraction in (0, 0.5], got {tol!r}")
    return {"profiles": profs, "rates": tuple(sorted(rates)), "ttft": ttft, "tpot": tpot, "pct": float(pct),
            "engines": check_engines(engines), "budget": budget, "requests": whole("requests", requests, 10),
            "search_requests": whole("search_requests", search_requests, 10), "tolerance": float(tol)}


def plan(model: Any, *, hw: Any, rate: Any, slo_ttft_s: float | None = None, slo_tpot_s: float | None = None,
         slo_percentile: float = 99.0, tp: Any = (1, 2, 4, 8), pp: Any = (1,), ep: Any = (1,), dp: Any = (1,),
         weights: Any = None, kv: Any = None, activations: str | None = None, max_num_seqs: Any = (64, 128, 256),
         max_batched_tokens: Any = (2048, 8192), disagg: Any = None, prompt_len: str = "lognormal:1024:512",
         gen_len: str = "lognormal:256:128", arrival: str = "poisson", seed: int = 0, requests: int = 1000,
         search_requests: int = 200, tolerance: float = 0.05, gpu_budget: int | None = None,
         usd_per_hour: Any = None, engines: Any = ("vllm", "sglang", "trtllm"), policy: str = "decode-first",
         admission: str = "on-demand", runtime: str = "serving", gpu_mem_util: float = 0.9, kv_block: int = 16,
         jobs: int | None = None, ray: str | None = None, refine: bool = True, pricing: Any = None,
         progress: Callable[[str], None] | None = None, options: Any = None, **frontend_opts: Any) -> PlanResult:
    """Search deployment configurations of *model* for each offered *rate* (requests/s) under the SLOs.

    Axes (each a value or a list): *hw* devices, *tp* (and *pp* / *ep* / *dp* when ``graphroof.llm.Pricing`` has
    them), *weights* / *kv* dtypes, *max_num_seqs* / *max_batched_tokens* batch limits, *disagg* x:y pools (when
    ``graphroof.serve`` has them).  Traffic: *arrival*, *prompt_len*, *gen_len* as :func:`graphroof.serve` takes
    them, drawn once from *seed*.  SLOs: *slo_ttft_s* (required), *slo_tpot_s*, held at *slo_percentile*.
    *gpu_budget*: most GPUs in all; *usd_per_hour*: a price per GPU-hour (or ``{device: price}``; default: the
    profiles' list prices).  *search_requests* requests per simulation while searching, *requests* when the frontier
    and the cheapest configurations are re-simulated (*refine*).  *jobs* processes (default the CPU count), or *ray*
    a cluster address / ``"local"``.  *pricing*: a base :class:`graphroof.llm.Pricing` (counting rules, attention
    ...) each configuration's TP, dtypes and memory settings are applied to.  Returns a :class:`~graphroof.planner.result.PlanResult`.
    """
    t0 = time.perf_counter()
    chk = _check(model, hw, rate, slo_ttft_s, slo_tpot_s, slo_percentile, engines, gpu_budget, requests,
                 search_requests, tolerance)
    from ..llm import Pricing
    from ..serving.inputs import check_choice, parse_arrivals, parse_lengths, whole

    arr = parse_arrivals(arrival)
    if arr.kind == "closed":
        raise InputError("plan needs an open arrival process (poisson, gamma:CV, constant), not closed:N")
    parse_lengths("prompt_len", prompt_len)
    parse_lengths("gen_len", gen_len)
    check_choice("policy", policy, ("decode-first", "prefill-first"))
    check_choice("admission", admission, ("on-demand", "reserve"))
    seed = whole("seed", seed, 0)
    jobs, ray = check_fanout(jobs, ray)
    tps = check_list("tp", tp, integer=True)
    ws = check_list("weights", weights, allow_none=True)
    kvs = check_list("kv", kv, allow_none=True)
    if pricing is not None and not isinstance(pricing, Pricing):
        raise InputError(f"pricing must be a graphroof.llm.Pricing, got {type(pricing).__name__}")
    for w in ws:
        for k in kvs:
            (pricing or Pricing()).with_(weights=w, kv=k, activations=activations, runtime=runtime, gpu_mem_util=gpu_mem_util,
                    kv_block=kv_block)  # dtypes, runtime and memory settings checked before any model is built
    names = [p.name for p in chk["profiles"]]
    configs, notes = expand(names, tps, ws, kvs, check_list("max_num_seqs", max_num_seqs, integer=True),
                            check_list("max_batched_tokens", max_batched_tokens, integer=True),
                            {"pp": pp, "ep": ep, "dp": dp}, disagg)
    if chk["budget"] is not None:
        least = min(c.gpus_per_replica for c in configs)
        if chk["budget"] < least:
            raise InputError(f"gpu_budget {chk['budget']} is below one replica (the smallest takes {least} GPUs); "
                             "raise it or add smaller TP degrees")
    st = Settings(model=model, frontend_opts=tuple(sorted(frontend_opts.items())), options=options,
                  rates=chk["rates"], arrival=arrival, prompt_len=prompt_len, gen_len=gen_len, seed=seed,
                  search_requests=chk["search_requests"], requests=chk["requests"], slo_ttft_s=chk["ttft"],
                  slo_tpot_s=chk["tpot"], slo_percentile=chk["pct"], tolerance=chk["tolerance"], policy=policy,
                  admission=admission, runtime=runtime, gpu_mem_util=float(gpu_mem_util), kv_block=int(kv_block),
                  activations=activations, prices=_prices(chk["profiles"], usd_per_hour), gpu_budget=chk["budget"],
                  base=pricing, run_id=f"{os.getpid()}-{time.time_ns()}", grid_seqs=max(2, *(c.max_num_seqs * c.dp for c in configs)),
                  grid_tokens=max(2, *(c.max_batched_tokens * c.dp for c in configs)))
    try:
        src = _open(st, configs, progress)
        groups = _groups(configs, jobs)
        t1 = time.perf_counter()
        with ray_session(ray, jobs):
            found = run_tasks(run_group, [(st, g, refine) for g in groups], jobs, ray, progress,
                              "configuration groups")
    finally:
        clear_cache()  # this process's engines served this call only
    records = sorted((r for rs in found for r in rs), key=lambda r: r["config"].key())
    t2 = time.perf_counter()
    for i, r in enumerate(records):
        for p in r["points"]:
            p["config_index"], p["config"] = i, r["config"].label
    frontier, cheapest, refined = _choose(records, st)
    for r in records:  # the sort keys served; the index and label say the same in the result
        for p in r["points"]:
            p.pop("key", None)
    for row in cheapest:
        for k in ("by_gpus", "by_usd"):
            if row[k] is not None:
                row[k] = {x: v for x, v in row[k].items() if x != "key"}
    frontier = [{x: v for x, v in p.items() if x != "key"} for p in frontier]
    t3 = time.perf_counter()
    out_configs = []
    for r in records:
        c: Config = r["config"]
        rec = {k: v for k, v in r.items() if k != "config"}
        rec.update(c.as_dict())
        rec["flags"] = flags_for(c, model if isinstance(model, str) else src.name, chk["engines"],
                                 gpu_mem_util=st.gpu_mem_util, kv_block=st.kv_block, memory=r.get("memory"))
        out_configs.append(rec)
    counts = _counts(records, refined)
    notes += _notes(st, refined)
    notes += _origin_notes(chk["profiles"], cheapest)
    if any(c.disagg for c in configs):
        notes.append("disaggregated configurations: simulated by graphroof.serve(disagg=...) (its own max-rate "
                     "search, engines built per call); a group is x prefill + y decode replicas; their points keep "
                     "their search figures (not re-simulated at full size)")
    settings = {"hw": names, "rates_rps": list(st.rates), "slo_ttft_s": st.slo_ttft_s, "slo_tpot_s": st.slo_tpot_s,
                "slo_percentile": st.slo_percentile, "tp": tps, "weights": ws, "kv": kvs,
                "max_num_seqs": sorted({c.max_num_seqs for c in configs}),
                "max_batched_tokens": sorted({c.max_batched_tokens for c in configs}), "arrival": arrival,
                "prompt_len": prompt_len, "gen_len": gen_len, "seed": seed, "requests": st.requests,
                "search_requests": st.search_requests, "tolerance": st.tolerance, "gpu_budget": st.gpu_budget,
                "prices_usd_per_hour": dict(st.prices), "engines": chk["engines"], "policy": policy,
                "admission": admission, "runtime": runtime, "gpu_mem_util": st.gpu_mem_util, "kv_block": st.kv_block,
                "fanout": {"jobs": jobs, "ray": ray, "groups": len(groups)},
                "hw_origins": {p.name: p.origin for p in chk["profiles"]}}
    timing = {"check_and_open_s": t1 - t0, "search_and_refine_s": t2 - t1, "choose_s": t3 - t2,
              "total_s": time.perf_counter() - t0}
    return PlanResult(model=src.name, settings=settings, configs=out_configs, frontier=frontier, cheapest=cheapest,
                      counts=counts, notes=notes, timing=timing,
                      bands=plan_bands(chk["profiles"], runtime, bool(pricing is not None and pricing.ideal)))


def _open(st: Settings, configs: list[Config], progress: Callable[[str], None] | None) -> Any:
    """The source, checked; the first group's engine built here so its traces are stored before the fan-out."""
    from .worker import engine_for, source_for

    if progress:
        progress(f"opening {st.model if isinstance(st.model, str) else type(st.model).__name__}")
    src = source_for(st)
    if not src.kv_cache:
        raise InputError(f"{src.name} has no KV cache: plan simulates decoders with a KV cache")
    if progress:
        progress(f"building the first engine ({configs[0].hw}, TP {configs[0].tp}): its traces are shared")
    engine_for(st, configs[0])
    return src


def _groups(configs: list[Config], jobs: int) -> list[list[Config]]:
    """One task per pipeline group (its devices share counted graphs); split by device when there are fewer groups
    than processes."""
    by: dict[tuple, list[Config]] = {}
    for c in configs:
        by.setdefault(c.pipeline_key(), []).append(c)
    groups = list(by.values())
    if len(groups) < jobs:
        groups = [[c for c in g if c.hw == h] for g in groups for h in dict.fromkeys(c.hw for c in g)]
    return groups


def _choose(records: list[dict[str, Any]], st: Settings) -> tuple[list[dict], list[dict], int]:
    """The frontier over every point meeting the SLOs within the budget (search figures), and per rate the cheapest
    by GPUs and by $ per hour among the groups' picks, on their full-size figures when re-simulated."""
    ok = [p for r in records for p in r["points"] if p["meets_slo"] and not p["over_budget"]]
    finals = [f for f in (_final(p) for p in ok) if f is not None and f["meets_slo"] and not f["over_budget"]]
    frontier = pareto(finals)  # on each point's final figures: full size where re-simulated
    cheapest = []
    for rate in st.rates:
        at = [p for p in ok if p["rate_rps"] == rate]
        row: dict[str, Any] = {"rate_rps": rate, "by_gpus": None, "by_usd": None}
        for name, key in (("by_gpus", by_gpus), ("by_usd", by_usd)):
            fin = [_final(p) for p in at if "full" in p] or [_final(p) for p in at]
            cands = [p for p in fin if p is not None and p["meets_slo"] and not p["over_budget"]]
            if name == "by_usd":
                cands = [p for p in cands if p.get("usd_per_hour") is not None]
            if cands:
                row[name] = min(cands, key=key)
        cheapest.append(row)
    refined = sum("full" in p for r in records for p in r["points"])
    return frontier, cheapest, refined


def _final(p: dict[str, Any]) -> dict[str, Any] | None:
    """A point's full-size figures when it was re-simulated (its configuration carried over), else its own."""
    f = p.get("full")
    if f is None:
        return dict(p) if "full" not in p else None
    return {**f, "config_index": p["config_index"], "config": p["config"], "key": p["key"], "search": {
        k: p[k] for k in ("replicas", "gpus", "ttft_s", "tpot_s", "output_tokens_per_s_per_gpu")}}


def _counts(records: list[dict[str, Any]], refined: int) -> dict[str, Any]:
    reasons: dict[str, int] = {}
    for r in records:
        if r["status"] in ("pruned", "rejected"):
            k = f"{r['status']}: {_reason_kind(r['reason'])}"
            reasons[k] = reasons.get(k, 0) + 1
    points = sum(len(r["points"]) for r in records)
    return {"configurations": len(records), "simulated": sum(r["status"] == "simulated" for r in records),
            "pruned": sum(r["status"] == "pruned" for r in records),
            "rejected": sum(r["status"] == "rejected" for r in records),
            "no_capacity": sum(r["status"] == "simulated" and r["capacity_rps"] is None for r in records),
            "points": points, "pruned_points": sum(len(r["pruned_points"]) for r in records),
            "simulations": sum(r["simulations"] for r in records), "refined_points": refined, "by_reason": reasons}


def _reason_kind(reason: str | None) -> str:
    if not reason:
        return "other"
    for k in ("out of memory", "TPOT of one sequence", "TTFT of the median prompt", "budget", "interconnect"):
        if k in reason:
            return k
    return reason.split(":")[0][:60]


def _origin_notes(profiles: list[Any], cheapest: list[dict[str, Any]]) -> list[str]:
    """When the devices' timing constants differ in origin (fitted on measurements, derived from datasheets), say
    so beside the picks that rest on derived ones: a cross-vendor pick is only as good as its constants."""
    origin = {p.name: p.origin for p in profiles}
    if len(set(origin.values())) < 2:
        return []
    picked = sorted({str(row[k]["config"]).split(" ")[0] for row in cheapest for k in ("by_gpus", "by_usd")
                     if row.get(k)})
    soft = [n for n in picked if origin.get(n) != "fitted"]
    text = ", ".join(f"{n} {o}" for n, o in origin.items())
    return [f"timing constants differ in origin ({text})" + (
        f"; the cheapest picks on {', '.join(soft)} rest on constants not fitted on measurements of that device"
        if soft else "")]


def _notes(st: Settings, refined: int) -> list[str]:
    n = st.search_requests
    out = [f"search: {n} requests per simulation; p{st.slo_percentile:g} over {n} requests is the "
           f"{max(1, math.ceil(n * st.slo_percentile / 100))}th smallest, whose true percentile spreads by about "
           f"+-{100 * 1.96 * math.sqrt(st.slo_percentile / 100 * (1 - st.slo_percentile / 100) / n):.1f} points "
           "(binomial 95%)",
           "replicas split the offered rate evenly; each replica sees the seeded stream at rate / replicas (no "
           "cross-replica load balancing simulated)",
           "tokens/s per user = 1 / median TPOT; tokens/s per GPU = a replica's output tokens/s / its GPUs"]
    if refined:
        out.append(f"each group's frontier and cheapest points per rate were re-simulated at {st.requests} requests "
                   f"({refined} points; replicas raised where the SLOs no longer held): their 'full' figures; the "
                   "cheapest per rate is chosen on them")
    return out
