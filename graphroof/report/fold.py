"""Layer rows as the reports show them: identical repeated blocks folded into one row, structural rows explained.

A decoder's 32 blocks are 32 identical layer rows.  :func:`display_layers` folds rows whose names differ only in
a block index (``model.layers.3`` -> ``model.layers.*``) *and* whose work is identical (same op count, op kinds,
FLOPs and bytes) into one row summing them, with ``repeat`` = how many were folded; the label reads
``model.layers.* ×32``.  Blocks that differ (a first layer with another shape) stay separate rows.

A row holding a parent module's own ops (``model``, the ops directly in ``model.layers.3`` when the table goes one
level deeper: the residual adds) or the ops outside every module (``(top)``) is labelled with what it holds:
``model.layers.* ×32 (block's own ops: add ×2)``.  Rows keep the :attr:`graphroof.analysis.Analysis.layers` fields
(re-rolled through the one rollup of :mod:`graphroof.layers`) plus ``repeat`` and ``label``, in the order their
first op with work runs (topological order, whatever order an exporter listed constants in).
"""

from __future__ import annotations

import re
from typing import Any

from ..layers import TOP, layer_row, rollup

__all__ = ["fold_name", "display_layers", "display_ops", "display_kernels", "label_of"]

_INDEX = re.compile(r"\.\d+(?=\.|$)")


def fold_name(name: str) -> str:
    """``model.layers.3.mlp`` -> ``model.layers.*.mlp``."""
    return _INDEX.sub(".*", name)


def _signature(r: dict[str, Any]) -> tuple:
    return (r["n_ops"], tuple(sorted(r["op_kinds"].items())), round(r["flops"], 3), round(r["bytes"], 3))


def _fold_key(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Full row name -> display name: rows with one folded name and one signature share the folded name."""
    groups: dict[tuple, list[str]] = {}
    for r in rows:
        groups.setdefault((fold_name(r["name"]), _signature(r)), []).append(r["name"])
    taken: set[str] = set()
    out = {r["name"]: r["name"] for r in rows}
    for (folded, _), names in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        if len(names) > 1 and folded not in taken and folded not in out:
            taken.add(folded)
            for n in names:
                out[n] = folded
    return out


def _kinds(op_kinds: dict[str, int], n: int = 3) -> str:
    items = sorted(op_kinds.items(), key=lambda kv: -kv[1])
    text = ", ".join(f"{k.split('.')[-1]} ×{v}" if v > 1 else k.split(".")[-1] for k, v in items[:n])
    return text + (f", +{len(items) - n} kinds" if len(items) > n else "")


def label_of(row: dict[str, Any], parents: set[str]) -> str:
    """The row's display label: ``name ×N`` plus what a structural row holds."""
    name = row["name"]
    label = name + (f" ×{row['repeat']}" if row.get("repeat", 1) > 1 else "")
    per_block = {k: v // max(1, row.get("repeat", 1)) for k, v in row["op_kinds"].items()}
    if name == TOP:
        label += f" (ops outside every module: {_kinds(per_block)})"
    elif name in parents:
        who = "each block's" if row.get("repeat", 1) > 1 else "the module's"
        label += f" ({who} own ops, outside its sub-modules: {_kinds(per_block)})"
    return label


def display_layers(a, fold: bool = True) -> list[dict[str, Any]]:
    """The layer rows of analysis *a* for a report: folded (``fold=True``) and labelled."""
    rows = a.layers
    if fold:
        key = _fold_key(rows)
        if any(k != v for k, v in key.items()):
            groups = rollup(a.timed_graph, a.hw, a.depth, key=lambda s: key.get(s, s))
            rows = [{**layer_row(g, a.hw, a.totals.t_lower_s), "repeat": g.repeat} for g in groups]
    params = a.params_by_op if hasattr(a, "params_by_op") else {}
    rows = [{**r, "repeat": r.get("repeat", 1), "params": sum(params.get(n, 0) for n in r["ops"])} for r in rows]
    # topological order of the work: a layer sits where its first op with FLOPs or bytes runs (an exporter may
    # hoist a later layer's constants or shape ops to the top of the graph, which must not move its row up)
    pos = {r["name"]: i for i, r in enumerate(a.ops)}
    work = {r["name"] for r in a.ops if r["flops"] or r["bytes"]}

    def first_work(row):
        idx = [pos[n] for n in row["ops"] if n in work and n in pos]
        return min(idx) if idx else min((pos.get(n, 0) for n in row["ops"]), default=0)

    rows.sort(key=first_work)
    names = [r["name"] for r in rows]
    parents = {n for n in names if any(m.startswith(n + ".") for m in names)}
    return [{**r, "label": label_of(r, parents)} for r in rows]


#: Per-op fields summed when identical ops of repeated blocks are grouped (the rest are equal in a group).
_SUMMED = ("flops", "bytes", "matrix_flops", "vector_flops", "weight_bytes", "act_bytes", "kv_bytes", "net_bytes",
           "t_compute_s", "t_memory_s", "t_network_s", "time_s", "time_realistic_s", "share")


def display_ops(a, fold: bool = True) -> list[dict[str, Any]]:
    """Op rows with their module path (``module``); with *fold*, identical ops (same op, dtype, FLOPs and bytes)
    at the same place of repeated blocks (``model.layers.*.mlp``, the k-th op of that type there) are one row, times summed, ``repeat`` = count,
    named after the first (``linear_4 ×32``), in first-seen order."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    seen: dict[tuple, int] = {}
    for r in a.ops:
        # the k-th op of this type in its own module: the same k in another block is "the same op"
        k = seen[(r["scope"], r["op"])] = seen.get((r["scope"], r["op"]), -1) + 1
        key = ((fold_name(r["scope"]), r["op"], k, r["dtype"], round(r["flops"], 3), round(r["bytes"], 3))
               if fold else (r["name"],))
        groups.setdefault(key, []).append(r)
    return _merged(groups, _SUMMED, fold)


def _merged(groups: dict[tuple, list[dict[str, Any]]], summed: tuple[str, ...], fold: bool) -> list[dict[str, Any]]:
    """One row per group: the first row's fields, *summed* fields added up, ``repeat`` / ``module`` / ``label``."""
    out = []
    for rs in groups.values():
        first = rs[0]
        row = dict(first)
        for k in summed:
            if k in first and all(isinstance(x.get(k), (int, float)) for x in rs):
                row[k] = sum(x[k] for x in rs)
        row["repeat"] = len(rs)
        row["module"] = (fold_name(first["scope"]) if fold else first["scope"]) or TOP
        row["label"] = first["name"] + (f" ×{len(rs)}" if len(rs) > 1 else "")
        out.append(row)
    return out


def display_kernels(a, fold: bool = True) -> list[dict[str, Any]]:
    """Kernel rows (:attr:`graphroof.analysis.Analysis.kernel_rows`) with the module each belongs to (``module``);
    with *fold*, identical kernels (same op kinds, dtype, FLOPs and bytes) at the same place of repeated blocks
    are one row, times summed, ``repeat`` = count, named after the first (``linear_4+2 ×32``), in first-seen
    order."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    seen: dict[tuple, int] = {}
    for r in a.kernel_rows:
        what = tuple(r.get("op_keys") or (r["kind"],))
        k = seen[(r["scope"], what)] = seen.get((r["scope"], what), -1) + 1
        key = ((fold_name(r["scope"]), what, k, r["dtype"], round(r["flops"], 3), round(r["bytes"], 3))
               if fold else (r["name"],))
        groups.setdefault(key, []).append(r)
    return _merged(groups, (*_SUMMED, "t_launch_s", "n_ops"), fold)
