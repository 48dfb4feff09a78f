"""Memory fit per GPU and the cheap analytic bounds a configuration is pruned on before any simulation.

**Memory** (what :func:`graphroof.serve` sizes its replica with, from the engine's memory figures,
:mod:`graphroof.llm.memory`): per GPU, ``usable = capacity x gpu_mem_util``; the KV cache gets
``usable - weights - activations of one max_batched_tokens chunk``, in paged blocks of ``kv_block`` tokens
(``kv_blocks = floor(that / (KV bytes per token x kv_block))``).  No block left, or fewer than the longest request
of the stream needs, rejects the configuration (it would OOM), with the figures in the reason.

**Bounds** (the configuration's own step cost, the simulator's, so a bound never disagrees with a simulation):

* ``tpot_alone_s``: one decode step of one sequence at the median prompt + half the mean output.  Under load a
  step holds more sequences (and prefill chunks), so no load meets a TPOT SLO this misses;
* ``ttft_alone_s``: the median prompt prefilled alone in ``max_batched_tokens`` chunks.  With the SLO held at a
  percentile >= 50, at least half the requests are that long or longer, so no load meets a TTFT SLO this misses;
* ``capacity_upper_rps``: decode-only throughput at the batch limit, ``B / (mean output x step(B))`` with
  ``B = min(max_num_seqs, sequences whose KV fits)`` and prefill free: the rate no number of replicas beats per
  replica (the replicas a rate needs are at least ``ceil(rate / capacity_upper_rps)``; over a GPU budget, the point
  is pruned);
* ``capacity_estimate_rps``: the same with each request's prefill time added (the bisection starts from it).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .space import Config, Settings

__all__ = ["Bounds", "memory_of", "engine_bounds", "GB"]

GB = 1e9


def memory_of(eng: Any, d: Any, c: Config, block: int) -> dict[str, Any]:
    """Per-GPU memory of *c* on its engine for the requests *d*: weights, activations of one chunk, KV blocks; the
    reason it does not fit (``reject``) or None."""
    key = ("plan-memory", int(np.median(d.prompt)))
    cache = eng.__dict__.setdefault("_planner_memory", {})
    if key not in cache:
        ref = key[1]
        figs = eng.price(1, ref, 2)
        mem = {k: float(v[0]) for k, v in figs.memory.items()}
        kv_tok = float(eng.priced([1], [ref], [2]).memory_inputs(1, ref)[1])
        cache[key] = (mem, kv_tok)
    mem, kv_tok = cache[key]
    ref = key[1]
    mbt = c.max_batched_tokens
    usable, weights = mem["usable_bytes"], mem["weight_bytes"]
    # one chunk of mbt tokens (serve's sizing); the peak was priced at the engine's own chunk, min(ref, its budget)
    grid = eng.pricing.max_batched_tokens or ref
    act = mem["activation_peak_bytes"] * mbt / min(ref, grid)
    out: dict[str, Any] = {"weight_bytes": weights, "activation_bytes": act, "usable_bytes": usable,
                           "capacity_bytes": mem.get("capacity_bytes"), "kv_bytes_per_token": kv_tok,
                           "kv_blocks": None, "kv_bytes": None, "reject": None}
    if math.isnan(usable) or kv_tok <= 0:
        out["kv_blocks"] = 10**12
        return out
    blocks = int(math.floor((usable - weights - act) / (kv_tok * block) + 1e-9))
    if blocks < 1:
        out["reject"] = (f"out of memory: weights {weights / GB:.1f} GB + one {mbt}-token chunk's activations "
                         f"{act / GB:.1f} GB per GPU leave no KV block in {usable / GB:.1f} GB usable")
        out["kv_blocks"] = 0
        return out
    out["kv_blocks"], out["kv_bytes"] = blocks, blocks * block * kv_tok
    need = -(-(d.prompt + d.gen) // block)
    if int(need.max()) > blocks:
        i = int(np.argmax(need))
        out["reject"] = (f"out of memory: the longest request ({int(d.prompt[i])} + {int(d.gen[i])} tokens) needs "
                         f"{int(need[i])} KV blocks; the replica holds {blocks} beside {weights / GB:.1f} GB of "
                         f"weights per GPU")
    return out


@dataclass
class Bounds:
    tpot_alone_s: float
    ttft_alone_s: float
    batch_limit: int           # min(max_num_seqs, sequences whose KV fits)
    capacity_upper_rps: float
    capacity_estimate_rps: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def prune_reason(self, st: Settings) -> str | None:
        """Why no load can meet the SLOs (None: simulate)."""
        if st.slo_tpot_s is not None and self.tpot_alone_s > st.slo_tpot_s:
            return (f"TPOT of one sequence alone {self.tpot_alone_s * 1e3:.1f} ms > SLO {st.slo_tpot_s * 1e3:g} ms "
                    "(a loaded step is no faster)")
        if st.slo_ttft_s is not None and st.slo_percentile >= 50 and self.ttft_alone_s > st.slo_ttft_s:
            return (f"TTFT of the median prompt alone {self.ttft_alone_s * 1e3:.1f} ms > SLO "
                    f"{st.slo_ttft_s * 1e3:g} ms at p{st.slo_percentile:g} (>= p50: half the prompts are longer)")
        return None


def engine_bounds(sc: Any, d: Any, c: Config, mem: dict[str, Any], block: int) -> Bounds:
    """The analytic bounds of *c* (see the module docstring), from its step cost *sc*."""
    ref = int(np.median(d.prompt))
    gen = float(np.mean(d.gen))
    ctx = ref + gen / 2.0

    def cost(n: Any, o: Any, m: Any, s: Any) -> np.ndarray:
        return np.asarray(sc(n, o, m, s), dtype=float)

    tpot1 = float(cost(0, 0, 1, int(round(ctx))).reshape(-1)[0])
    mbt = c.max_batched_tokens
    starts = np.arange(0, ref, mbt)
    sizes = np.minimum(mbt, ref - starts)
    ttft1 = float(cost(sizes, starts, np.zeros_like(sizes), np.zeros_like(sizes)).sum())
    kv_seq_blocks = -(-(ref + int(round(gen))) // block)
    # each DP rank holds the KV of its own sequences and schedules its own max_num_seqs (serving.api._engine_model)
    fit = mem["kv_blocks"] * c.dp // max(1, kv_seq_blocks) if mem["kv_blocks"] else 0
    b = int(max(1, min(c.max_num_seqs * c.dp, fit)))
    step_b = float(cost(0, 0, b, int(round(b * ctx))).reshape(-1)[0])
    upper = b / (gen * step_b)
    pre = float(cost(min(ref, mbt), 0, 0, 0).reshape(-1)[0]) * ref / min(ref, mbt)
    estimate = 1.0 / (pre + gen * step_b / b)
    return Bounds(tpot1, ttft1, b, upper, estimate)
