"""Measurement hygiene shared by ``graphroof calibrate`` and ``graphroof profile``: how loaded the machine was
before measuring, the run-to-run spread of repeated timings, and the CPU thread count a calibrated profile was
measured with (a profile measured with 2 threads predicts a 2-thread run, not a 16-thread one).

A loaded machine slows every measured time: ``profile`` then sees every layer run far above its roofline time
and labels it "overhead"; ``calibrate`` writes peaks that are too low.  Both warn and say to re-run.
"""

from __future__ import annotations

import os
import re
import statistics
from collections.abc import Sequence
from typing import Any

__all__ = ["LOADED_FRACTION", "SPREAD_WARN", "load_1min", "loaded_message", "spread", "calibrated_threads",
           "threads_message", "spread_message"]

#: a 1-min load average above this fraction of the CPUs means another process competes for them
LOADED_FRACTION = 0.75
#: (max - min) / median of repeated timings above this is noisy
SPREAD_WARN = 0.30

#: the stamp ``graphroof calibrate`` writes into every source of a profile it measured (see ``profile_dict``)
_STAMP_THREADS = re.compile(r"measured by graphroof calibrate on .*?, threads (\d+),")


def load_1min() -> float | None:
    """The 1-minute load average (``None`` where the platform has none); read it before measuring."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):  # not on this platform
        return None


def loaded_message(load: float | None, cpus: int | None, command: str, effect: str) -> str | None:
    """The warning when *load* (1-min average, read before *command* started) exceeds ``LOADED_FRACTION`` x *cpus*."""
    if load is None or not cpus or load <= LOADED_FRACTION * cpus:
        return None
    return (f"the machine was loaded when {command} started (1-min load average {load:.2f} on {cpus} CPUs): "
            f"{effect}; re-run on an idle machine")


def spread(samples_s: Sequence[float]) -> float | None:
    """(slowest - fastest) / median of repeated timings; ``None`` for fewer than 2 or a zero median."""
    if len(samples_s) < 2:
        return None
    med = statistics.median(samples_s)
    return (max(samples_s) - min(samples_s)) / med if med > 0 else None


def spread_message(samples_s: Sequence[float], what: str) -> str | None:
    """The warning when at least 3 timings of *what* spread more than ``SPREAD_WARN``."""
    from ..units import fmt_time

    s = spread(samples_s)
    if s is None or len(samples_s) < 3 or s <= SPREAD_WARN:
        return None
    return (f"noisy: {what} took {fmt_time(min(samples_s))} to {fmt_time(max(samples_s))} (median "
            f"{fmt_time(statistics.median(samples_s))}, spread {100 * s:.0f}% > {100 * SPREAD_WARN:.0f}%) over "
            f"{len(samples_s)} runs: another process competed for the CPU; re-run on an idle machine")


def calibrated_threads(hw: Any) -> int | None:
    """The CPU thread count a ``graphroof calibrate`` profile was measured with (its sources' stamp); ``None``
    for a profile calibrate did not write, or a GPU."""
    if getattr(hw, "kind", None) != "cpu":
        return None
    for text in (getattr(hw, "sources", None) or {}).values():
        m = _STAMP_THREADS.search(str(text))
        if m:
            return int(m.group(1))
    return None


def threads_message(threads: int | None, profile_threads: int | None, hw_name: str) -> str | None:
    """The warning when a run used another thread count than the profile it is compared with was measured with."""
    if threads is None or profile_threads is None or threads == profile_threads:
        return None
    return (f"this run used {threads} CPU threads but --hw {hw_name} was calibrated with {profile_threads}: its peaks "
            f"hold for {profile_threads} threads, so measured / predicted is skewed; run with --threads "
            f"{profile_threads}, or calibrate with --threads {threads}")
