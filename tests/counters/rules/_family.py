"""Helpers for the per-family rule tests: run a key's rule on a literal node, and the cross-frontend check."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from graphroof.counters import REGISTRY
from graphroof.counters.cost import Cost
from graphroof.counters.count import count_node
from graphroof.counters.family import FAMILIES
from graphroof.counters.settings import CountSettings
from graphroof.graph import OpNode

#: A cross-frontend case: one builder called with every key of the row (the frontends present the op alike), or
#: an (ATen node, ONNX node) pair of the same shapes and attributes in each frontend's input layout.
Case = Callable[[str], OpNode] | tuple[OpNode, OpNode]


def run(n: OpNode, **settings) -> Cost:
    """The Cost of *n* through the registry and the counting pass's entry point (settings passed explicitly)."""
    rule = REGISTRY.lookup(n.op)
    assert rule is not None, f"no rule for {n.op}"
    return count_node(n, rule, CountSettings(**settings))


def paired_members(family: str) -> list[str]:
    """Members of *family* registered under both an ATen and an ONNX key."""
    return [r.member for r in FAMILIES[family] if r.aten and r.onnx]


def assert_frontends_agree(family: str, member: str, cases: Mapping[str, Case], **settings) -> Cost:
    """Every ATen key and every ONNX key of the row give the same Cost on the member's case."""
    row = next(r for r in FAMILIES[family] if r.member == member)
    if row.rule is None and row.onnx_rule is None:  # aliasing ops: free in both frontends
        assert all(REGISTRY.is_free(k) for k in (*row.aten, *row.onnx))
        return Cost()
    assert member in cases, f"{family}.{member} has ATen and ONNX keys but no cross-frontend test case"
    case = cases[member]
    if callable(case):
        costs = {k: run(case(k), **settings) for k in (*row.aten, *row.onnx)}
    else:
        a, o = case
        assert a.op in row.aten and o.op in row.onnx, (a.op, o.op)
        costs = {a.op: run(a, **settings), o.op: run(o, **settings)}
    first = next(iter(costs.values()))
    assert first != Cost(), f"{family}.{member}: the case costs nothing, it cannot tell the frontends apart"
    differ = {k: c for k, c in costs.items() if c != first}
    assert not differ, f"{family}.{member}: {next(iter(costs))} gives {first}, but {differ}"
    return first
