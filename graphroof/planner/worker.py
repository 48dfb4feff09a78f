"""One worker's share of a plan: the configurations of one pipeline group (same TP / PP / EP / DP and dtypes, every
device and batch limit), evaluated on engines built once per process and reused.

For each device the worker builds one :class:`~graphroof.llm.Engine` (TP-only groups share one counted pipeline
across devices, as a sweep does: counted graphs do not depend on the device) and one step cost placed at the
group's largest batch limits (its polynomials are exact below them), then per configuration:

1. **memory** (:mod:`.bounds`): weights + one chunk's activations + KV blocks per GPU, the longest request's blocks;
   a configuration that does not fit is *rejected* with the reason;
2. **analytic bounds**: TPOT of one sequence alone, TTFT of the median prompt alone, the decode-only throughput at
   the batch limit; a configuration that cannot meet an SLO even alone is *pruned* without simulating;
3. **simulation** (:mod:`.search`): the max per-replica rate meeting the SLOs by bisection on one seeded request
   stream (common random numbers), then each offered rate on ``ceil(rate / capacity)`` replicas.

Everything returned is plain data (dicts of floats and strings), so results are equal whichever process ran them.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

from ..errors import GraphroofError
from .bounds import Bounds, engine_bounds, memory_of
from .search import Simulator, search_config
from .space import Config, Settings

__all__ = ["run_group", "local_picks", "clear_cache", "source_for", "engine_for", "draws"]

#: per process: the opened source (by settings) and the engines of the group being evaluated
_CACHE: dict[str, Any] = {"source_key": None, "source": None, "group": None, "engines": {}, "draws": {}}


def clear_cache() -> None:
    _CACHE.update(source_key=None, source=None, group=None, engines={}, draws={})


def source_for(st: Settings) -> Any:
    key = st.run_id
    if _CACHE["source_key"] != key:
        from ..llm import open_source

        opts = dict(st.frontend_opts)
        if st.options is not None:
            opts["options"] = st.options
        _CACHE.update(source_key=key, source=open_source(st.model, **opts), group=None, engines={}, draws={})
    return _CACHE["source"]


def _pricing(st: Settings, c: Config, mbt: int) -> Any:
    from ..llm import Pricing

    kw: dict[str, Any] = dict(tp=c.tp, weights=c.weights, kv=c.kv, activations=st.activations, runtime=st.runtime,
                              gpu_mem_util=st.gpu_mem_util, kv_block=st.kv_block, max_batched_tokens=mbt)
    for a in ("pp", "ep", "dp"):
        if getattr(c, a) > 1:
            kw[a] = getattr(c, a)
    return (st.base or Pricing()).with_(**kw)


def engine_for(st: Settings, c: Config) -> tuple[Any, Any, bool] | str:
    """(engine, step cost, step takes prefill_attention) of *c*'s device and pipeline group, or the reason it cannot
    be built (a TP degree the heads do not divide, no interconnect for the collectives ...)."""
    if _CACHE["group"] != c.pipeline_key():
        _CACHE.update(group=c.pipeline_key(), engines={})
    engines = _CACHE["engines"]
    if c.hw in engines:
        return engines[c.hw]
    from ..llm import Engine

    src = source_for(st)
    seqs, mbt = st.grid_seqs, st.grid_tokens  # one step-cost grid for every engine: the same traces everywhere
    try:
        eng = Engine(src, hw=c.hw, pricing=_pricing(st, c, mbt))
        shared = next((e[0] for e in engines.values() if not isinstance(e, str)), None)
        if shared is not None and c.pp == c.ep == c.dp == 1:
            eng.pipeline = shared.pipeline  # counted graphs do not depend on the device (TP-only layouts)
        d = draws(st, st.requests, src)
        longest = max(int(d.prompt.max()) + int(d.gen.max()), 2)
        sc = eng.step_cost(max_batch=max(2, seqs), max_context=longest, max_chunk=max(2, mbt))
    except GraphroofError as e:
        engines[c.hw] = str(e).splitlines()[0]
        return engines[c.hw]
    attn = "prefill_attention" in inspect.signature(sc.__call__).parameters
    engines[c.hw] = (eng, sc, attn)
    return engines[c.hw]


def draws(st: Settings, n: int, src: Any) -> Any:
    """The seeded requests of *n* (lengths and unit-rate arrivals: the same for every configuration)."""
    key = n
    if key not in _CACHE["draws"]:
        from ..serving.inputs import parse_arrivals, parse_lengths
        from ..serving.workload import draw

        _CACHE["draws"][key] = draw(st.seed, n, parse_arrivals(st.arrival), parse_lengths("prompt_len", st.prompt_len),
                                    parse_lengths("gen_len", st.gen_len), None, src.spec.max_positions)
    return _CACHE["draws"][key]


def _record(c: Config, status: str, reason: str | None = None, **kw: Any) -> dict[str, Any]:
    return {"config": c, "status": status, "reason": reason, "memory": kw.get("memory"), "bounds": kw.get("bounds"),
            "capacity_rps": kw.get("capacity_rps"), "capacity_upper_rps": kw.get("capacity_upper_rps"),
            "binding_slo": kw.get("binding_slo"), "simulations": kw.get("simulations", 0),
            "points": kw.get("points", []), "pruned_points": kw.get("pruned_points", [])}


def run_group(st: Settings, configs: list[Config], refine: bool = True) -> list[dict[str, Any]]:
    """Every configuration of one pipeline group at ``st.search_requests`` requests per simulation; then, with
    *refine*, the group's candidates re-simulated at ``st.requests`` on the same engines (:func:`local_picks`: the
    plan's frontier and cheapest points are among them)."""
    out = []
    for c in configs:
        if c.disagg:  # simulated by graphroof.serve(disagg=...): its own engines
            from .disagg import run_disagg

            res = run_disagg(st, c, source_for(st), _pricing(st, c, c.max_batched_tokens), 1.0)
            status, why = res.pop("status"), res.pop("reason")
            out.append(_record(c, status, why, **res))
            continue
        built = engine_for(st, c)
        if isinstance(built, str):
            out.append(_record(c, "rejected", built))
            continue
        eng, sc, attn = built
        src = source_for(st)
        d = draws(st, st.search_requests, src)
        mem = memory_of(eng, d, c, st.kv_block)
        if mem["reject"]:
            out.append(_record(c, "rejected", mem["reject"], memory=mem))
            continue
        b: Bounds = engine_bounds(sc, d, c, mem, st.kv_block)
        why = b.prune_reason(st)
        if why:
            out.append(_record(c, "pruned", why, memory=mem, bounds=b.as_dict()))
            continue
        sim = Simulator(sc, attn, c, mem["kv_blocks"], st, d, eng.pricing.ideal, eng.runtime.request_overhead_s)
        res = search_config(sim, b, st)
        why = res.pop("reason", None)
        out.append(_record(c, "simulated", why, memory=mem, bounds=b.as_dict(), **res))
    if refine and st.requests != st.search_requests:
        for ri, pi in local_picks(out, st):
            if not out[ri]["config"].disagg:  # a disaggregated point keeps its search figures
                _refine(st, out[ri], out[ri]["points"][pi])
    return out


