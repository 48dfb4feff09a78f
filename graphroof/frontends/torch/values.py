"""Values read from computed tensors during a fake-tensor capture, as named, assumed, bindable values.

Post-processing code reads tensor *contents* into Python: torchvision's ``paste_mask_in_image`` does
``w = int(box[2] - box[0] + 1)`` and slices an image with box corners, keypoint post-processing does
``int(widths_ceil[i].item())``, a sanity check does ``if torch.isnan(x).any()``.  Under fake tensors there is
no content to read (torch raises ``DataDependentOutputException``).  The dispatch capture hands such a read
(``aten._local_scalar_dense`` of a fake tensor) to :class:`ValueReads`, which answers with an assumed value:

* **one name per call site**: every read made by the same line of model code (the innermost frame outside
  torch and graphroof) is ``value_0``, the next line ``value_1`` ...: a loop over 100 detections reads
  ``value_0`` 100 times and one ``--dim value_0=64`` / ``dims={"value_0": 64}`` sets them all;
* **default** :data:`DEFAULT_NUMBER` (1) for a number and ``False`` for a truth value.  1 is the smallest
  value that is still a valid size (a box at least one pixel wide, a resize to at least 1×1), so the work
  that scales with the read value is counted at its least; ``False`` skips the branches guarded by a check
  (``if x.any(): raise``), so the rest of the model runs as it would on ordinary data.  The work that does not
  depend on the value (a full-image mask per detection, the ops run per loop iteration) is counted in full.
* the values are fixed while tracing (they decide sizes and branches, like a bound ``nonzero_0``); the
  graph's ``meta["assumed_values"]`` holds the defaults and ``meta["notes"]`` states each one with the line of
  code that read it.
"""

from __future__ import annotations

import linecache
import os
import sys
from collections.abc import Mapping
from typing import Any

import torch

from ...graph import OpGraph

__all__ = ["ValueReads", "DEFAULT_NUMBER", "DEFAULT_TRUTH"]

DEFAULT_NUMBER = 1
DEFAULT_TRUTH = False

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _call_site() -> tuple[str, int, str]:
    """(file, line, source text) of the innermost frame in the model's code (not torch's, not graphroof's)."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith((_TORCH_DIR, _OWN_DIR)) and not fn.startswith("<"):
            return fn, f.f_lineno, linecache.getline(fn, f.f_lineno).strip()
        f = f.f_back  # type: ignore[assignment]
    return "?", 0, ""


class ValueReads:
    """The values one capture reads from fake tensors: a name per call site, the value used, the reads."""

    def __init__(self, dims: Mapping[str, Any] | None = None):
        self.user = {k: v for k, v in (dims or {}).items() if isinstance(v, (int, float, bool))}
        self.sites: dict[tuple[str, int, str], str] = {}  # (file, line, kind) -> "value_0"
        self.defaults: dict[str, int | float | bool] = {}
        self.where: dict[str, str] = {}
        self.reads: dict[str, int] = {}

    def __bool__(self) -> bool:
        return bool(self.sites)

    def read(self, t: torch.Tensor, scope: str = "") -> int | float | bool:
        """The assumed content of the one-element fake tensor *t* (``.item()``, ``int()``, ``bool()``)."""
        kind = "bool" if t.dtype is torch.bool else ("float" if t.is_floating_point() or t.is_complex() else "int")
        fn, line, text = _call_site()
        key = (fn, line, kind)
        name = self.sites.get(key)
        if name is None:
            name = self.sites[key] = f"value_{len(self.sites)}"
            self.defaults[name] = DEFAULT_TRUTH if kind == "bool" else \
                (float(DEFAULT_NUMBER) if kind == "float" else DEFAULT_NUMBER)
            code = f" `{text[:60]}`" if text else ""
            self.where[name] = f"{'a truth value' if kind == 'bool' else 'a number'} read at " \
                               f"{os.path.basename(fn)}:{line}{code}" + (f" in {scope}" if scope else "")
        self.reads[name] = self.reads.get(name, 0) + 1
        value = self.user.get(name, self.defaults[name])
        if kind == "bool":
            return bool(value)
        return float(value) if kind == "float" else int(value)

    def apply(self, graph: OpGraph) -> OpGraph:
        """Record the defaults in ``meta["assumed_values"]`` and state them in the notes."""
        if not self.sites:
            return graph
        names = list(self.defaults)
        graph.meta["assumed_values"] = {n: self.defaults[n] for n in names}
        listed = "; ".join(f"{n} ({self.where[n]}, {self.reads[n]} read{'s' if self.reads[n] > 1 else ''}) = "
                           f"{self.defaults[n]}" for n in names[:8])
        more = f"; and {len(names) - 8} more" if len(names) > 8 else ""
        notes = graph.meta.setdefault("notes", [])
        notes.append(f"{sum(self.reads.values())} value(s) read from computed tensors at {len(names)} line(s) "
                     f"of model code were assumed ({DEFAULT_NUMBER} for a number, {DEFAULT_TRUTH} for a truth "
                     f"value; set one with --dim / dims=, it applies to every read at that line): {listed}{more}")
        given = {n: self.user[n] for n in names if n in self.user}
        if given:
            notes.append("traced with the values given: " + ", ".join(f"{n}={v}" for n, v in given.items()))
        return graph
