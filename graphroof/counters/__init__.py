"""Counting: rules (op key -> Cost), the registry, and the counting pass.

Importing this package imports every built-in rule module so they register.
"""

from . import rules  # noqa: F401  (registers the built-in rules)
from .cost import FLOPS_PER_MAC, Cost
from .count import CountSummary, count
from .registry import REGISTRY, RuleRegistry, register_rule

__all__ = ["FLOPS_PER_MAC", "REGISTRY", "Cost", "CountSummary", "RuleRegistry", "count", "register_rule"]
