"""Next steps: what to change, derived from a result and quantified by evaluating the result again under the
change (never by a fixed factor).  The engines compute them once and store them on their results
(``Analysis.next_steps``, ``LLMEstimate.next_steps``, plain dicts: the JSON ``next_steps``); the reports only
render them.

Every item carries ``kind``, ``text``, ``change``, ``metric``, ``before``, ``after`` and ``gain``
(:func:`advice_item`).  For an :class:`~graphroof.analysis.Analysis` (:func:`analysis_advice`):

* ``fit``: the weights alone exceed the device memory -> the number of devices (a power of two) they need.
* ``fuse``: elementwise / norm / reduction ops take a visible share of the eager time -> the same counted graph
  grouped into kernels by the ``compiled`` runtime preset (:mod:`graphroof.fuse`) and timed again
  (:func:`fusion_gain`).

The LLM items (quantize, batch, tp) are :func:`graphroof.llm.advice.llm_advice`.
"""

from __future__ import annotations

from typing import Any

from ..fuse import fuse
from ..fuse.classify import op_class
from ..graph import COST
from ..roofline import evaluate
from ..units import fmt_bytes, fmt_time

__all__ = ["MIN_SHARE", "MIN_GAIN", "advice_item", "fusion_gain", "fuse_item", "analysis_advice"]

#: Below this share of the time an item is not worth a line.
MIN_SHARE = 0.05
#: A re-evaluated change that gains less than this factor is not suggested.
MIN_GAIN = 1.1

#: Metrics where more is better (the gain is after / before); for the others (times, bytes) before / after.
_HIGHER_IS_BETTER = {"output_tokens_per_s"}


def advice_item(kind: str, text: str, change: str, metric: str, before: float | None, after: float | None,
                **extra: Any) -> dict[str, Any]:
    """One next step as a plain dict; ``gain`` = after / before for throughputs, before / after otherwise."""
    up = metric in _HIGHER_IS_BETTER
    gain = (after / before if up else before / after) if before and after else None
    return {"kind": kind, "text": text, "change": change, "metric": metric, "before": before, "after": after,
            "gain": gain, **extra}


_NOT_SMALL = ("gemm", "view", "attention", "conv")


def fusion_gain(a: Any, runtime: str = "compiled") -> dict[str, Any] | None:
    """Roofline and realistic time of analysis *a*'s graph as kernels of *runtime* vs one kernel per op, plus
    the share of the eager time in non-GEMM ops; None when the fuse stage cannot run on this graph."""
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
        if op_class(g.node(r["name"]), g.get(r["name"], COST)) not in _NOT_SMALL:
            small += r["time_realistic_s"]
    total = a.totals.t_realistic_s
    return {"runtime": runtime, "t_s": t_s, "t_realistic_s": t_real, "eager_t_s": a.totals.t_lower_s,
            "eager_t_realistic_s": total, "n_kernels": len(kg.kernels), "n_ops": len(a.ops),
            "small_ops_share": small / total if total else 0.0}


def fuse_item(a: Any, what: str) -> dict[str, Any] | None:
    """The ``fuse`` item of analysis *a* (*what*: ``model``, ``prefill``), or None: already fused, too small a
    share in non-GEMM ops, or too small a gain."""
    if getattr(a, "runtime", "eager") != "eager":
        return None  # already priced as fused kernels (the header shows the eager figure beside it)
    f = fusion_gain(a)
    if not f or f["small_ops_share"] < MIN_SHARE or not f["t_realistic_s"]:
        return None
    if f["eager_t_realistic_s"] / f["t_realistic_s"] < MIN_GAIN:
        return None
    return advice_item(
        "fuse", f"elementwise, norm and other non-GEMM ops are {100 * f['small_ops_share']:.0f}% of the "
        f"{what} time (realistic, one kernel per op): with the compiled runtime preset ({f['n_ops']} ops "
        f"in {f['n_kernels']} kernels) it would take {fmt_time(f['t_realistic_s'])} instead of "
        f"{fmt_time(f['eager_t_realistic_s'])} (×{f['eager_t_realistic_s'] / f['t_realistic_s']:.2f})",
        "runtime preset compiled (torch.compile-style fusion)", "time_realistic_s",
        f["eager_t_realistic_s"], f["t_realistic_s"], phase=what)


def analysis_advice(a: Any) -> list[dict[str, Any]]:
    """The next steps of an :class:`~graphroof.analysis.Analysis` (``fit``, ``fuse``)."""
    out: list[dict[str, Any]] = []
    cap = a.hw.mem_capacity_bytes
    w = a.totals.cost.weight_bytes
    if cap and w > cap:
        n = 1
        while n * cap < w and n < 1024:
            n *= 2
        out.append(advice_item(
            "fit", f"the weights ({fmt_bytes(w)}) do not fit in {a.hw.name}'s {fmt_bytes(cap)} of "
            f"memory: at least {n} devices (tensor or pipeline parallel) or narrower weights; for an "
            "LLM, `graphroof llm --tp N` or `--weights int4` estimates both",
            f"{n} devices", "weight_bytes_per_device", w, w / n, devices=n))
    item = fuse_item(a, "model")
    if item:
        out.append(item)
    return out
