"""Measure an ONNX model with onnxruntime's profiler (CPU) and map per-node kernel times onto its OpGraph.

ONNX Runtime writes one ``Node`` event per executed node and run (``<node name>_kernel_time``, microseconds,
with ``args.op_name``); the graphroof ONNX frontend names OpGraph nodes after the ONNX node names, so most
events match by name (pass 0 of :func:`graphroof.measure.match.match`).  Even the ``basic`` level fuses
(MatMul + Add -> Gemm), so the optimised graph onnxruntime executes is saved and compared with the file
(:func:`executed_cover`): a runtime node is shared among the file's nodes it computes.  What still has no
counterpart falls back to matching by op type in order; what is left is listed.  The default optimisation level is ``basic`` (constant folding and redundant-node removal only), so
the executed graph stays close to the file's.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import GraphroofError, InputError
from .match import Event, match
from .run import Measured, auto_runs, work_nodes

__all__ = ["run_onnx", "random_feeds", "OPT_LEVELS", "parse_profile"]

OPT_LEVELS = ("disable", "basic", "extended", "all")

_NP_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
             "tensor(bfloat16)": "bfloat16", "tensor(int64)": "int64", "tensor(int32)": "int32",
             "tensor(int8)": "int8", "tensor(uint8)": "uint8", "tensor(bool)": "bool"}


def random_feeds(sess, dims: Mapping[str, int] | None = None,
                 shapes: Mapping[str, tuple[int, ...]] | list | None = None, seed: int = 0) -> dict[str, Any]:
    """Random inputs for every session input: floats ~ N(0, 1); integer inputs named like a mask are ones,
    other integers uniform in [0, 100) (token / position ids); symbolic dims from *dims* or *shapes*."""
    import numpy as np

    rng = np.random.default_rng(seed)
    dims = dict(dims or {})
    feeds = {}
    ins = sess.get_inputs()
    for k, i in enumerate(ins):
        given = shapes.get(i.name) if isinstance(shapes, Mapping) else (shapes[k] if shapes and k < len(shapes) else None)
        if given is not None:
            shape = tuple(int(d) for d in given)
        else:
            bound: list[int] = []
            for d in i.shape:
                if isinstance(d, int) and d >= 0:
                    bound.append(d)
                elif isinstance(d, str) and d in dims:
                    bound.append(int(dims[d]))
                else:
                    raise InputError(f"input {i.name!r} has an unbound dimension {d!r}; give it with --dim {d}=N "
                                     f"or --input {i.name}=SHAPE")
            shape = tuple(bound)
        dt = _NP_TYPES.get(i.type)
        if dt is None:
            raise InputError(f"input {i.name!r} has type {i.type}, which graphroof cannot generate random data for")
        if dt.startswith(("float", "bfloat")):
            arr = rng.standard_normal(shape).astype("float32" if dt == "bfloat16" else dt)
        elif dt == "bool" or "mask" in i.name.lower():
            arr = np.ones(shape, dtype=dt)
        else:
            arr = rng.integers(0, 100, size=shape).astype(dt)
        feeds[i.name] = arr
    return feeds


def executed_cover(orig, opt, max_nodes: int = 64) -> dict[str, tuple[str, ...]]:
    """Runtime node name -> the file's nodes it computes, from the optimised model onnxruntime executed.

    Tensors present in both models are *anchors*.  Optimised nodes connected through non-anchor tensors form a
    group (a fused ``Gemm`` with the ``Reshape`` s around it); the group covers every original node between
    the anchors it consumes and the anchors it produces (a backward walk from the producers of its outputs
    that stops at its inputs).  A walk over more than *max_nodes* nodes is given up (the group then covers
    nothing and its events fall back to matching by op type).
    """
    producer = {t: n for n in orig.graph.node for t in n.output if t}
    anchors = set(producer) | {i.name for i in orig.graph.input} | {t.name for t in orig.graph.initializer}
    nodes = list(opt.graph.node)
    parent = list(range(len(nodes)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    made: dict[str, int] = {}
    for i, n in enumerate(nodes):
        for t in n.output:
            if t and t not in anchors:
                made[t] = i
    for i, n in enumerate(nodes):
        for t in n.input:
            if t in made:
                parent[find(i)] = find(made[t])
    groups: dict[int, list[int]] = {}
    for i in range(len(nodes)):
        groups.setdefault(find(i), []).append(i)
    out: dict[str, tuple[str, ...]] = {}
    for members in groups.values():
        ins = {t for i in members for t in nodes[i].input if t in anchors}
        outs = [t for i in members for t in nodes[i].output if t in producer]
        seen: dict[str, None] = {}
        stack = [producer[t] for t in outs]
        while stack and len(seen) <= max_nodes:
            n = stack.pop()
            if n.name in seen:
                continue
            seen[n.name] = None
            stack.extend(producer[t] for t in n.input if t and t not in ins and t in producer)
        cover = tuple(seen) if len(seen) <= max_nodes else ()
        for i in members:
            out[nodes[i].name] = cover
    return out


def _session(path: Path, opt: str, threads: int | None, profile_prefix: str | None, save_opt: str | None = None):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL, "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[opt]
    if threads:
        so.intra_op_num_threads = threads
    so.log_severity_level = 3
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    if save_opt:  # the graph onnxruntime executes, weights to a side file
        so.optimized_model_filepath = save_opt
        so.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                    Path(save_opt).name + ".data")
        so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    try:
        return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types
        raise GraphroofError(f"{path.name}: onnxruntime cannot load this model: {str(e).splitlines()[0][:300]}") from None


def parse_profile(events: list[dict], scope_of: Mapping[str, str], skip_runs: int = 0,
                  cover: Mapping[str, tuple[str, ...]] | None = None) -> list[tuple[float, list[Event]]]:
    """(run duration s, node events) per ``model_run``, in order, dropping the first *skip_runs* runs."""
    runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                  key=lambda e: e["ts"])
    nodes = sorted((e for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time")),
                   key=lambda e: e["ts"])
    out = []
    for r in runs[skip_runs:]:
        lo, hi = r["ts"], r["ts"] + r["dur"]
        evs: list[Event] = []
        for e in nodes:
            if lo <= e["ts"] <= hi:
                label = e["name"][: -len("_kernel_time")]
                op = str(e.get("args", {}).get("op_name", "")) or label
                cov = (cover or {}).get(label, ())
                scope = scope_of.get(label) or next((scope_of[c] for c in cov if c in scope_of), "")
                evs.append(Event(op, scope, e["dur"] * 1e-6, index=len(evs), label=label, covers=cov))
        out.append((r["dur"] * 1e-6, evs))
    return out


def run_onnx(path: str | Path, graph, *, dims: Mapping[str, int] | None = None, shapes=None,
             runs: int | None = None, warmup: int = 2, opt: str = "basic", threads: int | None = None,
             window: int = 8) -> Measured:
    """Time the ONNX model at *path* on random inputs and map node times onto *graph* (counted, evaluated)."""
    import onnxruntime as ort

    if opt not in OPT_LEVELS:
        raise InputError(f"--ort-opt {opt!r}: use one of {', '.join(OPT_LEVELS)}")
    if (runs is not None and runs < 1) or warmup < 0:
        raise InputError("profile: --runs must be >= 1 and --warmup >= 0")
    path = Path(path)
    all_dims = {**graph.meta.get("default_dims", {}), **graph.meta.get("dims", {}), **dict(dims or {})}
    sess = _session(path, opt, threads, None)
    feeds = random_feeds(sess, all_dims, shapes)
    wall: list[float] = []
    for _ in range(warmup):
        sess.run(None, feeds)
    t0 = time.perf_counter()
    sess.run(None, feeds)
    runs = runs or auto_runs(time.perf_counter() - t0)
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        wall.append(time.perf_counter() - t0)
    with tempfile.TemporaryDirectory(prefix="graphroof-ort-") as tmp:
        opt_file = os.path.join(tmp, "executed.onnx") if opt != "disable" else None
        psess = _session(path, opt, threads, os.path.join(tmp, "prof"), opt_file)
        for _ in range(warmup + runs):
            psess.run(None, feeds)
        prof_file = psess.end_profiling()
        with open(prof_file, encoding="utf-8") as f:
            events = json.load(f)
        cover, executed = None, None
        if opt_file and os.path.exists(opt_file):
            import onnx

            opt_model = onnx.load(opt_file, load_external_data=False)
            cover = executed_cover(onnx.load(str(path), load_external_data=False), opt_model)
            executed = {n.name for n in opt_model.graph.node} | {c for cov in cover.values() for c in cov}
    scope_of = {op.name: op.scope for op in graph.ops()}
    nodes = work_nodes(graph)
    results, profiled = [], []
    for dur, evs in parse_profile(events, scope_of, skip_runs=warmup, cover=cover):
        profiled.append(dur)
        results.append(match(nodes, evs, window=window))
    if not results:
        raise GraphroofError(f"{path.name}: onnxruntime wrote no per-run profile events; cannot map times")
    th = threads or "default (one per physical core)"
    rt = (f"onnxruntime {ort.__version__} CPUExecutionProvider, graph optimisation '{opt}', intra-op threads "
          f"{th}; {runs} profiled runs (per-node kernel time), {len(wall)} timed runs")
    notes = [f"run wall time without the profiler: median {statistics.median(wall) * 1e3:.3g} ms over {len(wall)} "
             f"runs after {warmup} warm-up; inputs: random (floats N(0,1), integer ids in [0, 100), masks 1)"]
    m = Measured(rt, results, wall, profiled, notes, threads=threads)
    if executed is not None:
        gone = [n for n in m.unmatched_nodes() if n not in executed]
        if gone:
            notes.append(f"{len(gone)} unmatched node(s) are not in the graph onnxruntime executed (constant-folded or "
                         f"removed by its '{opt}' optimisation): {', '.join(gone[:8])}" + (" ..." if len(gone) > 8 else ""))
    return m
