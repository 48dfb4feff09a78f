"""Speculative decoding and multi-token prediction as pricing settings (:class:`~graphroof.llm.engine.Pricing`'s
``spec_tokens``, ``spec_acceptance``, ``spec_draft``, ``spec_draft_cost``), priced through the one evaluator.

A speculative step of ``m`` decode sequences drafts ``k`` tokens per sequence, then the target *verifies* them in
one forward pass where each sequence feeds ``k + 1`` tokens (its last token and the ``k`` drafts):

* **verify**: the decode step's kernel groups that do not grow with the cached length (GEMMs, norms, collectives)
  run over the ``m (k + 1)`` tokens of the pass (the groups at batch ``m (k + 1)``), the attention and KV-cache
  groups over the ``m`` sequences' caches (at batch ``m``): as :class:`~graphroof.llm.stepcost.StepCost` prices a
  mixed step; the extra queries' attention FLOPs over the cache are not added (decode attention reads its cache
  once: memory-bound);
* **draft**: ``k`` decode steps of the draft model's own engine at batch ``m`` (same device, the target's
  pricing at TP 1), or, without a draft model (multi-token-prediction heads, self-speculation),
  ``spec_draft_cost * k`` target decode steps;
* **tokens per step**: with per-position acceptance ``a_i`` (position ``i`` is accepted only if ``1 .. i - 1``
  were), ``E = 1 + sum_{i=1..k} prod_{j<=i} a_j``; a constant ``a`` gives ``(1 - a^(k+1)) / (1 - a)``.

The time per output token is ``(verify + draft) / E``.  Not modelled: the draft's prefill, its weights and KV
cache in the memory fit, the rejected tokens' KV slots.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from .evaluator import PhasePricer
from .tokens import PhaseTotals, decode_range

__all__ = ["SpecDec", "check_spec", "expected_tokens", "profile_of", "fixed_groups", "step_tokens",
           "steps_to_emit", "tokens_after"]


def profile_of(k: int, acceptance: float | Sequence[float]) -> tuple[float, ...]:
    """The per-position acceptance of the ``k`` drafted tokens (a constant repeated ``k`` times)."""
    if isinstance(acceptance, (int, float)):
        return (float(acceptance),) * k
    return tuple(float(a) for a in acceptance)


def check_spec(k: Any, acceptance: Any, draft: Any, draft_cost: Any) -> None:
    """One-line :class:`InputError` for a bad setting."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise InputError(f"--spec-tokens must be an integer >= 0 (speculative tokens per step), got {k!r}")
    if isinstance(acceptance, (int, float)) and not isinstance(acceptance, bool):
        values = [acceptance]
    elif isinstance(acceptance, Sequence) and not isinstance(acceptance, str):
        values = list(acceptance)
        if len(values) != k:
            raise InputError(f"--spec-acceptance: a profile of {len(values)} values for --spec-tokens {k}; give "
                             f"{k} values (one per drafted position) or one number")
    else:
        raise InputError(f"--spec-acceptance must be a number or a list of numbers in [0, 1], got {acceptance!r}")
    for a in values:
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not 0.0 <= float(a) <= 1.0:
            raise InputError(f"--spec-acceptance values must be probabilities in [0, 1], got {a!r}")
    if isinstance(draft_cost, bool) or not isinstance(draft_cost, (int, float)) or not draft_cost >= 0:
        raise InputError(f"--spec-draft-cost must be a number >= 0 (the draft's time per drafted token as a "
                         f"fraction of one target decode step), got {draft_cost!r}")
    if draft is not None and draft_cost:
        raise InputError("--spec-draft and --spec-draft-cost exclude each other: a draft model is priced from its "
                         "own traces")


def expected_tokens(k: int, acceptance: float | Sequence[float]) -> float:
    """Tokens one speculative step yields per sequence on average: ``1 + sum_i prod_{j<=i} a_j``."""
    out, run = 1.0, 1.0
    for a in profile_of(k, acceptance):
        run *= a
        out += run
    return out


def tokens_after(frac: np.ndarray, steps: Any, e: float) -> np.ndarray:
    """Tokens emitted by *steps* speculative steps of a sequence carrying the fraction *frac* of a token: the
    expected value ``E`` per step, emitted as whole tokens (``floor(frac + steps E)``)."""
    return np.floor(frac + np.asarray(steps) * e + 1e-9).astype(np.int64)


def step_tokens(frac: np.ndarray, rem: np.ndarray, e: float) -> np.ndarray:
    """Tokens each sequence emits in its next step, at most its *rem* tokens left (1 each when ``E = 1``)."""
    if e == 1.0:
        return np.ones(len(rem), dtype=np.int64)
    return np.minimum(tokens_after(frac, 1, e), rem)


def steps_to_emit(frac: np.ndarray, tokens: np.ndarray, e: float) -> np.ndarray:
    """The fewest steps after which :func:`tokens_after` reaches *tokens* (``tokens`` itself when ``E = 1``)."""
    n = np.maximum(0, np.ceil((tokens - frac) / e - 1e-9)).astype(np.int64)
    n = np.where(tokens_after(frac, n, e) < tokens, n + 1, n)
    return np.where((n > 0) & (tokens_after(frac, n - 1, e) >= tokens), n - 1, n)


