"""Expert parallelism (EP) on an OpGraph: the fused MoE ``experts`` modules split over ``ep`` ranks, each holding
``E / ep`` experts, with an all-to-all **dispatch** before and a **combine** after every MoE layer.

Layout (vLLM's ``--enable-expert-parallel``, DeepSeek-V3's serving layout): the EP group is every rank of a
pipeline stage, ``ep = tp x dp``; attention and dense layers run tensor-parallel over ``tp`` ranks on the
``batch / dp`` sequences of their attention-data-parallel rank; the experts are not tensor-split (the TP plan
leaves the ``experts`` module out), each rank runs its own experts on the rows routed to it.

Per rank, at a step with ``T`` tokens on its attention-DP rank (the traced graph's tokens), ``k`` experts per
token, ``E`` experts:

* tokens the rank dispatches: ``T / tp`` (the TP ranks of one DP rank hold the same tokens, each sends its share);
* all-to-all bytes leaving the rank, each way: ``(T / tp) x k x hidden x dtype x (ep - 1) / ep``
  (:func:`graphroof.timing.p2p.all_to_all_bytes`; uniform routing sends ``(ep-1)/ep`` of the rows away);
* rows the busiest rank computes: ``R = imbalance x dp x T x k / ep`` (the EP group's ``dp x T x k`` rows over
  ``ep`` ranks, the busiest rank holding *imbalance* times the mean), so every op of the experts module costs its
  traced (all experts, ``T x k`` rows) cost times ``imbalance x dp / ep``, but its weights: a grouped GEMM reads
  the rank's experts that got at least one row, ``(E / ep) (1 - (1 - ep / E)^R)`` of them;
* *imbalance* (``Pricing.ep_imbalance``): the busiest rank's rows over the mean.  Default (None): the expected
  maximum of a multinomial load, ``n = dp x T x k`` rows thrown uniformly on ``ep`` ranks: mean ``mu = n / ep``,
  ``E[max] ~ mu + sigma sqrt(2 ln ep)``, ``sigma = sqrt(n (1/ep)(1 - 1/ep))`` (the Gaussian extreme-value
  approximation), at least 1 row and at most ``n``: :func:`expected_imbalance`.  Real routers are less uniform
  (hot experts); pass a measured value (e.g. 1.3) to model that.
"""

from __future__ import annotations

import math
from dataclasses import replace

import networkx as nx

from ..counters.cost import Cost
from ..counters.rules.matmul import experts_visited
from ..dtypes import is_float
from ..errors import InputError
from ..graph import COST, OP, OpGraph, OpNode, Role, TensorSpec, edge_copies, fill_digraph

__all__ = ["EXPERTS", "expected_imbalance", "expert_count", "insert_ep", "scale_ep_costs", "A2A"]

EXPERTS = "experts"
A2A = "comm.all_to_all"


def expected_imbalance(rows: float, ep: int) -> float:
    """Busiest rank's rows over the mean when *rows* rows land uniformly on *ep* ranks (see module doc).

    >>> round(expected_imbalance(8 * 4096, 16), 3)   # 32768 rows on 16 ranks: mu 2048, sigma 43.8, x 2.355
    1.05
    """
    if ep <= 1 or rows <= 0:
        return 1.0
    mu = rows / ep
    sigma = math.sqrt(rows * (1 / ep) * (1 - 1 / ep))
    top = min(rows, max(1.0, mu + sigma * math.sqrt(2 * math.log(ep))))
    return top / mu


def expert_count(graph: OpGraph) -> int | None:
    """``E`` of the model's fused MoE layers (the grouped GEMMs' ``moe_experts``), None for a dense model."""
    for op in graph.ops():
        e = op.attrs.get("moe_experts")
        if e:
            return int(e)
    return None


def _module(scope: str) -> str | None:
    parts = scope.split(".")
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] == EXPERTS:
            return ".".join(parts[: i + 1])
    return None


