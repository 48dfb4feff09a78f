"""Static batching (TensorRT-LLM's older behaviour), priced by the engine's estimate path.

Requests are grouped in arrival order into batches of ``max_num_seqs``.  A batch starts when it is full (its last
request has arrived; the last batch: when the arrivals end) and the previous batch has finished; it runs one
prefill of the whole batch padded to its longest prompt, then ``gen - 1`` decode steps in lockstep up to its
longest output.  Its figures are :meth:`graphroof.llm.engine.Engine.price` at (batch, longest prompt, longest
output): with equal lengths a request's TTFT, TPOT and e2e are those of ``Engine.estimate`` exactly.  A request
has its first token at the end of the prefill and its last after its own ``gen - 1`` decode steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .sim import STEP_FIELDS, SimOut
from .workload import Workload

__all__ = ["simulate_static"]


def simulate_static(engine: Any, wl: Workload, max_seqs: int, blocks: int, block: int) -> tuple[SimOut, list[str]]:
    """The static-batch timeline of *wl* on *engine* (notes: batches that do not fit the memory)."""
    n = len(wl)
    starts_at = np.arange(0, n, max_seqs)
    ends_at = np.minimum(starts_at + max_seqs, n)
    b = ends_at - starts_at
    pmax = np.maximum.reduceat(wl.prompt, starts_at)
    gmax = np.maximum.reduceat(wl.gen, starts_at)
    figs = engine.price(b, pmax, gmax)
    ttft, tpot = figs.ttft_s, np.nan_to_num(figs.tpot_s)
    e2e = ttft + (gmax - 1) * tpot
    group = np.repeat(np.arange(len(b)), b)
    start = np.empty(len(b))
    t = 0.0
    for k in range(len(b)):  # one batch at a time: after its last arrival and the previous batch
        start[k] = t = max(t, float(wl.arrival[ends_at[k] - 1]))
        t += float(e2e[k])
    first = start[group] + ttft[group]
    finish = first + (wl.gen - 1) * tpot[group]
    notes = []
    fits = figs.fits
    if np.any(fits == 0):
        k = int(np.flatnonzero(fits == 0)[0])
        notes.append(f"static batch of {int(b[k])} x ({int(pmax[k])} + {int(gmax[k])}) tokens does not fit the "
                     "device memory; the times are priced as if it did (lower max_num_seqs)")
    out = SimOut(wl.arrival.astype(float), start[group], first, finish, np.zeros(n, dtype=np.int64),
                 _steps(b, pmax, gmax, start, ttft, tpot, blocks, block, wl.arrival), blocks)
    return out, notes


def _steps(b: np.ndarray, pmax: np.ndarray, gmax: np.ndarray, start: np.ndarray, ttft: np.ndarray, tpot: np.ndarray,
           blocks: int, block: int, arrival: np.ndarray) -> dict[str, np.ndarray]:
    """One row per prefill and per decode step of every batch (the lockstep timeline)."""
    cols: list[list[np.ndarray]] = [[] for _ in STEP_FIELDS]
    done = 0
    for k in range(len(b)):
        steps = int(gmax[k])  # the prefill, then gen - 1 decode steps
        j = np.arange(steps)
        t0 = start[k] + np.where(j == 0, 0.0, ttft[k] + (j - 1) * tpot[k])
        dur = np.where(j == 0, ttft[k], tpot[k])
        ctx = pmax[k] + j
        kv = b[k] * np.ceil((ctx + 1) / block)
        waiting = np.maximum(0, np.searchsorted(arrival, t0, side="right") - done - b[k])
        tokens = np.where(j == 0, b[k] * pmax[k], b[k])
        for c, v in zip(cols, (t0, dur, np.full(steps, b[k]), waiting, tokens, np.where(j == 0, 0, b[k]),
                               np.minimum(kv, blocks))):
            c.append(np.asarray(v, dtype=float))
        done += int(b[k])
    return {f: np.concatenate(c) if c else np.zeros(0) for f, c in zip(STEP_FIELDS, cols)}