@dataclass(frozen=True)
class SpecDec:
    """The speculative setting of one engine: *k* drafts per step, their *acceptance* profile, the *draft*
    model's :class:`~graphroof.llm.engine.Engine` (None: *draft_cost* target steps per drafted token)."""

    k: int
    acceptance: tuple[float, ...]
    draft_cost: float = 0.0
    draft: Any = None

    @property
    def tokens(self) -> float:
        return expected_tokens(self.k, self.acceptance)

    def note(self) -> str:
        acc = (f"{self.acceptance[0]:g}" if len(set(self.acceptance)) == 1
               else "[" + ", ".join(f"{a:g}" for a in self.acceptance) + "]")
        draft = (f"draft model {self.draft.source.name} ({self.k} of its decode steps at TP 1 per step)"
                 if self.draft is not None else
                 f"draft cost {self.draft_cost:g} x {self.k} target decode steps per step (MTP / self-speculation)")
        return (f"speculative decoding: k = {self.k} drafted tokens per step, acceptance {acc}, "
                f"E = {self.tokens:.4g} tokens per step; {draft}; TPOT = (verify step at {self.k + 1} tokens per "
                "sequence + draft) / E; the decode layer tables show the plain decode step")


def fixed_groups(grid: Any) -> np.ndarray:
    """Per kernel group of a decode grid: True when its costs and GEMM shape do not change with the cached
    length (weights' GEMMs, norms, collectives), compared at the grid's ends."""
    bs, xs = grid.plan.bs, grid.plan.xs
    b = np.array([bs[0], bs[-1]] * 2, dtype=np.int64)
    x = np.array([xs[0], xs[0], xs[-1], xs[-1]], dtype=np.int64)
    cost, mnks = grid.costs_many(b, x)
    scale = np.abs(cost).max(axis=(1, 2)) + 1.0
    fixed = np.abs(cost[:, :, :2] - cost[:, :, 2:]).max(axis=(1, 2)) <= 1e-12 * scale
    for gi, m in enumerate(mnks):
        if m is not None and any(np.any(d[:2] != d[2:]) for d in m):
            fixed[gi] = False
    return fixed


def fixed_of(pm: Any, grid: Any) -> np.ndarray:
    """:func:`fixed_groups` of a priced model's decode grid; a grid of one context (``gen <= 2``) is compared
    with the counted steps one token later."""
    if len(grid.plan.xs) >= 2:
        return fixed_groups(grid)
    from .grids import KernelGrid
    from .poly import GridPlan

    x = int(grid.plan.xs[0])
    plan = GridPlan(grid.plan.bs, (x, x + 1), 1)
    counted = [pm.pipe.counted("decode", b, xx) for b, xx in plan.points]
    other = KernelGrid(plan, counted, grid.recount)  # the grid's own recounter (the pipeline's rules)
    if len(other.mult) != len(grid.mult):
        raise InputError(f"{pm.src.name}: the decode step's kernels change with the context; speculative decoding "
                         "cannot split its verify step")
    return fixed_groups(other)


def _fixed_sums(pricer: PhasePricer, groups: list[int], b: np.ndarray) -> np.ndarray:
    """Per-step sums ``[6, n]`` of the context-free *groups* at batches *b*."""
    grid = pricer.grid
    x0 = int(grid.plan.xs[0])
    cost, mnks = grid.costs_many(b, np.full(len(b), x0, dtype=np.int64))

    def node_of(gi: int, j: int, rep: int) -> Any:
        return grid.node_at(gi, int(b[j]), x0)

    return pricer._steps(lambda gi: (cost[gi], 1), lambda gi: mnks[gi], node_of, len(b), groups)  # noqa: SLF001


def verify_totals(pricer: PhasePricer, fixed: np.ndarray, b: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                  k: int) -> PhaseTotals:
    """The verify step of ``b`` sequences feeding ``k + 1`` tokens each, over the cached lengths ``lo .. hi``:
    the plain decode step, its context-free groups (*fixed*) moved from batch ``b`` to ``b (k + 1)``."""
    plain = pricer.totals(b, lo, hi)
    groups = np.flatnonzero(fixed).tolist()
    if not groups or k == 0:
        return plain
    d = _fixed_sums(pricer, groups, b * (k + 1)) - _fixed_sums(pricer, groups, b)
    rows = [d[0], d[1], d[2], d[3], d[4], d[0], d[1], d[0], d[1]]   # PhaseTotals' fields from the step sums
    return PhaseTotals(*(getattr(plain, f) + r for f, r in zip(PhaseTotals.__dataclass_fields__, rows)))


def spec_decode(pm: Any, spec: SpecDec, hw: Any, b: np.ndarray, p: np.ndarray, g: np.ndarray, lo: np.ndarray,
                hi: np.ndarray, plain: PhaseTotals) -> PhaseTotals:
    """The decode phase of a :class:`~graphroof.llm.price.PricedModel` under *spec*: per output token,
    ``(verify + draft) / E`` (every field of :class:`PhaseTotals`)."""
    grid = pm._grids.get("decode")  # noqa: SLF001 - the priced model's decode grid
    if not pm.kv or grid is None or len(grid.plan.bs) < 2:
        raise InputError(f"{pm.src.name}: speculative decoding is priced for decoders with a KV cache whose decode "
                         "step is interpolated over the batch (no sliding windows, state-space layers or "
                         "structure changes)")
    verify = verify_totals(pm.pricer(grid, "decode", hw), fixed_of(pm, grid), b, lo, hi, spec.k)
    if spec.draft is not None:
        dpm = spec.draft.priced(sorted(set(b.tolist())), sorted(set(p.tolist())), sorted(set(g.tolist())))
        dlo, dhi = decode_range(dpm.decode_start(p), g)
        draft, scale = dpm.phase_totals("decode", hw, b, dlo, dhi), float(spec.k)
    else:
        draft, scale = plain, spec.draft_cost * spec.k
    e = spec.tokens
    return PhaseTotals(*((getattr(verify, f) + scale * getattr(draft, f)) / e
                         for f in PhaseTotals.__dataclass_fields__))
