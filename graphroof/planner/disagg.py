"""Disaggregated configurations (``x`` prefill and ``y`` decode replicas of one device, TP and dtypes): each one is
simulated by :func:`graphroof.serve` with its ``disagg`` keyword (when this build has it; :mod:`.space` switches the
axis on), on the same seeded requests as the aggregated configurations.

A group of ``x + y`` replicas is the unit: its max rate under the SLOs comes from ``serve``'s own max-rate search
(bisection, :mod:`graphroof.serving.search`), an offered rate runs on ``ceil(rate / capacity)`` groups, and that
point is simulated for its figures.  ``serve`` builds its engines per call (no reuse across batch limits), so a
disaggregated configuration costs a few engine builds.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import GraphroofError
from .space import Config, Settings, replicas_floor

__all__ = ["run_disagg"]


def _serve(st: Settings, c: Config, src: Any, pricing: Any, rate: float, find: bool) -> Any:
    from ..serving import serve

    return serve(src, disagg=c.disagg, hw=c.hw, pricing=pricing, rate=[rate], requests=st.search_requests,
                 arrival=st.arrival, prompt_len=st.prompt_len, gen_len=st.gen_len, seed=st.seed,
                 max_num_seqs=c.max_num_seqs, max_batched_tokens=c.max_batched_tokens, policy=st.policy,
                 admission=st.admission, slo_ttft_s=st.slo_ttft_s, slo_tpot_s=st.slo_tpot_s,
                 slo_percentile=st.slo_percentile, find_max_rate=find)


def _point(st: Settings, c: Config, res: Any, rate: float, groups: int, mean_gen: float) -> dict[str, Any]:
    rec, pt = res.records[0], res.points[0]
    pct = st.slo_percentile
    ttft = float(np.percentile(rec["ttft_s"], pct))
    tp = rec["tpot_s"][np.isfinite(rec["tpot_s"])]
    tpot = float(np.percentile(tp, pct)) if len(tp) else math.nan
    why = "ttft" if ttft > (st.slo_ttft_s or math.inf) else (
        "tpot" if st.slo_tpot_s is not None and tpot > st.slo_tpot_s else None)
    gpus = groups * c.gpus_per_replica
    usd = st.price(c.hw)
    tpot50 = pt.tpot_s["p50"]
    return {"per_replica_rps": rate / groups, "throughput_rps": pt.throughput_rps,
            "output_tokens_per_s_per_gpu": pt.output_tokens_per_s / c.gpus_per_replica, "ttft_s": ttft,
            "tpot_s": tpot, "ttft_p50_s": pt.ttft_s["p50"], "tpot_p50_s": tpot50,
            "tokens_per_s_per_user": 1.0 / tpot50 if tpot50 and math.isfinite(tpot50) else math.nan,
            "preemptions": pt.preemptions, "kv_used_max": pt.kv_used_max, "binding": why,
            "requests": len(rec["ttft_s"]), "rate_rps": rate, "replicas": groups, "gpus": gpus,
            "meets_slo": why is None, "usd_per_hour": gpus * usd if usd else None,
            "usd_per_million_tokens": gpus * usd / (rate * mean_gen * 3600.0) * 1e6 if usd else None,
            "over_budget": st.gpu_budget is not None and gpus > st.gpu_budget, "key": c.key()}


def run_disagg(st: Settings, c: Config, src: Any, pricing: Any, start_rps: float) -> dict[str, Any]:
    """The record fields of one disaggregated configuration (status, reason, capacity, points)."""
    try:
        res = _serve(st, c, src, pricing, start_rps, True)
    except GraphroofError as e:
        return {"status": "rejected", "reason": str(e).splitlines()[0], "simulations": 0}
    mr = res.max_rate or {}
    cap, sims = mr.get("rate_rps"), int(mr.get("iterations") or 0) + 1
    out: dict[str, Any] = {"status": "simulated", "reason": None, "capacity_rps": cap,
                           "capacity_upper_rps": mr.get("upper_rps"), "binding_slo": mr.get("binding_slo"),
                           "points": [], "pruned_points": [], "simulations": sims}
    if not cap:
        out["reason"] = f"misses the {mr.get('binding_slo')} SLO at every rate tried"
        return out
    mean_gen = float(np.mean(res.records[0]["output_tokens"]))
    for rate in st.rates:
        groups = replicas_floor(rate, cap)
        if st.gpu_budget is not None and groups * c.gpus_per_replica > st.gpu_budget:
            out["pruned_points"].append({"rate_rps": rate, "reason": f"needs {groups} groups = "
                                         f"{groups * c.gpus_per_replica} GPUs > budget {st.gpu_budget}"})
            continue
        for g in range(groups, groups + 4):
            p = _point(st, c, _serve(st, c, src, pricing, rate / g, False), rate, g, mean_gen)
            out["simulations"] += 1
            if p["meets_slo"]:
                break
        out["points"].append(p)
    return out
