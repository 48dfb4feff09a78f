"""Per-object memos for constants derived from immutable objects that are not hashable.

A :class:`~graphroof.hardware.HardwareProfile` is a frozen dataclass holding dicts (its peak tables), so it cannot
key an ``lru_cache``; yet the kernel-time model derives the same constants from it (the matmul peak and its key,
the large-GEMM ceiling, the exponential rate ...) on every call, millions of times in a serving simulation.

:func:`memo_of` gives a dict that lives as long as the object is cached here: keyed by the object's ``id`` and
holding a strong reference to it (so the id cannot be reused by another object while the entry exists).  Entries
are what pure functions of the object (and the other parts of their key) return; profiles are never mutated in
place (every what-if copy is a new object made by :func:`dataclasses.replace`), so a memoised value is the value
the function would compute again, bit for bit.  At most :data:`MAX_OBJECTS` objects are remembered; beyond that
the memo is emptied (a bound on memory, no change to any figure).
"""

from __future__ import annotations

from typing import Any

__all__ = ["memo_of", "clear_memos", "MAX_OBJECTS"]

#: objects remembered before every memo is dropped
MAX_OBJECTS = 1024

_MEMOS: dict[int, tuple[Any, dict]] = {}


def memo_of(obj: Any) -> dict:
    """The memo dict of *obj* (created empty on first use)."""
    entry = _MEMOS.get(id(obj))
    if entry is not None and entry[0] is obj:
        return entry[1]
    if len(_MEMOS) >= MAX_OBJECTS:
        _MEMOS.clear()
    memo: dict = {}
    _MEMOS[id(obj)] = (obj, memo)
    return memo


def clear_memos() -> None:
    """Forget every memo (tests; what-if code that builds many throwaway profiles need not call it)."""
    _MEMOS.clear()
