"""Layer rollup: group ops by scope prefix at a depth, summing costs and times; and the one fold policy.

Depth counts module levels of the dotted scope; a numeric part (a ``ModuleList`` index) belongs to the part
before it, so ``model.layers.0.self_attn.q_proj`` is ``model`` / ``model.layers.0`` / ``model.layers.0.self_attn``
at depths 1 / 2 / 3.  A layer's bound comes from its summed compute vs memory (vs network) time
(:func:`graphroof.roofline.combine`).  This is the one rollup: ``Analysis.layers``, the LLM layer tables
(folded repeated blocks) and the measured comparison (``graphroof profile``) all build their rows here.

**Folding** (one policy for every table: ``analyze``'s layer / op / kernel tables, the LLM layer tables, the
prediction beside the measured tables): rows whose names differ only in a block index (``model.layers.3.mlp`` ->
``model.layers.*.mlp``, :func:`fold_name`) *and* whose work is identical (:func:`work_signature`) are one row
summing them, ``repeat`` = how many (:func:`fold_key`, :func:`fold_layers`, :func:`fold_rows`); a block that
differs (a first layer of another shape) keeps its own row.  Every summed row keeps ``bytes`` equal to the sum of
its byte fields.  (The torch capture folding identical blocks into one traced block is another matter: see
:mod:`graphroof.frontends`.)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .counters.cost import Cost
from .graph import BOUND, COST, REPEAT, OpGraph, OpNode
from .hardware import HardwareProfile
from .roofline import Bound, Totals, combine
from .scopes import TOP, auto_depth, block_level, default_depth, scope_at, scope_parts

__all__ = ["scope_parts", "scope_at", "auto_depth", "block_level", "default_depth", "op_params",
           "LayerGroup", "rollup", "layer_row", "summarize",
           "attainable_flops_per_s", "cost_fields", "COST_FIELDS", "TOP",
           "fold_name", "work_signature", "fold_key", "fold_layers", "fold_rows", "ROW_SUMMED", "label_of",
           "order_by_work"]

#: The cost fields every op and layer row carries (the JSON schema, see README).
COST_FIELDS = ("matrix_flops", "vector_flops", "weight_bytes", "act_read_bytes", "act_write_bytes",
               "kv_read_bytes", "kv_write_bytes", "net_bytes")


def cost_fields(cost: Cost) -> dict[str, Any]:
    """A cost as row fields: :data:`COST_FIELDS` plus ``flops``, ``bytes`` and ``estimated``."""
    d: dict[str, Any] = {k: getattr(cost, k) for k in COST_FIELDS}
    d["flops"] = cost.flops
    d["bytes"] = cost.bytes
    d["estimated"] = cost.estimated
    return d


@dataclass
class LayerGroup:
    """One row of a layer table: some ops, their summed cost and their combined roofline times."""

    name: str
    ops: list[OpNode]
    cost: Cost
    totals: Totals
    op_kinds: dict[str, int]
    #: the distinct scopes folded into this row (one unless a ``key`` merged several, e.g. repeated blocks)
    members: list[str] = field(default_factory=list)

    @property
    def bound(self) -> str:
        return self.totals.bound

    @property
    def repeat(self) -> int:
        return max(1, len(self.members))


def summarize(graph: OpGraph, ops: Iterable[OpNode | str], hw: HardwareProfile) -> tuple[Cost, Totals]:
    """Summed cost and combined roofline (:func:`graphroof.roofline.combine`, the one bound rule) of *ops*."""
    names = [o if isinstance(o, str) else o.name for o in ops]
    cost = sum((graph.get(n, COST) for n in names), Cost())
    bounds: list[Bound] = [graph.get(n, BOUND) for n in names]
    return cost, combine(bounds, cost, hw)


def attainable_flops_per_s(cost: Cost, t: Totals, hw: HardwareProfile) -> float:
    """min(achieved compute peak, intensity x bandwidth) of a group: the roof at the group's intensity."""
    flops, nbytes = cost.flops, cost.bytes
    if not flops:
        return 0.0
    intensity = flops / nbytes if nbytes else float("inf")
    peak = flops / t.t_compute_s if t.t_compute_s else 0.0
    return min(peak, intensity * hw.mem_bw_bytes_per_s)


