"""``StepCost``: the time of one serving-engine step, vectorised over many steps (what a serving simulation calls
millions of times).

A step runs, in one forward pass, ``m`` decode sequences whose cached lengths sum to ``s`` (one new token each)
and a prefill chunk of ``n`` tokens of one sequence whose first ``o`` tokens are already cached (chunked prefill;
``o = 0``: a whole prompt).  Its time comes from the same counted kernel groups and the same kernel-time model as
every other LLM figure (:class:`~graphroof.llm.evaluator.PhasePricer`):

* **decode part**: each kernel group's cost at batch ``m`` is affine in the cached length (the decode grid is
  exact there), taken at the mean ``s / m``: the KV bytes read are then those of the ``s`` cached tokens; equal
  lengths give exactly :meth:`graphroof.llm.phases.Pipeline.step` ``("decode", m, s / m)``;
* **prefill part**: each group's cost at batch 1 is a polynomial ``P(x)`` of the prompt length (degree 2:
  causal attention), and the chunk does the work of extending the pass from ``o`` to ``o + n`` tokens:
  ``P(o + n) - P(o) + P(0)`` (the weights read once); ``o = 0`` is exactly ``step("prefill", 1, n)``.  GEMMs
  take the shape at ``n`` tokens; groups of ops the grid counts per point (MoE grouped GEMMs: the experts the
  chunk's tokens visit) cost exactly what ``n`` tokens cost, whatever is cached before them.
* **mixed steps**: the groups that do not grow with the context (GEMMs, norms, collectives) run once over the
  ``m + n`` tokens of the pass (the decode step's groups at batch ``m + n``), the decode attention over the ``m``
  sequences' caches, and the chunk's attention-like groups (quadratic in the prompt) as above.
* **speculative decoding** (the engine's :class:`~graphroof.llm.specdec.SpecDec`, ``k`` drafts): each decode
  sequence feeds ``k + 1`` tokens to the verify pass (the context-free groups at batch ``m (k + 1)`` (+ ``n``),
  the attention over the ``m`` caches), plus the draft: ``k`` decode steps of the draft's own step cost at batch
  ``m``, or ``draft_cost * k`` plain target decode steps;
* **launches**: a decode-only step replays one CUDA graph under a runtime preset that captures decode (one
  graph launch, no per-kernel launch); a step with prefill work launches each working kernel.

Kernel groups whose cost depends only on ``m`` (weights' GEMMs, norms, collectives) or only on ``n`` are priced
once per value into tables; only attention and KV-cache groups are evaluated per step.  A single step (scalar
arguments, what a simulation's general step asks) takes a scalar path: the tables read as floats, and the
per-step groups' sums memoised on what they depend on, ``(m, s)`` for the decode part and ``(n, attention work,
m == 0)`` for the chunk's part; a miss is priced exactly as the vectorised path prices one step (the same
1-element arrays), so a memoised step equals the vectorised one bit for bit (``memo=False``: no memo).  A
decode-only call (a simulation's decode run) keeps its kernels' rows: the step an arrival then joins, at one of
those states, takes its decode part from them plus each working kernel's launch (launched eagerly, not replayed
as a graph), the same doubles as pricing it again.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from .evaluator import PhasePricer
from .grids import FIELDS, KernelGrid, lattice, recounter, step_launch_s
from .poly import DEGREE, GridPlan, grid_points

__all__ = ["StepCost"]

_SUMS = ("ideal", "realistic", "compute", "memory", "network", "launch")
#: entries a memo of per-step sums holds before it is emptied (a bound on memory; ~100 bytes an entry)
MEMO_ENTRIES = 1 << 18
_INTS = (int, np.integer)
_FLOATS = (int, float, np.integer, np.floating)
_F = {f: i for i, f in enumerate(FIELDS)}


def step_arrays(prefill_tokens: Any, prefill_offset: Any, decode_seqs: Any, decode_context: Any,
                prefill_attention: Any = None) -> tuple[Any, ...]:
    """A step call's arguments broadcast and flattened: ``(n, o, m, s, attention work, shape)``; the attention
    work defaults to ``2 o n + n^2`` (one causal chunk of n tokens after o cached ones)."""
    n, o, m, s = (np.asarray(v, dtype=np.int64) for v in np.broadcast_arrays(prefill_tokens, prefill_offset,
                                                                              decode_seqs, decode_context))
    shape = n.shape
    n, o, m, s = (v.reshape(-1) for v in (n, o, m, s))
    attn = (2.0 * o * n + n.astype(float) ** 2 if prefill_attention is None
            else np.broadcast_to(np.asarray(prefill_attention, dtype=float), shape).reshape(-1))
    return n, o, m, s, attn, shape

class StepCost:
    """Step times of one :class:`~graphroof.llm.engine.Engine` (its model, device and pricing).

    *max_batch*, *max_context*, *max_chunk*: the largest decode batch, cached length and prefill chunk the
    steps will ask for (they place the traced grid; larger values are extrapolated along the exact polynomials).
    """

    def __init__(self, engine: Any, *, max_batch: int = 256, max_context: int = 4096, max_chunk: int = 4096,
                 memo: bool = True, prefill_only: bool = False):
        src, pipe = engine.source, engine.pipeline
        if not src.kv_cache or src.cross_tokens(1) or src.spec.state_layers:
            raise InputError(f"{src.name}: the step cost models decoders with a KV cache (no encoder-decoder, no "
                             "state-space layers)")
        for flag, v in (("max_batch", max_batch), ("max_context", max_context), ("max_chunk", max_chunk)):
            if not isinstance(v, int) or v < 2:
                raise InputError(f"{flag} must be an integer >= 2, got {v!r}")
        self.hw, self.pipe = engine.hw, pipe
        self.max_batch, self.max_chunk = max_batch, max_chunk
        self.memo = memo
        self._memo_dec: dict[tuple, tuple[float, float]] = {}   # (alone, m, s) -> the decode part (ideal, real)
        self._memo_pre: dict[tuple, tuple[float, float]] = {}   # (n, attention, m == 0) -> the chunk's part
        self._last: tuple | None = None  # the last decode-only call: (m, s, per group (costs, CUDA-graph rows))
        self.spec = spec = getattr(engine, "spec", None)
        self.k = spec.k if spec is not None else 0
        self._draft = (spec.draft.step_cost(max_batch=max_batch, max_context=max_context, max_chunk=2)
                       if spec is not None and spec.draft is not None else None)
        dec = GridPlan((1, max_batch), (1, max_context), DEGREE["decode"])
        pre = GridPlan((1,), grid_points(range(1, max_chunk + 1), DEGREE["prefill"]), DEGREE["prefill"])
        counted = [pipe.counted("decode", b, x) for b, x in dec.points]
        self.decode = KernelGrid(dec, counted, recounter(pipe, counted[0].counted.meta),
                                 lattice([1, max_batch], [1, max_context]))
        counted = [pipe.counted("prefill", b, x) for b, x in pre.points]
        # checked at interior chunk sizes: ops whose rules are not polynomial in the tokens (MoE experts visited)
        # are found and counted per point (the token-only groups of _prefill_tables)
        self.prefill = KernelGrid(pre, counted, recounter(pipe, counted[0].counted.meta),
                                  lattice([1], sorted({1, 2, max_chunk // 4, max_chunk // 2, 3 * max_chunk // 4,
                                                       max_chunk} - {0})), lenient=True)
        graphs = pipe.runtime.decode_launch == "step"
        rt = pipe.runtime
        self._dec_graph = PhasePricer(self.decode, self.hw, cuda_graphs=graphs,
                                      step_launch_s=step_launch_s(graphs, self.hw), runtime=rt)
        self._dec_eager = PhasePricer(self.decode, self.hw, runtime=rt)
        self._pre = PhasePricer(self.prefill, self.hw, runtime=rt)
        # prefill_only (the chunked prefill of graphroof.llm.chunked): no step mixes decode sequences and a chunk
        self._decode_tables(max_batch * (self.k + 1) + (0 if prefill_only else max_chunk))
        self._prefill_tables(max_chunk)
        self._fixed_rows()

    # -- tables ----------------------------------------------------------------------------------------------
    def _decode_tables(self, top: int) -> None:
        """Per batch m = 0 .. top: each group's cost ``A[m] + B[m] x`` in the cached length x, and the summed
        time of the groups that do not depend on x (under a CUDA graph up to the largest decode-only step)."""
        ms = np.arange(1, top + 1)
        x0, x1 = self.decode.plan.xs[0], self.decode.plan.xs[-1]
        c0, mk0 = self.decode.costs_many(ms, np.full(top, x0))
        c1, mk1 = self.decode.costs_many(ms, np.full(top, x1))
        slope = (c1 - c0) / (x1 - x0)
        zero = np.zeros(c0.shape[:2] + (1,))
        self.dA = np.concatenate([zero, c0 - slope * x0], axis=2)         # [groups, fields, m]
        self.dB = np.concatenate([zero, slope], axis=2)
        scale = np.abs(self.dA).max(axis=(1, 2)) + 1.0
        self.d_vary = np.abs(self.dB).max(axis=(1, 2)) > 1e-12 * scale
        self.d_mnk: list[tuple | None] = []
        for gi, (a, b) in enumerate(zip(mk0, mk1)):
            if a is None or b is None:
                self.d_mnk.append(None)
                continue
            if any(np.any(u != v) for u, v in zip(a, b)):
                self.d_vary[gi] = True
            sl = [(v.astype(float) - u) / (x1 - x0) for u, v in zip(a, b)]
            self.d_mnk.append(tuple((np.concatenate([[1.0], u - s * x0]), np.concatenate([[0.0], s]))
                                    for u, s in zip(a, sl)))
        fixed = [gi for gi in range(len(self.d_vary)) if not self.d_vary[gi]]
        self.d_table = {}
        # a CUDA-graph step decodes alone: at most max_batch (k + 1) tokens; a mixed step adds its chunk's
        for key, pricer, last in (("graph", self._dec_graph, self.max_batch * (self.k + 1)),
                                  ("eager", self._dec_eager, top)):
            self.d_table[key] = self._sum(pricer, fixed, self.dA, self.d_mnk, np.arange(last + 1), np.zeros(last + 1))

    def _prefill_tables(self, top: int) -> None:
        """Each group's prompt-length polynomial ``p0 + p1 x + p2 x^2`` at batch 1, and the summed time of the
        chunk of n = 0 .. top tokens of the groups without a quadratic term (with and without ``p0``)."""
        xs = np.asarray(self.prefill.plan.xs)
        cost, mnk = self.prefill.costs_many(np.ones(len(xs), dtype=np.int64), xs)
        inv = np.linalg.inv(np.vander(xs.astype(float), increasing=True))
        coef = np.einsum("kj,gfj->gfk", inv, cost)
        self.p = np.zeros(coef.shape[:2] + (3,))
        self.p[:, :, : coef.shape[2]] = coef
        scale = np.abs(self.p).max(axis=(1, 2)) + 1.0
        self.p_vary = np.abs(self.p[:, :, 2]).max(axis=1) > 1e-12 * scale
        # the groups holding ops the grid counts per point (MoE grouped GEMMs: the experts a chunk's tokens visit)
        # cost what the chunk's n tokens cost, whatever is cached before them: priced exactly at n, never as
        # attention work (their fitted x^2 term is the experts-visited curve, not a context dependence)
        self._tok = [int(g) for g in np.flatnonzero(self.prefill.incidence.sum(axis=1) > 0)]
        self._tok_memo: dict[int, np.ndarray] = {}
        self.p_vary[self._tok] = False
        self.p_mnk = [None if m is None else tuple(np.einsum("kj,j->k", inv, d.astype(float)) for d in m)
                      for m in mnk]
        fixed = [gi for gi in range(len(self.p_vary)) if not self.p_vary[gi] and gi not in self._tok]
        n = np.arange(top + 1, dtype=float)
        cost_n = self.p[:, :, 1:2] * n + self.p[:, :, :1]
        cost_n[:, :, 0] = 0.0
        self.p_table = {True: self._sum(self._pre, fixed, cost_n, self._chunk_mnk(n), None, None)}

    def _token_sums(self, n: np.ndarray) -> np.ndarray:
        """``[6, len(n)]`` sums of the token-only groups (see :meth:`_prefill_tables`) for chunks of *n* tokens: their
        exact costs in a prefill of n tokens (the grid counts them per point), memoised per n."""
        out = np.zeros((6, len(n)))
        if not self._tok or not len(n):
            return out
        need = sorted({int(v) for v in n if v > 0 and int(v) not in self._tok_memo})
        if need:
            at = np.asarray(need, dtype=np.int64)
            cost, mnk = self.prefill.costs_many(np.ones(len(at), dtype=np.int64), at)
            sums = self._sum(self._pre, self._tok, cost, mnk, None, None)
            for j, v in enumerate(need):
                self._tok_memo[v] = sums[:, j].copy()
        for j, v in enumerate(n):
            if v > 0:
                out[:, j] = self._tok_memo[int(v)]
        return out

    def _chunk_mnk(self, n: np.ndarray, groups: Any = None) -> list[tuple | None]:
        """Each prefill group's GEMM shape at chunks of *n* tokens (only *groups*' when given; None elsewhere)."""
        out: list[tuple | None] = []
        for gi, m in enumerate(self.p_mnk):
            if m is None or (groups is not None and gi not in groups):
                out.append(None)
                continue
            out.append(tuple(np.maximum(1, np.rint(sum(c * n ** k for k, c in enumerate(d)))).astype(np.int64)
                             for d in m))
        return out

    def _sum(self, pricer: PhasePricer, groups: list[int], cost: np.ndarray, mnks: list, m: np.ndarray | None,
             x: np.ndarray | None) -> np.ndarray:
        """Per-step sums ``[6, n]`` of *groups* (the others contribute 0): costs ``[groups, fields, n]`` given, or
        the decode costs ``A[m] + B[m] x`` gathered."""
        keep = np.zeros(len(pricer.mult), dtype=bool)
        keep[groups] = True
        n = cost.shape[2] if m is None else len(m)

        def cost_of(gi: int) -> tuple[np.ndarray, int]:
            if not keep[gi]:
                return np.zeros((cost.shape[1], n)), 1
            if m is None:
                return np.maximum(0.0, cost[gi]), 1
            return np.maximum(0.0, self.dA[gi][:, m] + self.dB[gi][:, m] * x), 1

        def mnk_of(gi: int) -> tuple | None:
            if not keep[gi] or mnks[gi] is None:
                return None
            if m is None:
                return mnks[gi]
            return tuple(np.maximum(1, np.rint(a[m] + b[m] * x)).astype(np.int64) for a, b in mnks[gi])

        def node_of(gi: int, j: int, rep: int) -> Any:
            grid = self.decode if m is not None else self.prefill
            b = int(m[j]) if m is not None else 1
            return grid.node_at(gi, max(b, 1), int(grid.plan.xs[0]))

        return pricer._steps(cost_of, mnk_of, node_of, n, groups)  # noqa: SLF001 - the evaluator's per-step sums

    def _fixed_rows(self) -> None:
        """The per-step groups, and the tables as Python floats for the scalar path (the same doubles)."""
        self._vary_d = [gi for gi in range(len(self.d_vary)) if self.d_vary[gi]]
        self._vary_p = [gi for gi in range(len(self.p_vary)) if self.p_vary[gi]]
        launch = self._dec_graph.step_launch_s
        self._graph = {row: self.d_table["graph"][row] + (0.0 if row == 0 else launch) for row in (0, 1)}
        self._lists = {row: (self._graph[row].tolist(), self.d_table["eager"][row].tolist(),
                             self.p_table[True][row].tolist()) for row in (0, 1)}

    def _remember(self, memo: dict, key: tuple, sums: np.ndarray) -> tuple[float, float]:
        val = (float(sums[0, 0]), float(sums[1, 0]))
        if self.memo:
            if len(memo) >= MEMO_ENTRIES:
                memo.clear()
            memo[key] = val
        return val

    def _decode_part(self, alone: bool, m: int, s: int) -> tuple[float, float]:
        """(ideal, realistic) seconds of the per-step decode groups (attention over the cache) of *m* sequences
        with *s* cached tokens in all: under the CUDA graph when the step decodes *alone*, else launched eagerly."""
        key = (alone, m, s)
        hit = self._memo_dec.get(key)
        if hit is not None:
            return hit
        if not alone and self._last is not None:
            at = np.flatnonzero((self._last[0] == m) & (self._last[1] == s))
            if len(at):
                return self._remember(self._memo_dec, key, self._eager_from(self._last[2], int(at[0])))
        pricer = self._dec_graph if alone else self._dec_eager
        sums = self._sum(pricer, self._vary_d, self.dA, self.d_mnk, np.array([m], dtype=np.int64), np.array([s / m]))
        return self._remember(self._memo_dec, key, sums)

    def _chunk_part(self, n: int, attn: float, alone: bool) -> tuple[float, float]:
        """(ideal, realistic) seconds of the chunk's per-step groups (attention-like, quadratic in the prompt): *n*
        tokens doing *attn* causal pairs of work, with the weights' share ``P(0)`` when the chunk runs *alone*."""
        key = (n, attn, alone)
        hit = self._memo_pre.get(key)
        if hit is not None:
            return hit
        nn = np.array([float(n)])
        cost = (self.p[:, :, 1:2] * nn + self.p[:, :, 2:3] * np.array([attn])
                + self.p[:, :, :1] * np.array([alone]))
        sums = self._sum(self._pre, self._vary_p, cost, self._chunk_mnk(nn, self._vary_p), None, None)
        return self._remember(self._memo_pre, key, sums)

    def _decode_rows(self, m: np.ndarray, x: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per decode group growing with the context: its costs ``[fields, n]`` at batches *m* and mean cached
        lengths *x*, and one kernel's rows ``[6, n]`` under the CUDA graph (what :meth:`_sum` adds up)."""
        grid, x0, out = self.decode, int(self.decode.plan.xs[0]), []
        for gi in self._vary_d:
            c = np.maximum(0.0, self.dA[gi][:, m] + self.dB[gi][:, m] * x)
            mk = self.d_mnk[gi]
            mnk = None if mk is None else tuple(np.maximum(1, np.rint(a[m] + b[m] * x)).astype(np.int64) for a, b in mk)
            out.append((c, self._dec_graph._group_rows(  # noqa: SLF001 - the evaluator's per-kernel rows
                gi, c, mnk, lambda g, j: grid.node_at(g, max(int(m[j]), 1), x0))))
        return out

    def _eager_from(self, parts: list[tuple[np.ndarray, np.ndarray]], j: int) -> np.ndarray:
        """The sums ``[6, 1]`` of the same groups at column *j* launched eagerly: the CUDA-graph rows plus each
        working kernel's launch (as :meth:`PhasePricer._group_rows` adds it), summed as :meth:`_sum` sums."""
        sums, launch_s = np.zeros((6, 1)), self._dec_eager.launch_s
        for gi, (c, rows) in zip(self._vary_d, parts):
            c, r = c[:, j:j + 1], rows[:, j:j + 1].copy()
            nbytes = c[_F["weight_bytes"]] + c[_F["act_read_bytes"]] + c[_F["act_write_bytes"]] + \
                c[_F["kv_read_bytes"]] + c[_F["kv_write_bytes"]]
            works = ((c[_F["matrix_flops"]] + c[_F["vector_flops"]]) != 0) | (nbytes != 0) | (c[_F["net_bytes"]] != 0)
            r[5] = np.where(works, launch_s, 0.0)
            r[1] = r[1] + r[5]
            sums += self._dec_eager.mult[gi] * r
        return sums

    def _decodes(self, decode_seqs: Any, decode_context: Any, ideal: bool) -> np.ndarray:
        """Decode-only steps (arrays; what a simulation's decode run asks): the vectorised path without a chunk."""
        m, s = (np.asarray(v, dtype=np.int64) for v in np.broadcast_arrays(decode_seqs, decode_context))
        shape = m.shape
        m, s = m.reshape(-1), s.reshape(-1)
        if not m.size:
            return np.zeros(shape)
        if m.max() > self.max_batch:
            raise InputError(f"a step beyond the step cost's tables (decode batch <= {self.max_batch}, chunk <= "
                             f"{self.max_chunk} tokens): build it with larger max_batch / max_chunk")
        if m.min() < 0 or s.min() < 0:
            raise InputError("step sizes must be >= 0")
        row, dec = (0 if ideal else 1), m > 0
        t = np.where(dec, self._graph[row][m * (self.k + 1)], 0.0)
        rows = np.flatnonzero(dec)
        if self._vary_d and len(rows):
            mr, sr = m[rows], s[rows]
            parts = self._decode_rows(mr, sr / mr)
            sums = np.zeros((6, len(rows)))
            for gi, (_, r) in zip(self._vary_d, parts):
                sums += self._dec_graph.mult[gi] * r
            t[rows] += sums[row]
            self._last = (mr, sr, parts)  # the step an arrival joins next decodes one of these states, eagerly
        if self.spec is not None and len(rows):
            t += self._drafts(m, s, ideal)
        return t.reshape(shape)

    def _one(self, n: int, o: int, m: int, s: int, attn: float | None, ideal: bool) -> np.ndarray:
        """One step (scalar arguments): the vectorised path's arithmetic on floats, in its order."""
        if m > self.max_batch or n > self.max_chunk:
            raise InputError(f"a step beyond the step cost's tables (decode batch <= {self.max_batch}, chunk <= "
                             f"{self.max_chunk} tokens): build it with larger max_batch / max_chunk")
        attn = 2.0 * o * n + float(n) ** 2 if attn is None else float(attn)
        if n < 0 or o < 0 or m < 0 or s < 0 or attn < 0:
            raise InputError("step sizes must be >= 0")
        row = 0 if ideal else 1
        graph, eager, chunk = self._lists[row]
        t = 0.0
        if m > 0:
            t = graph[m * (self.k + 1)] if n == 0 else eager[m * (self.k + 1) + n]
            if self._vary_d:
                t += self._decode_part(n == 0, m, s)[row]
        if n > 0:
            if m == 0:
                t += chunk[n] + (float(self._token_sums(np.array([n]))[row, 0]) if self._tok else 0.0)
            if self._vary_p:
                t += self._chunk_part(n, attn, m == 0)[row]
        if self.spec is not None and m > 0:
            t += float(self._drafts(np.array([m], dtype=np.int64), np.array([s], dtype=np.int64), ideal)[0])
        return np.array(t)

    def prefill_sums(self, prefill_tokens: Any, prefill_attention: Any) -> np.ndarray:
        """Prefill-only steps of *prefill_tokens* doing *prefill_attention* causal work: ``[6, steps]`` sums (ideal,
        realistic, compute, memory, network, launch); row 1 is :meth:`__call__`'s ``(n, 0, 0, 0, attention)``."""
        n = np.asarray(prefill_tokens, dtype=np.int64).reshape(-1)
        attn = np.broadcast_to(np.asarray(prefill_attention, dtype=float), n.shape).astype(float)
        if n.size and (n.min() < 1 or n.max() > self.max_chunk or attn.min() < 0):
            raise InputError(f"prefill steps need 1 <= tokens <= {self.max_chunk} and attention work >= 0")
        out = self.p_table[True][:, n].copy() + self._token_sums(n)
        if self._vary_p and n.size:
            nn = n.astype(float)
            cost = self.p[:, :, 1:2] * nn + self.p[:, :, 2:3] * attn + self.p[:, :, :1]
            out += self._sum(self._pre, self._vary_p, cost, self._chunk_mnk(nn, self._vary_p), None, None)
        return out

    # -- steps -----------------------------------------------------------------------------------------------
    def __call__(self, prefill_tokens: Any = 0, prefill_offset: Any = 0, decode_seqs: Any = 0,
                 decode_context: Any = 0, *, prefill_attention: Any = None, ideal: bool = False) -> np.ndarray:
        """Seconds per step (arrays broadcast): *prefill_tokens* ``n`` of a chunk after *prefill_offset* ``o``
        cached tokens; *decode_seqs* ``m`` decode sequences whose cached lengths sum to *decode_context*.

        Several chunks in one step (of different sequences): *prefill_tokens* their sum and *prefill_attention*
        the sum over the chunks of ``2 o_i n_i + n_i^2`` (the causal attention work each adds); default
        ``2 o n + n^2`` of the one chunk.  A preset's ``host_per_sequence_s`` floors a realistic step at that
        times its decode sequences (the server's per-token host work, overlapped with the device)."""
        t = self._step(prefill_tokens, prefill_offset, decode_seqs, decode_context, prefill_attention, ideal)
        host = 0.0 if ideal else float(getattr(self.pipe.runtime, "host_per_sequence_s", 0.0) or 0.0)
        return np.maximum(t, host * np.asarray(decode_seqs, dtype=float)) if host else t

    def _step(self, prefill_tokens: Any, prefill_offset: Any, decode_seqs: Any, decode_context: Any,
              prefill_attention: Any, ideal: bool) -> np.ndarray:
        if (isinstance(prefill_tokens, _INTS) and isinstance(prefill_offset, _INTS) and isinstance(decode_seqs, _INTS)
                and isinstance(decode_context, _INTS) and (prefill_attention is None
                                                           or isinstance(prefill_attention, _FLOATS))):
            return self._one(int(prefill_tokens), int(prefill_offset), int(decode_seqs), int(decode_context),
                             None if prefill_attention is None else float(prefill_attention), ideal)
        if (isinstance(prefill_tokens, _INTS) and prefill_tokens == 0 and isinstance(prefill_offset, _INTS)
                and prefill_offset >= 0 and prefill_attention is None):
            return self._decodes(decode_seqs, decode_context, ideal)
        n, o, m, s, attn, shape = step_arrays(prefill_tokens, prefill_offset, decode_seqs, decode_context,
                                              prefill_attention)
        if np.any(m > self.max_batch) or np.any(n > self.max_chunk):
            raise InputError(f"a step beyond the step cost's tables (decode batch <= {self.max_batch}, chunk <= "
                             f"{self.max_chunk} tokens): build it with larger max_batch / max_chunk")
        if np.any((n < 0) | (o < 0) | (m < 0) | (s < 0) | (attn < 0)):
            raise InputError("step sizes must be >= 0")
        row = 0 if ideal else 1
        pre, dec = n > 0, m > 0
        xbar = np.where(dec, s / np.maximum(m, 1), 0.0)
        # groups that do not grow with the cached length (GEMMs, norms, collectives) run once over all the pass's
        # tokens: the decode step at batch m (a CUDA graph when decode runs alone), or m + n with a chunk
        graph = self.d_table["graph"][row] + (0.0 if ideal else self._dec_graph.step_launch_s)
        eager = self.d_table["eager"][row]
        mt = m * (self.k + 1)  # the pass's decode tokens: k + 1 per sequence under speculative decoding
        t = np.where(dec & ~pre, graph[mt], np.where(dec & pre, eager[mt + n], 0.0))
        vary = [gi for gi in range(len(self.d_vary)) if self.d_vary[gi]]
        for pricer, rows in ((self._dec_graph, np.flatnonzero(dec & ~pre)), (self._dec_eager, np.flatnonzero(dec & pre))):
            if vary and len(rows):  # attention over the cache: the m decode sequences only
                t[rows] += self._sum(pricer, vary, self.dA, self.d_mnk, m[rows], xbar[rows])[row]
        # the chunk: alone, the prefill of n tokens after o cached ones (weights read once); beside decode
        # sequences, only its attention-like groups (quadratic in the prompt) are added
        t += np.where(pre & ~dec, self.p_table[True][row][n], 0.0)
        alone = np.flatnonzero(pre & ~dec)
        if self._tok and len(alone):  # the chunk's MoE groups (alone: beside decode they run in the pass at m + n)
            t[alone] += self._token_sums(n[alone])[row]
        vary_p = [gi for gi in range(len(self.p_vary)) if self.p_vary[gi]]
        rows = np.flatnonzero(pre)
        if vary_p and len(rows):
            nn = n[rows].astype(float)
            cost = self.p[:, :, 1:2] * nn + self.p[:, :, 2:3] * attn[rows] + self.p[:, :, :1] * (m[rows] == 0)
            t[rows] += self._sum(self._pre, vary_p, cost, self._chunk_mnk(nn, vary_p), None, None)[row]
        if self.spec is not None and np.any(dec):  # the drafts of the m decode sequences
            t += self._drafts(m, s, ideal)
        return t.reshape(shape)

    def _drafts(self, m: np.ndarray, s: np.ndarray, ideal: bool) -> np.ndarray:
        """The draft's time per step: k decode steps of the draft model at batch m, or ``draft_cost * k`` plain
        decode steps of the target (0 where m = 0)."""
        assert self.spec is not None
        if self._draft is not None:
            return self.k * self._draft(0, 0, m, s, ideal=ideal)
        if not self.spec.draft_cost:
            return np.zeros(len(m))
        row, dec = (0 if ideal else 1), m > 0
        t = np.where(dec, self.d_table["graph"][row][m] + (0.0 if ideal else self._dec_graph.step_launch_s), 0.0)
        vary = [gi for gi in range(len(self.d_vary)) if self.d_vary[gi]]
        rows = np.flatnonzero(dec)
        if vary and len(rows):
            xbar = s[rows] / m[rows]
            t[rows] += self._sum(self._dec_graph, vary, self.dA, self.d_mnk, m[rows], xbar)[row]
        return self.spec.draft_cost * self.k * t
