"""A simulated rate's figures (:class:`~graphroof.serving.result.RatePoint`), its per-request records and a
downsampled step timeline, from a :class:`~graphroof.serving.sim.SimOut`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..hardware.bands import ErrorBand, figure_bands
from .result import RatePoint
from .sim import SimOut
from .workload import Workload

__all__ = ["records_of", "rate_point", "timeline_of", "stats", "meets_slo", "serve_bands", "TIMELINE_ROWS"]

TIMELINE_ROWS = 2000


def stats(x: np.ndarray, weights: np.ndarray | None = None) -> dict[str, float]:
    """{mean, p50, p90, p99} of the finite values of *x* (weighted: each value counted *weights* times)."""
    x = np.asarray(x, dtype=float)
    ok = np.isfinite(x)
    if weights is not None:
        ok &= np.asarray(weights) > 0
    if not ok.any():
        return {"mean": math.nan, "p50": math.nan, "p90": math.nan, "p99": math.nan}
    v = x[ok]
    if weights is None:
        p = np.percentile(v, [50, 90, 99])
        return {"mean": float(v.mean()), "p50": float(p[0]), "p90": float(p[1]), "p99": float(p[2])}
    w = np.asarray(weights, dtype=float)[ok]
    order = np.argsort(v)
    v, w = v[order], w[order]
    cum = np.cumsum(w)
    q = [float(v[min(len(v) - 1, int(np.searchsorted(cum, f * cum[-1], side="left")))]) for f in (0.5, 0.9, 0.99)]
    return {"mean": float(np.sum(v * w) / cum[-1]), "p50": q[0], "p90": q[1], "p99": q[2]}


def records_of(sim: SimOut, wl: Workload) -> dict[str, np.ndarray]:
    """Per request: times, token counts, queueing, TTFT, TPOT (NaN for one output token), e2e, preemptions."""
    arr = sim.arrival
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(wl.gen > 1, (sim.finish - sim.first_token) / np.maximum(wl.gen - 1, 1), np.nan)
    return {"arrival_s": arr, "first_token_s": sim.first_token, "finish_s": sim.finish,
            "input_tokens": wl.prompt.copy(), "output_tokens": wl.gen.copy(), "queue_s": sim.sched - arr,
            "ttft_s": sim.first_token - arr, "tpot_s": tpot, "e2e_s": sim.finish - arr,
            "preemptions": sim.preemptions.copy()}


def meets_slo(rec: dict[str, np.ndarray], slo_ttft_s: float | None, slo_tpot_s: float | None) -> np.ndarray:
    """Per request: True when it meets every SLO given (a one-token request has no TPOT to miss)."""
    ok = np.ones(len(rec["ttft_s"]), dtype=bool)
    if slo_ttft_s is not None:
        ok &= rec["ttft_s"] <= slo_ttft_s
    if slo_tpot_s is not None:
        ok &= ~(rec["tpot_s"] > slo_tpot_s)
    return ok


def steady(rec: dict[str, np.ndarray], users: int) -> dict[str, np.ndarray]:
    """A closed loop's steady-state requests: each user's first request (the loop filling) and last (emptying)
    left out, i.e. requests ``users .. n - users`` in send order; all of them when that leaves fewer than *users*."""
    n = len(rec["ttft_s"])
    if not users or n < 3 * users:
        return rec
    return {k: v[users: n - users] for k, v in rec.items()}


def rate_point(rate: float, sim: SimOut, rec: dict[str, np.ndarray], tp: int, slo_ttft_s: float | None,
               slo_tpot_s: float | None, users: int = 0) -> RatePoint:
    """The figures of one simulated rate.  *users* (a closed loop of that many users, each sending again at its
    last answer): request statistics over the steady-state requests (:func:`steady`), and the throughputs by
    Little's law, users / mean e2e requests/s, not over the run's window (which holds the filling and emptying)."""
    t0, t1 = float(np.nanmin(sim.arrival)), float(np.nanmax(sim.finish))
    window = dur = max(t1 - t0, 1e-300)
    rec = steady(rec, users)
    n = len(rec["ttft_s"])
    out_tok, in_tok = float(rec["output_tokens"].sum()), float(rec["input_tokens"].sum())
    if users and n < len(sim.arrival):  # the time the steady requests span at users / mean e2e requests/s
        dur = max(n * float(np.nanmean(rec["e2e_s"])) / users, 1e-300)
    st = sim.steps
    d = st["dur_s"]
    busy = float(d.sum())
    kv_frac = st["kv_blocks"] / max(sim.blocks, 1)
    kv_mean = float(np.sum(kv_frac * d) / window) if busy > 0 else 0.0  # idle time holds no sequence's KV
    in_system = float(np.sum((st["running"] + st["waiting"]) * d) / window)
    lam, w = n / dur, float(np.nanmean(rec["e2e_s"]))
    good = meets_slo(rec, slo_ttft_s, slo_tpot_s)
    return RatePoint(
        rate_rps=float(rate), requests=n, duration_s=dur, throughput_rps=n / dur, output_tokens_per_s=out_tok / dur,
        total_tokens_per_s=(out_tok + in_tok) / dur, output_tokens_per_s_per_gpu=out_tok / dur / tp,
        ttft_s=stats(rec["ttft_s"]), tpot_s=stats(rec["tpot_s"]), itl_s=stats(d, st["decode_tokens"]),
        e2e_s=stats(rec["e2e_s"]), queue_s=stats(rec["queue_s"]), preemptions=int(rec["preemptions"].sum()),
        kv_used_mean=kv_mean, kv_used_max=float(kv_frac.max()) if len(kv_frac) else 0.0,
        goodput_rps=float(good.sum()) / dur, slo_attainment=float(good.mean()) if n else math.nan,
        littles_law={"mean_in_system": in_system, "arrival_rate": lam, "mean_time_in_system": w,
                     "ratio": in_system / (lam * w) if lam * w > 0 else math.nan})


def timeline_of(sim: SimOut, rows: int = TIMELINE_ROWS) -> dict[str, np.ndarray]:
    """The step trace downsampled to at most *rows* evenly spaced steps: time_s, running, waiting, batch_tokens,
    kv_used_fraction."""
    st = sim.steps
    n = len(st["start_s"])
    idx = np.unique(np.linspace(0, n - 1, min(n, rows)).round().astype(np.int64)) if n else np.zeros(0, np.int64)
    return {"time_s": st["start_s"][idx], "running": st["running"][idx].astype(np.int64),
            "waiting": st["waiting"][idx].astype(np.int64), "batch_tokens": st["batch_tokens"][idx].astype(np.int64),
            "kv_used_fraction": st["kv_blocks"][idx] / max(sim.blocks, 1)}


def serve_bands(prefill_hw: Any, decode_hw: Any, runtime: str, ideal: bool) -> dict[str, ErrorBand]:
    """The error bands of a run's figures (:mod:`graphroof.serving.result`): TTFT from the prefill device's band,
    TPOT and throughput (e2e, tok/s, max rate) from the decode device's; aggregated, both are the replica's device.
    None for the ideal roofline (a bound, not an estimate)."""
    if ideal:
        return {}
    return {**figure_bands(decode_hw, runtime), "ttft": figure_bands(prefill_hw, runtime, ("ttft",))["ttft"]}