def rollup(graph: OpGraph, hw: HardwareProfile, depth: int | None = None,
           key: Callable[[str], str] | None = None) -> list[LayerGroup]:
    """Groups in first-seen (topological) order.

    Ops are grouped by their scope at *depth*; *key* maps that scope to a row name (e.g. folding
    ``model.layers.3.mlp`` into ``model.layers.*.mlp``), and :attr:`LayerGroup.members` records the scopes merged.
    """
    if depth is None:
        depth = auto_depth(graph)
    groups: dict[str, list[OpNode]] = {}
    members: dict[str, dict[str, None]] = {}
    for op in graph.ops():
        full = scope_at(op.scope, depth)
        name = key(full) if key else full
        groups.setdefault(name, []).append(op)
        members.setdefault(name, {}).setdefault(full)
    out = []
    for name, ops in groups.items():
        cost, t = summarize(graph, ops, hw)
        kinds: dict[str, int] = {}
        for o in ops:  # a kernel node counts the ops it runs
            for k, v in (o.attrs.get("op_key_counts") or {o.op: 1}).items():
                kinds[k] = kinds.get(k, 0) + v
        out.append(LayerGroup(name, ops, cost, t, kinds, list(members[name])))
    return out


def layer_row(g: LayerGroup, hw: HardwareProfile, total_t_s: float) -> dict[str, Any]:
    """The layer-table row of one group (``Analysis.layers`` schema); *total_t_s* is the model's roofline time."""
    t = g.totals
    flops, nbytes = g.cost.flops, g.cost.bytes
    return {
        "name": g.name, "n_ops": sum(int(o.attrs.get("n_ops", 1)) for o in g.ops),
        "n_kernels": sum(runs(o) for o in g.ops),
        **cost_fields(g.cost),
        "intensity": flops / nbytes if nbytes else (float("inf") if flops else 0.0),
        "attainable_flops_per_s": attainable_flops_per_s(g.cost, t, hw),
        "t_compute_s": t.t_compute_s, "t_memory_s": t.t_memory_s, "t_network_s": t.t_network_s,
        "time_s": t.t_lower_s, "time_upper_s": t.t_upper_s, "time_realistic_s": t.t_realistic_s,
        "bound": t.bound, "share": t.t_lower_s / (total_t_s or 1.0),
        "op_kinds": dict(sorted(g.op_kinds.items(), key=lambda kv: -kv[1])),
        "ops": [n for o in g.ops for n in (o.attrs.get("ops") or (o.name,))],
    }


def op_params(graph: OpGraph) -> dict[str, int]:
    """Op name -> the parameters it reads (elements of its weight inputs; ops with none are left out).  A layer's
    parameter count, as FLOP counters show it per module, is the sum over its ops (a weight two modules read, such
    as a tied embedding, counts in both)."""
    from .errors import UnboundDimError
    from .graph import Role

    out: dict[str, int] = {}
    for op in graph.ops():
        n = 0
        for t in op.inputs:
            if t is not None and t.role == Role.WEIGHT:
                try:
                    n += t.numel
                except UnboundDimError:
                    pass
        if n:
            out[op.name] = n
    return out


def runs(op: OpNode) -> int:
    """How many times an op or kernel node runs (each run one launch): its ``graphroof.repeat`` when a whole number
    (an op-table count, an ONNX loop with a known trip count), else 1."""
    r = op.attrs.get(REPEAT, 1)
    return r if isinstance(r, int) and not isinstance(r, bool) and r >= 0 else 1


# -- the fold policy ----------------------------------------------------------------------------------------

_INDEX = re.compile(r"\.\d+(?=\.|$)")


def fold_name(name: str) -> str:
    """``model.layers.3.mlp`` -> ``model.layers.*.mlp``: the name with every block index replaced by ``*``."""
    return _INDEX.sub(".*", name)


def work_signature(r: dict[str, Any]) -> tuple:
    """What must be equal for two layer rows to fold: op count, op kinds, FLOPs and bytes."""
    return (r["n_ops"], tuple(sorted(r["op_kinds"].items())), round(r["flops"], 3), round(r["bytes"], 3))


