"""``PricedModel``: an LLM's counted traces under one (dtypes, TP, count settings, runtime), and every figure of
any set of (batch, prompt, gen) points on any device from them, as arrays (:class:`Figures`).

This is the one place LLM figures come from: :func:`graphroof.llm.estimate`, :func:`graphroof.sweep`, the advice's
what-ifs, the step cost of a serving simulation and the benchmarks all call :meth:`PricedModel.price`.

* **Interpolated** (the default): each phase is sampled on a small grid of traces (:mod:`graphroof.llm.poly`:
  prefill on 2 batches x up to 3 prompts, decode on 2 batches x 2 contexts), counted once, grouped into kernel
  groups (:class:`~graphroof.llm.grids.KernelGrid`) and priced at any covered point by
  :class:`~graphroof.llm.evaluator.PhasePricer`; the activation peak and the KV bytes per token come from the same
  grids (:class:`~graphroof.llm.grids.LiveGrid`, :class:`~graphroof.llm.grids.ScalarGrid`).
* **Direct**: a model whose costs are not polynomial in the context (sliding windows, state-space layers) or
  whose traces differ in structure is priced from the traces at each point's own batch and contexts (a grid of
  one batch); a phase whose graph changes structure along its range is approximated by its middle step (a note
  says so).

The memory fit (:func:`graphroof.llm.memfit.memory_fit`) is the serving memory model of :class:`~graphroof.llm.memory.ServingMemory`
with every option, vectorised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import FrontendError
from ..hardware import HardwareProfile
from .chunked import chunk_engine, chunked_prefill
from .evaluator import PhasePricer
from .grids import KernelGrid, LiveGrid, ScalarGrid, lattice, recounter, step_launch_s
from .kvcache import APPEND
from .memfit import memory_fit
from .memory import ServingMemory, activation_peak_bytes, params_from_graph, resident_weight_bytes
from .poly import DEGREE, GridPlan, NotPolynomial, grid_points, poly_ok
from .tokens import PhaseTotals, decode_range, e2e_s, tokens_per_s, with_request_s

__all__ = ["Figures", "PricedModel", "TP_CANDIDATES", "figure_row", "kv_bytes_per_token_of", "kv_write_sums"]

#: the TP degrees the memory fit tries when it looks for the smallest one that fits
TP_CANDIDATES = (1, 2, 4, 8, 16, 32, 64)


def kv_write_sums(ops) -> tuple[float, float]:
    """(KV bytes the cache appends write, all KV-role bytes written) of a counted decode step's ops."""
    return (sum(c.kv_write_bytes for op, c in ops if op.op == APPEND), sum(c.kv_write_bytes for _, c in ops))


def kv_bytes_per_token_of(appended: float, all_kv: float, b: int, src: Any, kv_dtype_bits: float, tp: int) -> float:
    """Cache bytes per token and sequence, per device, from a decode step of batch *b*'s KV write sums."""
    if appended:
        return appended / b
    per = src.spec.kv_bytes_per_token(kv_dtype_bits)  # the graph writes its cache inside a fused op
    kv_heads = src.spec.kv_heads
    return per / (min(tp, kv_heads) if kv_heads else tp) if per else all_kv / b  # KV heads replicated above them


@dataclass
class Figures:
    """Every figure of a set of points on one device (arrays, one entry per point).  Times are realistic
    unless ``ideal``; ``tpot_*`` are NaN where ``gen == 1`` (no decode step)."""

    hw: HardwareProfile
    ideal: bool
    batch: np.ndarray
    prompt: np.ndarray
    gen: np.ndarray
    prefill: PhaseTotals
    decode: PhaseTotals
    memory: dict[str, np.ndarray]
    notes: list[str] = field(default_factory=list)
    #: prefill steps per point (1: one pass; more: chunked, :mod:`graphroof.llm.chunked`), their seconds (the mode's)
    prefill_steps: np.ndarray | None = None
    prefill_steps_s: np.ndarray | None = None
    #: the runtime's per-request time the realistic TTFT carries (0: none, or the ideal roofline)
    request_s: float = 0.0

    @property
    def ttft_s(self) -> np.ndarray:
        return self.prefill.t_s(self.ideal)

    @property
    def tpot_s(self) -> np.ndarray:
        return np.where(self.gen > 1, self.decode.t_s(self.ideal), np.nan)

    @property
    def e2e_s(self) -> np.ndarray:
        return e2e_s(self.ttft_s, self.tpot_s, self.gen)

    @property
    def tokens_per_s(self) -> np.ndarray:
        return tokens_per_s(self.batch, self.gen, self.e2e_s)

    def ttft(self, ideal: bool) -> np.ndarray:
        return self.prefill.t_s(ideal or self.ideal)

    def tpot(self, ideal: bool) -> np.ndarray:
        return np.where(self.gen > 1, self.decode.t_s(ideal or self.ideal), np.nan)

    @property
    def fits(self) -> np.ndarray:
        """1 fits, 0 does not, NaN: the device's capacity is unknown."""
        usable = self.memory["usable_bytes"]
        return np.where(np.isnan(usable), np.nan, (self.memory["total_bytes"] <= usable).astype(float))

    def __len__(self) -> int:
        return len(self.batch)


