"""``--dim`` names checked against an ONNX model's symbolic dims, and ``--batch N`` for ONNX models.

* A ``--dim`` name the model does not have is an error listing the dims it has (``--dim bacth=8`` used to be
  ignored, the header still saying ``(bacth=8)``).  Names of data-dependent sizes (``unk__3``, ``<tensor>_d0``)
  exist only after shape inference and are checked then.
* ``--batch N``: when the inputs' leading dims are one symbolic dim, it is bound to N (as ``--dim NAME=N``).  When
  they are fixed (an export at batch 1), the leading dim of every input is overridden to N, as onnxruntime's free
  dimension override does, the exporter's intermediate shapes are dropped and shape inference propagates N.  A
  graph that fixes its batch inside (a ``Reshape`` to ``[1, 2048]``) keeps an output at the old batch: that is an
  error naming the node, never a silent batch-1 count.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import onnx

from ...errors import InputError
from .shapes import iter_graphs, real_inputs

__all__ = ["Rebatch", "dim_names", "check_dim_names", "rebatch", "check_rebatched"]

#: Names shape inference invents for sizes it cannot know (ONNX's ``unk__N``, onnxruntime's, graphroof's).
_INVENTED = re.compile(r"^(unk__\d+|\w+_\d+_o\d+__d\d+|.*_d\d+)$")


@dataclass
class Rebatch:
    """A fixed batch overridden: inputs' leading dim *old* -> *new*; *outputs* had the old batch."""

    old: int
    new: int
    outputs: list[str] = field(default_factory=list)


def dim_names(model: onnx.ModelProto) -> set[str]:
    """Every symbolic dim name of the model's declared shapes (inputs, outputs, value_info; subgraphs too)."""
    names: set[str] = set()
    for g in iter_graphs(model.graph):
        for vi in (*g.input, *g.output, *g.value_info):
            if vi.type.HasField("tensor_type"):
                for d in vi.type.tensor_type.shape.dim:
                    if d.dim_param:
                        names.update(re.findall(r"[A-Za-z_]\w*", d.dim_param))
    return names


def _shape_text(vi: onnx.ValueInfoProto) -> str:
    dims = vi.type.tensor_type.shape.dim
    return "x".join(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in dims)


def check_dim_names(dims: Mapping[str, Any] | None, names: set[str], model: onnx.ModelProto, label: str, *,
                    late: bool = False) -> None:
    """``--dim`` names not in *names*: an error listing the model's dims.  Before inference (*late* False) the
    names inference may still invent are let through; after it (*late* True) every name is checked."""
    unknown = [k for k in (dims or {}) if k not in names and (late or not _INVENTED.match(k))]
    if not unknown:
        return
    k = unknown[0]
    given = f"--dim {k}={dims[k]}"  # type: ignore[index]
    shown = sorted(n for n in names if not _INVENTED.match(n)) or sorted(names)
    if shown:
        close = difflib.get_close_matches(k, shown, n=1)
        hint = f" (did you mean --dim {close[0]}={dims[k]}?)" if close else ""  # type: ignore[index]
        raise InputError(f"{given}: {label} has no symbolic dim {k!r}{hint}; its symbolic dims: {', '.join(shown)}")
    inputs = ", ".join(f"{vi.name} {_shape_text(vi)}" for vi in real_inputs(model.graph)[:4])
    raise InputError(f"{given}: {label} has no symbolic dims (every input shape is fixed: {inputs}); to run it at "
                     f"another batch size use --batch N")


def rebatch(model: onnx.ModelProto, batch: int | None, dims: dict[str, int], label: str,
            input_shapes: Any = None) -> Rebatch | None:
    """Apply ``--batch`` to *model* in place (see the module docstring); a symbolic batch is bound in *dims*.
    Returns what was overridden when the batch was fixed, else None."""
    if batch is None:
        return None
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InputError(f"--batch must be a positive integer, got {batch!r}")
    if input_shapes:
        raise InputError("--batch and --input both size the inputs: give the batch in the --input shapes, or drop "
                         "--input")
    inputs = [vi for vi in real_inputs(model.graph)
              if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape")
              and len(vi.type.tensor_type.shape.dim) >= 1]
    if not inputs:
        raise InputError(f"--batch {batch}: {label} has no input with a known shape to batch; set its shapes with "
                         "--input NAME=SHAPE")
    leads = [vi.type.tensor_type.shape.dim[0] for vi in inputs]
    listed = ", ".join(f"{vi.name} {_shape_text(vi)}" for vi in inputs[:4])
    symbolic = sorted({d.dim_param for d in leads if d.dim_param and d.dim_param.isidentifier()})
    if symbolic:  # the batch is a named dim (inputs with a fixed leading 1, e.g. position ids, keep it)
        for name in symbolic:
            old = dims.get(name)
            if old is not None and old != batch:
                raise InputError(f"--batch {batch} and --dim {name}={old} disagree on {label}'s batch dim; "
                                 "give one of them")
            dims[name] = batch
        return None
    fixed = {d.dim_value for d in leads if d.HasField("dim_value")}
    if len(fixed) != 1 or any(not d.HasField("dim_value") for d in leads):
        raise InputError(f"--batch {batch}: {label}'s inputs do not share one leading batch dim ({listed}); set "
                         "each input's shape with --input NAME=SHAPE")
    old = fixed.pop()
    if old == batch:
        return None
    for d in leads:
        d.dim_value = batch
    del model.graph.value_info[:]  # the exporter's shapes at the old batch: re-inferred
    outs = []
    for o in model.graph.output:
        tt = o.type.tensor_type
        if o.type.HasField("tensor_type") and tt.HasField("shape") and tt.shape.dim \
                and tt.shape.dim[0].HasField("dim_value") and tt.shape.dim[0].dim_value == old:
            tt.shape.dim[0].Clear()
            outs.append(o.name)
    return Rebatch(old, batch, outs)


def check_rebatched(model: onnx.ModelProto, table: Any, rb: Rebatch | None, label: str) -> None:
    """After inference: every output that had the old batch must have the new one, else the graph fixes its
    batch inside and cannot be re-batched (an error naming the first node that drops the batch)."""
    if rb is None:
        return
    stuck = [o for o in rb.outputs if not _leads_with(table.get(o), rb.new)]
    if not stuck:
        return
    culprit = ""
    for node in model.graph.node:
        ins = [table.get(i) for i in node.input if i]
        outs = [(o, table.get(o)) for o in node.output if o]
        if any(_leads_with(e, rb.new) for e in ins):
            bad = next(((o, e) for o, e in outs if e and e[1] and not _leads_with(e, rb.new)), None)
            if bad is not None:
                culprit = (f" (node {node.name or bad[0]!r} ({node.op_type}) gives "
                           f"{'x'.join(map(str, bad[1][1]))} at batch {rb.new})")
                break
    e = table.get(stuck[0])
    got = "x".join(map(str, e[1])) if e and e[1] is not None else "an unknown shape"
    raise InputError(f"--batch {rb.new}: {label} cannot be re-batched: its graph fixes the batch at {rb.old} "
                     f"inside{culprit}, so output {stuck[0]!r} stays {got}; export it with a dynamic batch dim "
                     f"and bind it with --dim NAME={rb.new}")


def _leads_with(entry: Any, n: int) -> bool:
    return bool(entry) and entry[1] is not None and len(entry[1]) >= 1 and entry[1][0] == n
