"""Layer tables for the LLM report: the rollup of :mod:`graphroof.layers`, with repeated blocks folded.

A decoder's 32 identical blocks make 32 identical rows; folding replaces the block index by ``*``
(``model.layers.*.mlp``) and sums the blocks, recording how many were folded in ``repeat``.  Rows carry the
same fields as :attr:`graphroof.analysis.Analysis.layers` plus ``repeat``.
"""

from __future__ import annotations

import re
from collections import Counter

from ..analysis import Analysis, _cost_fields
from ..counters.cost import Cost
from ..graph import BOUND, COST
from ..layers import auto_depth, scope_at, scope_parts
from ..roofline import combine

__all__ = ["block_depth", "table_depth", "fold_name", "layer_rows"]

_INDEX = re.compile(r"\.\d+(?=\.|$)")


def fold_name(name: str) -> str:
    """``model.layers.3.mlp`` -> ``model.layers.*.mlp``."""
    return _INDEX.sub(".*", name)


def block_depth(scopes) -> int | None:
    """Depth of the repeated block (``model.layers.0`` is depth 2), or None without numbered blocks."""
    depths = Counter()
    for s in scopes:
        for i, p in enumerate(scope_parts(s)):
            if re.search(r"\.\d+$", p):
                depths[i + 1] += 1
                break
    return depths.most_common(1)[0][0] if depths else None


def table_depth(analysis: Analysis) -> int:
    """One level below the repeated block (attention, MLP, norms, collectives), else the automatic depth."""
    d = block_depth(op.scope for op in analysis.graph.ops())
    return d + 1 if d else auto_depth(analysis.graph)


def layer_rows(a: Analysis, depth: int | None = None, fold: bool = True) -> list[dict]:
    """Rows in first-seen order, Analysis.layers fields (+ ``repeat``)."""
    depth = depth or table_depth(a)
    groups: dict[str, list] = {}
    blocks: dict[str, set] = {}
    for op in a.graph.ops():
        full = scope_at(op.scope, depth)
        key = fold_name(full) if fold else full
        groups.setdefault(key, []).append(op)
        blocks.setdefault(key, set()).add(full)
    total_t = a.totals.t_lower_s or 1.0
    rows = []
    for name, ops in groups.items():
        cost = sum((a.graph.get(o.name, COST) for o in ops), Cost())
        t = combine([a.graph.get(o.name, BOUND) for o in ops], cost, a.hw)
        flops, nbytes = cost.flops, cost.bytes
        intensity = flops / nbytes if nbytes else (float("inf") if flops else 0.0)
        peak = flops / t.t_compute_s if t.t_compute_s else 0.0
        kinds = Counter(o.op for o in ops)
        rows.append({
            "name": name, "n_ops": len(ops), **_cost_fields(cost), "intensity": intensity,
            "attainable_flops_per_s": min(peak, intensity * a.hw.mem_bw_bytes_per_s) if flops else 0.0,
            "t_compute_s": t.t_compute_s, "t_memory_s": t.t_memory_s, "t_network_s": t.t_network_s,
            "time_s": t.t_lower_s, "time_upper_s": t.t_upper_s, "time_realistic_s": t.t_realistic_s,
            "bound": t.bound, "share": t.t_lower_s / total_t,
            "op_kinds": dict(sorted(kinds.items(), key=lambda kv: -kv[1])),
            "ops": [o.name for o in ops], "repeat": len(blocks[name]),
        })
    return rows
