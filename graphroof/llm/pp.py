"""Figures of a parallel layout (:class:`~graphroof.llm.parallel.Layout`): pipeline stages, their micro-batches and
the bubble, attention-data-parallel ranks, from the one evaluator's per-stage phase totals.

Every stage's rank is priced by its own :class:`~graphroof.llm.price.PricedModel` (the stage's ops after the TP
split and the EP pass, :class:`~graphroof.llm.parallel.ParallelPipeline`); a step of the pipeline runs at the pace
of the slowest stage, ``t_stage = max_k t_k`` (each figure its own maximum over the stages).  A batch of ``b``
sequences is spread over the ``dp`` attention-DP ranks, ``b_dp = ceil(b / dp)`` each.  The schedule:

* **prefill** (TTFT): the ``b_dp`` prompts split into ``m = min(b_dp, microbatches)`` micro-batches of
  ``ceil(b_dp / m)`` (``microbatches`` default ``pp``), pushed through the stages back to back (GPipe fill, no
  interleaving): the last micro-batch's first token comes after ``sum_k t_k + (m - 1) x t_stage`` (the first
  micro-batch's path through the stages, then one slowest stage per later micro-batch; ``(m + pp - 1) x t_stage``
  with balanced stages) plus the ``pp - 1`` activation sends of one micro-batch (a send overlaps the next
  micro-batch's compute, so only the first micro-batch's sends are on the critical path);
* **decode** (TPOT): a serving engine keeps up to ``pp`` micro-batches in flight (vLLM's virtual engines, TRT-LLM's
  in-flight micro-batches), ``ceil(b_dp / pp)`` sequences each, ``m_dec = min(b_dp, pp)`` of them; a sequence's
  next token needs its micro-batch to pass every stage, and stage 0 can start it only when it is back, while each
  stage serves every micro-batch in turn: a round takes ``max(sum_k t_k, m_dec x t_stage) + (pp - 1) x t_send``
  (``pp x t_stage + sends`` with every micro-batch filled and the stages balanced; one sequence passes the stages
  one after the other, ``sum_k t_k + sends``, as llama.cpp's layer split runs a batch of 1);
  throughput = ``b / TPOT`` (every micro-batch makes a token per round).  ``pp = 1`` is one micro-batch, no send.
* **send / recv**: ``[tokens, hidden]`` activations in the activation dtype per boundary
  (:func:`graphroof.timing.p2p.send_recv_time`), over NVLink inside a node and the system's network when the
  boundary crosses nodes (:meth:`~graphroof.llm.parallel.Layout.boundary_inter_node`); the ideal figures add only
  its bandwidth part, the network term too.
* **memory** per rank: the stage whose rank holds the most (its weights, its layers' KV of the ``b_dp`` sequences
  of its DP rank, the activation peak of a prefill).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from ..dtypes import dtype_bits
from ..errors import InputError
from ..timing.p2p import send_recv_time
from .memfit import memory_fit
from .price import Figures
from .stepcost import step_arrays
from .tokens import PhaseTotals, decode_range, with_request_s

__all__ = ["ParallelStepCost", "parallel_figures", "send_time_s"]

_FIELDS = tuple(PhaseTotals.__dataclass_fields__)
_TIMES = ("t_ideal_s", "t_realistic_s", "first_ideal_s", "first_realistic_s", "last_ideal_s", "last_realistic_s")


def _ceil_div(a: np.ndarray, d: int) -> np.ndarray:
    return -(-a // d)


def act_bytes_per_token(eng: Any) -> float:
    """``hidden x activation dtype`` bytes of one token's activations at a stage boundary."""
    src, q = eng.source, eng.pipeline.quant
    hidden = src.spec.hidden
    if not hidden:
        raise InputError(f"--pp: {src.name} has no hidden size in its spec to size the stage-boundary sends")
    return hidden * dtype_bits(q.activations or src.spec.dtype or "bf16") / 8


