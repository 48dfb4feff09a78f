"""The max sustainable rate under SLOs (bisection on the rate) and the replicas a target rate needs."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["max_rate", "replicas_for", "MAX_ITERATIONS", "TOLERANCE"]

MAX_ITERATIONS = 12
TOLERANCE = 0.02


def _verdict(rec: dict[str, np.ndarray], pct: float, slo_ttft_s: float | None,
             slo_tpot_s: float | None) -> str | None:
    """None when the percentile of TTFT and of TPOT meet their SLOs, else the binding SLO's name."""
    if slo_ttft_s is not None and float(np.percentile(rec["ttft_s"], pct)) > slo_ttft_s:
        return "ttft"
    tpot = rec["tpot_s"][np.isfinite(rec["tpot_s"])]
    if slo_tpot_s is not None and len(tpot) and float(np.percentile(tpot, pct)) > slo_tpot_s:
        return "tpot"
    return None


def max_rate(trial: Callable[[float], dict[str, np.ndarray]], start: float, pct: float, slo_ttft_s: float | None,
             slo_tpot_s: float | None) -> dict[str, Any]:
    """Bisection on the rate: bracket by doubling (or halving) from *start*, then halve the bracket until it is
    within :data:`TOLERANCE` of its top or :data:`MAX_ITERATIONS` trials ran.  *trial(rate)* simulates a rate
    and returns its records."""
    lo, hi, binding, it = 0.0, math.inf, None, 0
    rate = start
    while it < MAX_ITERATIONS and not math.isfinite(hi):  # bracket
        it += 1
        why = _verdict(trial(rate), pct, slo_ttft_s, slo_tpot_s)
        if why is None:
            lo, rate = rate, rate * 2
        else:
            hi, binding = rate, why
            if lo == 0.0:
                # halve until a rate passes; the bracket is then [rate / 2, rate]
                while it < MAX_ITERATIONS:
                    it += 1
                    rate /= 2
                    why = _verdict(trial(rate), pct, slo_ttft_s, slo_tpot_s)
                    if why is None:
                        lo = rate
                        break
                    hi, binding = rate, why
    while it < MAX_ITERATIONS and lo > 0 and math.isfinite(hi) and (hi - lo) > TOLERANCE * hi:
        it += 1
        mid = (lo + hi) / 2
        why = _verdict(trial(mid), pct, slo_ttft_s, slo_tpot_s)
        if why is None:
            lo = mid
        else:
            hi, binding = mid, why
    return {"rate_rps": lo if lo > 0 else None, "upper_rps": hi if math.isfinite(hi) else None,
            "binding_slo": binding, "percentile": pct, "iterations": it, "slo_ttft_s": slo_ttft_s,
            "slo_tpot_s": slo_tpot_s, "converged": lo > 0 and math.isfinite(hi) and (hi - lo) <= TOLERANCE * hi}


def replicas_for(target_rate: float, capacity_rps: float | None, tp: int, usd_per_hour: float | None,
                 mean_output_tokens: float, basis: str) -> dict[str, Any]:
    """Replicas of *capacity_rps* each to serve *target_rate*, their GPUs and the price per million output
    tokens when a GPU-hour price is known."""
    out: dict[str, Any] = {"target_rate_rps": target_rate, "capacity_rps_per_replica": capacity_rps,
                           "basis": basis, "replicas_needed": None, "gpus": None, "usd_per_hour": usd_per_hour,
                           "usd_per_million_tokens": None}
    if not capacity_rps or capacity_rps <= 0:
        return out
    n = max(1, math.ceil(target_rate / capacity_rps - 1e-9))
    out["replicas_needed"], out["gpus"] = n, n * tp
    if usd_per_hour:
        tokens_per_hour = target_rate * mean_output_tokens * 3600.0
        out["usd_per_million_tokens"] = n * tp * usd_per_hour / tokens_per_hour * 1e6
    return out
