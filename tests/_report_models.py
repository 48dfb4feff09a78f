"""Small hand-built graphs for the report tests (numbers chosen so every figure is derivable by hand)."""

from __future__ import annotations

import warnings

from graphroof.api import count_graph
from graphroof.errors import GraphroofWarning
from graphroof.graph import OpGraph, OpNode, TensorSpec

#: Names an attacker could put in a model file: raw HTML, attribute breakers, quotes.
EVIL_NAME = '<script>alert("pwn")</script>'
EVIL_OP = "evil.<img src=x onerror=alert(1)>"
EVIL_SCOPE = "\"onmouseover=\"alert(2)\" it's"  # no dots: the whole scope is the layer name
EVIL_RAW = ('<script>alert("pwn")', "<img src=x", '"onmouseover="', "it's")


def _table_op(g: OpGraph, name: str, scope: str, flops: float, nbytes: float, kind: str, op: str = "table.op"):
    g.add_op(OpNode(name, op, attrs={"flops": flops, "bytes": nbytes, "kind": kind, "compute_dtype": "bf16"},
                    scope=scope))


def tiny_graph(name: str = "tiny") -> OpGraph:
    """Four table ops and one op without a rule, on round_hw (100 TFLOP/s matrix, 10 vector, 1 TB/s):

    * ``embed`` (emb): 0 FLOPs, 0.5 GB -> 0.5e9 / 1e12 = 0.5 ms, memory-bound, not on the chart (no FLOPs)
    * ``up`` (blk.mlp): 200 GFLOP matrix, 1 GB -> max(200e9 / 100e12 = 2 ms, 1 ms) = 2 ms, compute, AI 200
    * ``act`` (blk.mlp): 1 GFLOP vector, 2 GB -> max(1e9 / 10e12 = 0.1 ms, 2 ms) = 2 ms, memory, AI 0.5
    * ``view`` (blk.mlp): 0 FLOPs, 0 bytes -> 0 s (collapsed into the "moves no data" row)
    * ``mystery`` (blk.attn, custom.Mystery, no rule): bf16[1000,1000] in and out -> 2 * 2e6 B = 4 MB -> 4 us
    Total 0.5 + 2 + 2 + 0.004 = 4.504 ms; ``up`` is 2 / 4.504 = 44.4 % of it.
    """
    g = OpGraph(name, meta={"capture": "hand-built test graph", "model": name})
    _table_op(g, "embed", "emb", 0, 0.5e9, "vector")
    _table_op(g, "up", "blk.mlp", 200e9, 1e9, "matrix")
    _table_op(g, "act", "blk.mlp", 1e9, 2e9, "vector")
    _table_op(g, "view", "blk.mlp", 0, 0, "vector")
    t = TensorSpec((1000, 1000), "bf16")
    g.add_op(OpNode("mystery", "custom.Mystery", (t,), (t,), {}, "blk.attn"))
    return g


def evil_graph() -> OpGraph:
    """Node names, op types and scopes that try to break out of HTML / markdown."""
    g = OpGraph("evil<model>", meta={"capture": "hand-built test graph", "model": 'evil<model>"\''})
    _table_op(g, EVIL_NAME, EVIL_SCOPE, 200e9, 1e9, "matrix")
    t = TensorSpec((1000, 1000), "bf16")
    g.add_op(OpNode("it's \"quoted\"", EVIL_OP, (t,), (t,), {}, EVIL_SCOPE))
    _table_op(g, "pipe|name`*_x_*", "a|b", 1e9, 2e9, "vector")
    return g


def analyse(graph: OpGraph, hw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GraphroofWarning)
        return count_graph(graph, hw)
