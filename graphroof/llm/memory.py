"""Memory fit per device: resident weights + KV cache at the full context + the activation peak.

* Weights: every parameter once, in the weights dtype of the what-if, divided by the TP degree when its module
  is split (:class:`~graphroof.llm.tp.TPPlan`; norms and other replicated parameters stay whole).
* KV cache: what a server must reserve for ``batch`` sequences of ``prompt + gen`` tokens; the bytes per token
  are the KV-role bytes one decode step writes per sequence (so they follow the KV dtype and the TP split).
* Activation peak: a liveness sweep over the prefill graph in op order.  Each op's activation outputs are live
  from the op until their last consumer; views (ops with a free rule) alias their input and extend its life;
  sharded outputs count ``1/N``.  Framework workspace and allocator fragmentation are not modelled.

``fits`` compares the sum with the profile's ``memory.capacity_bytes``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ..counters.registry import REGISTRY
from ..dtypes import is_float
from ..graph import OpGraph, Role, TensorSpec
from .quant import Quant
from .source import Param
from .tp import DEFAULT_PLAN, TPPlan

__all__ = ["MemoryFit", "resident_weight_bytes", "params_from_graph", "activation_peak_bytes", "max_batch"]


def resident_weight_bytes(params: Iterable[Param], quant: Quant, tp: int = 1, plan: TPPlan = DEFAULT_PLAN) -> float:
    """Per-device bytes of *params* after the weights what-if and the TP split."""
    total = 0.0
    for scope, t in params:
        if quant.weights and is_float(t.dtype):
            t = t.with_dtype(quant.weights)
        kind, _ = plan.kind(scope)
        split = tp > 1 and kind is not None and not (kind == "row" and t.rank == 1)
        total += t.nbytes / tp if split else t.nbytes
    return total


def params_from_graph(graph: OpGraph) -> list[Param]:
    """Weight inputs of the graph's non-view ops, once per (scope, shape, dtype): for sources that cannot
    list their parameters (op tables, hand-built graphs)."""
    seen: dict[tuple, Param] = {}
    for op in graph.ops():
        if REGISTRY.is_free(op.op):
            continue
        for t in op.inputs:
            if t is not None and t.role is Role.WEIGHT:
                seen.setdefault((op.scope, t.shape, t.dtype), (op.scope, t))
    return list(seen.values())


def _out_bytes(op, t: TensorSpec) -> float:
    info = op.attrs.get("tp_shard")
    b = t.nbytes
    if info and not info["replicated_outputs"]:
        b /= info["world_size"]
    return b


def activation_peak_bytes(graph: OpGraph) -> float:
    """Largest sum of live activation tensors over the op order (see module docstring)."""
    order = list(graph.nx.nodes)
    idx = {n: i for i, n in enumerate(order)}
    root: dict[str, str] = {}
    size: dict[str, float] = {}
    for n in order:
        op = graph.node(n)
        preds = list(graph.nx.predecessors(n))
        if REGISTRY.is_free(op.op) and preds:
            root[n] = root[preds[0]]
            continue
        root[n] = n
        size[n] = sum(_out_bytes(op, t) for t in op.outputs if t.role is Role.ACTIVATION and t.is_bound)
    last = {r: idx[r] for r in size}
    for u, v in graph.nx.edges():
        r = root[u]
        last[r] = max(last[r], idx[v])
    delta = [0.0] * (len(order) + 1)
    for r, s in size.items():
        delta[idx[r]] += s
        delta[last[r] + 1] -= s
    peak = live = 0.0
    for d in delta:
        live += d
        peak = max(peak, live)
    return peak


def max_batch(capacity: float, fixed: float, per_seq: float) -> int:
    """Largest batch with ``fixed + batch * per_seq <= capacity`` (0 when even the weights do not fit)."""
    if fixed > capacity:
        return 0
    if per_seq <= 0:
        return 10**9
    return int(math.floor((capacity - fixed) / per_seq + 1e-9))


@dataclass(frozen=True)
class MemoryFit:
    """Per-device memory of one configuration."""

    weight_bytes: float
    kv_cache_bytes: float
    activation_peak_bytes: float
    capacity_bytes: float | None
    max_batch: int | None          # at this context and TP (None: capacity unknown)
    min_tp: int | None             # smallest TP degree that fits (None: unknown or none up to 64)

    @property
    def total_bytes(self) -> float:
        return self.weight_bytes + self.kv_cache_bytes + self.activation_peak_bytes

    @property
    def fits(self) -> bool | None:
        return None if self.capacity_bytes is None else self.total_bytes <= self.capacity_bytes

    def as_dict(self) -> dict:
        return {"weight_bytes": self.weight_bytes, "kv_cache_bytes": self.kv_cache_bytes,
                "activation_peak_bytes": self.activation_peak_bytes, "total_bytes": self.total_bytes,
                "capacity_bytes": self.capacity_bytes, "fits": self.fits, "max_batch_that_fits": self.max_batch,
                "min_tp_that_fits": self.min_tp}
