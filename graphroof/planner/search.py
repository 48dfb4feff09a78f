"""One configuration under traffic: its max per-replica rate meeting the SLOs, and each offered rate's replicas.

Every simulation is :func:`graphroof.serving.sim.simulate` (continuous batching, chunked prefill, paged KV,
preemption) on the same seeded requests: lengths and unit-rate arrival gaps drawn once, a rate dividing the gaps
(common random numbers, as :func:`graphroof.serve` does), so a configuration's result does not depend on which
process ran it or in what order.

* **Capacity**: bisection on the per-replica rate from the analytic estimate (:mod:`.bounds`): up by 1.5x while
  the SLOs hold (to 1.5x the decode-only upper bound), down by 2x while they do not (to 1/64 of the estimate),
  then halving the bracket until it is within ``tolerance`` of its top (at most :data:`MAX_TRIALS` simulations).
  The SLOs hold when the ``slo_percentile`` of TTFT and of TPOT over the requests are within them.  A trial needs
  only that verdict: its simulation stops once the TTFT percentile is certain to miss the SLO (:func:`stop_rule`;
  the verdict is the whole run's, the TTFT SLO being checked first), else runs to the end (its figures then serve
  a point at the same rate).
* **Replicas**: an offered rate R runs on ``r = ceil(R / capacity)`` replicas, each seeing R / r (requests split
  evenly; each replica's stream is the seeded Poisson stream at R / r); that point is simulated for its figures, and
  r raised (at most 3 times) if it misses the SLOs (simulation noise at the bracket's edge).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .bounds import Bounds
from .space import Config, Settings, replicas_floor

__all__ = ["Simulator", "search_config", "stop_rule", "MAX_TRIALS"]

MAX_TRIALS = 14


def stop_rule(slo_ttft_s: float | None, pct: float, n: int) -> tuple[float, int] | None:
    """When a trial of *n* requests may stop: (limit, k) once k requests are certain to have a TTFT above the limit.

    numpy's percentile ``q`` (linear) lies between the order statistics ``floor(q (n - 1))`` and the next, so when
    ``k = n - floor(q (n - 1))`` requests exceed the SLO, both do and so does the percentile, whatever the rest of
    the run.  The floor is taken a hair low and the limit a hair high (1e-9) so rounding never decides it; None:
    no stop (no TTFT SLO, or a single request)."""
    lower = math.floor((n - 1) * (float(pct) / 100.0) - 1e-9)
    if slo_ttft_s is None or not math.isfinite(slo_ttft_s) or slo_ttft_s <= 0 or lower < 0:
        return None
    return slo_ttft_s * (1.0 + 1e-9), n - lower


class Simulator:
    """The simulations of one configuration, memoised by per-replica rate."""

    def __init__(self, sc: Any, attn: bool, c: Config, blocks: int, st: Settings, d: Any, ideal: bool,
                 request_s: float = 0.0):
        from ..serving.sim import EngineModel

        # *blocks*: one DP rank's; each rank schedules its own max_num_seqs / max_batched_tokens
        self.em = EngineModel.of_ranks(sc, blocks, st.kv_block, c.max_batched_tokens, c.max_num_seqs, c.dp,
                                       policy=st.policy, ideal=ideal, attention_arg=attn, admission=st.admission,
                                       request_s=0.0 if ideal else float(request_s))
        self.c, self.st, self.d = c, st, d
        self.memo: dict[float, dict[str, Any]] = {}
        self.missed: set[float] = set()  # rates whose trial stopped early on the TTFT SLO (no figures)
        self.count = 0

    def verdict(self, lam: float) -> str | None:
        """The SLO *lam* requests/s misses (None: it meets them), stopping the simulation once TTFT is decided."""
        if lam in self.memo:
            return self.memo[lam]["binding"]
        if lam in self.missed:
            return "ttft"
        return self.run(lam, stop_rule(self.st.slo_ttft_s, self.st.slo_percentile, len(self.d.prompt)))["binding"]

    def run(self, lam: float, ttft_stop: tuple[float, int] | None = None) -> dict[str, Any]:
        """The figures of one replica at *lam* requests/s (with *ttft_stop*, perhaps only ``{"binding": "ttft"}``)."""
        if lam in self.memo:
            return self.memo[lam]
        from ..serving.metrics import rate_point, records_of
        from ..serving.sim import simulate
        from ..serving.workload import workload_at

        st = self.st
        wl = workload_at(self.d, lam, 0.0, st.kv_block)
        out = simulate(self.em, wl, None, ttft_stop)
        if lam not in self.missed:
            self.count += 1  # a rate whose trial stopped early and is now run whole counts once
        if out.stopped:
            self.missed.add(lam)
            return {"binding": "ttft"}
        rec = records_of(out, wl)
        pt = rate_point(lam, out, rec, self.c.gpus_per_replica, st.slo_ttft_s, st.slo_tpot_s)
        pct = st.slo_percentile
        ttft = float(np.percentile(rec["ttft_s"], pct))
        tp = rec["tpot_s"][np.isfinite(rec["tpot_s"])]
        tpot = float(np.percentile(tp, pct)) if len(tp) else math.nan
        why = None
        if st.slo_ttft_s is not None and ttft > st.slo_ttft_s:
            why = "ttft"
        elif st.slo_tpot_s is not None and len(tp) and tpot > st.slo_tpot_s:
            why = "tpot"
        tpot50 = pt.tpot_s["p50"]
        fig = {"per_replica_rps": lam, "throughput_rps": pt.throughput_rps,
               "output_tokens_per_s_per_gpu": pt.output_tokens_per_s_per_gpu,
               "ttft_s": ttft, "tpot_s": tpot, "ttft_p50_s": pt.ttft_s["p50"], "tpot_p50_s": tpot50,
               "tokens_per_s_per_user": 1.0 / tpot50 if tpot50 and math.isfinite(tpot50) else math.nan,
               "preemptions": pt.preemptions, "kv_used_max": pt.kv_used_max, "binding": why,
               "requests": len(wl)}
        self.memo[lam] = fig
        return fig

    def point(self, rate: float, replicas: int) -> dict[str, Any]:
        """*rate* offered to *replicas* replicas: one replica's figures, the GPUs and the price."""
        f = dict(self.run(rate / replicas))
        gpus = replicas * self.c.gpus_per_replica
        usd = self.st.price(self.c.hw)
        mean_gen = float(np.mean(self.d.gen))
        f.update(rate_rps=rate, replicas=replicas, gpus=gpus, meets_slo=f["binding"] is None,
                 usd_per_hour=gpus * usd if usd else None,
                 usd_per_million_tokens=gpus * usd / (rate * mean_gen * 3600.0) * 1e6 if usd else None,
                 over_budget=self.st.gpu_budget is not None and gpus > self.st.gpu_budget, key=self.c.key())
        return f


