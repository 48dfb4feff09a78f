"""Rule registry: op key -> rule, filled by decorators.

A rule is ``Callable[[OpNode], Cost]``: it sees plain data only.  A rule that depends on the counting settings
(:class:`~graphroof.counters.settings.CountSettings`) takes them as a second parameter
named ``settings``, ``def rule(node, settings=DEFAULT)``; :func:`takes_settings` finds out by signature inspection (recorded when the
rule is registered) and the counting pass passes them.  Registering ``None`` marks a key as
explicitly free (aliasing ops: views, reshapes, ``getitem``), which costs 0 FLOPs *and* 0 bytes, so only
ops that move no data may be free.
"""

from __future__ import annotations

import difflib
import inspect
import weakref
from collections.abc import Callable, Iterable, Mapping

from ..graph import OpNode
from .cost import Cost

__all__ = ["FREE", "REGISTRY", "Rule", "RuleRegistry", "register_rule", "takes_settings"]

Rule = Callable[[OpNode], Cost]


def _free(node: OpNode) -> Cost:
    return Cost()


#: The rule object stored for explicitly free keys.
FREE: Rule = _free

_TAKES_SETTINGS: weakref.WeakKeyDictionary[Rule, bool] = weakref.WeakKeyDictionary()


def takes_settings(rule: Rule) -> bool:
    """True when *rule*'s second positional parameter is named ``settings``; cached per rule."""
    try:
        return _TAKES_SETTINGS[rule]
    except (KeyError, TypeError):
        pass
    try:
        params = list(inspect.signature(rule).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: a one-argument rule
        params = []
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    ok = len(positional) >= 2 and positional[1].name == "settings"
    try:
        _TAKES_SETTINGS[rule] = ok
    except TypeError:  # a callable that cannot be weakly referenced: not cached
        pass
    return ok


class RuleRegistry:
    """Op key -> rule.  Duplicate registration raises unless ``override=True``."""

    def __init__(self) -> None:
        self._rules: dict[str, Rule] = {}

    def add(self, key: str, rule: Rule | None, *, override: bool = False) -> None:
        if key in self._rules and not override:
            first = self._rules[key]
            raise ValueError(
                f"duplicate rule for {key!r} (first: {first.__module__}.{first.__qualname__}); "
                "pass override=True to replace it"
            )
        self._rules[key] = FREE if rule is None else rule
        takes_settings(self._rules[key])  # recorded at registration

    def register(self, *keys: str, override: bool = False) -> Callable[[Rule], Rule]:
        """Decorator registering one rule under several op keys."""
        if not keys:
            raise TypeError("register_rule needs at least one op key")

        def deco(fn: Rule) -> Rule:
            for k in keys:
                self.add(k, fn, override=override)
            return fn

        return deco

    def free(self, *keys: str, override: bool = False) -> None:
        """Mark aliasing ops (no data moved) as free."""
        for k in keys:
            self.add(k, None, override=override)

    def lookup(self, key: str, overrides: Mapping[str, Rule | None] | None = None) -> Rule | None:
        """The rule for *key* (per-call *overrides* first), or ``None`` when there is none."""
        if overrides and key in overrides:
            r = overrides[key]
            return FREE if r is None else r
        return self._rules.get(key)

    def is_free(self, key: str) -> bool:
        return self._rules.get(key) is FREE

    def keys(self) -> list[str]:
        return sorted(self._rules)

    def __contains__(self, key: object) -> bool:
        return key in self._rules

    def __len__(self) -> int:
        return len(self._rules)

    def suggest(self, key: str, n: int = 3) -> list[str]:
        """Close registered keys, for "did you mean" messages."""
        return difflib.get_close_matches(key, self._rules, n=n, cutoff=0.6)

    def copy(self) -> RuleRegistry:
        r = RuleRegistry()
        r._rules = dict(self._rules)
        return r

    def update(self, rules: Iterable[tuple[str, Rule | None]], *, override: bool = True) -> None:
        for k, v in rules:
            self.add(k, v, override=override)


#: The global registry the built-in rules register into.
REGISTRY = RuleRegistry()


def register_rule(*keys: str, override: bool = False) -> Callable[[Rule], Rule]:
    """Register a rule globally under one or more op keys.

    >>> from graphroof import Cost, register_rule
    >>> @register_rule("mylib.doctest_op")
    ... def _rule(node):
    ...     return Cost(vector_flops=1)
    """
    return REGISTRY.register(*keys, override=override)
