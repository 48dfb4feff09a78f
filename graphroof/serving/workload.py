"""The requests of one simulated rate: arrival times, prompt and output token counts, cached prefix tokens.

Common random numbers: the lengths and the unit-rate arrival gaps are drawn once per seed and every rate reuses
them (the gaps divided by the rate), so two rates differ only by their rate and a rate search sees a monotone
workload.  Closed-loop arrivals (``closed:N``) are known only as requests finish: the first *N* arrive at 0 and
the others are NaN until the simulator sets them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .inputs import Arrivals, Lengths, Trace

__all__ = ["Workload", "Draws", "draw", "workload_at"]


@dataclass
class Workload:
    """One rate's requests (arrays, one entry per request, in arrival order)."""

    arrival: np.ndarray   # seconds (NaN: a closed-loop arrival not known yet)
    prompt: np.ndarray    # input tokens
    gen: np.ndarray       # output tokens (the first from the prefill)
    prefix: np.ndarray    # of the prompt, tokens served from the shared prefix cache (whole blocks)
    users: int = 0        # closed loop: concurrent users (0: open loop)

    def __len__(self) -> int:
        return len(self.prompt)


@dataclass
class Draws:
    """The random draws of one seed: lengths and unit-rate gaps (or a trace's own times)."""

    prompt: np.ndarray
    gen: np.ndarray
    unit_arrival: np.ndarray  # arrival times at 1 request/s
    arrivals: Arrivals | None
    trace_rate: float | None = None  # a trace's own rate (its times are at that rate)


def clip_lengths(prompt: np.ndarray, gen: np.ndarray, max_positions: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Prompts to ``<= max_positions - 1``, outputs to ``<= max_positions - prompt`` (both >= 1)."""
    prompt, gen = np.maximum(1, prompt), np.maximum(1, gen)
    if max_positions:
        prompt = np.minimum(prompt, max(1, max_positions - 1))
        gen = np.maximum(1, np.minimum(gen, max_positions - prompt))
    return prompt.astype(np.int64), gen.astype(np.int64)


def draw(seed: int, requests: int, arrivals: Arrivals | None, prompt_len: Lengths | None, gen_len: Lengths | None,
         trace: Trace | None, max_positions: int | None) -> Draws:
    """Every random draw of a run (numpy ``Generator(PCG64(seed))``): one call per run, shared by its rates."""
    if trace is not None:
        p, g = clip_lengths(trace.input_tokens, trace.output_tokens, max_positions)
        rate = trace.rate
        t = trace.arrival_s - trace.arrival_s[0]
        unit = t * rate if math.isfinite(rate) else np.zeros_like(t)
        return Draws(p, g, unit, None, trace_rate=rate)
    assert arrivals is not None and prompt_len is not None and gen_len is not None
    rng = np.random.default_rng(seed)
    p = prompt_len.sample(rng, requests)
    g = gen_len.sample(rng, requests)
    p, g = clip_lengths(p, g, max_positions)
    gaps = arrivals.unit_gaps(rng, requests)
    unit = np.cumsum(gaps) - gaps[0]  # the first request arrives at 0
    return Draws(p, g, unit, arrivals)


def workload_at(d: Draws, rate: float, prefix_share: float, block: int) -> Workload:
    """The requests at *rate* requests/s (a trace: its times scaled from its own rate to *rate*)."""
    n = len(d.prompt)
    users = d.arrivals.users if d.arrivals is not None and d.arrivals.kind == "closed" else 0
    if users:
        arrival = np.full(n, np.nan)
        arrival[: min(users, n)] = 0.0
    elif d.trace_rate is not None and not math.isfinite(d.trace_rate):
        arrival = np.zeros(n)
    else:
        arrival = d.unit_arrival / rate
    # a shared prefix is cached in whole blocks, and at least one prompt token is computed (it yields a token)
    prefix = np.minimum(np.floor(d.prompt * prefix_share / block) * block, ((d.prompt - 1) // block) * block)
    return Workload(arrival, d.prompt.copy(), d.gen.copy(), prefix.astype(np.int64), users)
