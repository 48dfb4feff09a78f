"""Next steps of an LLM estimate, computed once by :func:`graphroof.llm.engine.estimate` and stored on it
(``LLMEstimate.next_steps``, the JSON ``next_steps``).  Every item carries the figure before and after the change;
the after figure comes from evaluating the estimate again under the change, never from a fixed factor:

* ``quantize``: decode is memory-bound and the weights are wider than 4 bits -> the estimate again with
  ``weights="int4"``: TPOT before / after.
* ``batch``: the batch is below the critical batch of the layer with most of the decode time (where decode
  turns compute-bound) -> the estimate again at that batch (capped by the largest batch that fits):
  throughput and TPOT before / after.
* ``chunk``: the configuration does not fit, but its sequences' KV does beside one prompt's prefill activations
  (only the one-pass prefill of the whole batch overflows) -> the estimate again with the prefill in chunks of one
  prompt (``--max-batched-tokens PROMPT``): memory, TTFT and TPOT before / after; no more devices.
* ``tp``: the configuration does not fit the device -> the smallest tensor-parallel degree that fits (from the
  memory model) and the estimate again at it when the profile has an interconnect; else (``fit``) int4 weights.
* ``fuse``: the prefill's non-GEMM ops under the ``compiled`` preset (:func:`graphroof.advice.fuse_item`).

The figures under a change come from :func:`graphroof.llm.whatif.what_if` (the estimate's traced and counted
graphs reused), or, for what it does not price, from :func:`full_rerun`: one configuration re-priced on the
pipeline's traced graphs with the pipeline's own options, the change applied.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

from ..advice import MIN_GAIN, advice_item, fuse_item
from ..dtypes import dtype_bits
from ..units import fmt_bytes, fmt_rate, fmt_time

__all__ = ["llm_advice", "full_rerun", "Rerun"]


@dataclass(frozen=True)
class Rerun:
    """The figures of one configuration re-priced under a change: what the items read."""

    ttft_s: float
    tpot_s: float | None
    output_tokens_per_s: float
    memory: Any  # a graphroof.llm.memory.MemoryFit (min_tp not searched)


def full_rerun(est: Any, pipe: Any, cfg: Any, *, batch: int | None = None, weights: str | None = None,
               tp: int | None = None, serving: Any = None) -> Rerun:
    """Configuration *cfg* of *est* priced again with the *batch*, weights dtype, TP degree or serving-memory
    settings (*serving*, a :class:`~graphroof.llm.memory.ServingMemory`) changed: a pipeline with *pipe*'s options
    (hardware, plan, count settings, rules, runtime) on *pipe*'s traced graphs (re-counted, not re-traced), priced
    at that one point (:class:`~graphroof.llm.price.PricedModel`) with the configuration's serving-memory settings
    unless *serving* is given."""
    from .memfit import memory_of
    from .phases import Pipeline
    from .price import PricedModel
    from .quant import Quant
    from .whatif import CachedSource

    q = pipe.quant
    quant = Quant.parse(weights if weights is not None else q.weights, q.activations, q.kv)
    p = Pipeline(CachedSource(pipe), pipe.hw, quant=quant, tp=pipe.tp if tp is None else tp, plan=pipe.plan,
                 settings=pipe.settings, rules=pipe.rules, strict=pipe.strict, depth=pipe.depth,
                 runtime=pipe.runtime)
    b, P, G = cfg.batch if batch is None else batch, est.prompt, est.gen
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        priced = PricedModel(p, [b], [P], [G])
        sm = cfg.memory.serving if serving is None else serving
        figs = priced.price(p.hw, b, P, G, ideal=est.ideal, serving=sm)
        memory = memory_of(priced, figs.memory, b, P, 0, sm, min_tp=False)
    tpot = float(figs.tpot_s[0])
    return Rerun(float(figs.ttft_s[0]), None if math.isnan(tpot) else tpot, float(figs.tokens_per_s[0]), memory)


def _rerun(est: Any, pipe: Any, cfg: Any, **change: Any) -> Any:
    """The figures the items read (TTFT, TPOT, throughput, memory fit) of *cfg* under *change* (``weights``,
    ``tp`` or ``batch``)."""
    from .whatif import what_if

    def full() -> Any:
        return full_rerun(est, pipe, cfg, **change)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = what_if(est, change.get("batch", cfg.batch), weights=change.get("weights"), tp=change.get("tp"),
                       fallback=full, pipeline=pipe)
    return fast if fast is not None else full()


def _dominant_critical(cfg: Any) -> tuple[str, int] | None:
    """(layer, critical batch) of the layer with the largest decode time that has a finite critical batch."""
    crit = {r["name"]: r for r in cfg.critical}
    rows = sorted(cfg.layer_rows("decode"), key=lambda r: -r["time_s"])
    for r in rows:
        k = crit.get(r["name"])
        if k and k["critical_batch"]:
            return r["name"], int(k["critical_batch"])
    return None


def _usable(est: Any, mem: Any) -> str:
    """``76.5 GB usable on h100-sxm (0.9 of its 85.0 GB)``: what the fit compares with."""
    usable = mem.usable_bytes if mem.usable_bytes is not None else mem.capacity_bytes
    if mem.capacity_bytes and usable != mem.capacity_bytes:
        return (f"the {fmt_bytes(usable)} usable on {est.hw.name} ({mem.serving.gpu_mem_util:g} of its "
                f"{fmt_bytes(mem.capacity_bytes)})")
    return f"{est.hw.name}'s {fmt_bytes(usable)}"


def _chunk_item(est: Any, pipe: Any, cfg: Any) -> dict[str, Any] | None:
    """The batch's KV fits beside one prompt's prefill (``max_batch >= batch``) but not its one-pass prefill: the
    estimate again with the prefill in chunks of one prompt, when that fits."""
    from dataclasses import replace

    mem, P = cfg.memory, est.prompt
    sm = mem.serving
    if not (mem.max_batch and mem.max_batch >= cfg.batch and cfg.batch > 1) or \
            (sm.max_batched_tokens is not None and sm.max_batched_tokens <= P):
        return None
    after = full_rerun(est, pipe, cfg, serving=replace(sm, max_batched_tokens=P))
    if not after.memory.fits:
        return None
    return advice_item(
        "chunk", f"batch {cfg.batch} needs {fmt_bytes(mem.total_bytes)} per device, more than {_usable(est, mem)}, "
        f"but only because its {cfg.batch} prompts are prefilled in one pass: --max-batched-tokens {P} (one "
        f"prompt a chunk) fits ({fmt_bytes(after.memory.total_bytes)} per device) at TTFT "
        f"{fmt_time(after.ttft_s)}, TPOT {fmt_time(after.tpot_s or 0)}, on the same devices",
        f"--max-batched-tokens {P}", "total_bytes_per_device", mem.total_bytes, after.memory.total_bytes,
        max_batched_tokens=P, tpot_s=after.tpot_s, ttft_s=after.ttft_s)


def _memory_item(est: Any, pipe: Any, cfg: Any) -> dict[str, Any]:
    mem = cfg.memory
    need = mem.total_bytes
    chunk = _chunk_item(est, pipe, cfg)
    if chunk is not None:
        return chunk
    if mem.min_tp and mem.min_tp > est.tp and est.hw.interconnect_bw_bytes_per_s:
        after = _rerun(est, pipe, cfg, tp=mem.min_tp)
        return advice_item(
            "tp", f"batch {cfg.batch} needs {fmt_bytes(need)} per device, more than {_usable(est, mem)}: "
            f"--tp {mem.min_tp} fits ({fmt_bytes(after.memory.total_bytes)} per "
            f"device) at TPOT {fmt_time(after.tpot_s or 0)}, TTFT {fmt_time(after.ttft_s)}",
            f"--tp {mem.min_tp}", "total_bytes_per_device", need, after.memory.total_bytes,
            tp=mem.min_tp, tpot_s=after.tpot_s, ttft_s=after.ttft_s)
    after = _rerun(est, pipe, cfg, weights="int4")
    fits = after.memory.fits
    return advice_item(
        "fit", f"batch {cfg.batch} needs {fmt_bytes(need)} per device, more than "
        f"{_usable(est, mem)}; with int4 weights it needs "
        f"{fmt_bytes(after.memory.total_bytes)} ({'fits' if fits else 'still does not fit'})"
        + ("" if est.hw.interconnect_bw_bytes_per_s else
           f"; {est.hw.name} has no interconnect in its profile for --tp"),
        "--weights int4", "total_bytes_per_device", need, after.memory.total_bytes)


def _quantize_item(est: Any, pipe: Any, cfg: Any) -> dict[str, Any] | None:
    dec = cfg.decode.analysis
    wbits = dtype_bits(est.quant.weights or est.spec.dtype or "bf16")
    if not (cfg.tpot_s and dec.totals.bound == "memory" and wbits > 4):
        return None
    after = _rerun(est, pipe, cfg, weights="int4")
    if not after.tpot_s or cfg.tpot_s / after.tpot_s < MIN_GAIN:
        return None
    mem_share = sum(r["time_s"] for r in dec.ops if r["bound"] == "memory") / (dec.totals.t_lower_s or 1)
    return advice_item(
        "quantize", f"decode is memory-bound ({100 * mem_share:.0f}% of its roofline time in "
        f"memory-bound ops, weights {wbits}-bit): int4 weights would take TPOT from "
        f"{fmt_time(cfg.tpot_s)} to {fmt_time(after.tpot_s)} (×{cfg.tpot_s / after.tpot_s:.2f} faster decode)",
        "--weights int4", "tpot_s", cfg.tpot_s, after.tpot_s)


def _batch_item(est: Any, pipe: Any, cfg: Any) -> dict[str, Any] | None:
    dom = _dominant_critical(cfg) if est.kv_cache else None
    if not dom or cfg.batch >= dom[1]:
        return None
    layer, crit = dom
    mb = cfg.memory.max_batch
    target = min(crit, mb) if mb else crit
    if target <= cfg.batch:
        return None
    after = _rerun(est, pipe, cfg, batch=target)
    b_tok, a_tok = cfg.output_tokens_per_s, after.output_tokens_per_s
    if a_tok / b_tok < MIN_GAIN:
        return None
    capped = f" (the largest batch that fits; the critical batch is {crit})" if target < crit else ""
    return advice_item(
        "batch", f"batch {cfg.batch} is below the critical batch {crit} of {layer} (the "
        f"batch from which its decode is compute-bound): batch {target}{capped} would raise "
        f"throughput from {fmt_rate(b_tok, 'tok/s')} to {fmt_rate(a_tok, 'tok/s')} "
        f"(×{a_tok / b_tok:.1f}) at TPOT {fmt_time(after.tpot_s or 0)} (now {fmt_time(cfg.tpot_s or 0)})",
        f"--batch {target}", "output_tokens_per_s", b_tok, a_tok, batch=target, critical_batch=crit, layer=layer)


def llm_advice(est: Any, pipe: Any, cfg: Any = None) -> list[dict[str, Any]]:
    """Next steps for one configuration of *est* (default: the first batch of the sweep); *pipe*: the
    :class:`~graphroof.llm.phases.Pipeline` that produced the estimate (its traces are reused)."""
    cfg = cfg or (est.configs[0] if est.configs else None)
    if pipe is None or cfg is None:
        return []
    out: list[dict[str, Any]] = []
    if cfg.memory.fits is False:
        out.append(_memory_item(est, pipe, cfg))
    for item in (_quantize_item(est, pipe, cfg), _batch_item(est, pipe, cfg),
                 fuse_item(cfg.prefill.analysis, "prefill")):
        if item:
            out.append(item)
    return out
