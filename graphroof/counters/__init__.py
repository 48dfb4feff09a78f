"""Counting: rules (op key -> Cost), the registry, and the counting pass.

Importing this package imports every built-in rule module so they register.
"""

from .cost import FLOPS_PER_MAC, Cost
from .count import CountSummary, count
from .registry import REGISTRY, RuleRegistry, register_rule
from . import rules  # noqa: F401  (registers the built-in rules)

__all__ = ["FLOPS_PER_MAC", "Cost", "CountSummary", "count", "REGISTRY", "RuleRegistry", "register_rule"]