def fold_key(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Row name -> the name it shows under: the rows of one folded name and one :func:`work_signature` share the
    folded name (the largest such group gets it, the rest keep their own names; a model's only block, or blocks
    that all do the same work, always take it, so that every table of a model names its blocks alike)."""
    groups: dict[tuple, list[str]] = {}
    for r in rows:
        groups.setdefault((fold_name(r["name"]), work_signature(r)), []).append(r["name"])
    n_groups: dict[str, int] = {}
    for folded, _ in groups:
        n_groups[folded] = n_groups.get(folded, 0) + 1
    taken: set[str] = set()
    out = {r["name"]: r["name"] for r in rows}
    for (folded, _), names in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        if (len(names) > 1 or n_groups[folded] == 1) and folded not in taken and folded not in out:
            taken.add(folded)
            for n in names:
                out[n] = folded
    return out


def fold_layers(graph: OpGraph, hw: HardwareProfile, depth: int, total_t_s: float, params: dict[str, int],
                fold: bool = True) -> list[dict[str, Any]]:
    """The layer rows of *graph* at *depth* (:func:`layer_row` fields, ``params`` and ``repeat``), in first-seen
    order, identical repeated blocks folded (*fold*) by :func:`fold_key` through the one :func:`rollup`."""
    groups = rollup(graph, hw, depth)
    if fold:
        key = fold_key([layer_row(g, hw, total_t_s) for g in groups])
        if any(k != v for k, v in key.items()):
            groups = rollup(graph, hw, depth, key=lambda s: key.get(s, s))
    out = []
    for g in groups:
        row = layer_row(g, hw, total_t_s)
        out.append({**row, "repeat": g.repeat, "params": sum(params.get(n, 0) for n in row["ops"])})
    return out


#: Fields summed when rows fold (op and kernel rows): every cost field, so ``bytes`` stays the sum of the split
#: byte fields, and every time; the other fields are equal within a group or are the first row's.
ROW_SUMMED = ("flops", "bytes", *COST_FIELDS, "t_compute_s", "t_memory_s", "t_network_s", "time_s",
              "time_realistic_s", "share", "params", "t_launch_s", "n_ops")


def fold_rows(rows: list[dict[str, Any]], what: Callable[[dict[str, Any]], Any], fold: bool = True,
              summed: tuple[str, ...] = ROW_SUMMED) -> list[dict[str, Any]]:
    """Op or kernel rows with their module (``module``); with *fold*, the same op (*what*: its kind) with the same
    dtype, FLOPs and bytes at the same place of repeated blocks (the k-th of its kind in ``model.layers.*.mlp``)
    is one row, *summed* fields added up, ``repeat`` = count, ``label`` = the first's name ``×N``, in first-seen
    order."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    seen: dict[tuple, int] = {}
    for r in rows:
        kind = what(r)
        k = seen[(r["scope"], kind)] = seen.get((r["scope"], kind), -1) + 1
        key = ((fold_name(r["scope"]), kind, k, r["dtype"], round(r["flops"], 3), round(r["bytes"], 3))
               if fold else (r["name"],))
        groups.setdefault(key, []).append(r)
    out = []
    for rs in groups.values():
        first = rs[0]
        row = dict(first)
        for f in summed:
            if f in first and all(isinstance(x.get(f), (int, float)) for x in rs):
                row[f] = sum(x[f] for x in rs)
        row["repeat"] = len(rs)
        row["module"] = (fold_name(first["scope"]) if fold else first["scope"]) or TOP
        row["label"] = first["name"] + (f" ×{len(rs)}" if len(rs) > 1 else "")
        out.append(row)
    return out


def _kinds(op_kinds: dict[str, int], n: int = 3) -> str:
    items = sorted(op_kinds.items(), key=lambda kv: -kv[1])
    text = ", ".join(f"{k.split('.')[-1]} ×{v}" if v > 1 else k.split(".")[-1] for k, v in items[:n])
    return text + (f", +{len(items) - n} kinds" if len(items) > n else "")


def label_of(row: dict[str, Any], parents: set[str]) -> str:
    """A layer row's label: ``name ×N`` plus what a structural row holds (a parent module's own ops, the ops
    outside every module)."""
    name = row["name"]
    rep = row.get("repeat", 1)
    label = name + (f" ×{rep}" if rep > 1 else "")
    per_block = {k: v // max(1, rep) for k, v in row["op_kinds"].items()}
    if name == TOP:
        label += f" (ops outside every module: {_kinds(per_block)})"
    elif name in parents:
        who = "each block's" if rep > 1 else "the module's"
        label += f" ({who} own ops, outside its sub-modules: {_kinds(per_block)})"
    return label


def order_by_work(rows: list[dict[str, Any]], ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Layer rows in the topological order of their work, labelled (:func:`label_of`): a row sits where its first
    op with FLOPs or bytes runs (an exporter may hoist a later layer's constants to the top of the graph, which
    must not move its row up)."""
    pos = {r["name"]: i for i, r in enumerate(ops)}
    work = {r["name"] for r in ops if r["flops"] or r["bytes"]}

    def first_work(row: dict[str, Any]) -> int:
        idx = [pos[n] for n in row["ops"] if n in work and n in pos]
        return min(idx) if idx else min((pos.get(n, 0) for n in row["ops"]), default=0)

    rows = sorted(rows, key=first_work)
    names = [r["name"] for r in rows]
    parents = {n for n in names if any(m.startswith(n + ".") for m in names)}
    return [{**r, "label": label_of(r, parents)} for r in rows]
