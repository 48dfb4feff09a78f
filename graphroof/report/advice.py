"""Next steps: what to change, derived from the result and quantified by re-evaluating under the change.

:func:`advise` returns plain dicts (the JSON ``next_steps``); every item carries the figure before and after
the change, and the after figure comes from evaluating the estimate again with the change applied, never from
a fixed factor: the figures an item reads (TTFT, TPOT, throughput, memory fit) come from
:func:`graphroof.llm.whatif.what_if` (the estimate's traced and counted graphs reused: kernel grids, nothing
traced again; the same numbers as a full re-run, to float rounding), or, for sources it does not cover, from a
full re-run of the estimate on the traced graphs (an LLM source is wrapped so the re-run only re-counts):

* ``quantize``: decode is memory-bound and the weights are wider than 4 bits -> the estimate again with
  ``weights="int4"``: TPOT before / after.
* ``batch``: the batch is below the critical batch of the layer with most of the decode time (where decode
  turns compute-bound) -> the estimate again at that batch (capped by the largest batch that fits):
  throughput and TPOT before / after.
* ``tp``: the configuration does not fit the device -> the smallest tensor-parallel degree that fits (from the
  memory model) and the estimate again at it when the profile has an interconnect; else int4 weights.
* ``fuse``: elementwise / norm / reduction ops take a visible share of the time -> the same counted graph
  grouped into kernels by the ``compiled`` runtime preset (:mod:`graphroof.fuse`) and timed again.
* ``fit`` (analyze): the weights alone exceed the device memory.

Renderers: :func:`advice_lines` (terminal / markdown bullets).
"""

from __future__ import annotations

import warnings
from typing import Any

from ..units import fmt_bytes, fmt_rate, fmt_time

__all__ = ["advise", "llm_advice", "analysis_advice", "phases_advice", "advice_lines", "fusion_gain"]

#: Below this share of the time an item is not worth a line.
MIN_SHARE = 0.05
#: A re-evaluated change that gains less than this factor is not suggested.
MIN_GAIN = 1.1


def advise(result: Any) -> list[dict[str, Any]]:
    """Next steps for an :class:`~graphroof.analysis.Analysis` or an :class:`~graphroof.llm.result.LLMEstimate`."""
    if hasattr(result, "configs") and hasattr(result, "quant"):
        return llm_advice(result)
    return analysis_advice(result)


#: Metrics where more is better (the gain is after / before); for the others (times, bytes) before / after.
_HIGHER_IS_BETTER = {"output_tokens_per_s"}


def _item(kind: str, text: str, change: str, metric: str, before: float | None, after: float | None,
          **extra: Any) -> dict[str, Any]:
    up = metric in _HIGHER_IS_BETTER
    gain = (after / before if up else before / after) if before and after else None
    return {"kind": kind, "text": text, "change": change, "metric": metric, "before": before, "after": after,
            "gain": gain, **extra}


# -- fusion (any counted graph) -------------------------------------------------------------------------------

_FUSIBLE = ("elementwise", "norm", "reduction", "softmax", "vector", "activation")


def fusion_gain(a, runtime: str = "compiled") -> dict[str, Any] | None:
    """Roofline and realistic time of analysis *a*'s graph as kernels of *runtime* vs one kernel per op, plus
    the share of the eager time in non-GEMM ops; None when the fuse stage cannot run on this graph."""
    try:
        from ..fuse import fuse
        from ..fuse.classify import op_class
        from ..graph import COST
        from ..roofline import evaluate
    except ImportError:
        return None
    g = a.graph
    try:
        kg = fuse(g, runtime)
    except Exception:  # noqa: BLE001 - a graph the fuse stage does not understand: no advice, not a failure
        return None
    t_s = t_real = 0.0
    for k in kg.kernels:
        b = evaluate(k.cost, a.hw, k.dtype)
        t_s += b.t_s
        t_real += b.t_realistic_s
    small = 0.0
    for r in a.ops:
        node = g.node(r["name"])
        cls = op_class(node, g.get(r["name"], COST))
        if cls not in ("gemm", "view", "attention", "conv"):
            small += r["time_realistic_s"]
    total = a.totals.t_realistic_s
    return {"runtime": runtime, "t_s": t_s, "t_realistic_s": t_real, "eager_t_s": a.totals.t_lower_s,
            "eager_t_realistic_s": total, "n_kernels": len(kg.kernels), "n_ops": len(a.ops),
            "small_ops_share": small / total if total else 0.0}


