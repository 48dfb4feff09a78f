"""Disaggregated prefill / decode: *x* prefill replicas and *y* decode replicas, the KV cache sent between them.

A request goes through three stages:

1. **Prefill pool.**  Requests are dealt round robin (in arrival order) over the prefill replicas; each replica is
   the continuous-batching engine of :mod:`~graphroof.serving.sim` running prefill-only steps (chunked prefill
   within its token budget, priced by the prefill engine's step cost).  The prefill's last chunk emits the first
   token: **TTFT = prefill end - arrival**.  A prefill replica frees the request's KV blocks when its prefill ends
   (the copy held while the transfer runs is not counted against it).
2. **KV transfer** over the prefill replica's link (:mod:`~graphroof.serving.kvlink`): FIFO, ``bytes / bw`` on
   the wire plus the latency.
3. **Decode pool.**  Landed requests are dealt round robin (in the order they land) over the decode replicas.  A
   decode replica admits a request (queue front first) when its KV blocks (the prompt's and the next token's) are
   free and a seat is open, in the same step as its running decodes; from then it decodes as in the aggregated
   engine (decode steps priced by the decode engine's step cost; preemption by recompute when blocks run out, the
   recompute done by the decode replica).  The transfer and the wait for blocks delay the second token, so TPOT
   and the inter-token latency of the second token include them.

One request at a time and free transfers, each stage prices exactly the steps the aggregated engine runs for it
(the prefill chunks, then decode steps at the same contexts): TTFT and TPOT equal the aggregated simulation's.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..sweeps.kvlink import KVLink, transfer_times
from .metrics import meets_slo, stats
from .result import RatePoint
from .sim import EngineModel, SimOut, _Sim, simulate
from .workload import Workload

__all__ = ["DisaggOut", "simulate_disagg", "simulate_replicas", "disagg_records", "disagg_point", "pool_stats"]


class _DecodeSim(_Sim):
    """A decode replica: its requests arrive with the prompt's KV computed elsewhere and the first token emitted.

    ``first`` records the second token's time (the first this replica emits); ``sched`` the admission."""

    def __init__(self, em: EngineModel, wl: Workload, progress: Callable[[str], None] | None):
        super().__init__(replace(em, policy="decode-first"), wl, progress)
        self.comp = wl.prompt.astype(np.int64).copy()
        self.known = self.comp + 1
        self.out = np.ones(len(wl), dtype=np.int64)

    def _join_spec(self, h: int, budget: int) -> tuple[int, int, float, int, int] | None:
        """A landed request joins the next step as one more decode at its context."""
        return (0, 0, 0.0, 1, int(self.comp[h])) if budget > 0 else None

    def _fresh(self, h: int) -> bool:
        """Whether waiting request *h* is a landed transfer (not a preempted request to recompute)."""
        return bool(self.comp[h] == self.known[h] - 1)

    def _head_admissible(self, budget: int) -> bool:
        if not self.waiting or not self._fresh(self.waiting[0]):
            return super()._head_admissible(budget)
        if len(self.running) >= self.em.max_seqs or budget <= 0:
            return False
        h = self.waiting[0]
        tok = int(self._tok(np.array([h]))[0])
        return self._blocks_for(h, self._hold(h, int(self.comp[h]) + tok)) <= self.free

    def _decodes(self, d: np.ndarray, budget: int) -> tuple[np.ndarray, int]:
        got, budget = super()._decodes(d, budget)
        joined = []
        while not self.gone and self.waiting and self._fresh(self.waiting[0]) and self._head_admissible(budget):
            h = self.waiting.popleft()
            tok = int(self._tok(np.array([h]))[0])
            self._grab(h, self._hold(h, int(self.comp[h]) + tok))
            bisect.insort(self.running, h)
            self.sched[h] = self.now
            joined.append(h)
            budget -= 1
        if joined:
            got = np.r_[got, np.array(joined, dtype=np.int64)]
        return got, budget


@dataclass
class DisaggOut:
    """Per request (the workload's order): times through the three stages; each replica's simulation."""

    arrival: np.ndarray
    sched: np.ndarray           # first scheduled at the prefill pool
    first_token: np.ndarray     # prefill end
    xfer_start: np.ndarray      # NaN: no transfer (one output token)
    xfer_done: np.ndarray
    decode_sched: np.ndarray    # admitted by a decode replica
    second_token: np.ndarray
    finish: np.ndarray
    preemptions: np.ndarray
    prefill: list[SimOut]
    decode: list[SimOut]
    decode_ids: list[np.ndarray]  # each decode replica's requests, in its simulation's order


