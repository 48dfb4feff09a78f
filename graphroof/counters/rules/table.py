"""Rule for op-table rows (``table.op``): the user supplied the FLOPs and bytes."""

from __future__ import annotations

from ...graph import OpNode
from ..cost import Cost
from ..registry import register_rule


@register_rule("table.op")
def table_cost(node: OpNode) -> Cost:
    """FLOPs go to the unit named by ``kind`` (``matrix`` or ``vector``); bytes by the given role columns.

    ``attrs``: ``flops``, ``kind``, and either ``bytes`` (all counted as activation reads) or any of
    ``weight_bytes``, ``act_read_bytes``, ``act_write_bytes``, ``kv_read_bytes``, ``kv_write_bytes``.
    """
    a = node.attrs
    flops = a.get("flops", 0)
    kind = a.get("kind", "matrix")
    split = {k: a[k] for k in ("weight_bytes", "act_read_bytes", "act_write_bytes", "kv_read_bytes",
                                "kv_write_bytes") if a.get(k) is not None}
    if not split:
        split = {"act_read_bytes": a.get("bytes", 0)}
    return Cost(
        matrix_flops=flops if kind == "matrix" else 0,
        vector_flops=flops if kind == "vector" else 0,
        estimated=bool(a.get("estimated", False)),
        **split,
    )
