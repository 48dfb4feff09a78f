"""Map measured op times back onto OpGraph nodes.

A runner (:mod:`graphroof.measure.run_torch`, :mod:`graphroof.measure.run_onnx`) turns one model execution into a list
of :class:`Event`: one per top-level measured op call, in execution order, with the module scope it ran in,
its inclusive time, and the names of the op and of everything it called (an eager ``aten::linear`` calls
``aten::t`` and ``aten::addmm``).  :func:`match` assigns events to the graph's nodes that do work (FLOPs or
bytes > 0).  The algorithm, in three passes over the still-unassigned nodes and events:

0. **By node name**, for runtimes that keep the graph's node names (ONNX Runtime's per-node events); a
   runtime node that fuses several graph nodes carries the list it ``covers`` and is shared among them.
1. **By name, per scope, in order.**  Nodes and events are grouped by scope (the dotted module path); within a
   scope both are in program order.  Each node, in topological order, takes the first event at or after the
   scope's cursor (looking at most ``window`` events ahead) whose name set holds the node's op name
   (normalised: ``aten.`` / ``onnx.`` and leading ``_`` dropped, ``native_`` and ``_legit_no_training``-style
   suffixes removed).  A match on the event's own name closes the event (node and event are the same op); a
   match on a name the event called leaves it open for the other nodes it was decomposed into (``t`` +
   ``addmm`` of a ``linear``), each name occurrence used once.  Events jumped over stay unassigned.
2. **By name, across scopes, in order**: the same greedy walk (8x the window) over the leftovers of all scopes
   (catches nodes a frontend attributes to a parent scope).
3. **By position, per scope**: where a scope has as many leftover work nodes as leftover events that are not
   pure views, they are paired in order (``how = "position"``).

An event shared by several nodes is split among them in proportion to their predicted roofline time (equal
shares when that is zero).  Nodes left over are *unmatched nodes*; events left over are *unmatched events*
(framework overhead such as ``aten::empty`` / views, or ops the runtime fused) and are reported with their time.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Event", "MatchResult", "norm_name", "match", "VIEW_NAMES"]

#: Eager ops that only alias or allocate: never paired by position (pass 3).
VIEW_NAMES = frozenset({
    "view", "reshape", "t", "transpose", "permute", "expand", "as_strided", "unsqueeze", "squeeze", "slice",
    "select", "empty", "empty_like", "empty_strided", "detach", "alias", "unflatten", "flatten", "contiguous",
    "resolve_conj", "resolve_neg", "lift_fresh", "_unsafe_view", "unsafe_view", "split", "chunk", "narrow",
    "identity", "shape", "reshape_as", "view_as", "expand_as", "numpy_t", "mt", "resize_", "zeros", "ones",
})

_SUFFIX = re.compile(r"(_legit_no_training|_legit_functional|_legit|_no_training|_functional|_for_cpu|_default)$")


def norm_name(name: str) -> str:
    """``"aten._native_batch_norm_legit_no_training"`` -> ``"batch_norm"``; ``"onnx.Gemm"`` -> ``"gemm"``."""
    s = name.rsplit("::", 1)[-1]
    if "." in s and s.split(".", 1)[0] in ("aten", "onnx", "prims", "quantized", "torch", "com"):
        s = s.rsplit(".", 1)[-1]
    s = s.lower().lstrip("_")
    s = _SUFFIX.sub("", s)
    if s.startswith("native_"):
        s = s[len("native_"):]
    return s


@dataclass
class Event:
    """One measured top-level op call.  ``names`` holds the normalised names of the op and all it called."""

    name: str
    scope: str
    t_s: float
    names: Counter = field(default_factory=Counter)
    index: int = 0          # position in the execution stream
    label: str = ""         # the runtime's node name (ONNX node name); "" for eager torch ops
    covers: tuple[str, ...] = ()  # graph nodes this runtime node computes (fusions), when the runtime says

    def __post_init__(self) -> None:
        if not self.names:
            self.names = Counter([norm_name(self.name)])


@dataclass
class MatchResult:
    """``node_time_s``: measured seconds per matched node; ``how``: node -> node-name | fused | name |
    descendant | cross-scope | position; ``unmatched_nodes``: work nodes with no event; ``unmatched_events``: events with
    no node."""

    node_time_s: dict[str, float]
    how: dict[str, str]
    node_events: dict[str, list[int]]
    unmatched_nodes: list[str]
    unmatched_events: list[Event]


@dataclass
class _Node:
    name: str
    key: str           # normalised op name
    scope: str
    weight: float      # predicted time, for splitting shared events


class _State:
    def __init__(self, events: Sequence[Event]):
        self.events = list(events)
        self.remaining = [Counter(e.names) for e in self.events]
        self.own = [norm_name(e.name) for e in self.events]
        self.closed = [False] * len(self.events)
        self.used = [False] * len(self.events)
        self.assign: dict[int, list[_Node]] = {}
        self.how: dict[str, str] = {}

    def take(self, i: int, node: _Node, how: str) -> None:
        self.assign.setdefault(i, []).append(node)
        self.used[i] = True
        self.how[node.name] = how
        if node.key == self.own[i] or how in ("position", "node-name", "fused"):
            self.closed[i] = True
        else:
            self.remaining[i][node.key] -= 1

    def fits(self, i: int, node: _Node) -> bool:
        return not self.closed[i] and self.remaining[i][node.key] > 0


def _greedy(state: _State, nodes: list[_Node], idx: list[int], how: str, window: int) -> list[_Node]:
    """Walk *nodes* in order over events *idx* (positions into state.events); return the nodes left over."""
    left: list[_Node] = []
    cur = 0
    for n in nodes:
        hit = None
        for k in range(cur, min(len(idx), cur + window + 1)):
            if state.fits(idx[k], n):
                hit = k
                break
        if hit is None:
            left.append(n)
            continue
        i = idx[hit]
        own = n.key == state.own[i]
        state.take(i, n, how if how != "name" else ("name" if own else "descendant"))
        cur = hit + 1 if state.closed[i] else hit
    return left


def _by_scope(items: Iterable, scope_of) -> dict[str, list]:
    out: dict[str, list] = {}
    for it in items:
        out.setdefault(scope_of(it), []).append(it)
    return out


def match(nodes: Sequence[tuple[str, str, str, float]], events: Sequence[Event], *, window: int = 8,
          scope_map: Mapping[str, str] | None = None) -> MatchResult:
    """Assign *events* to *nodes* (``(name, op_key, scope, predicted_t_s)`` of every node that does work, in
    topological order).  *scope_map* rewrites graph scopes to event scopes where the two spell them differently.
    """
    sm = scope_map or {}
    ns = [_Node(n, norm_name(op), sm.get(scope, scope), max(0.0, w)) for n, op, scope, w in nodes]
    st = _State(events)
    ev_by_scope = _by_scope(range(len(st.events)), lambda i: st.events[i].scope)
    # pass 0: runtimes that keep the graph's node names (ONNX Runtime) match on them, or on the list of graph
    # nodes a fused runtime node covers
    by_node = {n.name: n for n in ns}
    done: set[str] = set()
    for i, e in enumerate(st.events):
        names = e.covers or ((e.label,) if e.label else ())
        targets = [by_node[x] for x in names if x in by_node]
        for n in targets:
            st.take(i, n, "node-name" if names == (e.label,) else "fused")
            done.add(n.name)
    ns_left = [n for n in ns if n.name not in done]
    # pass 1: by name within each scope
    left: list[_Node] = []
    for scope, group in _by_scope(ns_left, lambda n: n.scope).items():
        left += _greedy(st, group, ev_by_scope.get(scope, []), "name", window)
    # pass 2: by name across scopes over what is left (events still open, in execution order)
    if left:
        open_idx = [i for i in range(len(st.events)) if not st.closed[i]]
        order = {n.name: k for k, n in enumerate(ns)}
        left = _greedy(st, sorted(left, key=lambda n: order[n.name]), open_idx, "cross-scope", 8 * window)
    # pass 3: by position within a scope when the leftover counts agree
    still: list[_Node] = []
    for scope, group in _by_scope(left, lambda n: n.scope).items():
        free = [i for i in ev_by_scope.get(scope, []) if not st.used[i] and st.own[i] not in VIEW_NAMES]
        if len(free) == len(group):
            for n, i in zip(group, free):
                st.take(i, n, "position")
        else:
            still += group
    # split each event's time among its nodes by predicted time
    times: dict[str, float] = {}
    evs: dict[str, list[int]] = {}
    for i, group in st.assign.items():
        total_w = sum(n.weight for n in group)
        for n in group:
            share = n.weight / total_w if total_w > 0 else 1.0 / len(group)
            times[n.name] = times.get(n.name, 0.0) + st.events[i].t_s * share
            evs.setdefault(n.name, []).append(st.events[i].index)
    return MatchResult(times, st.how, evs, [n.name for n in still],
                       [e for i, e in enumerate(st.events) if not st.used[i]])