def _part(wl: Workload, idx: np.ndarray, arrival: np.ndarray | None = None) -> Workload:
    return Workload(wl.arrival[idx] if arrival is None else arrival, wl.prompt[idx].copy(), wl.gen[idx].copy(),
                    wl.prefix[idx].copy())


def simulate_replicas(em: EngineModel, wl: Workload, n: int,
                      progress: Callable[[str], None] | None = None) -> tuple[SimOut, list[SimOut]]:
    """*n* aggregated replicas, requests dealt round robin in arrival order: the merged per-request output (steps
    of every replica, sorted by start; ``blocks`` one replica's) and each replica's."""
    ids = [np.arange(r, len(wl), n) for r in range(n)]
    outs = [simulate(em, _part(wl, i), progress) for i in ids]
    k = len(wl)
    m = {f: np.full(k, np.nan) for f in ("sched", "first", "finish")}
    pre = np.zeros(k, dtype=np.int64)
    for i, o in zip(ids, outs):
        m["sched"][i], m["first"][i], m["finish"][i], pre[i] = o.sched, o.first_token, o.finish, o.preemptions
    steps = {f: np.concatenate([o.steps[f] for o in outs]) for f in outs[0].steps}
    order = np.argsort(steps["start_s"], kind="stable")
    steps = {f: v[order] for f, v in steps.items()}
    # blocks: one replica's, so each step's KV fraction is its replica's (the time-weighted mean then sums the
    # replicas' means: the caller divides it by n)
    return SimOut(wl.arrival.copy(), m["sched"], m["first"], m["finish"], pre, steps, em.blocks), outs


def simulate_disagg(pre_em: EngineModel, dec_em: EngineModel, wl: Workload, x: int, y: int, link: KVLink,
                    kv_bytes_per_token: float, progress: Callable[[str], None] | None = None,
                    decode: bool = True) -> DisaggOut:
    """The requests of *wl* through *x* prefill replicas, their links and *y* decode replicas (module docstring).
    *decode* False: the prefill pool and the transfers only (the decode fields stay NaN)."""
    n = len(wl)
    pre_wl = Workload(wl.arrival, wl.prompt, np.ones(n, dtype=np.int64), wl.prefix)  # prefill-only: one token
    _, pouts = simulate_replicas(pre_em, pre_wl, x, progress)
    nan = np.full(n, np.nan)
    sched, first, xs, xd = nan.copy(), nan.copy(), nan.copy(), nan.copy()
    pre = np.zeros(n, dtype=np.int64)
    sends = wl.gen > 1
    for r, o in enumerate(pouts):
        i = np.arange(r, n, x)
        sched[i], first[i], pre[i] = o.sched, o.first_token, o.preemptions
        j = i[sends[i]]
        if len(j):
            xs[j], xd[j] = transfer_times(first[j], kv_bytes_per_token * wl.prompt[j], link)
    dsched, second, finish = nan.copy(), nan.copy(), np.where(sends, np.nan, first)
    douts: list[SimOut] = []
    dids: list[np.ndarray] = []
    if decode and sends.any():
        j = np.flatnonzero(sends)
        landed = j[np.lexsort((j, xd[j]))]  # in the order they land
        for r in range(y):
            k = landed[r::y]
            if not len(k):
                continue
            o = _DecodeSim(dec_em, _part(wl, k, xd[k].copy()), progress).run()
            dsched[k], second[k], finish[k] = o.sched, o.first_token, o.finish
            pre[k] += o.preemptions
            douts.append(o)
            dids.append(k)
    return DisaggOut(wl.arrival.copy(), sched, first, xs, xd, dsched, second, finish, pre, pouts, douts, dids)


def pool_stats(outs: list[SimOut], replicas: int, duration_s: float) -> dict[str, Any]:
    """Busy share (step time / (duration x replicas)) and KV use of one pool."""
    busy = sum(float(o.steps["dur_s"].sum()) for o in outs)
    kv = [float(np.sum(o.steps["kv_blocks"] / max(o.blocks, 1) * o.steps["dur_s"])) for o in outs]
    kv_max = max((float((o.steps["kv_blocks"] / max(o.blocks, 1)).max()) for o in outs if len(o.steps["dur_s"])),
                 default=0.0)
    span = max(duration_s * replicas, 1e-300)
    return {"replicas": replicas, "busy": busy / span, "kv_used_mean": sum(kv) / span, "kv_used_max": kv_max}