def _fuse_item(a, what: str) -> dict[str, Any] | None:
    if getattr(a, "runtime", "eager") != "eager":
        return None  # already priced as fused kernels (the header shows the eager figure beside it)
    f = fusion_gain(a)
    if not f or f["small_ops_share"] < MIN_SHARE or not f["t_realistic_s"]:
        return None
    if f["eager_t_realistic_s"] / f["t_realistic_s"] < MIN_GAIN:
        return None
    return _item("fuse", f"elementwise, norm and other non-GEMM ops are {100 * f['small_ops_share']:.0f}% of the "
                 f"{what} time (realistic, one kernel per op): with the compiled runtime preset ({f['n_ops']} ops "
                 f"in {f['n_kernels']} kernels) it would take {fmt_time(f['t_realistic_s'])} instead of "
                 f"{fmt_time(f['eager_t_realistic_s'])} (×{f['eager_t_realistic_s'] / f['t_realistic_s']:.2f})",
                 "runtime preset compiled (torch.compile-style fusion)", "time_realistic_s",
                 f["eager_t_realistic_s"], f["t_realistic_s"], phase=what)


# -- analyze -------------------------------------------------------------------------------------------------

def analysis_advice(a) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cap = a.hw.mem_capacity_bytes
    w = a.totals.cost.weight_bytes
    if cap and w > cap:
        n = 1
        while n * cap < w and n < 1024:
            n *= 2
        out.append(_item("fit", f"the weights ({fmt_bytes(w)}) do not fit in {a.hw.name}'s {fmt_bytes(cap)} of "
                         f"memory: at least {n} devices (tensor or pipeline parallel) or narrower weights; for an "
                         "LLM, `graphroof llm --tp N` or `--weights int4` estimates both",
                         f"{n} devices", "weight_bytes_per_device", w, w / n, devices=n))
    item = _fuse_item(a, "model")
    if item:
        out.append(item)
    return out


# -- llm -----------------------------------------------------------------------------------------------------

def _cached_source(est):
    """The estimate's source with its traced graphs reused (a re-run re-counts, it does not re-trace)."""
    from ..llm.whatif import CachedSource

    return CachedSource(est.pipeline)


def _rerun(est, cfg, **change):
    """The configuration *cfg* again under *change* (``weights``, ``tp`` or ``batch``): the figures the items
    read (TTFT, TPOT, throughput, memory fit) from :func:`graphroof.llm.whatif.what_if` where it covers the
    source, else a full re-run of the estimate on the traced graphs."""
    from ..llm.whatif import what_if

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = what_if(est, change.get("batch", cfg.batch), weights=change.get("weights"), tp=change.get("tp"),
                       fallback=lambda: _full_rerun(est, cfg, **change))
    return fast if fast is not None else _full_rerun(est, cfg, **change)


def _full_rerun(est, cfg, **change):
    from ..llm.estimate import estimate

    pipe = est.pipeline
    kw: dict[str, Any] = dict(hw=est.hw, prompt=est.prompt, gen=est.gen, batch=cfg.batch, weights=est.quant.weights,
                              activations=est.quant.activations, kv=est.quant.kv, tp=est.tp, ideal=est.ideal,
                              attention=est.settings.attention, causal=est.settings.causal, plan=pipe.plan,
                              rules=pipe.rules, strict=pipe.strict, depth=cfg.table_depth, runtime=pipe.runtime.name,
                              gpu_mem_util=cfg.memory.serving.gpu_mem_util, kv_block=cfg.memory.serving.kv_block,
                              max_batched_tokens=cfg.memory.serving.max_batched_tokens)
    kw.update(change)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimate(_cached_source(est), **kw).configs[0]


def _dominant_critical(cfg) -> tuple[str, int] | None:
    """(layer, critical batch) of the layer with the largest decode time that has a finite critical batch."""
    crit = {r["name"]: r for r in cfg.critical}
    rows = sorted(cfg.layer_rows("decode"), key=lambda r: -r["time_s"])
    for r in rows:
        k = crit.get(r["name"])
        if k and k["critical_batch"]:
            return r["name"], int(k["critical_batch"])
    return None


