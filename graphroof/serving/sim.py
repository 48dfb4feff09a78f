"""The continuous-batching engine: iteration-level scheduling as vLLM v1 does it, priced by
:class:`~graphroof.llm.stepcost.StepCost`.

Every request holds ``known`` tokens (its prompt plus the tokens it generated) of which ``computed`` have KV in
the cache; a step schedules tokens of requests, and a request whose computed tokens reach its known tokens emits
one token (the prefill's last chunk emits the first).  A step has a budget of ``max_batched_tokens`` tokens and at
most ``max_num_seqs`` running sequences:

* ``decode-first``: every running decode takes its token, then running partial prefills, then waiting requests in
  arrival order (front first) fill the rest of the budget with chunks (chunked prefill);
* ``prefill-first``: prefills first, decodes with what is left.

KV lives in paged blocks of ``kv_block`` tokens; a running sequence holds ``ceil(computed / block)`` blocks less
the shared prefix's (cached once for every request).  When a running sequence cannot get a block, the most
recently arrived running sequence is preempted by recompute: its blocks are freed and it goes back to the front
of the waiting queue, to prefill its prompt and generated tokens again.  A waiting request is admitted only when
its chunk's blocks are free.

Skipping ahead: while every running sequence decodes and no waiting request can be admitted, consecutive steps
differ only by their cached lengths, so a run of steps up to the next event (an arrival that could be admitted,
the first completion, the first step without a free block) is priced with one vectorised StepCost call (widened,
pricing only the steps added, when the guessed length falls short of the next arrival, whose step is general).
Speculative decoding: a decode step emits E (``tokens``) per sequence on average, as ``floor(frac + E)`` whole
tokens, the fraction carried (the expected value, no random draws); it takes KV blocks for the tokens it keeps.
Stopping early (``ttft_stop = (limit, k)``): an open-loop run stops once ``k`` requests are certain to have a TTFT
above the limit (emitted late, or still without a first token ``limit`` after arriving: it ends a later step);
the result is marked ``stopped`` (:mod:`graphroof.planner.search` sets ``k`` so the TTFT percentile is decided).
"""

from __future__ import annotations

import bisect
import inspect
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..llm.specdec import step_tokens, steps_to_emit, tokens_after
from .workload import Workload

__all__ = ["EngineModel", "SimOut", "simulate", "STEP_FIELDS"]

#: the step trace's columns: start, seconds, running sequences, waiting requests, tokens scheduled, decode tokens,
#: KV blocks in use
STEP_FIELDS = ("start_s", "dur_s", "running", "waiting", "batch_tokens", "decode_tokens", "kv_blocks")
_RUN_CAP = 4096  # most steps priced in one call


