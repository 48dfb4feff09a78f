"""Tensor parallelism (Megatron-LM style) on an OpGraph: per-device costs plus the collectives the split needs.

The split, by module name (the last matching part of an op's scope, see :class:`TPPlan`):

* column-parallel linears (``q_proj k_proj v_proj gate_proj up_proj``, fused ``qkv`` / ``c_attn`` ...): the
  weight is split along its output features, the input is replicated, the output is sharded;
* everything downstream of a sharded tensor (rotary, attention over the device's heads, the KV cache of
  those heads, SiLU * up) is sharded, up to
* row-parallel linears (``o_proj down_proj dense c_proj fc2`` ...): the weight is split along its input
  features, each device produces partial sums of the full output, and an **all-reduce** follows the module;
* fused MoE ``experts`` modules (grouped GEMMs over ``[experts, ...]`` weights): every expert's FFN is split the
  same way (the first grouped GEMM reads the replicated tokens, the second produces partial sums), with one
  all-reduce after the module; the router stays replicated;
* the token embedding is vocab-parallel (rows split, partial outputs, all-reduce after it) and the LM head
  column-parallel over the vocabulary with an **all-gather** of the logits after it;
* norms, residual adds and anything else outside those regions are replicated (full cost on every device).

Costs are per device.  A sharded op costs ``1/N`` of its FLOPs and of the bytes of its sharded tensors, and
the full bytes of its replicated tensors (the input of a column-parallel linear, the partial-sum output of a
row-parallel one, masks and rotary tables): ``cost/N + (1 - 1/N) * bytes(replicated tensors)``, capped at the
unsharded cost.  Tensor shapes in op rows stay the unsharded ones; the op's ``tp_shard`` attr records the split.
Collectives are ``comm.*`` ops (see :mod:`graphroof.counters.rules.comm`) costed on the interconnect.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import networkx as nx

from ..counters.common import read_bytes, write_bytes
from ..counters.cost import Cost
from ..errors import InputError
from ..graph import COST, OpGraph, OpNode, Role, TensorSpec

__all__ = ["TPPlan", "DEFAULT_PLAN", "check_tp", "shard", "scale_costs", "COMM_OPS"]

COMM_OPS = ("comm.all_reduce", "comm.all_gather")


@dataclass(frozen=True)
class TPPlan:
    """Module names (scope parts) that decide the split."""

    column: frozenset[str] = frozenset({
        "q_proj", "k_proj", "v_proj", "qkv_proj", "gate_proj", "up_proj", "gate_up_proj", "c_attn", "c_fc",
        "query_key_value", "query", "key", "value", "fc1", "w1", "w3", "wq", "wk", "wv", "Wqkv",
        "dense_h_to_4h", "fc_in",
        "q", "k", "v", "wi", "wi_0", "wi_1",  # T5: attention q / k / v, MLP wi (gated: wi_0, wi_1)
    })
    row: frozenset[str] = frozenset({
        "o_proj", "down_proj", "out_proj", "c_proj", "dense", "fc2", "w2", "wo", "dense_4h_to_h", "fc_out", "o",
        "experts",  # fused MoE experts (one [E, ...] weight per projection): up / gate split, down reduced
    })
    embed: frozenset[str] = frozenset({"embed_tokens", "wte", "word_embeddings", "embed_in", "tok_embeddings"})
    lm_head: frozenset[str] = frozenset({"lm_head", "embed_out"})

    def kind(self, scope: str) -> tuple[str | None, str]:
        """(``column`` | ``row`` | ``embed`` | ``lm_head`` | None, module scope) of the deepest matching part."""
        parts = scope.split(".")
        for i in range(len(parts) - 1, -1, -1):
            for kind in ("column", "row", "embed", "lm_head"):
                if parts[i] in getattr(self, kind):
                    return kind, ".".join(parts[: i + 1])
        return None, ""


DEFAULT_PLAN = TPPlan()


def check_tp(n: int, heads: int | None = None, kv_heads: int | None = None,
             intermediate: int | None = None) -> None:
    """Raise :class:`InputError` when ``N`` cannot split the model's heads / MLP evenly."""
    if not isinstance(n, int) or n < 1:
        raise InputError(f"--tp must be an integer >= 1, got {n!r}")
    for what, v in (("attention heads", heads), ("KV heads", kv_heads), ("MLP intermediate size", intermediate)):
        if n > 1 and v and v % n:
            ok = [d for d in range(1, v + 1) if v % d == 0 and (not heads or heads % d == 0)
                  and (not kv_heads or kv_heads % d == 0) and d <= 64]
            raise InputError(f"--tp {n} does not divide the model's {v} {what}; use one of: "
                             f"{', '.join(str(d) for d in ok)}")


