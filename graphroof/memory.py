"""Memory of one graph on one device, without any LLM knowledge: the parameters it reads, the activation peak of a
liveness sweep in op order, and the per-device fit and energy of a comparison (``graphroof compare``).

* Parameters: the weight inputs of the graph's non-view ops, once per (scope, shape, dtype).
* Activation peak: a liveness sweep over the graph in op order.  Each op's activation outputs are live from the op
  until their last consumer; views (ops with a free rule) alias their input and extend its life; sharded outputs
  count ``1/N``.  Framework workspace and allocator fragmentation are not modelled.
* Device fit (:func:`device_fit`, per device of a comparison):

  ``memory_weight_bytes``: every parameter once (:func:`params_from_graph`), in its dtype;
  ``memory_kv_bytes``: the KV cache the run holds: the KV-cache bytes it reads (the past) + writes (the new
    entries); 0 for a model without a cache;
  ``memory_activation_peak_bytes``: the liveness sweep of :func:`activation_peak_bytes`;
  ``memory_bytes`` = their sum, ``capacity_bytes`` the profile's memory, ``fits`` = sum <= capacity (None when the
    profile gives no capacity); all None for an op table (no tensors: memory unknown).  Framework workspace and
    fragmentation are not modelled, as in ``graphroof llm``.
  ``samples``: the samples one run processes (the leading dim of the first model input, or the ``batch`` dim; 1
    when unknown: an op table), ``joules_per_sample = board_power_w * time_realistic_s / samples`` (an upper bound:
    the device at its full board power throughout) and ``samples_per_joule``; None without a board power.
"""

from __future__ import annotations

import re
from typing import Any

from .counters.registry import REGISTRY
from .graph import OpGraph, Role, TensorSpec

__all__ = ["Param", "params_from_graph", "activation_peak_bytes", "activation_live_bytes", "device_fit",
           "add_device_fit", "samples_per_run"]

#: one parameter: (the scope of the op reading it, its tensor)
Param = tuple[str, TensorSpec]


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
    return max(0.0, max(activation_live_bytes(graph)))


def activation_live_bytes(graph: OpGraph) -> list[float]:
    """Bytes of live activation tensors after each op in order (and one trailing 0), the liveness sweep of
    :func:`activation_peak_bytes`; a step graph's entries are polynomials of the shapes (see llm/poly.py)."""
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
    for u, nbrs in graph.nx.adjacency():  # not nx.edges(): its cached view keeps the graph in a reference cycle
        r = root[u]
        for v in nbrs:
            last[r] = max(last[r], idx[v])
    delta = [0.0] * (len(order) + 1)
    for r, s in size.items():
        delta[idx[r]] += s
        delta[last[r] + 1] -= s
    out = []
    live = 0.0
    for d in delta:
        live += d
        out.append(live)
    return out


_FIRST_INPUT = re.compile(r"^[^=,]+=[A-Za-z0-9_]+\[(\d+)[,\]]")


def samples_per_run(a: Any) -> int:
    """The batch of one run: the ``batch`` dim when bound, else the leading dim of the first input, else 1."""
    meta = a.graph.meta
    dims = meta.get("dims") or {}
    if isinstance(dims.get("batch"), int) and dims["batch"] > 0:
        return int(dims["batch"])
    m = _FIRST_INPUT.match(str(meta.get("inputs") or ""))
    return int(m.group(1)) if m and int(m.group(1)) > 0 else 1


def device_fit(a: Any) -> dict[str, Any]:
    """The memory and energy fields of one device's row (see the module docstring)."""
    cap = a.hw.mem_capacity_bytes
    fit: dict[str, Any] = dict.fromkeys(("memory_weight_bytes", "memory_kv_bytes", "memory_activation_peak_bytes",
                                         "memory_bytes"))
    if any(op.inputs or op.outputs for op in a.graph.ops()):  # an op table has no tensors: memory unknown
        weights = float(sum(t.nbytes for _, t in params_from_graph(a.graph) if t.is_bound))
        cost = a.totals.cost
        kv = float(cost.kv_read_bytes + cost.kv_write_bytes)
        act = float(activation_peak_bytes(a.graph))
        fit = {"memory_weight_bytes": weights, "memory_kv_bytes": kv, "memory_activation_peak_bytes": act,
               "memory_bytes": weights + kv + act}
    total = fit["memory_bytes"]
    samples = samples_per_run(a)
    power = a.hw.board_power_w
    t = a.totals.t_realistic_s
    j = power * t / samples if power is not None and t > 0 else None
    return {**fit, "capacity_bytes": cap, "fits": None if not cap or total is None else total <= cap,
            "samples": samples, "board_power_w": power, "joules_per_sample": j,
            "samples_per_joule": 1.0 / j if j else None}


def add_device_fit(c: Any) -> Any:
    """Add :func:`device_fit`'s fields to every row of the comparison *c* (in place); returns *c*."""
    for row, a in zip(c.rows, c.analyses):
        row.update(device_fit(a))
    c.notes.append("memory = weights (every parameter once) + KV cache read and written + activation peak "
                   "(liveness over the op order; no framework workspace); fits = memory <= the profile's capacity")
    c.notes.append("J/sample = board power x realistic time / samples per run: an upper bound, the device at its "
                   "full board power (TDP / TBP from the profile's datasheet) throughout; n/a: the profile gives no "
                   "board power")
    return c
