"""ONNX frontend: any ``.onnx`` file -> :class:`~graphroof.graph.OpGraph`, weights never read.

* The file is loaded with ``load_external_data=False``: weight shapes and dtypes come from the initializers'
  metadata, so a model whose external data file is absent analyses the same.
* Shapes: see :mod:`graphroof.frontends.onnx.shapes` (user dims bound first, ONNX inference with data
  propagation, then onnxruntime's symbolic inference where gaps remain).  Dims nobody bound stay ``str``.
* Roles: initializers are weights, ``Constant`` outputs constants, graph inputs activations, and inputs /
  outputs named like a KV cache (``past_key_values.0.key``, ``present.0.value``) are KV cache.
* Op keys: ``onnx.<Op>`` for the default domain, ``<domain>.<Op>`` otherwise (``com.microsoft.MatMulNBits``).
* Scope: the torch dynamo exporter's ``pkg.torch.onnx.name_scopes`` / ``namespace`` metadata, else the node
  name's path (``/model/layers.0/self_attn/q_proj/MatMul`` -> ``model.layers.0.self_attn.q_proj``), else the
  module path in the name of a weight the node reads (``encoder.layer.3.output.dense.weight``).
* Control flow: If / Loop / Scan bodies are flattened into the graph under ``<scope>.<Node>_<attr>`` with
  ``attrs["graphroof.repeat"]`` = trip count (the counting pass scales their cost by it; a model attribute in
  the ``graphroof.`` namespace is renamed ``model.graphroof...``); trip counts: :mod:`.control` (an
  unknown one is capped at ``loop_trips``, with a warning and a report note).
* Robustness: names are cleaned first (:mod:`.clean`), shape inference runs in a child process under a
  time and memory budget (:mod:`.guard`), constant shape arithmetic is folded (:mod:`.fold`); an
  output nothing reads whose size is unknown is left out (noted), a tensor with no shape at all marks its ops
  ``graphroof.shape_unknown`` (counted as estimated bytes, warned), and outputs computed only from weights
  and constants count as weights.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx
import onnx.inliner
from onnx import TensorProto

from ...errors import InputError
from ...errors import warn as warn_user
from ...graph import ESTIMATED, OpGraph
from .builder import GraphBuilder
from .clean import clean_names
from .clean import text as clean_text
from .guard import default_budget, run_guarded
from .limits import check_inlined_size, warn_huge_tensors
from .naming import is_kv_name, op_key, scope_of
from .read import check_versions, read_model
from .shapes import (
    NeedsSymbolic,
    TypeTable,
    bind_inputs,
    infer,
    iter_graphs,
    precheck,
    ssi_class,
)

__all__ = ["load_onnx", "op_key", "scope_of", "is_kv_name"]


def _producer(model: onnx.ModelProto) -> str:
    return " ".join(x for x in (model.producer_name, model.producer_version) if x) or "unknown"


def _prepare(model: onnx.ModelProto, name: str, allow_symbolic: bool
             ) -> tuple[bytes | None, TypeTable, dict[str, Any], list[str]] | None:
    """The guarded step: inline local functions, then infer shapes; returns the inlined model (serialised, or
    ``None`` when nothing was inlined), the type table, the folded values and the notes."""
    inlined = None
    if model.functions:
        try:
            model = onnx.inliner.inline_local_functions(model)
            inlined = model.SerializeToString()
        except Exception as e:  # noqa: BLE001 - keep the calls as (unknown) ops then
            warn_user(f"{name}: could not inline its local functions ({str(e).splitlines()[0] if str(e) else e});"
                          " counting calls as ops")
    notes: list[str] = []
    try:
        table, values = infer(model, notes, allow_symbolic)
    except NeedsSymbolic:
        return None
    return inlined, table, values, notes


def load_onnx(path: str | Path, *, dims: Mapping[str, int] | None = None,
              input_shapes: Mapping[str, Sequence[int]] | Sequence[Sequence[int]] | None = None,
              loop_trips: int | None = None, infer_time_s: float | None = None, infer_mem_gb: float | None = None,
              batch: int | None = None, **ignored: Any) -> OpGraph:
    """Load an ``.onnx`` file into an OpGraph without reading its weights.

    Parameters
    ----------
    path : the ``.onnx`` file (its external data file may be absent).
    dims : values for the model's symbolic dims, ``{"batch": 8, "seq": 512}`` (``--dim``).
    input_shapes : ``{"input_ids": (1, 512)}`` or positional ``[(1, 3, 224, 224)]`` (``--input``).
    batch : ``--batch``: binds the inputs' symbolic leading dim, or overrides a fixed one and re-infers the shapes
        (:mod:`graphroof.frontends.onnx.batch`; a graph that fixes its batch inside is an error).
    loop_trips : iterations to count for a Loop / Scan whose count is unknown before run time or only
        bounded (``--loop-trips``; default 1, see :mod:`graphroof.frontends.onnx.control`).
    infer_time_s, infer_mem_gb : budget of the shape-inference step (a child process, see
        :mod:`graphroof.frontends.onnx.guard`; defaults from ``GRAPHROOF_INFER_TIME_S`` / ``_MEM_GB``).

    Dims nobody bound stay symbolic (``str``) in the shapes; binding them later (``graphroof.graph.bind``,
    or ``analyze(..., dims=...)``) is enough, and counting an unbound one raises ``UnboundDimError`` naming the
    op, the tensor and where the dim comes from.
    """
    path = Path(path).expanduser()
    if loop_trips is not None and (isinstance(loop_trips, bool) or not isinstance(loop_trips, int) or loop_trips < 0):
        raise InputError(f"--loop-trips must be an integer >= 0, got {loop_trips!r}")
    model = read_model(path)
    clean_names(model)
    opset = check_versions(model, path)
    precheck(model)
    check_inlined_size(model, path.name)
    from .batch import check_dim_names, check_rebatched, dim_names, rebatch

    label = clean_text(path.stem)
    names = dim_names(model)
    check_dim_names(dims, names, model, label)
    dims = dict(dims or {})
    rebatched = rebatch(model, batch, dims, label, input_shapes)
    for flag in ("seq",):
        if ignored.get(flag) is not None:
            warn_user(f"--{flag} applies to zoo and config models; bind an ONNX model's dims with --dim NAME=VALUE "
                          "or --input NAME=SHAPE")
    bound = bind_inputs(model, dims, input_shapes)
    budget = default_budget()
    if infer_time_s is not None:
        budget.time_s = float(infer_time_s)
    if infer_mem_gb is not None:
        budget.mem_bytes = int(float(infer_mem_gb) * 1e9)
        budget.origin = "the infer_mem_gb argument"
    step = "ONNX shape inference"
    out = run_guarded(_prepare, model, path.name, False, step=step, budget=budget)
    if out is None:  # onnxruntime's symbolic inference is needed: load it here once, so children inherit it
        ssi_class()
        out = run_guarded(_prepare, model, path.name, True, step=f"{step} (with onnxruntime's symbolic inference)",
                          budget=budget)
    assert out is not None  # with onnxruntime's symbolic inference allowed, _prepare always returns its result
    inlined, table, values, notes = out
    warn_huge_tensors(table, path.name)
    if inlined is not None:
        model = onnx.ModelProto()
        model.ParseFromString(inlined)
    b = GraphBuilder(model, table, values, notes, opset, loop_trips)
    b.walk(model.graph)
    check_rebatched(model, table, rebatched, label)
    check_dim_names({k: v for k, v in dims.items() if k not in names}, set(b.bounds), model, label, late=True)
    if b.dropped:
        notes.append(f"{len(b.dropped)} output(s) nothing reads have sizes unknown before run time and are not "
                     f"counted (e.g. {b.dropped[0]})")
    if b.unknown_types:
        notes.append(f"{len(b.unknown_types)} tensor(s) have no shape after inference (e.g. "
                     f"{b.unknown_types[0]!r}); the ops touching them are counted as estimated bytes only")
    if b.derived:
        notes.append(f"{b.derived} op(s) compute only from weights and constants (weights built at run time; "
                     "runtimes fold them once when the model loads): not counted per run, and their outputs count as weights")
    g = b.graph
    if b.bounded:
        notes.append(f"{len(b.bounded)} size(s) depend on input values and are counted at their upper bound "
                     f"(estimated; set them with --dim): {'; '.join(b.bounded[:5])}")
        g.meta["default_dims"] = dict(b.bounds)
        for op in g.ops():
            if (isinstance(op.attrs, dict)  # the builder's ops carry their own attrs dict
                    and any(isinstance(d, str) and d in b.bounds for t in (*op.inputs, *op.outputs) if t
                            for d in t.shape)):
                op.attrs[ESTIMATED] = "size counted at an upper bound"
    name = clean_text(path.stem)  # a file name may carry control characters: escaped as any ONNX name
    g.name = name
    g.nx.graph["name"] = name
    external = sum(1 for t in model.graph.initializer if t.data_location == TensorProto.EXTERNAL)
    used = {n.domain for g2 in iter_graphs(model.graph) for n in g2.node}
    others = ", ".join(f"{i.domain} {i.version}" for i in model.opset_import
                       if i.domain not in ("", "ai.onnx") and i.domain in used)
    header = (f"ONNX file: producer {_producer(model)}, IR {model.ir_version}, opset {opset}"
              + (f" (+ {others})" if others else "")
              + f"; {len(model.graph.initializer)} weight tensors, not read"
              + (f" ({external} in external data)" if external else ""))
    g.meta.update({
        "capture": "onnx", "model": name, "producer": _producer(model), "opset": opset,
        "ir_version": model.ir_version, "notes": [header, *notes], "dim_origins": dict(b.origins),
    })
    if rebatched is not None:
        bound = {"batch": rebatched.new, **bound}
        g.meta["notes"].insert(1, f"re-batched with --batch {rebatched.new}: the inputs' fixed leading dim "
                                  f"{rebatched.old} overridden (as onnxruntime's free-dimension override), shapes "
                                  "re-inferred")
    if bound:
        g.meta["dims"] = dict(bound)
    return g