def _producers(g: OpGraph, name: str, node: OpNode) -> list[str | None]:
    """Producer op of each activation input (matched by shape and dtype among the predecessors)."""
    preds = [(p, g.node(p)) for p in g.nx.predecessors(name)]
    out: list[str | None] = []
    for t in node.inputs:
        if t is None or t.role in (Role.WEIGHT, Role.CONST):
            out.append(None)
            continue
        cands = [p for p, pn in preds if any(o.shape == t.shape and o.dtype == t.dtype for o in pn.outputs)]
        out.append(cands[0] if cands else (preds[0][0] if len(preds) == 1 else None))
    return out


def _exits(g: OpGraph, plan: TPPlan) -> dict[str, tuple[str, str]]:
    """Last op of each row / embed / lm_head module instance -> (collective, module scope)."""
    last: dict[str, tuple[str, str]] = {}
    for op in g.ops():
        kind, mscope = plan.kind(op.scope)
        if kind in ("row", "embed", "lm_head"):
            last[mscope] = (op.name, kind)
    return {name: ("comm.all_gather" if kind == "lm_head" else "comm.all_reduce", mscope)
            for mscope, (name, kind) in last.items()}


def _comm_scope(kind: str, mscope: str) -> str:
    parts = mscope.split(".")
    if kind == "comm.all_gather":
        return f"{mscope}_all_gather"
    if len(parts) >= 2 and not parts[-1].isdigit() and parts[-1] not in DEFAULT_PLAN.embed:
        return f"{'.'.join(parts[:-1])}_all_reduce"
    return f"{mscope}_all_reduce"