class PricedModel:
    """One pipeline (a :class:`~graphroof.llm.phases.Pipeline`: source, dtypes, TP, count settings, runtime) and
    the grids its points are priced on.  *batches*, *prompts*, *gens*: the values points will ask for (they
    place the grids); *grid_batches*: the batches the grids are traced at (default: the ends of *batches*)."""

    def __init__(self, pipe: Any, batches: Sequence[int], prompts: Sequence[int], gens: Sequence[int], *,
                 grid_batches: Sequence[int] | None = None, interpolate: bool = True):
        self.pipe, self.src = pipe, pipe.source
        self.kv = bool(self.src.kv_cache)
        self.notes: list[str] = []
        self._grids: dict[Any, KernelGrid] = {}
        self._pricers: dict[tuple, PhasePricer] = {}
        self._chunks: dict[tuple, Any] = {}  # chunked-prefill step costs, per (device, budget)
        self._mem: dict[tuple[int, int], tuple[float, float, float, float, int]] = {}
        self._weights: float | None = None
        self._act_tp: dict[tuple[int, int, int], float] = {}
        self.live: LiveGrid | None = None
        self.kv_sums: tuple[ScalarGrid, ScalarGrid] | None = None
        self.interpolated = False
        self._first_prompt = int(list(prompts)[0])
        if interpolate and poly_ok(self.src) and not self.src.spec.state_layers:
            try:
                self._plan(list(batches), list(prompts), list(gens), grid_batches)
                self.interpolated = True
            except NotPolynomial as e:
                self._grids.clear()
                self.notes.append(f"points priced from their own traces: costs are not interpolated ({e})")
        elif interpolate and self.src.spec.state_layers:
            self.notes.append("points priced from their own traces: state-space layers are not interpolated")

    # -- grids --------------------------------------------------------------------------------------------
    def _plan(self, batches: list[int], prompts: list[int], gens: list[int], grid_batches) -> None:
        pipe, src = self.pipe, self.src
        bs = tuple(grid_batches) if grid_batches else grid_points(batches, 1)
        pre_x: set[int] = set(prompts)
        dec_x: set[int] = set()
        for p in prompts:
            start = src.decode_start(p)
            if self.kv:
                dec_x.add(start)  # the KV bytes per token come from the step at past = the decoder prompt
            for g in gens:
                if g > 1:
                    lo, hi = decode_range(start, g, self.kv)
                    (dec_x if self.kv else pre_x).update(range(lo, hi + 1))
        pre = GridPlan(bs, grid_points(pre_x, DEGREE["prefill"]), DEGREE["prefill"])
        counted = [pipe.counted("prefill", b, x) for b, x in pre.points]
        self._grids["prefill"] = KernelGrid(pre, counted, recounter(pipe, counted[0].counted.meta),
                                            lattice(batches, sorted(pre_x)))
        self.live = LiveGrid(pre, [pipe.prepared("prefill", b, x) for b, x in pre.points])
        if self.kv:
            dec = GridPlan(bs, grid_points(dec_x, DEGREE["decode"]), DEGREE["decode"])
            counted = [pipe.counted("decode", b, x) for b, x in dec.points]
            self._grids["decode"] = KernelGrid(dec, counted, recounter(pipe, counted[0].counted.meta),
                                               lattice(batches, sorted(dec_x)))
            sums = [kv_write_sums(c.ops) for c in counted]
            self.kv_sums = (ScalarGrid(dec, [s[0] for s in sums]), ScalarGrid(dec, [s[1] for s in sums]))

    def _direct(self, phase: str, b: int, lo: int, hi: int) -> KernelGrid:
        """A grid of one batch at the contexts a direct pricing of ``lo .. hi`` samples."""
        degree = DEGREE[phase] if self.kv or lo == hi else 2
        n = hi - lo + 1
        xs = tuple(range(lo, hi + 1)) if n <= degree + 1 else (
            (lo, hi) if degree == 1 else (lo, (lo + hi) // 2, hi))
        key = (phase, b, xs)
        if key not in self._grids:
            pipe = self.pipe
            try:
                counted = [pipe.counted(phase, b, x) for x in xs]
                self._grids[key] = KernelGrid(GridPlan((b,), xs, len(xs) - 1), counted,
                                              recounter(pipe, counted[0].counted.meta))
            except (NotPolynomial, FrontendError):
                mid = (lo + hi) // 2
                c = pipe.counted(phase, b, mid)
                self._grids[key] = KernelGrid(GridPlan((b,), (mid,), 0), [c], recounter(pipe, c.counted.meta))
                msg = (f"{'decode' if phase == 'decode' or lo != hi else phase}: the graph changes structure with "
                       f"the context, so every step is approximated by the step at context {mid} (the middle of "
                       "the range)")
                if msg not in self.notes:
                    self.notes.append(msg)
        return self._grids[key]

    def pricer(self, grid: KernelGrid, phase: str, hw: HardwareProfile) -> PhasePricer:
        key = (id(grid), hw.name, id(hw))
        if key not in self._pricers:
            graphs = phase == "decode" and self.pipe.runtime.decode_launch == "step"
            floor = float(self.pipe.runtime.host_per_sequence_s) if phase == "decode" else 0.0
            self._pricers[key] = PhasePricer(grid, hw, cuda_graphs=graphs, step_launch_s=step_launch_s(graphs, hw),
                                             runtime=self.pipe.runtime, seq_floor_s=floor)
        return self._pricers[key]

    def phase_totals(self, phase: str, hw: HardwareProfile, b: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> PhaseTotals:
        """One phase's totals at every point (``phase``: the graph phase, prefill or decode)."""
        if phase in self._grids:
            try:
                return self.pricer(self._grids[phase], phase, hw).totals(b, lo, hi)
            except NotPolynomial as e:  # a kernel's node cannot be interpolated there: price from own traces
                del self._grids[phase]
                self.interpolated = False
                self.notes.append(f"points priced from their own traces: costs are not interpolated ({e})")
        out = np.zeros((9, len(b)))
        keys = np.unique(np.stack([b, lo, hi]), axis=1)
        for bv, lv, hv in keys.T:
            sel = np.flatnonzero((b == bv) & (lo == lv) & (hi == hv))
            grid = self._direct(phase, int(bv), int(lv), int(hv))
            t = self.pricer(grid, phase, hw).totals([int(bv)], [int(lv)], [int(hv)])
            out[:, sel] = np.array([getattr(t, f) for f in PhaseTotals.__dataclass_fields__])
        return PhaseTotals(*out)

    # -- memory inputs ------------------------------------------------------------------------------------
    def weight_bytes(self, tp: int | None = None) -> float:
        pipe = self.pipe
        if tp is not None and tp != pipe.tp:
            return resident_weight_bytes(self.params(), pipe.quant, tp, pipe.plan)
        if self._weights is None:
            self._weights = resident_weight_bytes(self.params(), pipe.quant, pipe.tp, pipe.plan)
        return self._weights

    def params(self):
        src = self.src
        p = getattr(self, "_params", None)
        if p is None:
            p = src.params() or params_from_graph(self.pipe.raw("prefill", 1, self._first_prompt))
            p = self._params = self.pipe.rank_params(p)
        return p

    def memory_inputs(self, b: int, prompt: int) -> tuple[float, float, float, float, int]:
        """(activation peak of the prefill at ``(b, prompt)``, KV bytes per token and sequence, cross-attention
        KV bytes per encoder token, recurrent-state bytes per sequence, encoder tokens), per device."""
        key = (b, prompt)
        if key not in self._mem:
            self._mem[key] = self._memory_inputs(b, prompt)
        return self._mem[key]

    def _memory_inputs(self, b: int, prompt: int) -> tuple[float, float, float, float, int]:
        from ..counters.rules.ssm import STATE_OPS
        from ..dtypes import dtype_bits

        pipe, src = self.pipe, self.src
        if self.live is not None and self.live.plan.covers(b, prompt):
            act = self.live.peak(b, prompt)
        else:
            act = activation_peak_bytes(pipe.prepared("prefill", b, prompt))
        if not self.kv:
            return act, 0.0, 0.0, 0.0, 0
        start = src.decode_start(prompt)
        bits = dtype_bits(pipe.quant.kv or src.spec.dtype or "bf16")
        state = 0.0
        if self.kv_sums is not None and self.kv_sums[0].plan.covers(b, start):
            appended, all_kv = self.kv_sums[0].at(b, start), self.kv_sums[1].at(b, start)
        else:
            ops = pipe.counted("decode", b, start).ops
            appended, all_kv = kv_write_sums(ops)
            if src.spec.state_layers:
                state = sum(c.kv_write_bytes for op, c in ops if op.op in STATE_OPS) / b
        if not appended and not src.spec.kv_elems_per_token and state:
            kv_tok = 0.0  # a pure state-space model: its only cache is the recurrent state
        else:
            kv_tok = kv_bytes_per_token_of(appended, all_kv, b, src, bits, pipe.tp)
        cross, enc = 0.0, src.cross_tokens(prompt)
        if enc:
            from .encdec import cross_kv_per_token

            ops = pipe.counted("prefill", b, prompt).ops
            app = sum(c.kv_write_bytes for op, c in ops if op.op == APPEND) / b
            cross = cross_kv_per_token(app, kv_tok, start, enc)
        return act, kv_tok, cross, state, enc

    def min_tp(self, b: int, prompt: int, usable: float, kv_seq: float, act: float,
               serving: ServingMemory) -> int | None:
        """Smallest TP degree whose weights + KV + activations fit in *usable* bytes per device (None: none)."""
        from ..errors import GraphroofError
        from .tp import check_tp

        pipe, spec = self.pipe, self.src.spec
        batch_tokens = b * prompt
        for n in TP_CANDIDATES:
            try:
                check_tp(n, spec.heads, spec.kv_heads, spec.intermediate)
            except GraphroofError:
                continue
            # the KV bytes of a sequence split as its KV heads are (replicated above them: llm/tp.py)
            fixed = self.weight_bytes(n) + kv_seq * pipe.plan.kv_split(pipe.tp) / pipe.plan.kv_split(n) * b
            if fixed > usable:
                continue  # activations are >= 0: no need to shard the graph at n to know it does not fit
            try:
                act_n = act if n == pipe.tp else (self._act_at_tp(b, prompt, n)
                                                  * serving.chunk_tokens(batch_tokens) / batch_tokens)
            except GraphroofError:
                continue
            if fixed + act_n <= usable:
                return n
        return None

    def _act_at_tp(self, b: int, prompt: int, n: int) -> float:
        """The prefill's activation peak under a TP split of degree *n* (kept)."""
        key = (b, prompt, n)
        if key not in self._act_tp:
            pipe = self.pipe
            self._act_tp[key] = activation_peak_bytes(pipe.prepare(pipe.raw("prefill", b, prompt), tp=n))
        return self._act_tp[key]

    # -- points -------------------------------------------------------------------------------------------
    def price(self, hw: HardwareProfile, batch, prompt, gen, *, ideal: bool = False,
              serving: ServingMemory | None = None, spec: Any = None) -> Figures:
        """Every figure of the points ``(batch[i], prompt[i], gen[i])`` on *hw* (scalars broadcast); *spec*: a
        :class:`~graphroof.llm.specdec.SpecDec` (the decode figures per output token of speculative steps)."""
        b, p, g = np.broadcast_arrays(*(np.asarray(v, dtype=np.int64) for v in (batch, prompt, gen)))
        b, p, g = b.reshape(-1), p.reshape(-1), g.reshape(-1)
        pre, steps, steps_s, note = self.prefill_totals(hw, b, p, serving, ideal)
        notes = list(self.notes) + ([note] if note else [])
        start = self.decode_start(p)
        lo, hi = decode_range(start, g, self.kv)
        dec = self.phase_totals("decode", hw, b, lo, hi) if self.kv else self._no_cache(hw, b, lo, hi)
        if spec is not None:
            from .specdec import spec_decode

            dec, notes = spec_decode(self, spec, hw, b, p, g, lo, hi, dec), notes + [spec.note()]
        mem = memory_fit(self, hw, b, p, g, serving or ServingMemory())
        request = self.request_on(hw, ideal)
        return Figures(hw, ideal, b, p, g, pre, dec, mem, notes, steps, steps_s, request)

    def prefill_totals(self, hw: HardwareProfile, b: np.ndarray, p: np.ndarray, serving: ServingMemory | None,
                       ideal: bool) -> tuple[PhaseTotals, np.ndarray, np.ndarray, str | None]:
        """The TTFT phase of the points: the prefill (chunked under *serving*'s ``max_batched_tokens``,
        :mod:`graphroof.llm.chunked`) plus the runtime's per-request time; its steps per point, their seconds
        (without the per-request time) and the chunking's note."""
        pre = self.phase_totals("prefill", hw, b, p, p)
        budget, steps, note = (serving or ServingMemory()).max_batched_tokens, np.ones(len(b), dtype=np.int64), None
        if budget:
            pre, note, steps = chunked_prefill(self, hw, b, p, pre, budget)
        steps_s = pre.t_s(ideal).copy()
        pre = with_request_s(pre, self.request_on(hw))
        return pre, steps, steps_s, note

    def request_on(self, hw: HardwareProfile, ideal: bool = False) -> float:
        """The runtime preset's per-request time (``[launch].request_overhead_s``) a realistic TTFT on *hw* carries:
        0 on a profile without overheads (an ideal one), and for the ideal roofline's figures when *ideal*."""
        if ideal or (hw.timing is None and not hw.launch_overhead_s):
            return 0.0
        return float(getattr(self.pipe.runtime, "request_overhead_s", 0.0) or 0.0)

    def host_ahead(self, hw: HardwareProfile) -> bool:
        """Whether this pipeline's prefill on *hw* dispatches kernels from the host ahead of the device (a preset's
        ``[launch].overlap``): a step's time is then not the sum of its kernels' rows."""
        return "prefill" in self._grids and self.pricer(self._grids["prefill"], "prefill", hw).overlap

    def chunk_step_cost(self, hw: HardwareProfile, budget: int) -> Any:
        """The step cost the chunked prefill steps of *budget* tokens are priced by (kept per device)."""
        key = (hw.name, id(hw), budget)
        if key not in self._chunks:
            from .stepcost import StepCost

            self._chunks[key] = StepCost(chunk_engine(self, hw), max_batch=2, max_context=2, max_chunk=max(2, budget),
                                         prefill_only=True)
        return self._chunks[key]

    def decode_start(self, prompt: np.ndarray) -> np.ndarray:
        """The decoder's prompt of each point (the prompt itself, but an encoder-decoder's decoder prompt)."""
        values, inv = np.unique(prompt, return_inverse=True)
        return np.array([self.src.decode_start(int(v)) for v in values], dtype=np.int64)[inv.reshape(-1)]

    def _no_cache(self, hw: HardwareProfile, b: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> PhaseTotals:
        """Decode without a KV cache: the prefill graphs over ``lo .. hi`` (costs quadratic in the context)."""
        if "prefill" in self._grids:
            try:
                return self.pricer(self._grids["prefill"], "prefill", hw).totals(b, lo, hi)
            except NotPolynomial as e:
                del self._grids["prefill"]
                self.notes.append(f"points priced from their own traces: costs are not interpolated ({e})")
        return self.phase_totals("prefill", hw, b, lo, hi)


def figure_row(figs: Figures, i: int, decode_floor_s: float = 0.0) -> dict[str, Any]:
    """Point *i*'s phase figures as plain numbers (ideal and realistic, first and last decode steps, terms,
    bounds): what an :class:`~graphroof.llm.result.LLMConfig` holds; ``decode_host_floor_s``: *decode_floor_s*, the
    realistic decode step's floor from the runtime's host work per sequence (0: none)."""
    out: dict[str, Any] = {"decode_host_floor_s": float(decode_floor_s), "request_overhead_s": float(figs.request_s)}
    if figs.prefill_steps is not None and figs.prefill_steps_s is not None and figs.prefill_steps[i] > 1:
        out.update(prefill_steps=int(figs.prefill_steps[i]), prefill_steps_s=float(figs.prefill_steps_s[i]))
    for name, t in (("prefill", figs.prefill), ("decode", figs.decode)):
        for f in PhaseTotals.__dataclass_fields__:
            out[f"{name}_{f}"] = float(getattr(t, f)[i])
        out[f"{name}_bound"] = str(t.bound[i])
    return out