def local_picks(records: list[dict[str, Any]], st: Settings) -> list[tuple[int, int]]:
    """(record, point) indices of the group's frontier points and, per rate, its fewest-GPU and lowest-$/h points
    meeting the SLOs within the budget: the plan's frontier is in the union of the groups' frontiers, and its
    cheapest points are among the groups' cheapest."""
    from .result import pareto
    from .space import by_gpus, by_usd

    ok = [dict(p, _at=(ri, pi)) for ri, r in enumerate(records) for pi, p in enumerate(r["points"])
          if p["meets_slo"] and not p["over_budget"]]
    picks = {p["_at"]: None for p in pareto(ok)}
    for rate in st.rates:
        at = [p for p in ok if p["rate_rps"] == rate]
        for key in (by_gpus, by_usd):
            if at:
                picks[min(at, key=key)["_at"]] = None
    return sorted(picks)


def _refine(st: Settings, rec: dict[str, Any], p: dict[str, Any]) -> None:
    """*p* re-simulated at ``st.requests`` requests (``p["full"]``): its replicas, raised one at a time (at most 4)
    until the SLOs hold; None when the longer stream does not fit the replica's KV blocks."""
    c: Config = rec["config"]
    built = engine_for(st, c)
    assert not isinstance(built, str)
    eng, sc, attn = built
    d = draws(st, st.requests, source_for(st))
    mem = memory_of(eng, d, c, st.kv_block)
    if mem["reject"]:
        p["full"] = None
        p["full_reason"] = mem["reject"]
        return
    sim = Simulator(sc, attn, c, mem["kv_blocks"], st, d, eng.pricing.ideal, eng.runtime.request_overhead_s)
    pt = sim.point(p["rate_rps"], p["replicas"])
    for r in range(p["replicas"] + 1, p["replicas"] + 5):
        if pt["meets_slo"]:
            break
        pt = sim.point(p["rate_rps"], r)
    p["full"] = pt
    rec["simulations"] += sim.count


def finite(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)