def send_time_s(eng: Any, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(realistic, bandwidth-only) seconds of the ``pp - 1`` boundary sends of *tokens* tokens (arrays)."""
    lay = eng.layout
    tokens = np.asarray(tokens, dtype=float)
    real, beta = np.zeros(len(tokens)), np.zeros(len(tokens))
    if lay.pp == 1:
        return real, beta
    per = act_bytes_per_token(eng)
    vals, inv = np.unique(tokens, return_inverse=True)
    r, bw = np.zeros(len(vals)), np.zeros(len(vals))
    for k in range(lay.pp - 1):
        inter = lay.boundary_inter_node(k)
        for i, t in enumerate(vals):
            s = send_recv_time(float(t) * per, eng.hw, inter_node=inter, gpus_per_node=lay.gpus_per_node or 8)
            r[i] += s.t_s
            bw[i] += s.t_bandwidth_s
    return r[inv.reshape(-1)], bw[inv.reshape(-1)]


def _stage_max(totals: list[PhaseTotals]) -> np.ndarray:
    return np.max(np.stack([np.stack([getattr(t, f) for f in _FIELDS]) for t in totals]), axis=0)


def _stage_sum(totals: list[PhaseTotals]) -> np.ndarray:
    return np.sum(np.stack([np.stack([getattr(t, f) for f in _FIELDS]) for t in totals]), axis=0)


def _round(totals: list[PhaseTotals], live: np.ndarray) -> np.ndarray:
    """One decode round's fields (before the sends): ``live`` micro-batches each pass every stage, a stage serving
    them in turn, so each time is the longer of the stages' sum (one micro-batch's path) and ``live x`` the slowest
    stage's (the busiest stage's queue), taken field by field (module doc); the compute / memory / network parts
    follow the realistic time's choice."""
    most, total = _stage_max(totals), _stage_sum(totals)
    busy = most * live
    i = _FIELDS.index("t_realistic_s")
    out = np.where(total[i] > busy[i], total, busy)
    for f in _TIMES:
        j = _FIELDS.index(f)
        out[j] = np.maximum(total[j], busy[j])
    return out


def _fill(totals: list[PhaseTotals], m: np.ndarray) -> np.ndarray:
    """A GPipe fill's fields (before the sends): *m* equal micro-batches pushed through the stages back to back; the
    last leaves the last stage after the stages' sum (the first micro-batch's path) plus ``m - 1`` of the slowest
    stage (each later micro-batch waits on it), field by field."""
    return _stage_sum(totals) + (m - 1) * _stage_max(totals)


def _with_sends(arr: np.ndarray, real: np.ndarray, beta: np.ndarray) -> PhaseTotals:
    """A phase's fields (already the pipeline's: :func:`_fill`, :func:`_round`) with the boundary sends added."""
    out = arr.copy()
    for f in _TIMES:
        i = _FIELDS.index(f)
        out[i] += real if "realistic" in f else beta
    out[_FIELDS.index("t_network_s")] += beta
    return PhaseTotals(*out)


