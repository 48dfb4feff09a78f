"""Layer tables for the LLM report: the one rollup of :mod:`graphroof.layers`, with repeated blocks folded.

A decoder's 32 identical blocks make 32 identical rows; folding replaces the block index by ``*``
(``model.layers.*.mlp``) and sums the blocks, recording how many were folded in ``repeat``.  Rows carry the
same fields as :attr:`graphroof.analysis.Analysis.layers` plus ``repeat``.
"""

from __future__ import annotations

import re
from collections import Counter

from ..analysis import Analysis
from ..layers import auto_depth, layer_row, rollup, scope_parts

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
    """Rows in first-seen order, Analysis.layers fields (``params`` included, + ``repeat``): the common rollup,
    blocks folded."""
    groups = rollup(a.timed_graph, a.hw, depth or table_depth(a), key=fold_name if fold else None)
    params = a.params_by_op
    out = []
    for g in groups:
        row = layer_row(g, a.hw, a.totals.t_lower_s)
        out.append({**row, "repeat": g.repeat, "params": sum(params.get(n, 0) for n in row["ops"])})
    return out