@dataclass
class EngineModel:
    """What a simulation needs of one engine replica."""

    step: Callable[..., Any]  # (prefill_tokens, offset, decode_seqs, decode_context, **kw) -> seconds
    blocks: int               # KV blocks of the replica (beside weights and one chunk's activations)
    block: int                # tokens per block
    budget: int               # max_batched_tokens of the replica (a DP rank's times dp: each rank schedules its own)
    max_seqs: int             # max_num_seqs of the replica (likewise a DP rank's times dp)
    policy: str = "decode-first"
    ideal: bool = False
    #: ``on-demand`` (vLLM): a request takes blocks as its tokens are computed, preempted when they run out;
    #: ``reserve`` (TensorRT-LLM's guaranteed-no-evict): admitted only when blocks for its prompt and whole output
    #: are free, which it holds from admission: never preempted
    admission: str = "on-demand"
    attention_arg: bool = True  # the step cost takes prefill_attention (several chunks priced exactly)
    tokens: float = 1.0         # tokens a decode step emits per sequence on average (speculative decoding: E)
    #: the runtime's time per request (``[launch].request_overhead_s``): the scheduler sees a request this long after
    #: it is sent; TTFT and e2e count from the send (a closed-loop user sends again at the finish)
    request_s: float = 0.0

    #: the step cost takes prefill_chunks / prefill_largest (a pipelined step keeps each chunk on one micro-batch);
    #: None: read from its signature
    chunk_args: bool | None = None
    #: the largest chunk of one prompt in a step: the budget of the scheduler that runs it (a DP rank's
    #: max_batched_tokens under attention DP, where *budget* is the replica's); 0: *budget*
    chunk_max: int = 0
    #: the KV blocks one request can hold: a DP rank's (a sequence lives on one rank) where *blocks* is the
    #: replica's; 0: *blocks*
    rank_blocks: int = 0

    @classmethod
    def of_ranks(cls, step: Callable[..., Any], rank_blocks: int, block: int, rank_budget: int, rank_seqs: int,
                 dp: int, **kw: Any) -> EngineModel:
        """A replica of *dp* attention-DP ranks, each an engine core with its own scheduler (vLLM deploys one per DP
        rank) and the KV of its own sequences: *dp* times one rank's KV blocks, max_batched_tokens and max_num_seqs,
        and one prompt's chunk at most a rank's budget."""
        return cls(step, rank_blocks * dp, block, rank_budget * dp, rank_seqs * dp, chunk_max=rank_budget,
                   rank_blocks=rank_blocks, **kw)

    def __post_init__(self) -> None:
        if not 0 < self.chunk_max <= self.budget:
            self.chunk_max = self.budget
        if not 0 < self.rank_blocks <= self.blocks:
            self.rank_blocks = self.blocks
        if self.chunk_args is None:
            try:
                self.chunk_args = "prefill_chunks" in inspect.signature(self.step).parameters
            except (TypeError, ValueError):
                self.chunk_args = False

    def cost(self, n: Any, o: Any, m: Any, s: Any, attn: Any = None, chunks: Any = None,
             largest: Any = None) -> np.ndarray:
        kw: dict[str, Any] = {"ideal": self.ideal}
        if self.attention_arg:
            kw["prefill_attention"] = attn
        if self.chunk_args and chunks is not None:
            kw.update(prefill_chunks=chunks, prefill_largest=largest)
        return np.asarray(self.step(n, o, m, s, **kw), dtype=float)


@dataclass
class SimOut:
    """Per request: first scheduled, first token and finish times, preemptions; the step trace (:data:`STEP_FIELDS`)."""

    arrival: np.ndarray
    sched: np.ndarray
    first_token: np.ndarray
    finish: np.ndarray
    preemptions: np.ndarray
    steps: dict[str, np.ndarray]
    blocks: int
    stopped: bool = False  # the run stopped early: the TTFT limit is missed at the percentile (``ttft_stop``)