def parallel_figures(eng: Any, batch: Any, prompt: Any, gen: Any) -> Figures:
    """Every figure of the points under the engine's layout (see the module doc); ``batch`` is the whole
    layout's batch (all DP ranks), so ``tokens_per_s`` is the layout's throughput."""
    lay, hw, p = eng.layout, eng.hw, eng.pricing
    b, pr, g = (np.asarray(v, dtype=np.int64).reshape(-1) for v in np.broadcast_arrays(batch, prompt, gen))
    if not eng.source.kv_cache and lay.pp > 1:
        raise InputError(f"--pp {lay.pp}: {eng.source.name} has no KV cache; the pipeline schedule models decoders "
                         "with a KV cache")
    b_dp = _ceil_div(b, lay.dp)
    m_pre = np.minimum(b_dp, lay.microbatches or lay.pp)
    b_pre = _ceil_div(b_dp, m_pre)
    b_dec = _ceil_div(b_dp, lay.pp)
    bs = sorted(set(b_pre.tolist()) | set(b_dec.tolist()) | set(b_dp.tolist()))
    prompts, gens = sorted(set(pr.tolist())), sorted(set(g.tolist()))
    stages = [eng.stage_priced(k, bs, prompts, gens) for k in range(lay.pp)]
    pre = _fill([pm.phase_totals("prefill", hw, b_pre, pr, pr) for pm in stages], m_pre.astype(float))
    start = stages[0].decode_start(pr)
    lo, hi = decode_range(start, g, stages[0].kv)
    live = np.minimum(b_dp, lay.pp).astype(float)  # micro-batches in flight (module doc)
    if stages[0].kv:
        dec = _round([pm.phase_totals("decode", hw, b_dec, lo, hi) for pm in stages], live)
    else:  # no cache (pp = 1 here): each step is the prefill graph over the whole context
        dec = _round([pm.phase_totals("prefill", hw, b_dec, lo, hi) for pm in stages], live)
    real_pre, beta_pre = send_time_s(eng, b_pre * pr)
    real_dec, beta_dec = send_time_s(eng, b_dec)
    prefill = _with_sends(pre, real_pre, beta_pre)
    prefill = with_request_s(prefill, stages[0].request_on(hw))  # the runtime's per-request time, once, as plain
    request = stages[0].request_on(hw, p.ideal)
    decode = _with_sends(dec, real_dec, beta_dec)
    mems = [memory_fit(pm, hw, b_dp, pr, g, p.serving) for pm in stages]
    heaviest = np.argmax(np.stack([m["total_bytes"] for m in mems]), axis=0)
    mem = {k: np.choose(heaviest, [m[k] for m in mems]) for k in mems[0]}
    notes: list[str] = []
    for pm in stages:
        notes += [n for n in pm.notes if n not in notes]
    budget = p.serving.max_batched_tokens
    if budget and np.any(b_pre * pr > budget):
        notes.append(f"--max-batched-tokens {budget}: under a parallel layout the prefill is priced as whole "
                     "micro-batches (chunked prefill is priced by graphroof serve's steps, not by TTFT here)")
    return Figures(hw, p.ideal, b, pr, g, prefill, decode, mem, notes, request_s=request)


