"""``sweep``'s per-point figures from a few traces: every (batch, prompt, gen) of one (dtypes, TP) pipeline group.

The prefill graph is sampled on ``2 batches x 3 prompts`` (fewer when the sweep asks for fewer values) and the
decode step on ``2 batches x 2 contexts`` (:mod:`graphroof.llm.poly`); every point is then priced from those
samples (:mod:`graphroof.llm.fastpath`): TTFT and its bound from the prefill kernels at ``(batch, prompt)``, TPOT
and its bound from the decode kernels summed over ``past = prompt .. prompt + gen - 2`` exactly as
:meth:`~graphroof.llm.phases.Pipeline.phase` sums them, the activation peak from the interpolated liveness
sums, the KV bytes per token from the interpolated cache writes.  The same numbers as one direct trace per point,
to float rounding.
"""

from __future__ import annotations

from typing import Any

from .estimate import kv_bytes_per_token_of, kv_write_sums
from .fastpath import KernelGrid, LiveGrid, PhaseEval, ScalarGrid
from .poly import DEGREE, GridPlan, NotPolynomial, grid_points, poly_ok

__all__ = ["FastLLM", "NotPolynomial"]


def _decode_range(prompt: int, gen: int, kv_cache: bool) -> tuple[int, int]:
    """The context range a decode phase covers (see :meth:`graphroof.llm.estimate._Run.decode_phase`)."""
    if kv_cache:
        return prompt, prompt + max(gen - 2, 0)
    return prompt + 1, prompt + max(gen - 1, 1)


def _quantiles(values: list[int], n: int) -> list[int]:
    vals = sorted(set(values))
    return sorted({vals[round(i * (len(vals) - 1) / (n - 1))] for i in range(n)})


def _lattice(batches: list[int], xs: list[int], n: int = 5) -> list[tuple[int, int]]:
    """Check points: ``n`` quantiles of the batches x ``n`` of the contexts the sweep asks for."""
    return [(b, x) for b in _quantiles(batches, n) for x in _quantiles(xs, n)]


def _recounter(pipe: Any, meta: dict):
    """Counts op nodes as *pipe* counts its graphs (its rules and settings, then the per-device TP costs)."""
    from ..counters.count import count
    from ..graph import COST, OpGraph
    from .tp import scale_costs

    def recount(nodes):
        g = OpGraph("ops", {"dims": meta.get("dims", {})})
        for nd in nodes:
            g.add_op(nd)
        count(g, rules=pipe.rules, settings=pipe.settings, warn=False)
        scale_costs(g)
        return [g.get(nd.name, COST) for nd in nodes]

    return recount


class FastLLM:
    """Grids of one pipeline group (dtypes, TP), built from the pipeline's counted graphs at the grid points.

    Raises :class:`NotPolynomial` when the model cannot be interpolated (the caller prices points directly).
    """

    def __init__(self, pipe: Any, batches: list[int], prompts: list[int], gens: list[int]):
        src = pipe.source
        if not poly_ok(src):
            raise NotPolynomial("sliding-window layers: costs are piecewise in the context")
        self.kv = bool(src.kv_cache)
        self.src, self.quant, self.tp = src, pipe.quant, pipe.tp
        bs = grid_points(batches, 1)
        pre_x: set[int] = set(prompts)
        dec_x: set[int] = set()
        for p in prompts:
            if self.kv:
                dec_x.add(p)  # the KV bytes per token come from the step at past = prompt
            for g in gens:
                if g > 1:
                    lo, hi = _decode_range(p, g, self.kv)
                    (dec_x if self.kv else pre_x).update(range(lo, hi + 1))
        pre = GridPlan(bs, grid_points(pre_x, DEGREE["prefill"]), DEGREE["prefill"])
        counted = [pipe.counted("prefill", b, x) for b, x in pre.points]
        self.prefill = KernelGrid(pre, counted, _recounter(pipe, counted[0].counted.meta),
                                  _lattice(batches, sorted(pre_x)))
        self.live = LiveGrid(pre, [c.graph for c in counted])
        self.decode: KernelGrid | None = None
        if self.kv:
            dec = GridPlan(bs, grid_points(dec_x, DEGREE["decode"]), DEGREE["decode"])
            counted = [pipe.counted("decode", b, x) for b, x in dec.points]
            self.decode = KernelGrid(dec, counted, _recounter(pipe, counted[0].counted.meta),
                                     _lattice(batches, sorted(dec_x)))
            sums = [kv_write_sums(c.ops) for c in counted]
            self.kv_appended = ScalarGrid(dec, [s[0] for s in sums])
            self.kv_all = ScalarGrid(dec, [s[1] for s in sums])
        self._evals: dict[str, tuple[PhaseEval, PhaseEval]] = {}
        self._mem: dict[tuple[int, int], tuple[float, float]] = {}

    def evals(self, pipe: Any) -> tuple[PhaseEval, PhaseEval]:
        """(prefill, decode) evaluators on *pipe*'s device (kept per device)."""
        name = pipe.hw.name
        if name not in self._evals:
            pre = PhaseEval(self.prefill, pipe.hw, cuda_graphs=pipe.cuda_graphs("prefill"),
                            step_launch_s=pipe.step_launch_s("prefill"))
            dec = pre
            if self.decode is not None:
                dec = PhaseEval(self.decode, pipe.hw, cuda_graphs=pipe.cuda_graphs("decode"),
                                step_launch_s=pipe.step_launch_s("decode"))
            self._evals[name] = (pre, dec)
        return self._evals[name]

    def kv_bytes_per_token(self, b: int, prompt: int) -> float:
        if not self.kv:
            return 0.0
        return kv_bytes_per_token_of(self.kv_appended.at(b, prompt), self.kv_all.at(b, prompt), b, self.src,
                                     self.quant, self.tp)

    def figures(self, pipe: Any, b: int, prompt: int, gen: int, ideal: bool):
        """(ttft_s, prefill bound, tpot_s or None, decode bound or None, activation peak, KV bytes per token)."""
        pre, dec = self.evals(pipe)
        t = pre.totals(b, prompt, prompt)
        ttft = t.t_ideal_s if ideal else t.t_realistic_s
        tpot = dbound = None
        if gen > 1:
            lo, hi = _decode_range(prompt, gen, self.kv)
            d = dec.totals(b, lo, hi)
            tpot, dbound = (d.t_ideal_s if ideal else d.t_realistic_s), d.bound
        if (b, prompt) not in self._mem:
            self._mem[b, prompt] = (self.live.peak(b, prompt), self.kv_bytes_per_token(b, prompt))
        return (ttft, t.bound, tpot, dbound, *self._mem[b, prompt])
