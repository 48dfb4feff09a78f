"""Trip counts of ONNX ``Loop`` and ``Scan`` nodes, from what is known before run time.

``Loop`` (ONNX spec: ``for (i = 0; i < M && cond; ++i) { cond = body(...) }``):

* the initial ``cond`` is a constant false: 0 iterations;
* ``M`` is a constant <= 0: 0 iterations (a negative M is noted);
* the body's condition output is a constant false: at most 1 iteration (``min(M, 1)``);
* the body's condition is a constant true or the loop-carried ``cond`` passed through unchanged (``Identity``
  or the same name): exactly ``M`` iterations (``for`` loops from ``torch.onnx``);
* anything else is a ``while`` loop: ``M`` is only an upper bound, and ``M`` absent, unknown or a "no limit"
  sentinel (>= 2^31 - 1, ``torch.onnx`` writes 2^63 - 1) gives no count at all.  Then the count is capped at
  ``loop_trips`` (``--loop-trips N``; default :data:`DEFAULT_LOOP_TRIPS`) with a warning and a report note; a
  known ``M`` below the cap is counted as ``M`` (upper bound, noted).

``Scan``: the length of the first scan input along its scan axis; ``num_scan_inputs`` and
``scan_input_axes`` are checked against the node (a malformed value is a one-line error, never an allocation
of the size it claims).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import onnx

from ...errors import FrontendError

__all__ = ["Trips", "loop_trips", "scan_trips", "DEFAULT_LOOP_TRIPS", "NO_LIMIT"]

#: Iterations counted for a loop whose trip count cannot be known before run time (``--loop-trips`` sets it).
DEFAULT_LOOP_TRIPS = 1
#: An ``M`` at or above this means "no limit" (INT32_MAX; torch.onnx writes INT64_MAX for ``while``).
NO_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class Trips:
    """Iterations to count, whether they are exact, and the note to report (``""``: nothing to say)."""

    count: int | str
    exact: bool
    note: str = ""
    warn: bool = False


def _first(values: Mapping[str, Any], name: str) -> Any:
    v = values.get(name) if name else None
    if v is None:
        return None
    try:
        flat = list(v.reshape(-1).tolist()) if hasattr(v, "reshape") else list(v)
    except (TypeError, ValueError):
        return None
    return flat[0] if len(flat) == 1 else None


def _body_cond(body: onnx.GraphProto, values: Mapping[str, Any]) -> str:
    """``"true"``, ``"false"``, ``"carried"`` (cond_out is cond_in) or ``"unknown"``."""
    if len(body.output) < 1:
        return "unknown"
    out = body.output[0].name
    cond_in = body.input[1].name if len(body.input) > 1 else None
    seen: set[str] = set()
    while out not in seen:
        seen.add(out)
        if cond_in and out == cond_in:
            return "carried"
        v = _first(values, out)
        if v is not None:
            return "true" if bool(v) else "false"
        prod = next((n for n in body.node if out in n.output), None)
        if prod is None or prod.op_type != "Identity" or not prod.input:
            return "unknown"
        out = prod.input[0]
    return "unknown"


def loop_trips(node: onnx.NodeProto, name: str, body: onnx.GraphProto, values: Mapping[str, Any],
               cap: int | None) -> Trips:
    """Iterations of the Loop *node* (see module docstring); *cap* is ``--loop-trips`` (``None``: not given)."""
    limit = DEFAULT_LOOP_TRIPS if cap is None else cap
    m_name = node.input[0] if len(node.input) > 0 else ""
    c_name = node.input[1] if len(node.input) > 1 else ""
    m = _first(values, m_name)
    c = _first(values, c_name)
    try:
        m = int(m) if m is not None else None
    except (TypeError, ValueError, OverflowError):
        m = None
    if c_name and c is not None and not bool(c):
        return Trips(0, True, f"Loop {name!r}: its condition is false before the first iteration; counted 0 "
                              "iterations")
    if m is not None and m <= 0:
        return Trips(0, True, f"Loop {name!r}: trip count M = {m}; counted 0 iterations" if m < 0 else "")
    body_c = _body_cond(body, values)
    if body_c == "false":
        n = 1 if m is None or m >= 1 else 0
        return Trips(n, True, f"Loop {name!r}: its body sets the condition to false; counted {n} iteration")
    bounded = m is not None and m < NO_LIMIT
    if bounded and body_c in ("true", "carried"):
        return Trips(m, True)
    if bounded:  # a while loop with a maximum
        n = m if cap is None else min(m, cap)
        return Trips(n, False, f"Loop {name!r}: runs while a condition computed in its body holds, at most M = {m} "
                               f"times; counted {n} iteration{'s' if n != 1 else ''} (set --loop-trips N for "
                               "another count)")
    why = ("its trip count M is unknown before run time" if m_name and m is None else
           f"M = {m} means no limit" if m is not None else "it has no trip count M")
    if body_c == "unknown":
        why += " and it stops on a condition computed at run time"
    return Trips(limit, False, f"Loop {name!r}: {why}; counted {limit} iteration{'s' if limit != 1 else ''} "
                               f"({'--loop-trips' if cap is not None else 'default cap'}; set --loop-trips N for "
                               "another count)", warn=True)


def scan_trips(node: onnx.NodeProto, name: str, attrs: Mapping[str, Any], shape_of, opset: int) -> Trips | None:
    """Iterations of the Scan *node* (``None``: unknown); *shape_of(tensor)* gives a shape tuple or ``None``."""
    inputs: Sequence[str] = list(node.input)
    n_scan = attrs.get("num_scan_inputs")
    if not isinstance(n_scan, int) or isinstance(n_scan, bool):
        raise FrontendError(f"{name} (Scan): attribute num_scan_inputs is missing or not an integer")
    first = 1 if opset < 9 else 0  # opset 8: optional sequence_lens first, batch axis 0, scan axis 1
    avail = len(inputs) - first
    if not 1 <= n_scan <= avail:
        raise FrontendError(f"{name} (Scan): num_scan_inputs = {n_scan} is invalid: the node has {avail} "
                            "state and scan input(s)")
    axes = attrs.get("scan_input_axes", ())
    if not isinstance(axes, (tuple, list)) or (axes and len(axes) != n_scan):
        raise FrontendError(f"{name} (Scan): scan_input_axes has {len(axes) if isinstance(axes, (tuple, list)) else '?'}"
                            f" entries for {n_scan} scan input(s)")
    x = inputs[len(inputs) - n_scan]
    if not x:
        return None
    shape = shape_of(x)
    if not shape:
        return None
    axis = int(axes[0]) if axes else (1 if opset < 9 else 0)
    if not -len(shape) <= axis < len(shape):
        raise FrontendError(f"{name} (Scan): scan axis {axis} is out of range for input {x!r} of rank {len(shape)}")
    return Trips(shape[axis], True)