def _shard_spec(t: TensorSpec, n: int) -> TensorSpec:
    last = t.shape[-1]
    d = -(-last // n) if isinstance(last, int) else f"({last}) // {n}"
    return replace(t, shape=(*t.shape[:-1], d))


def _insert_comms(g: OpGraph, n: int, plan: TPPlan) -> OpGraph:
    exits = _exits(g, plan)
    out = OpGraph(g.name, g.meta)
    out.nx = nx.DiGraph()
    out.nx.graph.update(g.nx.graph)
    comm_of: dict[str, str] = {}
    for name, data in g.nx.nodes(data=True):
        out.nx.add_node(name, **data)
        if name in exits:
            kind, mscope = exits[name]
            op = data["op"]
            full = op.outputs[0]
            src = _shard_spec(full, n) if kind == "comm.all_gather" else full
            cname = f"{name}__{kind.split('.')[1]}"
            comm = OpNode(cname, kind, (src,), (full,), {"world_size": n, "algorithm": "ring"},
                          _comm_scope(kind, mscope))
            out.nx.add_node(cname, op=comm)
            comm_of[name] = cname
    for u, v, data in g.nx.edges(data=True):
        mscope = exits[u][1] if u in comm_of else ""
        if u in comm_of and not (g.node(v).scope == mscope or g.node(v).scope.startswith(mscope + ".")):
            out.nx.add_edge(comm_of[u], v, **data)
        else:
            out.nx.add_edge(u, v, **data)
    for u, c in comm_of.items():
        out.nx.add_edge(u, c, tensor=f"{u}:out")
    out._producer = {t: comm_of.get(p, p) for t, p in g._producer.items()}
    return out


def shard(graph: OpGraph, n: int, plan: TPPlan = DEFAULT_PLAN) -> OpGraph:
    """The graph split over ``n`` devices: collectives inserted, sharded ops marked (``attrs["tp_shard"]``).

    Run :func:`scale_costs` after counting to turn the counts into per-device costs.
    """
    if n == 1:
        return graph
    if not any(plan.kind(op.scope)[0] in ("column", "row") for op in graph.ops()):
        raise InputError(f"--tp {n}: no column/row-parallel linear layers found in the op scopes "
                         f"(expected module names such as q_proj, o_proj, gate_proj, down_proj); tensor "
                         "parallelism needs a model with module scopes")
    g = _insert_comms(graph, n, plan)
    sharded: dict[str, bool] = {}
    weightish: dict[str, bool] = {}
    partial: dict[str, bool] = {}
    updates: dict[str, OpNode] = {}
    for op in list(g.ops()):
        name = op.name
        if op.op in COMM_OPS:
            sharded[name] = weightish[name] = partial[name] = False
            continue
        kind, _ = plan.kind(op.scope)
        prods = _producers(g, name, op)
        in_sh, in_w, in_partial = [], [], []
        for t, p in zip(op.inputs, prods):
            if t is None:
                in_sh.append(False), in_w.append(False), in_partial.append(False)
                continue
            if t.role in (Role.WEIGHT, Role.CONST):
                # a row-parallel bias (rank 1) is added to the full output: replicated
                in_sh.append(kind is not None and t.role is Role.WEIGHT and not (kind == "row" and t.rank == 1))
                in_w.append(True)
                in_partial.append(False)
            elif t.role is Role.KV_CACHE and p is None:
                in_sh.append(True), in_w.append(False), in_partial.append(False)
            else:
                in_sh.append(bool(p and sharded.get(p)))
                in_w.append(bool(p and weightish.get(p)))
                in_partial.append(bool(p and partial.get(p)))
        weightish[name] = bool(op.inputs) and all(in_w[i] for i, t in enumerate(op.inputs) if t is not None)
        act_sh = any(s and not w for s, w in zip(in_sh, in_w))
        if kind in ("row", "embed") and any(in_w) and (act_sh or kind == "embed") and not weightish[name]:
            out_sh, partial[name] = False, True          # partial sums of the full output: reduced after
        elif kind in ("row", "embed") and any(in_partial):
            out_sh, partial[name] = False, True          # e.g. the view / bias add after the matmul
        else:
            out_sh, partial[name] = any(in_sh), False
        sharded[name] = out_sh
        if any(in_sh) or out_sh:
            rep_in = tuple(i for i, t in enumerate(op.inputs) if t is not None and not in_sh[i])
            rep_out = () if out_sh else tuple(range(len(op.outputs)))
            updates[name] = replace(op, attrs={**op.attrs, "tp_shard": {
                "world_size": n, "replicated_inputs": rep_in, "replicated_outputs": rep_out}})
    for name, op in updates.items():
        g.set(name, "op", op)
    g.meta["tp"] = n
    return g


def _cap(new: Cost, old: Cost) -> Cost:
    vals = {f.name: min(getattr(new, f.name), getattr(old, f.name)) for f in fields(Cost) if f.name != "estimated"}
    return Cost(**vals, estimated=old.estimated)


def shard_cost(op: OpNode, cost: Cost) -> Cost:
    """Per-device cost of one op marked by :func:`shard` (see the module docstring for the formula)."""
    info = op.attrs.get("tp_shard")
    if not info:
        return cost
    n = info["world_size"]
    keep = 1 - 1 / n
    r = read_bytes(op.inputs[i] for i in info["replicated_inputs"])
    w = write_bytes(op.outputs[i] for i in info["replicated_outputs"])
    back = Cost(**{k: v * keep for k, v in {**r, **w}.items()})
    return _cap(cost.scale(1 / n) + back, cost)


def scale_costs(graph: OpGraph) -> None:
    """Replace each sharded op's counted cost by its per-device cost (run after ``counters.count``)."""
    for op in graph.ops():
        if op.attrs.get("tp_shard"):
            graph.set(op.name, COST, shard_cost(op, graph.get(op.name, COST)))
