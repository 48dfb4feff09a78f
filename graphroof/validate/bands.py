"""Error bands per regime (``graphroof validate --bands PATH``): what a later figure's "error band" is looked up in.

Key: ``FIGURE|DEVICE|RUNTIME`` where FIGURE is the figure kind (:data:`FIGURE_KINDS`: ``ttft``, ``tpot``,
``throughput``, ``layer-kernel``, ``collective``, ``kernel``, ``vision-latency``, ``encoder-latency``), DEVICE a
profile name (``h100-sxm``) or a vendor (``vendor:NVIDIA``) or ``*``, RUNTIME a runtime preset name or ``*``.
Each band: ``n``, ``median_abs``, ``p90_abs``, ``signed_median`` (fractions; the error convention of
:mod:`graphroof.validate.result`).

Lookup (:func:`lookup_band`), first key present wins::

    FIGURE|<profile>|<runtime>  ->  FIGURE|<profile>|*  ->  FIGURE|vendor:<vendor>|<runtime>
    ->  FIGURE|vendor:<vendor>|*  ->  FIGURE|*|*  ->  the fallback band

Rows priced under a runtime that dispatches from the host ahead of the device (a preset with a host cost per
kernel: ``pytorch-eager``, ``pytorch-eager-amp``, ``fastertransformer``) are pooled only under their own runtime's
keys, never under a ``*`` runtime: their error is mostly the host's dispatch cost, which says nothing of a figure
priced under another runtime on the same device.

A device without rows of a figure (an unmeasured profile, or a figure not measured on it) has no in-sample
evidence: with ``--holdout gpu`` the table also holds ``unseen`` bands, the same vendor / ``*`` keys over the rows'
GPU hold-out errors (each predicted with its own GPU's rows left out of every fit: how the model does on a device it
was not fitted on); the lookup takes them before the in-sample vendor bands.

The fallback (a regime without data) is wider than anything measured: median 2x and p90 3x the p90 over all
scored rows, at least 25% / 50%; it says ``"fallback": true``.
"""

from __future__ import annotations

from typing import Any

from ..hardware.bands import band_keys, lookup_band
from .result import ValidationResult, stats_of

__all__ = ["FIGURE_KINDS", "bands_of", "lookup_band", "band_keys", "host_dispatched"]

#: the Row.figure of each dataset -> the figure kind a band is keyed by
FIGURE_KINDS = {"layer-kernels": "layer-kernel", "allreduce": "collective", "tokens-per-s": "tpot",
                "ttft": "ttft", "throughput": "throughput", "tflops": "kernel", "vision-latency": "vision-latency",
                "encoder-latency": "encoder-latency"}
LOOKUP_ORDER = ("FIGURE|<profile>|<runtime>", "FIGURE|<profile>|*", "FIGURE|vendor:<vendor>|<runtime>",
                "FIGURE|vendor:<vendor>|*", "FIGURE|*|*", "fallback")


#: what the ``unseen`` bands are (written beside them in the JSON)
UNSEEN_NOTE = ("bands for a device without measured rows of the figure: the vendor / '*' levels of the rows' GPU "
               "hold-out errors (each row predicted with its own GPU's rows left out of every fit), looked up before "
               "the in-sample vendor bands when the device's own keys are absent")


def host_dispatched(runtime: str) -> bool:
    """Whether the runtime preset *runtime* (a name or a preset file) adds a host cost per kernel."""
    from ..errors import GraphroofError
    from ..fuse import get_runtime

    if not runtime:
        return False
    try:
        return get_runtime(runtime).host_overhead_per_kernel_s > 0
    except GraphroofError:
        return False


def bands_of(result: ValidationResult) -> dict[str, Any]:
    """The bands JSON of a validation result (every key level that has scored rows)."""
    groups: dict[str, list[float]] = {}
    unseen: dict[str, list[float]] = {}
    host: dict[str, bool] = {}
    gpu_holdout = result.holdout == "gpu"
    for r in result.scored:
        fig = FIGURE_KINDS.get(r.figure, r.figure)
        err = r.error
        if err is None:
            continue
        if r.runtime not in host:
            host[r.runtime] = host_dispatched(r.runtime)
        keys = band_keys(fig, r.gpu, r.vendor, r.runtime)
        if host[r.runtime]:  # only under its own runtime (module docstring)
            keys = [k for k in keys if not k.endswith("|*")]
        for key in keys:  # each row once per key (band_keys already holds the runtime's '*' levels)
            groups.setdefault(key, []).append(err)
        held = r.holdout_error("gpu") if gpu_holdout else None
        if held is not None:  # the row predicted with its GPU's rows out of every fit: the unseen-device bands
            for key in keys:
                if key.split("|")[1] != r.gpu:
                    unseen.setdefault(key, []).append(held)
    out: dict[str, dict[str, Any]] = {}
    for name, table in (("bands", groups), ("unseen", unseen)):
        out[name] = {}
        for key, errs in sorted(table.items()):
            s = stats_of(errs)
            if s is not None:
                out[name][key] = {"n": s.n, "median_abs": s.median_abs, "p90_abs": s.p90_abs,
                                  "signed_median": s.signed_median}
    bands = out["bands"]
    overall = result.overall()
    p90 = overall.p90_abs if overall else 0.25
    fallback = {"n": 0, "median_abs": max(0.25, 2 * p90), "p90_abs": max(0.5, 3 * p90), "signed_median": 0.0,
                "fallback": True}
    return {"schema": "graphroof.validate.bands/1", "convention": "error = predicted / measured - 1 on times "
            "(on throughputs: measured / predicted - 1); a figure f with band b: low = f / (1 + p90_abs), "
            "high = f * (1 + p90_abs) for times", "key": "FIGURE|DEVICE|RUNTIME",
            "figures": sorted(set(FIGURE_KINDS.values())), "lookup_order": list(LOOKUP_ORDER),
            "datasets": result.datasets, "bands": bands,
            **({"unseen": out["unseen"], "unseen_note": UNSEEN_NOTE} if out["unseen"] else {}), "fallback": fallback}
