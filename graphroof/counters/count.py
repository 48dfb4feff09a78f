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
from typing import Any, cast

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
        cost = cast(Any, rule)(node, settings) if takes_settings(rule) else rule(node)  # a rule taking settings
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


def _freeze(v: Any) -> Any:
    """A hashable stand-in for an attribute value that equals another's only when the values are equal and of
    the same types: ints and strings stand for themselves (they equal no other stand-in), floats, bools,
    containers and anything else are tagged with their type (so ``1``, ``1.0`` and ``True`` stay apart).
    Raises TypeError for an unhashable leaf."""
    t = type(v)
    if t is str or t is int or v is None:
        return v
    if t is tuple or t is list:
        return t, *[_freeze(x) for x in v]
    if t is dict:
        return dict, *[(_freeze(k), _freeze(x)) for k, x in v.items()]
    hash(v)
    return t, v


def signature(node: OpNode) -> tuple | None:
    """What a built-in rule's result depends on: the op key, the tensor specs and the attributes -- not the
    op's name or scope -- or None when an attribute cannot be frozen.  The ~80 identical decoder blocks of an
    LLM give ~80 nodes per signature."""
    try:
        return node.op, node.inputs, node.outputs, _freeze(node.attrs)
    except TypeError:
        return None


def _pure(rule: Rule) -> bool:
    """Whether *rule* is one of graphroof's built-in rules (they read only the op key, specs, attrs and settings,
    so equal signatures give equal costs); a user's rule may read anything (the name, the scope): never shared."""
    return rule is FREE or (getattr(rule, "__module__", None) or "").startswith(_RULES_PACKAGE)


_RULES_PACKAGE = __name__.rsplit(".", 1)[0] + ".rules."


def _count_all(graph: OpGraph, reg: RuleRegistry, rules: Mapping[str, Rule | None] | None,
               summary: CountSummary, settings: CountSettings, memo: bool = True) -> None:
    seen: dict[tuple, Cost] = {}  # signature -> cost, for graphroof's own rules (see signature())
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
            key = signature(node) if memo and _pure(rule) else None
            hit = seen.get(key) if key is not None else None
            if hit is not None:
                cost = hit
            else:
                cost = count_node(node, rule, settings)
                if key is not None:
                    seen[key] = cost
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
            except GraphroofError as e:  # keeps its type and attributes (an UnboundDimError its .dim)
                e.args = (f"{node.name} ({node.op}): repeat {repeat}: {e}", *e.args[1:])
                raise
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
    memo: bool = True,
) -> CountSummary:
    """Count every op of *graph* in place (``nodes[n]["cost"]``) and return the summary.

    *rules* overrides the registry per call; a ``None`` value marks a key as free.  *settings* picks the
    modelling assumptions (attention byte model, causal counting); they are passed to the rules that take
    them.  The settings used are recorded in ``graph.meta["count_settings"]`` for the reports.

    *memo*: run each of graphroof's own rules once per op signature (op key, tensor specs, attributes) and
    share the result among the ops that have it (the repeated blocks of a model); ``False`` runs the rule on
    every op (the reference the tests compare with).
    """
    reg = registry or REGISTRY
    settings = settings or CountSettings()
    summary = CountSummary()
    _count_all(graph, reg, rules, summary, settings, memo)
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
