"""Serving simulation: an LLM engine replica under a stream of requests (:func:`serve`).

* :mod:`~graphroof.serving.inputs`: the inputs checked (one-line errors, before any model is built);
* :mod:`~graphroof.serving.workload`: the requests of a rate (arrival processes, length distributions, traces);
* :mod:`~graphroof.serving.sim`: continuous batching (vLLM v1's scheduler: chunked prefill, paged KV, preemption),
  each step priced by :class:`graphroof.llm.stepcost.StepCost`;
* :mod:`~graphroof.serving.static`: static batches priced by the engine's estimate path;
* :mod:`~graphroof.serving.metrics`, :mod:`~graphroof.serving.search`: a rate's figures, the max rate under SLOs;
* :mod:`~graphroof.serving.disagg`, :mod:`~graphroof.serving.disagg_api`: disaggregated prefill / decode pools with
  the KV transfer between them (``serve(..., disagg="XpYd" | "auto")``), and aggregated replicas sharing the traffic;
* :mod:`~graphroof.serving.result`: :class:`ServeResult`, plain data.
"""

from __future__ import annotations

from .._lazy import lazy_getattr

__all__ = ["serve", "ServeResult", "RatePoint", "ServeComparison"]

#: public name -> the submodule defining it, imported on first use (the LLM engine loads with ``serve``)
_LAZY = {"serve": "compare", "ServeResult": "result", "RatePoint": "result", "ServeComparison": "compare"}

__getattr__ = lazy_getattr(__name__, _LAZY)
