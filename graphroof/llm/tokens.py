"""Token accounting of the one LLM evaluator (:mod:`graphroof.llm.evaluator`), in one place: prefill produces the
first output token; :func:`decode_range` gives the cached lengths of the ``gen - 1`` decode steps; :func:`e2e_s` is
``ttft + (gen - 1) * tpot``; :func:`tokens_per_s` is ``batch * gen / e2e``; :class:`PhaseTotals` holds a phase's
priced arrays, and :func:`with_request_s` adds a runtime's per-request time to a prefill's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

__all__ = ["PhaseTotals", "decode_range", "e2e_s", "tokens_per_s", "with_request_s"]


def decode_range(prompt: Any, gen: Any, kv_cache: bool = True) -> tuple[Any, Any]:
    """The contexts the ``gen - 1`` decode steps cover (``lo == hi`` when ``gen <= 2``).

    With a KV cache, step ``j`` (1-based) feeds one token with ``prompt + j - 1`` tokens cached: ``prompt ..
    prompt + gen - 2`` (*prompt*: the decoder's prompt).  Without one, each step recomputes the whole context,
    the prefill graph at ``prompt + j``: ``prompt + 1 .. prompt + gen - 1``.  Ints or arrays."""
    at_least = np.maximum if isinstance(gen, np.ndarray) else max
    if kv_cache:
        return prompt, prompt + at_least(gen - 2, 0)
    return prompt + 1, prompt + at_least(gen - 1, 1)


def e2e_s(ttft_s, tpot_s, gen):
    """End-to-end time of a request: the prefill, then ``gen - 1`` decode steps (*tpot_s* None / NaN: none)."""
    if tpot_s is None:
        return ttft_s
    if isinstance(tpot_s, np.ndarray):
        return ttft_s + (np.asarray(gen) - 1) * np.nan_to_num(tpot_s)
    return ttft_s + (gen - 1) * tpot_s


def tokens_per_s(batch, gen, e2e):
    """Output tokens per second of *batch* sequences of *gen* tokens each taking *e2e* seconds."""
    if isinstance(e2e, np.ndarray):
        with np.errstate(divide="ignore"):
            return np.where(e2e > 0, np.asarray(batch) * np.asarray(gen) / np.where(e2e > 0, e2e, 1.0), np.inf)
    return batch * gen / e2e if e2e else float("inf")


def with_request_s(prefill: PhaseTotals, request_s: float) -> PhaseTotals:
    """The prefill totals with a runtime's per-request time *request_s* (``[launch].request_overhead_s``: setup,
    sampling, host syncs before the first token) added to its realistic times: TTFT and so e2e carry it once per
    request; the ideal roofline and the compute / memory / network terms do not."""
    if not request_s:
        return prefill
    return replace(prefill, t_realistic_s=prefill.t_realistic_s + request_s,
                   first_realistic_s=prefill.first_realistic_s + request_s,
                   last_realistic_s=prefill.last_realistic_s + request_s)


@dataclass(frozen=True)
class PhaseTotals:
    """Per point (arrays): the mean step of a phase (ideal and realistic time, compute / memory / network terms)
    and its first and last steps."""

    t_ideal_s: np.ndarray
    t_realistic_s: np.ndarray
    t_compute_s: np.ndarray
    t_memory_s: np.ndarray
    t_network_s: np.ndarray
    first_ideal_s: np.ndarray
    first_realistic_s: np.ndarray
    last_ideal_s: np.ndarray
    last_realistic_s: np.ndarray

    @property
    def bound(self) -> np.ndarray:
        """``compute`` / ``memory`` / ``network`` per point (as :func:`graphroof.roofline.bound_name`)."""
        tc, tm, tn = self.t_compute_s, self.t_memory_s, self.t_network_s
        out = np.where(tc >= tm, "compute", "memory").astype(object)
        out = np.where((tc == 0) & (tm == 0), "memory", out)
        return np.where((tn > tc) & (tn > tm), "network", out)

    def t_s(self, ideal: bool) -> np.ndarray:
        return self.t_ideal_s if ideal else self.t_realistic_s

    def first_s(self, ideal: bool) -> np.ndarray:
        return self.first_ideal_s if ideal else self.first_realistic_s

    def last_s(self, ideal: bool) -> np.ndarray:
        return self.last_ideal_s if ideal else self.last_realistic_s

    def row(self, i: int) -> dict[str, float | str]:
        return {k: (float(getattr(self, k)[i])) for k in self.__dataclass_fields__} | {"bound": str(self.bound[i])}