class ParallelStepCost:
    """Engine steps under a layout (what ``graphroof serve`` calls per step), from each stage's
    :class:`~graphroof.llm.stepcost.StepCost`.

    A step of a pipelined engine is one **round**: the step's work (its decode sequences, its prefill tokens) is
    spread over the ``dp`` attention-DP ranks and, on each, over the ``pp`` micro-batches in flight; every
    micro-batch passes every stage, a stage serving them in turn, so the step takes the longer of ``live x`` the
    slowest stage's micro-step (``ceil(m / (pp dp))`` decode sequences, ``ceil(n / (pp dp))`` prefill tokens, the
    attention work over ``pp dp``; ``live`` the micro-batches in flight: ``pp``, or the decode sequences of a DP rank
    when fewer and no prefill) and the stages' sum (one micro-batch's path), plus the ``pp - 1`` boundary sends of
    one micro-batch's tokens: the time a sequence waits for its next token, as TPOT above.
    ``pp = dp = 1`` is the plain step cost.

    A prompt's chunk is not split over micro-batches (a scheduler puts a sequence in one): given the step's
    *prefill_chunks* (how many) and *prefill_largest* (the largest chunk's tokens), a DP rank's ``n_r =
    ceil(n / dp)`` prefill tokens sit as ``n_h = min(n_r, max(ceil(n_r / pp), largest))`` on the heavy micro-batch
    and the rest spread over the other ``live - 1`` of the ``live = min(pp, ceil(m / dp) + ceil(chunks / dp))``
    micro-batches in flight; the round is the longer of the heavy micro-batch's path and the busiest stage's turn over them all,
    ``max(sum_k t_k(heavy), max_k [t_k(heavy) + (live - 1) t_k(light)])`` (equal micro-batches: the rule above).
    A lone chunk with no decodes passes the stages one after the other.  Without them, the even spread above (what
    the simulator asks for while more prefill work is queued: its token budget then stands for every micro-batch's
    and rank's own, each busy with other prompts).
    Under expert parallelism (``dp > 1``, ``ep > 1``) the attention-DP ranks meet at every expert layer, so a chunk
    larger than the even share ``n_e = ceil(n / dp)`` makes a heavy DP rank: it holds that chunk, ``n_r = largest``
    prefill tokens (a lower bound: it may hold more chunks), and the step's attention work in proportion, on one
    micro-batch, while its expert ops (the group's rows over the EP ranks) are priced at the group's mean, its
    ``x`` prefill tokens as ``x n_e / n_r``: ``t(x) - t_experts(x) + t_experts(x n_e / n_r)``, with
    ``t_experts`` the stage's expert ops alone (:meth:`experts`).  A lone prompt then costs its rank's attention and
    dense layers at its whole length, not a ``dp``-th of it.  Without expert parallelism the DP ranks are not
    coupled and the even spread stays.
    The runtime's per-sequence host floor (``host_per_sequence_s``, :class:`~graphroof.llm.stepcost.StepCost`) is
    the rank's scheduler's, paid once per round for the rank's ``ceil(m / dp)`` decode sequences, not per stage.
    """

    def __init__(self, engine: Any, **kw: Any):
        self.layout = engine.layout
        self.engine = engine
        self.hw = engine.hw
        self._kw = kw
        self.stages = self._stage_costs(experts_only=False)
        self._experts: list | None = None  # the stages' expert ops alone, built when a step first needs them

    def _stage_costs(self, experts_only: bool) -> list:
        """One :class:`~graphroof.llm.stepcost.StepCost` per stage (of its expert ops alone with *experts_only*)."""
        from .stepcost import StepCost

        eng, out = self.engine, []
        for k in range(self.layout.pp):
            pipe = eng.pipeline.stage_view(k)
            view = SimpleNamespace(source=eng.source, pipeline=pipe.ep_view() if experts_only else pipe, hw=eng.hw,
                                   spec=None)
            out.append(StepCost(view, **self._kw))
        return out

    def experts(self) -> list:
        """Each stage's step cost of its expert ops alone (:meth:`~graphroof.llm.parallel.ParallelPipeline.ep_view`)."""
        if self._experts is None:
            self._experts = self._stage_costs(experts_only=True)
        return self._experts

    def __call__(self, prefill_tokens: Any = 0, prefill_offset: Any = 0, decode_seqs: Any = 0,
                 decode_context: Any = 0, *, prefill_attention: Any = None, prefill_chunks: Any = None,
                 prefill_largest: Any = None, ideal: bool = False) -> np.ndarray:
        lay = self.layout
        share = lay.pp * lay.dp
        n, o, m, s, attn, shape = step_arrays(prefill_tokens, prefill_offset, decode_seqs, decode_context,
                                              prefill_attention)
        n_mb, m_mb = _ceil_div(n, share), _ceil_div(m, share)
        s_mb = np.where(m > 0, np.rint(s * m_mb / np.maximum(m, 1)), 0).astype(np.int64)
        if (prefill_largest is None) != (prefill_chunks is None):
            raise InputError("prefill_chunks and prefill_largest go together: give both (the step's chunk count and "
                             "its largest chunk) or neither (an even spread)")
        if prefill_largest is None:
            per = np.stack([st._step(n_mb, o, m_mb, s_mb, attn / share, ideal) for st in self.stages])
            live = np.where(n > 0, lay.pp, np.minimum(lay.pp, _ceil_div(m, lay.dp)))
            t = np.maximum(np.sum(per, axis=0), live * np.max(per, axis=0))
        else:
            c, big = (np.broadcast_to(np.asarray(v, dtype=np.int64), shape).reshape(-1)
                      for v in (prefill_chunks, prefill_largest))
            t, n_mb = self._uneven(n, o, m, m_mb, s_mb, attn, c, big, ideal)
        host = 0.0 if ideal else float(getattr(self.stages[0].pipe.runtime, "host_per_sequence_s", 0.0) or 0.0)
        if host:  # the rank's one scheduler does its sequences' host work once per round, overlapped (StepCost)
            t = np.maximum(t, host * _ceil_div(m, lay.dp))
        real, beta = send_time_s(self.engine, (n_mb + m_mb).astype(float))
        work = (n > 0) | (m > 0)
        out = np.where(work, t + (beta if ideal else real), 0.0)
        return out.reshape(shape)

    def _uneven(self, n: np.ndarray, o: np.ndarray, m: np.ndarray, m_mb: np.ndarray, s_mb: np.ndarray,
                attn: np.ndarray, c: np.ndarray, big: np.ndarray, ideal: bool) -> tuple[np.ndarray, np.ndarray]:
        """The round with whole chunks (class doc; *c*, *big*: the chunk counts and largest chunks, flattened as
        *n*): its time and the heavy micro-batch's prefill tokens."""
        lay = self.layout
        if (np.any((c < 0) | (big < 0) | (big > n)) or np.any((n > 0) & ((c < 1) | (big * c < n)))
                or np.any((n == 0) & ((c > 0) | (big > 0)))):
            raise InputError("prefill_chunks / prefill_largest: a step with prefill tokens has >= 1 chunk, the "
                             "largest at least their mean and at most their sum; one without has none")
        n_e = _ceil_div(n, lay.dp)  # a DP rank's even share
        # per step: the heavy DP rank holds the largest chunk, and the expert layers wait for it (class doc)
        heavy_rank = (big > n_e) if lay.dp > 1 and lay.ep > 1 else np.zeros(n.shape, dtype=bool)
        n_r = np.where(heavy_rank, big, n_e)
        c_r = _ceil_div(c, lay.dp)
        a_r = np.where(heavy_rank, attn / np.maximum(n, 1), attn / lay.dp / np.maximum(n_e, 1))
        n_h = np.minimum(n_r, np.maximum(_ceil_div(n_r, lay.pp), big))
        live = np.where(n > 0, np.minimum(lay.pp, _ceil_div(m, lay.dp) + c_r),
                        np.minimum(lay.pp, _ceil_div(m, lay.dp)))
        n_l = _ceil_div(n_r - n_h, np.maximum(live - 1, 1))  # the rest over the other micro-batches in flight
        heavy = np.stack([st._step(n_h, o, m_mb, s_mb, a_r * n_h, ideal) for st in self.stages])
        light = np.stack([st._step(n_l, o, m_mb, s_mb, a_r * n_l, ideal) for st in self.stages])
        if np.any(heavy_rank):  # expert ops at the group's mean tokens: the heavy rank's x prefill tokens -> x n_e / n_r
            share = np.where(heavy_rank, n_e / np.maximum(n_r, 1), 1.0)
            for x, t in ((n_h, heavy), (n_l, light)):
                xe = np.rint(x * share).astype(np.int64)
                t += np.stack([ex._step(xe, o, m_mb, s_mb, a_r * xe, ideal) - ex._step(x, o, m_mb, s_mb, a_r * x, ideal)
                               for ex in self.experts()])
        turn = np.max(heavy + np.maximum(live - 1, 0) * light, axis=0)
        return np.maximum(np.sum(heavy, axis=0), turn), n_h


def layout_note(lay: Any) -> str:
    """The schedule in words (an estimate's note)."""
    mb = lay.microbatches or lay.pp
    return (f"parallel layout {lay.describe()}: prefill of a batch in min(batch / DP, {mb}) micro-batches through "
            f"{lay.pp} stage{'s' if lay.pp > 1 else ''}, TTFT = sum of the stages + (m - 1) x slowest stage + sends; "
            f"decode keeps up to {lay.pp} micro-batch{'es' if lay.pp > 1 else ''} in flight, TPOT = max(sum of the "
            f"stages, micro-batches x slowest stage) + sends; "
            f"figures per rank, throughput over all {lay.world} GPUs"
            + ("" if lay.ep == 1 else f"; experts over {lay.ep} ranks, the busiest rank's rows "
               + ("x the expected multinomial maximum" if lay.ep_imbalance is None else f"x {lay.ep_imbalance:g}")
               + " of the mean"))


def check_no_spec(pricing: Any) -> None:
    if pricing.spec_tokens:
        raise InputError("--spec-tokens with --pp / --dp / --ep / --system: speculative decoding is not modelled "
                         "on a parallel layout yet; drop one of them")