def llm_advice(est, cfg=None) -> list[dict[str, Any]]:
    """Next steps for one configuration of an LLM estimate (default: the first batch of the sweep)."""
    from ..dtypes import dtype_bits

    cfg = cfg or est.configs[0]
    out: list[dict[str, Any]] = []
    mem = cfg.memory
    if est.pipeline is None:
        return out
    if mem.fits is False:
        need, cap = mem.total_bytes, mem.capacity_bytes
        if mem.min_tp and mem.min_tp > est.tp and est.hw.interconnect_bw_bytes_per_s:
            after = _rerun(est, cfg, tp=mem.min_tp)
            out.append(_item("tp", f"batch {cfg.batch} needs {fmt_bytes(need)} per device, more than {est.hw.name}'s "
                             f"{fmt_bytes(cap)}: --tp {mem.min_tp} fits ({fmt_bytes(after.memory.total_bytes)} per "
                             f"device) at TPOT {fmt_time(after.tpot_s or 0)}, TTFT {fmt_time(after.ttft_s)}",
                             f"--tp {mem.min_tp}", "total_bytes_per_device", need, after.memory.total_bytes,
                             tp=mem.min_tp, tpot_s=after.tpot_s, ttft_s=after.ttft_s))
        else:
            after = _rerun(est, cfg, weights="int4")
            fits = after.memory.fits
            out.append(_item("fit", f"batch {cfg.batch} needs {fmt_bytes(need)} per device, more than "
                             f"{est.hw.name}'s {fmt_bytes(cap)}; with int4 weights it needs "
                             f"{fmt_bytes(after.memory.total_bytes)} ({'fits' if fits else 'still does not fit'})"
                             + ("" if est.hw.interconnect_bw_bytes_per_s else
                                f"; {est.hw.name} has no interconnect in its profile for --tp"),
                             "--weights int4", "total_bytes_per_device", need, after.memory.total_bytes))
    dec = cfg.decode.analysis
    wbits = dtype_bits(est.quant.weights or est.spec.dtype or "bf16")
    if cfg.tpot_s and dec.totals.bound == "memory" and wbits > 4:
        after = _rerun(est, cfg, weights="int4")
        if after.tpot_s and cfg.tpot_s / after.tpot_s >= MIN_GAIN:
            mem_share = sum(r["time_s"] for r in dec.ops if r["bound"] == "memory") / (dec.totals.t_lower_s or 1)
            out.append(_item("quantize", f"decode is memory-bound ({100 * mem_share:.0f}% of its roofline time in "
                             f"memory-bound ops, weights {wbits}-bit): int4 weights would take TPOT from "
                             f"{fmt_time(cfg.tpot_s)} to {fmt_time(after.tpot_s)} "
                             f"(×{cfg.tpot_s / after.tpot_s:.2f} faster decode)",
                             "--weights int4", "tpot_s", cfg.tpot_s, after.tpot_s))
    dom = _dominant_critical(cfg) if est.kv_cache else None
    if dom and cfg.batch < dom[1]:
        layer, crit = dom
        target = min(crit, mem.max_batch) if mem.max_batch else crit
        if target > cfg.batch:
            after = _rerun(est, cfg, batch=target)
            b_tok, a_tok = cfg.output_tokens_per_s, after.output_tokens_per_s
            if a_tok / b_tok >= MIN_GAIN:
                capped = f" (the largest batch that fits; the critical batch is {crit})" if target < crit else ""
                out.append(_item("batch", f"batch {cfg.batch} is below the critical batch {crit} of {layer} (the "
                                 f"batch from which its decode is compute-bound): batch {target}{capped} would raise "
                                 f"throughput from {fmt_rate(b_tok, 'tok/s')} to {fmt_rate(a_tok, 'tok/s')} "
                                 f"(×{a_tok / b_tok:.1f}) at TPOT {fmt_time(after.tpot_s or 0)} "
                                 f"(now {fmt_time(cfg.tpot_s or 0)})",
                                 f"--batch {target}", "output_tokens_per_s", b_tok, a_tok, batch=target,
                                 critical_batch=crit, layer=layer))
    item = _fuse_item(cfg.prefill.analysis, "prefill")
    if item:
        out.append(item)
    return out


# -- rendering ------------------------------------------------------------------------------------------------

def phases_advice(ph) -> list[dict[str, Any]]:
    """Next steps of each phase (``.name``, ``.analysis``) of a report; the phase name prefixes the text when
    there are several."""
    out = []
    for p in ph:
        for it in analysis_advice(p.analysis):
            if len(ph) > 1:
                it = {**it, "phase": p.name, "text": f"{p.name}: {it['text']}"}
            out.append(it)
    return out


def advice_lines(items: list[dict[str, Any]]) -> list[str]:
    """One line per item (the renderers add bullets / headings)."""
    return [it["text"] for it in items]
