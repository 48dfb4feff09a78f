"""Layer rows as the reports show them: identical repeated blocks folded into one row, structural rows explained.

A decoder's 32 blocks are 32 identical layer rows.  :func:`display_layers` folds rows whose names differ only in
a block index (``model.layers.3`` -> ``model.layers.*``) *and* whose work is identical (same op count, op kinds,
FLOPs and bytes) into one row summing them, with ``repeat`` = how many were folded; the label reads
``model.layers.* ×32``.  Blocks that differ (a first layer with another shape) stay separate rows.

A row holding a parent module's own ops (``model``, the ops directly in ``model.layers.3`` when the table goes one
level deeper: the residual adds) or the ops outside every module (``(top)``) is labelled with what it holds:
``model.layers.* ×32 (block's own ops: add ×2)``.  Rows keep the :attr:`graphroof.analysis.Analysis.layers` fields
(re-rolled through the one rollup of :mod:`graphroof.layers`) plus ``repeat`` and ``label``.
"""

from __future__ import annotations

import re
from typing import Any

from ..layers import TOP, layer_row, rollup

__all__ = ["fold_name", "display_layers", "label_of"]

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
            groups = rollup(a.graph, a.hw, a.depth, key=lambda s: key.get(s, s))
            rows = [{**layer_row(g, a.hw, a.totals.t_lower_s), "repeat": g.repeat} for g in groups]
    rows = [{**r, "repeat": r.get("repeat", 1)} for r in rows]
    names = [r["name"] for r in rows]
    parents = {n for n in names if any(m.startswith(n + ".") for m in names)}
    return [{**r, "label": label_of(r, parents)} for r in rows]
