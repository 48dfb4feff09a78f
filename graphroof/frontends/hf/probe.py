"""The cache-layout probe over one block per group of identical decoder layers.

:meth:`HFSource.kv_layout` runs a one-token step on meta tensors and records the shapes each layer hands its KV
cache.  A plain forward runs every layer: 0.4-1.1 s for a 32-80-layer model, as long as a folded trace.  Identical
layers (:func:`graphroof.frontends.torch.blocks.fold_groups`: same structure, parameters and per-layer config)
hand their caches the same shapes when they receive the same inputs, so under :func:`skipped_blocks` only the
first member of each group runs:

* the first member runs for real; its inputs' keys (:func:`~graphroof.frontends.torch.recording.leaf_key`: shapes,
  strides, dtypes; the same objects otherwise), its output and the one cache layer it wrote are kept;
* a later member whose inputs have the same keys returns the first member's output (meta tensors hold no
  values: only shapes travel on) and its cache layer (its ``layer_idx``) gets the first member's entry;
* anything else runs for real: a member whose inputs differ, a group whose first member wrote no cache layer or
  several, a member without one ``layer_idx``-like number.

The layouts equal the plain probe's (tested on dense, GQA, MoE, MLA and sliding-window models).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["skipped_blocks"]


def _layer_of(index: dict) -> int | None:
    """The cache layer a block writes: its one ``layer_idx``-like number (None when it has none or several)."""
    from ..torch.blocks import INDEX_ATTRS

    vals = {v for k, v in index.items() if k[-1] in INDEX_ATTRS}
    return vals.pop() if len(vals) == 1 else None


def _keys(args: tuple, kwargs: dict) -> tuple:
    from ..torch.recording import leaf_keys, tree_leaves

    return leaf_keys(tree_leaves((args, kwargs)))


class _Group:
    """One group's first member's call: its inputs' keys, output and cache layer, once it ran."""

    def __init__(self, layer: int):
        self.layer = layer
        self.keys: tuple | None = None
        self.out: Any = None


@contextmanager
def skipped_blocks(root: Any, probe: dict) -> Iterator[list[int]]:
    """While active, the members of *root*'s groups of identical blocks after the first return the first's
    output and copy its entry of *probe* (``cache layer -> (key shape, value shape)``) when the step ends.
    Yields the list of the cache layers so copied (filled as the step runs)."""
    from ..torch.blocks import fold_groups

    installed: list[tuple[Any, bool, Any]] = []
    copies: list[tuple[int, int]] = []  # (skipped member's cache layer, its group's first member's)
    skipped: list[int] = []

    def first_forward(state: _Group, fwd: Any) -> Any:
        def forward(*args: Any, **kwargs: Any) -> Any:
            keys, before = _keys(args, kwargs), set(probe)
            out = fwd(*args, **kwargs)
            if state.keys is None and set(probe) - before == {state.layer}:
                state.keys, state.out = keys, out
            return out
        return forward

    def later_forward(state: _Group, layer: int | None, fwd: Any) -> Any:
        def forward(*args: Any, **kwargs: Any) -> Any:
            if layer is None or state.keys is None or layer in probe or _keys(args, kwargs) != state.keys:
                return fwd(*args, **kwargs)
            copies.append((layer, state.layer))
            skipped.append(layer)
            return state.out
        return forward

    try:  # installed inside: a failure part-way restores what was installed
        for g in fold_groups(root, {}):
            first = _layer_of(g.members[0].index)
            if first is None:
                continue
            state = _Group(first)
            for i, m in enumerate(g.members):
                mod = m.module
                had, fwd = "forward" in vars(mod), mod.forward
                mod.forward = first_forward(state, fwd) if i == 0 else later_forward(state, _layer_of(m.index), fwd)
                installed.append((mod, had, fwd))
        yield skipped
        for layer, src in copies:
            probe.setdefault(layer, probe[src])
    finally:
        for mod, had, fwd in reversed(installed):  # last first: a block wrapped twice gets its own forward back
            if had:
                mod.forward = fwd
            else:
                del mod.forward
