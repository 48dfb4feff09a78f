"""Layer tables for the LLM report: the one rollup and fold policy of :mod:`graphroof.layers`.

A decoder's 32 identical blocks make 32 identical rows; folding replaces the block index by ``*``
(``model.layers.*.mlp``) and sums the blocks, recording how many were folded in ``repeat``, when the blocks do
identical work (:func:`graphroof.layers.fold_key`; a block that differs keeps its own row).  Rows carry the same
fields as :attr:`graphroof.analysis.Analysis.layers` plus ``repeat``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from ..analysis import Analysis
from ..layers import auto_depth, fold_layers, fold_name, scope_parts

__all__ = ["block_depth", "table_depth", "fold_name", "layer_rows"]


def block_depth(scopes: Iterable[str]) -> int | None:
    """Depth of the repeated block (``model.layers.0`` is depth 2), or None without numbered blocks."""
    depths: Counter[int] = Counter()
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
    identical blocks folded (:func:`graphroof.layers.fold_layers`)."""
    return fold_layers(a.timed_graph, a.hw, depth or table_depth(a), a.totals.t_lower_s, a.params_by_op, fold)
