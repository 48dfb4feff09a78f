"""The counting pass: run the rule for every op, record ``graph.nx.nodes[n]["cost"]``.

Three tiers (fvcore style): handled by a rule, explicitly free (aliasing ops), unknown.  Unknown ops are
never a silent zero: they get the bytes of their inputs and outputs (so they are memory-bound), are marked
``estimated``, are counted per op key, and produce one :class:`GraphroofWarning` per key with its count.
``strict=True`` raises :class:`UnsupportedOpError` listing them instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ..errors import GraphroofError, RuleError, UnsupportedOpError
from ..errors import warn as warn_user
from ..graph import COST, ESTIMATED, REPEAT, SHAPE_UNKNOWN, OpGraph, OpNode, resolve_dim
from .common import io_cost
from .cost import Cost
from .registry import FREE, REGISTRY, Rule, RuleRegistry, takes_settings
from .settings import DEFAULT, CountSettings

__all__ = ["CountSummary", "count", "count_node"]


@dataclass
class CountSummary:
    """What the counting pass saw: coverage and unknown op keys with their node counts."""

    total: int = 0
    ruled: int = 0
    free: int = 0
    unknown: Counter = field(default_factory=Counter)
    estimated: int = 0
    shape_unknown: list = field(default_factory=list)

    @property
    def n_unknown(self) -> int:
        return sum(self.unknown.values())

    def coverage_line(self) -> str:
        """``"412/415 nodes ruled; unknown: onnx.Foo×3 (bytes only)"``."""
        ruled = self.total - self.n_unknown
        line = f"{ruled}/{self.total} nodes ruled ({self.free} free views)"
        if self.unknown:
            parts = ", ".join(f"{k}×{v}" for k, v in sorted(self.unknown.items()))
            line += f"; unknown: {parts} (bytes only, estimated)"
        return line

    def as_dict(self) -> dict:
        return {"total": self.total, "ruled": self.ruled, "free": self.free,
                "estimated": self.estimated, "unknown": dict(sorted(self.unknown.items()))}


def unknown_cost(node: OpNode) -> Cost:
    """Fallback for ops without a rule: read every input, write every output, no FLOPs, estimated."""
    return io_cost(node, estimated=True)


def count_node(node: OpNode, rule: Rule, settings: CountSettings = DEFAULT) -> Cost:
    """Run *rule* on *node* (with *settings* when the rule takes them), naming the node on failure.

    A graphroof error keeps its type and attributes (an :class:`UnboundDimError` stays one, with its ``dim``):
    the node's description is appended to its message in place, never by rebuilding the exception.
    Any other exception becomes a :class:`RuleError` chained from it.
    """
    try:
        cost = rule(node, settings) if takes_settings(rule) else rule(node)
    except UnsupportedOpError:
        raise
    except GraphroofError as e:
        e.args = (f"{e} (while counting {node.describe()})", *e.args[1:])
        raise
    except Exception as e:  # a rule bug or an input the rule did not expect
        raise RuleError(f"rule for {node.op} failed on {node.describe()}: {type(e).__name__}: {e}") from e
    if not isinstance(cost, Cost):
        raise RuleError(f"rule for {node.op} returned {type(cost).__name__}, expected Cost ({node.describe()})")
    return cost


def _count_all(graph: OpGraph, reg: RuleRegistry, rules: Mapping[str, Rule | None] | None,
               summary: CountSummary, settings: CountSettings) -> None:
    for node in graph.ops():
        summary.total += 1
        rule = reg.lookup(node.op, rules)
        if node.attrs.get(SHAPE_UNKNOWN):  # no shape to rule on: bytes of what is known, estimated, warned
            summary.shape_unknown.append(node.name)
            cost = unknown_cost(node)
        elif rule is None:
            summary.unknown[node.op] += 1
            cost = unknown_cost(node)
        else:
            cost = count_node(node, rule, settings)
            if rule is FREE:
                summary.free += 1
            else:
                summary.ruled += 1
        if node.attrs.get(ESTIMATED) and not cost.estimated:
            cost = replace(cost, estimated=True)
        repeat = node.attrs.get(REPEAT, 1)
        if repeat != 1:  # ops inside a loop body (frontends set the trip count, an int or a symbolic dim)
            try:
                cost = cost.scale(resolve_dim(repeat, graph.meta.get("dims", {})))
            except GraphroofError as e:
                raise type(e)(f"{node.name} ({node.op}): repeat {repeat}: {e}") from None
        if cost.estimated:
            summary.estimated += 1
        graph.set(node.name, COST, cost)


def count(
    graph: OpGraph,
    registry: RuleRegistry | None = None,
    *,
    rules: Mapping[str, Rule | None] | None = None,
    strict: bool = False,
    warn: bool = True,
    settings: CountSettings | None = None,
) -> CountSummary:
    """Count every op of *graph* in place (``nodes[n]["cost"]``) and return the summary.

    *rules* overrides the registry per call; a ``None`` value marks a key as free.  *settings* picks the
    modelling assumptions (attention byte model, causal counting); they are passed to the rules that take
    them.  The settings used are recorded in ``graph.meta["count_settings"]`` for the reports.
    """
    reg = registry or REGISTRY
    settings = settings or CountSettings()
    summary = CountSummary()
    _count_all(graph, reg, rules, summary, settings)
    graph.meta["count_settings"] = settings
    if summary.unknown and strict:
        parts = []
        for k, v in sorted(summary.unknown.items()):
            hint = reg.suggest(k)
            parts.append(f"{k}×{v}" + (f" (did you mean {', '.join(hint)}?)" if hint else ""))
        raise UnsupportedOpError(
            f"no counting rule for {len(summary.unknown)} op type(s): {'; '.join(parts)}; "
            "register one with graphroof.register_rule or drop --strict to count them as bytes only",
            dict(summary.unknown),
        )
    if warn and summary.shape_unknown:
        names = summary.shape_unknown
        warn_user(f"{len(names)} node(s) have tensors of unknown shape (e.g. {names[0]!r}); counted as the bytes "
                      "of their known tensors only, no FLOPs (estimated); give the input shapes with --input")
    if warn:
        for k, v in sorted(summary.unknown.items()):
            warn_user(f"no rule for {k!r} ({v} node{'s' if v != 1 else ''}); counted as memory-only (bytes of inputs "
                "and outputs, estimated); add one with graphroof.register_rule")
    graph.meta["count_summary"] = summary
    return summary