class _Sim:
    def __init__(self, em: EngineModel, wl: Workload, progress: Callable[[str], None] | None,
                 ttft_stop: tuple[float, int] | None = None):
        self.em, self.wl = em, wl
        n = len(wl)
        self.arr = wl.arrival.astype(float) + em.request_s  # when the scheduler sees each request
        if wl.users and n:  # closed loop: the users' first requests at even phases over one request's time
            k = min(wl.users, n)
            self.arr[:k] += self._cycle_s(k) * np.arange(k) / k
        self.comp = wl.prefix.astype(np.int64).copy()
        self.known = wl.prompt.astype(np.int64).copy()
        self.out = np.zeros(n, dtype=np.int64)
        self.pblocks = wl.prefix // em.block
        self.own = np.zeros(n, dtype=np.int64)
        self.sched = np.full(n, np.nan)
        self.first = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.preempt = np.zeros(n, dtype=np.int64)
        self.frac = np.zeros(n)  # the fraction of a token each sequence carries (speculative decoding)
        self.running: list[int] = []
        self.waiting: deque[int] = deque()
        self.next_arr = 0      # the next request not yet in the system
        self.next_unknown = min(wl.users, n) if wl.users else n  # closed loop: the next arrival not known yet
        self.done = 0
        self.now = 0.0
        self.free = em.blocks - (int(self.pblocks.max()) if n else 0)  # the shared prefix's blocks, held once
        self.rows: list[tuple] = []
        self.gone: set[int] = set()        # preempted during the current step
        self.last_dt = 0.0                  # the last decode step's seconds (how far to price ahead)
        self.runs: list[np.ndarray] = []
        self.progress, self.t0, self.last_msg = progress, time.perf_counter(), 0.0
        self.stop, self.late = (None if wl.users else ttft_stop), 0  # late: first tokens past the stop's limit

    # -- helpers -------------------------------------------------------------------------------------------
    def _blocks_for(self, i: int, tokens: int) -> int:
        """New blocks request *i* needs to hold *tokens* computed tokens."""
        b = self.em.block
        return max(0, -(-tokens // b) - int(self.pblocks[i]) - int(self.own[i]))

    def _preempt_last(self) -> int:
        v = self.running.pop()  # the most recently arrived running sequence (running is kept in arrival order)
        self.gone.add(v)
        self.free += int(self.own[v])
        self.own[v] = 0
        self.comp[v] = self.wl.prefix[v]
        self.preempt[v] += 1
        self.waiting.appendleft(v)
        return v

    def _grab(self, i: int, tokens: int) -> bool:
        """Blocks for *i* to hold *tokens* computed tokens, preempting the latest arrivals; False: *i* itself went."""
        need = self._blocks_for(i, tokens)
        while need > self.free:
            if self._preempt_last() == i:
                return False
        self.own[i] += need
        self.free -= need
        return True

    def _cycle_s(self, users: int) -> float:
        """About how long one request takes with *users* running: its prompt's prefill chunks alone, then its
        decode steps at *users* sequences (at most ``max_seqs``) of mean context prompt + gen / 2, from the first
        users' median lengths.  The users of a closed loop start spread over it, as a server's steady state has
        them (equal requests sent together would stay in step, every prefill landing in the same steps)."""
        em, wl = self.em, self.wl
        p, g = int(np.median(wl.prompt[:users])), int(np.median(wl.gen[:users]))
        chunk = max(1, min(p, em.chunk_max))
        m = max(1, min(users, em.max_seqs))
        pre = float(em.cost(chunk, 0, 0, 0, chunks=1, largest=chunk)) * -(-p // chunk)
        dec = float(em.cost(0, 0, m, m * (p + g // 2))) * max(g - 1, 0) / max(em.tokens, 1e-9)
        return pre + dec

    def _admit_arrivals(self) -> None:
        arr, n = self.arr, self.next_unknown
        while self.next_arr < n and arr[self.next_arr] <= self.now:
            self.waiting.append(self.next_arr)
            self.next_arr += 1

    def _head_admissible(self, budget: int) -> bool:
        if not self.waiting or len(self.running) >= self.em.max_seqs or budget <= 0:
            return False
        h = self.waiting[0]
        chunk = min(int(self.known[h] - self.comp[h]), budget, self.em.chunk_max)
        return self._blocks_for(h, self._hold(h, int(self.comp[h]) + chunk)) <= self.free

    def _hold(self, i: int, tokens: int) -> int:
        """Tokens request *i* holds blocks for once admitted with *tokens* computed (``reserve``: its whole
        prompt and output)."""
        if self.em.admission == "reserve":
            return max(tokens, int(self.wl.prompt[i]) + int(self.wl.gen[i]))
        return tokens

    def _finish(self, ids: list[int], ends: Any) -> None:
        """Requests *ids* finished at *ends* (one time or one per request)."""
        times = np.broadcast_to(np.asarray(ends, dtype=float), (len(ids),))
        for i, end in zip(ids, times.tolist()):
            self.finish[i] = end
            self.free += int(self.own[i])
            self.own[i] = 0
            self.running.remove(i)
            self.done += 1
            if self.wl.users and self.next_unknown < len(self.arr):  # closed loop: the user sends its next one
                self.arr[self.next_unknown] = end + self.em.request_s
                self.next_unknown += 1

    def _say(self) -> None:
        if self.progress is None:
            return
        t = time.perf_counter() - self.t0
        if t > 2.0 and t - self.last_msg >= 1.0:
            self.last_msg = t
            self.progress(f"simulating: {self.done}/{len(self.arr)} requests done, {self.now:.1f} s simulated")

    # -- one step --------------------------------------------------------------------------------------------
    def _tok(self, d: np.ndarray) -> np.ndarray:  # tokens the decode sequences *d* emit in their next step
        return step_tokens(self.frac[d], self.wl.gen[d] - self.out[d], self.em.tokens)

    def _decodes(self, d: np.ndarray, budget: int) -> tuple[np.ndarray, int]:
        """Schedule the decode sequences *d* (running order) within *budget*: (scheduled, budget left)."""
        d = d[:budget]
        tok = self._tok(d)
        need = np.maximum(0, -(-(self.comp[d] + tok) // self.em.block) - self.pblocks[d] - self.own[d])
        total = int(need.sum())
        if total <= self.free:  # blocks for all: no preemption
            self.own[d] += need
            self.free -= total
            return d, budget - len(d)
        got = []
        for i, t in zip(d.tolist(), tok.tolist()):  # blocks are short: one at a time, preempting the latest arrivals
            if i in self.gone:
                continue
            if not self._grab(i, int(self.comp[i]) + t):
                break
            got.append(i)
        return np.array(got, dtype=np.int64), budget - len(got)

    def _prefills(self, pre: list[int], budget: int, chunks: list[tuple[int, int, int]]) -> int:
        """Chunks of the running partial prefills, then of waiting requests in queue order: the budget left."""
        for i in pre:
            if budget <= 0:
                break
            if i in self.gone:
                continue
            c = min(int(self.known[i] - self.comp[i]), budget, self.em.chunk_max)
            if not self._grab(i, int(self.comp[i]) + c):
                break
            chunks.append((i, c, int(self.comp[i])))
            budget -= c
        while not self.gone and self._head_admissible(budget):  # no admission in a step that preempted (vLLM)
            h = self.waiting.popleft()
            c = min(int(self.known[h] - self.comp[h]), budget, self.em.chunk_max)
            self._grab(h, self._hold(h, int(self.comp[h]) + c))
            bisect.insort(self.running, h)
            if np.isnan(self.sched[h]):
                self.sched[h] = self.now
            chunks.append((h, c, int(self.comp[h])))
            budget -= c
        return budget

    def step(self) -> None:
        """One engine step through the scheduler (the general path)."""
        em = self.em
        ids = np.array(self.running, dtype=np.int64)
        is_dec = (self.out[ids] > 0) & (self.known[ids] - self.comp[ids] == 1)
        self.gone = set()
        chunks: list[tuple[int, int, int]] = []
        if em.policy == "prefill-first":
            budget = self._prefills(ids[~is_dec].tolist(), em.budget, chunks)
            decodes, budget = self._decodes(ids[is_dec], budget)
        else:
            decodes, budget = self._decodes(ids[is_dec], em.budget)
            budget = self._prefills(ids[~is_dec].tolist(), budget, chunks)
        if self.gone:  # a request preempted later in the step (for a later request's blocks) drops out of it
            chunks = [ch for ch in chunks if ch[0] not in self.gone]
            decodes = decodes[~np.isin(decodes, list(self.gone))]
        if not len(decodes) and not chunks:
            if self.waiting and not self.running:
                return  # everything was preempted: the queue's front is admitted next step
            self._idle()
            return
        n = sum(c for _, c, _ in chunks)
        attn = sum(2.0 * o * c + float(c) * c for _, c, o in chunks)
        s = int(self.comp[decodes].sum())
        o1 = chunks[0][2] if len(chunks) == 1 else 0
        # the chunks are all the prefill work there is (nothing waiting, no running prompt left out): they sit whole
        # on their micro-batches / DP ranks (ParallelStepCost); with more work queued the step's budget stands for
        # every micro-batch's and rank's own, the even spread
        alone = not self.waiting and set(ids[~is_dec].tolist()) <= {i for i, _, _ in chunks}
        sizes = [c for _, c, _ in chunks if c > 0]
        dt = float(em.cost(n, o1, len(decodes), s, attn, chunks=len(sizes) if alone else None,
                           largest=max(sizes, default=0) if alone else None))
        start, end = self.now, self.now + dt
        emitted = []
        for i, c, _ in chunks:
            self.comp[i] += c
            if self.comp[i] == self.known[i]:
                emitted.append(i)
        em_ids = np.concatenate([decodes, np.array(emitted, dtype=np.int64)])
        tok = np.r_[self._tok(decodes), np.ones(len(emitted), dtype=np.int64)]
        self.frac[decodes] = np.maximum(0.0, self.frac[decodes] + em.tokens - tok[:len(decodes)])
        self.comp[decodes] += tok[:len(decodes)]
        self.out[em_ids] += tok
        self.known[em_ids] += tok
        fresh = em_ids[np.isnan(self.first[em_ids])]
        self.first[fresh] = end
        if self.stop is not None and len(fresh):
            self.late += int(np.count_nonzero(end - (self.arr[fresh] - self.em.request_s) > self.stop[0]))
        self.rows.append((start, dt, len(self.running), len(self.waiting), n + len(decodes), len(decodes),
                          em.blocks - self.free))
        self.now = end
        self._finish(em_ids[self.out[em_ids] >= self.wl.gen[em_ids]].tolist(), end)

    def _idle(self) -> None:
        if self.next_arr < self.next_unknown:
            self.now = max(self.now, float(self.arr[self.next_arr]))
            return
        raise RuntimeError("serve: the engine can neither schedule nor wait for an arrival")  # a bug, not an input

    # -- a run of decode steps ------------------------------------------------------------------------------
    def decode_run(self) -> bool:
        """Skip ahead over decode-only steps; False when the next step needs the general path.

        The run stops before the step an arrival could join, and at the first completion unless nothing else
        can change the schedule (open loop, an empty queue, free blocks for every sequence to its end): then it
        runs on past completions with the sequences that remain."""
        if not self.running:
            return False
        ids = np.array(self.running, dtype=np.int64)
        m, em = len(ids), self.em
        if np.any(self.out[ids] == 0) or np.any(self.known[ids] - self.comp[ids] != 1) or m > em.budget:
            return False
        if self._head_admissible(em.budget - m):
            return False
        c, rem = self.comp[ids], self.wl.gen[ids] - self.out[ids]  # cached tokens, tokens left
        steps = rem if (e := em.tokens) == 1.0 else steps_to_emit(self.frac[ids], rem, e)  # decode steps left
        # an arrival can join when the seat cap and the blocks allow (a blocked queue stays blocked while decoding)
        can_join = m < em.max_seqs and not self.waiting and self.next_arr < self.next_unknown
        no_more = not self.waiting and self.next_arr >= self.next_unknown
        to_end = int(np.maximum(0, -(-(c + rem) // em.block) - self.pblocks[ids] - self.own[ids]).sum())
        if not self.wl.users and (can_join or no_more) and to_end <= self.free:
            k = int(min(steps.max(), _RUN_CAP))
        else:
            r = np.sort((-c) % em.block)   # step j needs a new block for sequence i when (c_i + j) % block == 0
            q, left = divmod(self.free, m)
            k = int(min(steps.min(), (q * em.block + int(r[left])) // math.ceil(e), _RUN_CAP))  # completion / no block
        if k <= 0:
            return False
        by_rem = np.argsort(steps, kind="stable")
        rem_sorted, c_before = steps[by_rem], np.r_[0, np.cumsum(c[by_rem])]
        total_c = int(c.sum())

        def active(j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """(sequences, their cached tokens summed) at step j: those with more than j steps left."""
            gone = np.searchsorted(rem_sorted, j, side="right")
            mj = m - gone
            return mj, total_c - c_before[gone] + (j * mj if e == 1.0 else np.floor(j * e * mj + 1e-9).astype(np.int64))

        t_next = float(self.arr[self.next_arr]) if can_join else np.inf
        width = k
        if np.isfinite(t_next):
            guess = (t_next - self.now) / self.last_dt if self.last_dt > 0 else 14.0
            width = int(min(k, max(2.0, 1.25 * guess + 2)))
        mj, sj = active(np.arange(width + 1))  # and the state after them (the next step's, priced with them)
        dt = np.asarray(em.cost(0, 0, mj, sj), dtype=float)[:width]
        while True:
            ends = self.now + np.cumsum(dt)
            hit = int(np.searchsorted(ends, t_next, side="left"))
            if hit < width or width == k:
                take = min(hit + 1, width)
                break
            wider = min(k, width * 4)  # the arrival comes later: price the steps added only
            more_m, more_s = active(np.arange(width + 1, wider + 1))
            more = np.asarray(em.cost(0, 0, np.r_[mj[-1:], more_m], np.r_[sj[-1:], more_s]), dtype=float)
            mj, sj, dt, width = np.r_[mj, more_m], np.r_[sj, more_s], np.r_[dt, more[:-1]], wider
        self.last_dt = float(dt[take - 1])
        dt, ends, mj = dt[:take], ends[:take], mj[:take]
        starts = ends - dt
        tok = np.minimum(rem, take if e == 1.0 else tokens_after(self.frac[ids], take, e))
        self.frac[ids] = np.maximum(0.0, self.frac[ids] + take * e - tok)
        old = self.own[ids].copy()
        self.comp[ids] += tok
        self.out[ids] += tok
        self.known[ids] += tok
        # blocks held: those of the computed tokens, or more when they were reserved at admission
        self.own[ids] = np.maximum(old, -(-self.comp[ids] // em.block) - self.pblocks[ids])
        used0 = em.blocks - self.free
        self.free -= int((self.own[ids] - old).sum())
        used1 = em.blocks - self.free
        waiting = np.full(take, len(self.waiting), dtype=float)
        if not self.wl.users:  # arrivals queued during the run (they could not join)
            waiting += np.searchsorted(self.arr, starts, side="right") - self.next_arr
        kv = used0 + (used1 - used0) * (np.arange(1, take + 1) / take)  # linear between the run's ends
        self.runs.append(np.stack([starts, dt, mj, waiting, mj, mj, kv]))
        self.now = float(ends[-1])
        done = steps <= take
        self._finish(ids[done].tolist(), ends[steps[done] - 1])
        return True

    def run(self) -> SimOut:
        stopped = False
        while self.done < len(self.arr) and not stopped:
            self._admit_arrivals()
            if not self.running and not self.waiting:
                self._idle()
                continue
            if not self.decode_run():
                self.step()
            self._say()
            stopped = self.stop is not None and self._missed(*self.stop) >= self.stop[1]
        return SimOut(self.arr - self.em.request_s, self.sched, self.first, self.finish, self.preempt, self._steps(),
                      self.em.blocks, stopped)

    def _missed(self, limit: float, _k: int) -> int:
        """Requests certain to have a TTFT above *limit*: emitted late, or still without a token that long after."""
        sent = self.arr - self.em.request_s  # TTFT counts from the send
        cut = int(np.searchsorted(sent, self.now - limit, side="right"))
        return self.late + int(np.count_nonzero(np.isnan(self.first[:cut]) & (self.now - sent[:cut] > limit)))

    def _steps(self) -> dict[str, np.ndarray]:
        parts = list(self.runs)
        if self.rows:
            parts.append(np.array(self.rows, dtype=float).T)
        if not parts:
            return {f: np.zeros(0) for f in STEP_FIELDS}
        allsteps = np.concatenate(parts, axis=1)
        order = np.argsort(allsteps[0], kind="stable")
        return {f: allsteps[i][order] for i, f in enumerate(STEP_FIELDS)}


def simulate(em: EngineModel, wl: Workload, progress: Callable[[str], None] | None = None,
             ttft_stop: tuple[float, int] | None = None) -> SimOut:
    """Run the requests of *wl* through the engine *em* until every one has finished, or, with *ttft_stop*
    ``(limit seconds, k)``, until k requests are certain to have a TTFT above the limit (``stopped``)."""
    return _Sim(em, wl, progress, ttft_stop).run()
