"""Collectives inserted by tensor parallelism (:mod:`graphroof.llm.tp`): costed on the interconnect.

Ring algorithms over ``N = attrs["world_size"]`` devices, per device (the NCCL / Megatron convention):

* ``comm.all_reduce`` of a tensor of ``S`` bytes: a reduce-scatter then an all-gather, each sending
  ``(N-1)/N * S``, so ``net_bytes = 2 (N-1)/N * S``; the reduce-scatter adds ``(N-1)/N * numel`` elements.
* ``comm.all_gather`` producing a tensor of ``S`` bytes from ``S/N`` shards: ``net_bytes = (N-1)/N * S``.

* ``comm.all_to_all`` (expert-parallel dispatch / combine, :mod:`graphroof.llm.ep`) of ``[tokens, hidden]``
  activations over ``N`` ranks: each rank sends its ``tokens / attrs["tp"]`` tokens to ``attrs["top_k"]`` experts,
  ``(N-1)/N`` of them on other ranks: ``net_bytes = tokens / tp * k * hidden * dtype * (N-1)/N``; it reads its
  send buffer and writes its receive buffer (``tokens / tp * k * hidden * dtype`` each).

All also read their input from and write their output to main memory once (unfused convention), so they
move data: they are never free.  The roofline divides ``net_bytes`` by the profile's interconnect bandwidth
per direction.
"""

from __future__ import annotations

from ...errors import RuleError
from ...graph import OpNode
from ..common import io_cost, req
from ..cost import Cost
from ..registry import register_rule

__all__ = ["all_gather_net_bytes", "all_reduce_net_bytes", "all_to_all_net_bytes", "world_size"]


def world_size(node: OpNode) -> int:
    n = node.attrs.get("world_size")
    if not isinstance(n, int) or n < 1:
        raise RuleError(f"{node.op} needs attrs['world_size'] >= 1, got {n!r}")
    return n


def all_reduce_net_bytes(nbytes: float, n: int) -> float:
    """Ring all-reduce: ``2 (N-1)/N * bytes`` sent per device."""
    return 2 * (n - 1) / n * nbytes


def all_gather_net_bytes(out_nbytes: float, n: int) -> float:
    """Ring all-gather: ``(N-1)/N * bytes of the gathered tensor`` sent per device."""
    return (n - 1) / n * out_nbytes


@register_rule("comm.all_reduce")
def all_reduce_cost(node: OpNode) -> Cost:
    n = world_size(node)
    t = node.outputs[0]
    base = io_cost(node, vector_flops=(n - 1) / n * t.numel)
    return base + Cost(net_bytes=all_reduce_net_bytes(t.nbytes, n))


@register_rule("comm.all_gather")
def all_gather_cost(node: OpNode) -> Cost:
    n = world_size(node)
    return io_cost(node) + Cost(net_bytes=all_gather_net_bytes(node.outputs[0].nbytes, n))


def all_to_all_net_bytes(rows_bytes: float, n: int) -> float:
    """All-to-all: ``(N-1)/N`` of the *rows_bytes* a rank sends go to other ranks."""
    return (n - 1) / n * rows_bytes


@register_rule("comm.all_to_all")
def all_to_all_cost(node: OpNode) -> Cost:
    n = world_size(node)
    t = req(node, 0)
    tp = int(node.attrs.get("tp") or 1)
    k = int(node.attrs.get("top_k") or 1)
    rows_bytes = t.nbytes / tp * k
    return Cost(act_read_bytes=rows_bytes, act_write_bytes=rows_bytes, net_bytes=all_to_all_net_bytes(rows_bytes, n))