def insert_ep(graph: OpGraph, ep: int, tp: int, dp: int, imbalance: float | None, gpus_per_node: int | None,
              hidden: int | None = None) -> OpGraph:
    """The graph with every op of the ``experts`` modules marked ``attrs["ep"]`` and an all-to-all (dispatch)
    before and (combine) after each module (of the module's ``[tokens, hidden]`` input: *hidden* the model's
    hidden size); run :func:`scale_ep_costs` after counting."""
    if ep == 1:
        return graph
    e = expert_count(graph)
    if e is None:
        raise InputError(f"--ep {ep}: the model has no fused MoE experts (grouped GEMMs over [experts, ...] "
                         "weights); expert parallelism needs a mixture-of-experts model; use --ep 1")
    if e % ep:
        ok = [d for d in range(1, e + 1) if e % d == 0]
        raise InputError(f"--ep {ep} does not divide the model's {e} experts; use one of: "
                         f"{', '.join(str(d) for d in ok if d <= 1024)}")
    k_model = next((int(op.attrs["moe_top_k"]) for op in graph.ops() if op.attrs.get("moe_top_k")), 1)
    info = {"world_size": ep, "tp": tp, "dp": dp, "experts": e, "imbalance": imbalance, "top_k": k_model}
    first: dict[str, str] = {}
    last: dict[str, str] = {}
    module_tokens: dict[str, int] = {}  # the step's tokens, from the module's grouped GEMMs (their routing facts)
    for op in graph.ops():
        m = _module(op.scope)
        if m is not None and op.attrs.get("moe_tokens") is not None:
            module_tokens.setdefault(m, op.attrs["moe_tokens"])
    nodes: list[tuple[str, dict]] = []
    for name, data in graph.nx.nodes(data=True):
        op = data[OP]
        m = _module(op.scope)
        if m is not None:
            first.setdefault(m, name)
            last[m] = name
            extra: dict = {"ep": info}
            if m in module_tokens and op.attrs.get("moe_tokens") is None:
                extra["ep_tokens"] = module_tokens[m]
            data = {**data, OP: replace(op, attrs={**op.attrs, **extra})}
        nodes.append((name, dict(data)))
    top_k = {m: 0 for m in first}
    tokens: dict[str, TensorSpec] = {}
    for _, data in nodes:
        op = data[OP]
        m = _module(op.scope)
        if m is None:
            continue
        if op.attrs.get("moe_top_k"):
            top_k[m] = int(op.attrs["moe_top_k"])
        if m not in tokens:
            t = _token_tensor(op, hidden)
            if t is not None:
                tokens[m] = t
    out = OpGraph(graph.name, graph.meta)
    out.nx = nx.DiGraph()
    out.nx.graph.update(graph.nx.graph)
    comms: dict[str, tuple[str, str]] = {}  # module -> (dispatch, combine) names
    ordered: list[tuple[str, dict]] = []
    heads = {v: m for m, v in first.items()}
    tails = {v: m for m, v in last.items()}
    attrs = {"world_size": ep, "gpus_per_node": gpus_per_node, "tp": tp}
    for name, data in nodes:
        op = data[OP]
        if name in heads:
            m = heads[name]
            t = tokens.get(m)
            if t is not None:
                k = top_k[m] or 1
                a = {**attrs, "top_k": k, "collective": "all_to_all"}
                d = OpNode(f"{m}__dispatch", A2A, (t,), (t,), a, f"{m}_dispatch")
                c = OpNode(f"{m}__combine", A2A, (t,), (t,), a, f"{m}_combine")
                ordered.append((d.name, {OP: d}))
                comms[m] = (d.name, c.name)
        ordered.append((name, data))
        if name in tails and tails[name] in comms:
            c_name = comms[tails[name]][1]
            t = tokens[tails[name]]
            k = top_k[tails[name]] or 1
            ordered.append((c_name, {OP: OpNode(c_name, A2A, (t,), (t,), {**attrs, "top_k": k,
                                                                          "collective": "all_to_all"},
                                                f"{tails[name]}_combine")}))
    edges = list(edge_copies(graph.nx))
    for m, (dn, cn) in comms.items():
        edges.append((dn, first[m], {"tensor": f"{dn}:out"}))
        edges.append((last[m], cn, {"tensor": f"{last[m]}:out"}))
    fill_digraph(out.nx, ordered, edges)
    out.set_producers(dict(graph.producers))
    out.meta = {**graph.meta, "ep": ep}
    return out


def _token_tensor(op: OpNode, hidden: int | None) -> TensorSpec | None:
    """The ``[tokens, hidden]`` activations of an experts-module op (a floating input whose last dim is *hidden*;
    any floating activation input of rank >= 2 when *hidden* is unknown)."""
    for t in op.inputs:
        if t is None or t.rank < 2 or t.role in (Role.WEIGHT, Role.CONST) or not is_float(t.dtype):
            continue
        if hidden is None or t.shape[-1] == hidden:
            return t
    return None


def scale_ep_costs(graph: OpGraph) -> None:
    """Per-rank costs of the ops :func:`insert_ep` marked (see the module doc), after counting (and TP scaling);
    the all-to-alls are counted by their rule (:mod:`graphroof.counters.rules.comm`)."""
    for _, data in graph.nx.nodes(data=True):
        op = data[OP]
        info = op.attrs.get("ep")
        cost = data.get(COST)
        if not info or cost is None:
            continue
        data[COST] = ep_cost(op, cost, info)


def ep_cost(op: OpNode, cost: Cost, info: dict) -> Cost:
    """One experts-module op's per-rank cost (see the module doc)."""
    ep, dp, e = int(info["world_size"]), int(info["dp"]), int(info["experts"])
    k = int(op.attrs.get("moe_top_k") or info.get("top_k") or 1)
    tokens = op.attrs.get("moe_tokens", op.attrs.get("ep_tokens"))
    t = float(tokens) if tokens is not None else None
    imb = info.get("imbalance")
    if imb is None:
        imb = expected_imbalance(dp * (t if t is not None else 1.0) * k, ep)
    f = float(imb) * dp / ep
    out = cost.scale(f)
    visited = experts_visited(op.attrs)
    if visited and cost.weight_bytes and t is not None:
        per_expert = cost.weight_bytes / visited
        rows = f * t * k
        local = e / ep
        touched = local * (1.0 - (1.0 - 1.0 / local) ** rows) if local > 1 else min(1.0, rows)
        out = replace(out, weight_bytes=per_expert * touched)
    return out