def disagg_records(o: DisaggOut, wl: Workload) -> dict[str, np.ndarray]:
    """Per request, the aggregated record's fields (:data:`~graphroof.serving.result.RECORD_FIELDS`) plus
    ``transfer_s`` (prefill end -> KV landed) and ``decode_queue_s`` (landed -> admitted by a decode replica)."""
    arr = o.arrival
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(wl.gen > 1, (o.finish - o.first_token) / np.maximum(wl.gen - 1, 1), np.nan)
    return {"arrival_s": arr, "first_token_s": o.first_token, "finish_s": o.finish,
            "input_tokens": wl.prompt.copy(), "output_tokens": wl.gen.copy(), "queue_s": o.sched - arr,
            "ttft_s": o.first_token - arr, "tpot_s": tpot, "e2e_s": o.finish - arr, "preemptions": o.preemptions.copy(),
            "transfer_s": o.xfer_done - o.first_token, "decode_queue_s": o.decode_sched - o.xfer_done}


def itl_samples(o: DisaggOut) -> tuple[np.ndarray, np.ndarray]:
    """(gaps, weights) of the inter-token latency: each decode step's duration weighted by its decode tokens, except
    that a request's second token counts its own gap (prefill end -> second token: transfer, queue and step)."""
    vals, wts = [], []
    for sim, k in zip(o.decode, o.decode_ids):
        st = sim.steps
        w = st["decode_tokens"].astype(float).copy()
        ends = st["start_s"] + st["dur_s"]
        at = np.clip(np.searchsorted(ends, o.second_token[k], side="left"), 0, max(len(ends) - 1, 0))
        if len(ends):
            np.add.at(w, at, -1.0)
        vals += [st["dur_s"], o.second_token[k] - o.first_token[k]]
        wts += [np.maximum(w, 0.0), np.ones(len(k))]
    if not vals:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(vals), np.concatenate(wts)


def disagg_point(rate: float, o: DisaggOut, rec: dict[str, np.ndarray], x: int, y: int, gpus: int,
                 slo_ttft_s: float | None, slo_tpot_s: float | None) -> RatePoint:
    """A rate's figures over both pools (per GPU: over *gpus*, every GPU of both pools).  Little's law counts the
    requests in the prefill pool, on the links and in the decode pool."""
    n = len(rec["ttft_s"])
    t0, t1 = float(np.nanmin(o.arrival)), float(np.nanmax(o.finish))
    dur = max(t1 - t0, 1e-300)
    out_tok, in_tok = float(rec["output_tokens"].sum()), float(rec["input_tokens"].sum())
    in_steps = sum(float(np.sum((s.steps["running"] + s.steps["waiting"]) * s.steps["dur_s"]))
                   for s in o.prefill + o.decode)
    on_link = float(np.nansum(o.xfer_done - o.first_token))
    in_system = (in_steps + on_link) / dur
    lam, w = n / dur, float(np.nanmean(rec["e2e_s"]))
    good = meets_slo(rec, slo_ttft_s, slo_tpot_s)
    pools = {"prefill": pool_stats(o.prefill, x, dur), "decode": pool_stats(o.decode, y, dur)}
    gaps, wts = itl_samples(o)
    return RatePoint(
        rate_rps=float(rate), requests=n, duration_s=dur, throughput_rps=n / dur, output_tokens_per_s=out_tok / dur,
        total_tokens_per_s=(out_tok + in_tok) / dur, output_tokens_per_s_per_gpu=out_tok / dur / gpus,
        ttft_s=stats(rec["ttft_s"]), tpot_s=stats(rec["tpot_s"]), itl_s=stats(gaps, wts),
        e2e_s=stats(rec["e2e_s"]), queue_s=stats(rec["queue_s"]), preemptions=int(rec["preemptions"].sum()),
        kv_used_mean=pools["decode"]["kv_used_mean"], kv_used_max=pools["decode"]["kv_used_max"],
        goodput_rps=float(good.sum()) / dur, slo_attainment=float(good.mean()) if n else float("nan"),
        littles_law={"mean_in_system": in_system, "arrival_rate": lam, "mean_time_in_system": w,
                     "ratio": in_system / (lam * w) if lam * w > 0 else float("nan")},
        pools=pools, transfer_s=stats(rec["transfer_s"]))
