"""Data-dependent sizes as named symbolic dims.

``nonzero``, boolean-mask indexing, ``masked_select``, ``unique``, NMS ... return a number of rows that depends
on tensor *values*, which graphroof never has.  Under a fake-tensor ``ShapeEnv`` such a size is an *unbacked*
symbol (``u0``); this module names each one after the op that made it (``nonzero_0``, ``index_0``,
``masked_select_0``, ``nms_0`` ...), keeps it symbolic in every shape that depends on it (``2*nonzero_0 + 4``,
``min(100, nonzero_0)``) and gives it a default so the rest of the model is analysed either way:

* **default: half the candidates, rounded up**: ``ceil(n / 2)`` where ``n`` is the most rows the op can return
  (``numel`` of ``nonzero``'s input, of the mask, of ``unique``'s input; the boxes given to NMS).  A mask with no
  information either way keeps about half.  ``unique`` is the exception: at most :data:`UNIQUE_DEFAULT_MAX`
  (8) distinct values, since its size usually counts classes a Python loop then walks (torchvision's
  batched NMS loops over the unique labels), not rows of work.  A user who knows better binds the name:
  ``dims={"nonzero_0": 37}``
  / ``--dim nonzero_0=37``.  The value is also used while tracing, to decide Python branches on the size
  (``if boxes.numel() == 0``), so a bound value steers the trace as the real data would.
* The graph's ``meta["default_dims"]`` holds the defaults (the pipeline binds them unless the caller sets the
  dim) and ``meta["notes"]`` states each assumption.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import torch

from ...graph import OpGraph, TensorSpec, resolve_dim

__all__ = ["DataDims", "shape_fake_mode", "quiet_shape_logs", "DEFAULT_ASSUMPTION"]

DEFAULT_ASSUMPTION = "half the candidates, rounded up"
#: ``unique``'s assumed size: half its candidates, at most this many distinct values
UNIQUE_DEFAULT_MAX = 8
_UNBOUNDED = 2 ** 40  # a range bound above this is "no bound" (sys.maxsize, oo)
_SYM = re.compile(r"\bu\d+\b")
#: ops whose output rows are bounded by their first input's rows (the others: by its elements)
_BY_ROWS = ("nms",)


def shape_fake_mode() -> Any:
    """A fake-tensor mode whose data-dependent outputs get unbacked symbolic sizes (inputs stay static).
    Reading a computed value (``.item()`` of a fake tensor) stays an error."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    env = ShapeEnv(allow_scalar_outputs=False)
    return FakeTensorMode(allow_non_fake_inputs=True, shape_env=env, static_shapes=True)


