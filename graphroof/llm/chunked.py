"""Chunked prefill in the static-batch figures (``llm``, ``sweep``, the advice's what-ifs): with a prefill token
budget ``C`` (``max_batched_tokens``, vLLM's ``--max-num-batched-tokens``), a batch of ``b`` prompts of ``p``
tokens whose ``b p`` tokens exceed ``C`` is prefilled in ``K = ceil(b p / C)`` steps, as a serving engine's
scheduler fills each step's budget from the waiting prompts in order (the last step takes the rest).

Each step is priced by the serving simulation's step cost (:class:`~graphroof.llm.stepcost.StepCost`: the GEMMs at
the step's ``n`` tokens with the weights read again every step, the attention-like groups by the causal work the
step adds), so ``llm``'s TTFT and a ``serve`` run of the same prompts price the same steps.  A step covering the end
of one prompt (offsets ``o .. p``) and the start of the next (``0 .. r``) adds ``p^2 - o^2 + r^2`` of causal work:
over the token stream, :func:`chunk_schedule`'s ``G(t) = floor(t / p) p^2 + (t mod p)^2`` differences.

The prefill steps run back to back before the first decode step (a static batch: TTFT is the whole batch's
first token); ``serve`` interleaves decode steps of the sequences already prefilled.  Models the step cost does not
model (no KV cache, encoder-decoders, state-space layers) keep the one-pass prefill, with a note.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from ..errors import FrontendError
from .poly import NotPolynomial
from .tokens import PhaseTotals

__all__ = ["chunk_engine", "chunk_schedule", "chunked_prefill"]


def chunk_schedule(b: int, p: int, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, causal attention work) of each step prefilling *b* prompts of *p* tokens with *budget* tokens a
    step: the work of a piece from offset ``o`` to ``o + n`` of one prompt is ``(o + n)^2 - o^2``.

    >>> chunk_schedule(2, 5, 4)   # steps [0, 4), [4, 8), [8, 10) of the 10-token stream: 16, 9 + 9, 25 - 9
    (array([4, 4, 2]), array([16, 18, 16]))
    """
    total = b * p
    start = np.arange(0, total, budget, dtype=np.int64)
    end = np.minimum(start + budget, total)

    def work(t: np.ndarray) -> np.ndarray:
        return (t // p) * p * p + (t % p) ** 2

    return end - start, work(end) - work(start)


def chunked_prefill(priced: Any, hw: Any, b: np.ndarray, p: np.ndarray, pre: PhaseTotals,
                    budget: int) -> tuple[PhaseTotals, str | None, np.ndarray]:
    """*pre* (the one-pass prefill of each point) with the points whose ``b p`` tokens exceed *budget* priced as
    their chunked steps (module doc), the note that says so (None: no point is chunked) and each point's number of
    prefill steps (1: one pass)."""
    over = np.flatnonzero(b * p > budget)
    count_of = np.ones(len(b), dtype=np.int64)
    if not len(over):
        return pre, None, count_of
    src = priced.src
    why = ("no encoder-decoder, state-space or sliding-window layers" if not src.kv_cache or src.cross_tokens(1)
           or src.spec.state_layers or any(w for w in (src.spec.windows or ()))
           else "kernels launched ahead from the host are priced per pass" if priced.host_ahead(hw) else None)
    sc = None
    if why is None:
        try:
            sc = priced.chunk_step_cost(hw, budget)
        except (NotPolynomial, FrontendError):
            why = "its graph changes structure with the prompt length"
    if sc is None:
        return pre, (f"--max-batched-tokens {budget}: {src.name}'s prefill is priced as one pass (chunked prefill is "
                     f"modelled for decoders with a KV cache, {why})"), count_of
    fields = list(PhaseTotals.__dataclass_fields__)
    out = np.array([np.asarray(getattr(pre, f), dtype=float).copy() for f in fields])
    steps = {}
    for i in over:
        key = (int(b[i]), int(p[i]))
        if key not in steps:
            n, work = chunk_schedule(key[0], key[1], budget)
            pairs, count = np.unique(np.stack([n, work]), axis=1, return_counts=True)
            sums = sc.prefill_sums(pairs[0], pairs[1]) @ count.astype(float)
            steps[key] = (sums, len(n))
        sums, count_of[i] = steps[key]
        ideal, real, compute, memory, network = sums[:5]
        for f, v in (("t_ideal_s", ideal), ("first_ideal_s", ideal), ("last_ideal_s", ideal),
                     ("t_realistic_s", real), ("first_realistic_s", real), ("last_realistic_s", real),
                     ("t_compute_s", compute), ("t_memory_s", memory), ("t_network_s", network)):
            out[fields.index(f), i] = v
    ks = sorted({k for _, k in steps.values()})
    note = (f"chunked prefill (--max-batched-tokens {budget}): a batch's batch x prompt tokens above {budget} are "
            f"prefilled in {'/'.join(map(str, ks[:4]))}{' ...' if len(ks) > 4 else ''} steps of at most {budget} "
            "tokens, each priced as graphroof serve prices a prefill step (the weights read every step, attention "
            "over the prompt's earlier chunks); TTFT is their sum; the prefill layer table shows one unchunked pass")
    return PhaseTotals(*out), note, count_of


def chunk_engine(priced: Any, hw: Any) -> SimpleNamespace:
    """What :class:`~graphroof.llm.stepcost.StepCost` reads of an engine, from a priced model's pipeline."""
    return SimpleNamespace(source=priced.src, pipeline=priced.pipe, hw=hw, spec=None)