def capacity(sim: Simulator, b: Bounds, st: Settings) -> tuple[float | None, float | None, str | None]:
    """(largest per-replica rate found meeting the SLOs, smallest found missing them, the SLO that binds)."""
    lo, hi, binding, trials = 0.0, math.inf, None, 0
    lam = max(min(b.capacity_estimate_rps, b.capacity_upper_rps), 1e-9)
    top, bottom = 1.5 * b.capacity_upper_rps, lam / 64.0
    while trials < MAX_TRIALS:
        trials += 1
        why = sim.verdict(lam)
        if why is None:
            lo = lam
            if lam >= top:
                break
            lam = min(lam * 1.5, top)
        else:
            hi, binding = lam, why
            if lo > 0:
                break
            if lam <= bottom:
                return None, hi, binding
            lam /= 2.0
    while trials < MAX_TRIALS and lo > 0 and math.isfinite(hi) and hi - lo > st.tolerance * hi:
        trials += 1
        mid = (lo + hi) / 2.0
        why = sim.verdict(mid)
        if why is None:
            lo = mid
        else:
            hi, binding = mid, why
    return (lo if lo > 0 else None), (hi if math.isfinite(hi) else None), binding


def search_config(sim: Simulator, b: Bounds, st: Settings) -> dict[str, Any]:
    """Capacity, then one point per offered rate (or the reason it is left out)."""
    gpr = sim.c.gpus_per_replica
    pruned: list[dict[str, Any]] = []
    rates = []
    for r in st.rates:
        need = replicas_floor(r, b.capacity_upper_rps)
        if st.gpu_budget is not None and need * gpr > st.gpu_budget:
            pruned.append({"rate_rps": r, "reason": f"needs >= {need} replicas = {need * gpr} GPUs (decode-only "
                           f"upper bound {b.capacity_upper_rps:.3g} req/s per replica) > budget {st.gpu_budget}"})
        else:
            rates.append(r)
    if not rates:
        return {"reason": "every rate needs more GPUs than the budget", "pruned_points": pruned, "simulations": 0,
                "points": []}
    cap, upper, binding = capacity(sim, b, st)
    points = []
    if cap is not None:
        for r in rates:
            reps = replicas_floor(r, cap)
            pt = sim.point(r, reps)
            for _ in range(3):
                if pt["meets_slo"]:
                    break
                reps += 1
                pt = sim.point(r, reps)
            points.append(pt)
    reason = None if cap is not None else (f"misses the {binding} SLO even at {upper:.3g} req/s per replica"
                                           if upper else "misses the SLOs")
    return {"capacity_rps": cap, "capacity_upper_rps": upper, "binding_slo": binding, "points": points,
            "pruned_points": pruned, "simulations": sim.count, "reason": reason}