@contextmanager
def quiet_shape_logs() -> Iterator[None]:
    """The ShapeEnv logs a warning each time a size test is decided by the assumed value, fake tensors log
    the traceback of a failing meta kernel: the caller reports failures in one line."""
    loggers = [logging.getLogger(n) for n in ("torch.fx.experimental.symbolic_shapes",
                                               "torch._subclasses.fake_tensor")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, lv in zip(loggers, levels):
            lg.setLevel(lv)


def _printer() -> Any:
    try:
        from torch.utils._sympy.printers import PythonPrinter
        return PythonPrinter()
    except Exception:  # noqa: BLE001 - an older torch: sympy's own str
        return None


def sym_text(expr: Any) -> str:
    """A sympy size expression as Python arithmetic (``min(5, u1)``, ``3*u0 + (u0 // 2)``)."""
    p = _printer()
    text = p.doprint(expr) if p is not None else str(expr)
    return text.replace("Max(", "max(").replace("Min(", "min(")


def _op_base(op: Any) -> str:
    """``aten._unique2.default`` -> ``unique``; ``torchvision.nms`` -> ``nms``."""
    name = getattr(op, "_opname", None) or getattr(op, "__name__", None) or str(op)
    name = name.split(".")[-1] if "." in name and not hasattr(op, "_opname") else name
    return re.sub(r"\d+$", "", name.strip("_")) or "size"


class DataDims:
    """The data-dependent sizes one capture meets: names, assumed values, where they come from."""

    def __init__(self, dims: Mapping[str, int] | None = None):
        self.user = {k: int(v) for k, v in (dims or {}).items() if isinstance(v, (int, float))}
        self.names: dict[str, str] = {}        # "u3" -> "nonzero_0"
        self.values: dict[str, int] = {}       # "nonzero_0" -> value used while tracing
        self.defaults: dict[str, int] = {}     # "nonzero_0" -> ceil(candidates / 2)
        self.where: dict[str, str] = {}        # "nonzero_0" -> "aten.nonzero in layer x, up to 24 rows"
        self._counts: dict[str, int] = {}
        self.fallbacks: list[str] = []

    def __bool__(self) -> bool:
        return bool(self.names)

    def name(self, sym: Any, op: Any, candidates: int | None, scope: str = "", key: str = "",
             held: int | None = None) -> tuple[str, int]:
        """Name a new unbacked symbol made by *op*; -> (name, value to trace with).  The default is half the
        *candidates*, at most the rows its input *held* as traced (0 when an upstream size was bound to 0)."""
        s = str(sym)
        if s in self.names:
            n = self.names[s]
            return n, self.values[n]
        base = _op_base(op)
        i = self._counts.get(base, 0)
        self._counts[base] = i + 1
        n = f"{base}_{i}"
        self.names[s] = n
        default = max(1, math.ceil(candidates / 2)) if candidates else 1
        if held is not None:
            default = min(default, held)
            candidates = held if candidates is None else min(candidates, held)
        if base.startswith("unique"):
            default = min(default, UNIQUE_DEFAULT_MAX)
        self.defaults[n] = default
        self.values[n] = self.user.get(n, default)
        where = f"rows of {key or base}" + (f" in {scope}" if scope else "")
        self.where[n] = where + (f", at most {candidates}" if candidates is not None else "")
        return n, self.values[n]

    def rename(self, text: str) -> str:
        return _SYM.sub(lambda m: self.names.get(m.group(0), m.group(0)), text)

    # -- after the capture ------------------------------------------------------------------------------
    def _dim(self, d: Any) -> Any:
        if not isinstance(d, str) or not _SYM.search(d):
            return d
        text = self.rename(d)
        try:
            resolve_dim(text, {n: 1 for n in self.values})
            return text
        except Exception:  # noqa: BLE001 - an expression graphroof cannot evaluate: trace value instead
            try:
                value = resolve_dim(self.rename(d), self.values)
            except Exception:  # noqa: BLE001
                value = 1
            self.fallbacks.append(f"{text} = {value}")
            return value

    def _spec(self, t: TensorSpec | None) -> TensorSpec | None:
        if t is None or t.is_bound:
            return t
        return replace(t, shape=tuple(self._dim(d) for d in t.shape))

    def _attr(self, v: Any) -> Any:
        if isinstance(v, str):
            return self.rename(v) if _SYM.search(v) else v
        if isinstance(v, tuple):
            return tuple(self._attr(x) for x in v)
        return v

    def apply(self, graph: OpGraph) -> OpGraph:
        """Rename the symbols in every shape and attr, record the defaults and state the assumptions."""
        if not self.names:
            return graph
        g = graph.map_ops(lambda op: replace(op, inputs=tuple(self._spec(t) for t in op.inputs),
                                             outputs=tuple(self._spec(t) for t in op.outputs),
                                             attrs={k: self._attr(v) for k, v in op.attrs.items()}))
        used = sorted(self.values, key=lambda n: (n.rsplit("_", 1)[0], int(n.rsplit("_", 1)[1])))
        g.meta["default_dims"] = {**graph.meta.get("default_dims", {}), **{n: self.defaults[n] for n in used}}
        listed = "; ".join(f"{n} ({self.where[n]}) = {self.defaults[n]}" for n in used[:12])
        more = f"; and {len(used) - 12} more" if len(used) > 12 else ""
        traced = {n: v for n, v in self.values.items() if v != self.defaults[n]}
        notes = g.meta.setdefault("notes", [])
        notes.append(f"{len(used)} data-dependent size(s) kept symbolic, each assumed {DEFAULT_ASSUMPTION} "
                     f"({UNIQUE_DEFAULT_MAX} at most for unique) "
                     f"unless set with --dim / dims=: {listed}{more}")
        if traced:
            notes.append("traced with the data-dependent sizes given: " +
                         ", ".join(f"{n}={v}" for n, v in traced.items()))
        if self.fallbacks:
            notes.append(f"{len(self.fallbacks)} size expression(s) graphroof cannot evaluate symbolically "
                         f"were fixed at their traced values ({'; '.join(self.fallbacks[:3])})")
        return g


def candidates_of(sym: Any, shape_env: Any, inputs: list[Any], hint: Any, op: Any = None) -> tuple[int | None, int | None]:
    """-> (the most rows the op making *sym* can return: its ShapeEnv range, else the first input's rows;
    what its first input holds as traced: rows for NMS's boxes, elements otherwise).
    The second caps the default, so a size bound to 0 upstream leaves 0 candidates downstream."""
    first = next((t for t in inputs if isinstance(t, torch.Tensor) and t.dim() > 0), None)
    held = None
    if first is not None:
        try:
            held = hint(first.shape[0]) if _op_base(op).endswith(_BY_ROWS) \
                else math.prod(hint(d) for d in first.shape)
        except Exception:  # noqa: BLE001 - a size graphroof cannot evaluate: no cap
            held = None
    try:
        upper = shape_env.var_to_range[sym].upper
        if upper.is_finite and int(upper) < _UNBOUNDED:
            return int(upper), held
    except Exception:  # noqa: BLE001
        pass
    return (hint(first.shape[0]) if first is not None else None), held


def set_value(shape_env: Any, sym: Any, value: int) -> None:
    """Let size tests on *sym* be decided with *value* (torch's real-tensor propagation hook)."""
    setter = getattr(shape_env, "set_real_tensor_prop_unbacked_vals", None) or \
        getattr(shape_env, "set_unbacked_var_to_val", None)
    if setter is not None:
        setter(sym, value)
