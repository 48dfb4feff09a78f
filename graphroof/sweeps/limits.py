"""The size of a sweep grid, refused past :data:`MAX_POINTS` unless forced.

A sweep evaluates the product of its list options (devices x batches x prompts x gens x dtypes x TP degrees) and
keeps every point for the frontier and the SLO picks: about 3 KB of memory and 0.16 ms per point (864,000 points
took 138 s and 2.6 GB), so a few long lists on the command line could exhaust the machine.  The count is known
from the arguments alone, so the check runs before any model is built.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import InputError

__all__ = ["MAX_POINTS", "check_grid"]

#: The largest grid a sweep runs without ``--force`` (``max_points=None`` in the API).
MAX_POINTS = 100_000


def check_grid(sizes: Mapping[str, int], max_points: int | None = MAX_POINTS) -> int:
    """The number of points of a grid with *sizes* (``{"--batch": 4, "--hw": 2}``); an :class:`InputError`
    giving the count and the way out when it is above *max_points* (None: no limit)."""
    n = 1
    for v in sizes.values():
        n *= max(int(v), 1)
    if max_points is not None and n > max_points:
        parts = " x ".join(f"{v} {k}" for k, v in sizes.items() if v > 1)
        raise InputError(f"this sweep has {n:,} points ({parts}), more than {max_points:,}: shorten the lists, "
                         "or add --force to run it anyway (about 3 KB of memory and 0.2 ms per point)")
    return n
