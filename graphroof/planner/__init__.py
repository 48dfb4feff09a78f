"""Configuration search (:func:`plan`): for an LLM, devices, request rates and SLOs, every deployment configuration
(device x TP [x PP x EP x DP] x dtypes x batch limits) checked for memory, pruned on analytic bounds, simulated under
traffic (the serving simulator, fanned out over processes or Ray), and answered as a Pareto frontier of tokens/s per
GPU against tokens/s per user, the cheapest configuration per rate, and each configuration's engine flags.

* :mod:`~graphroof.planner.space`: the configurations and the inputs checked; :mod:`~graphroof.planner.flags`: the
  vLLM / SGLang / TensorRT-LLM command lines;
* :mod:`~graphroof.planner.bounds`: memory per GPU and the analytic bounds; :mod:`~graphroof.planner.search`: the
  capacity bisection and the replicas per rate; :mod:`~graphroof.planner.worker`: one group on reused engines;
* :mod:`~graphroof.planner.fanout`: serial, processes or Ray; :mod:`~graphroof.planner.result`: :class:`PlanResult`.
"""

from __future__ import annotations

from .._lazy import lazy_getattr

__all__ = ["plan", "PlanResult"]

_LAZY = {"plan": "api", "PlanResult": "result"}

__getattr__ = lazy_getattr(__name__, _LAZY)
