"""``kv_cache.append``: the new keys or values of a step written into the KV cache.

Written by :func:`graphroof.llm.kvcache.mark_kv_cache` in place of a traced concatenation onto the cache.
Reads the new entries (activation role) and writes them into the cache (KV-cache role): no FLOPs, and the
rest of the cache is neither read nor rewritten (a serving engine's static or paged cache).
"""

from __future__ import annotations

from ...graph import OpNode
from ..common import io_cost
from ..cost import Cost
from ..registry import register_rule


@register_rule("kv_cache.append")
def kv_append_cost(node: OpNode) -> Cost:
    return io_cost(node)
