"""What-if costs for the interactive HTML page: every kernel's FLOPs and bytes by role as polynomials of the shapes.

A zoo model or a transformers config (which take ``batch`` and ``seq``) is counted at a few more shapes around the
traced point ``(b0, s0)``: batches ``b0, 2 b0`` x contexts ``s0/4, s0/2, s0`` (``s0, 2 s0, 3 s0`` when ``s0 < 8``),
the same kernels under the same runtime.  Each kernel field (matrix / vector FLOPs, weight, activation and KV bytes)
is fitted exactly on that grid as ``c . [1, u, v, uv, v^2, uv^2]`` with ``u = b / b0``, ``v = s / s0`` (degree 1 in
the batch, 2 in the context: attention is quadratic), and the fit must reproduce one more counted point
``(3 b0, 3 s0 / 4)`` (``(3 b0, 4 s0)``); when it does not (a cost that is not polynomial: an embedding gather
capped at the vocabulary, sliding windows, kernels that differ between the shapes), every field but the weights
scales linearly in ``b s`` from the traced point and the page says so.  Models without a batch / context
(op tables, ONNX files, modules with given inputs) get the traced costs as constants (device, dtype and TP
what-ifs only).

The page prices a kernel ``t = max(matrix / peak_m + vector / peak_v, bytes / bandwidth)`` exactly as
:func:`graphroof.roofline.evaluate`, so at any batch and context the page's roofline time equals what
``graphroof.analyze`` computes there.  The data are plain JSON (:func:`whatif_costs`); the page is drawn by
:mod:`graphroof.report.whatif_html`.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..dtypes import DTYPE_BITS, canonical_dtype
from ..errors import GraphroofError, GraphroofWarning
from ..graph import COST
from ..hardware import HardwareProfile, load_hardware
from ..roofline import compute_dtype, evaluate

__all__ = ["FIELDS", "BASIS", "DEVICES", "DTYPE_CHOICES", "whatif_costs", "analyze_whatif", "basis"]

#: cost fields fitted per kernel (``bytes`` is the sum of the five byte roles)
FIELDS = ("matrix_flops", "vector_flops", "weight_bytes", "act_read_bytes", "act_write_bytes", "kv_read_bytes",
          "kv_write_bytes", "net_bytes")
#: monomials of u = batch / b0, v = seq / s0
BASIS = ("1", "u", "v", "u*v", "v^2", "u*v^2")
#: devices offered beside the analysed one
DEVICES = ("a100", "h100", "l4", "mi300x")
#: dtypes offered for weights and activations
DTYPE_CHOICES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
#: relative error the extra counted point must be reproduced within
TOL = 1e-6

_INPUT_IDS = re.compile(r"input_ids=\w+\[(\d+),(\d+)\]")


def basis(u: float, v: float) -> list[float]:
    """The monomials of :data:`BASIS` at ``(u, v)``."""
    return [1.0, u, v, u * v, v * v, u * v * v]


def _rows(a) -> list[dict[str, Any]]:
    return a.kernel_rows


def _matrix(a) -> np.ndarray:
    return np.array([[float(r[f]) for f in FIELDS] for r in _rows(a)])


def _traced_shape(a, opts: dict) -> tuple[int, int | None]:
    """(batch, seq) the analysis was traced at: the options, else the ``input_ids`` shape; None when unknown."""
    m = _INPUT_IDS.search(str(a.graph.meta.get("inputs", "")))
    b = opts.get("batch") or (int(m.group(1)) if m else 1)
    s = int(m.group(2)) if m else None
    return int(b), s


def _model_kind(model: Any) -> str:
    from ..frontends.resolve import classify

    try:
        return classify(model).kind
    except GraphroofError:
        return "other"


def _grid(b0: int, s0: int | None) -> tuple[list[tuple[int, int | None]], tuple[int, int | None]]:
    if s0 is None:
        return [(b0, None), (2 * b0, None)], (3 * b0, None)
    xs = (s0 // 4, s0 // 2, s0) if s0 >= 8 else (s0, 2 * s0, 3 * s0)
    extra = (3 * b0, (3 * s0) // 4 if s0 >= 8 else 4 * s0)
    return [(b, x) for b in (b0, 2 * b0) for x in xs], extra


def _fit(samples: dict, b0: int, s0: int | None, extra: tuple[int, int | None]) -> np.ndarray:
    """Coefficients [kernels, fields, basis] solving the grid exactly; ValueError when the extra point misses."""
    pts = [p for p in samples if p != extra]
    cols = [0, 1] if s0 is None else list(range(len(BASIS)))
    A = np.array([[basis(b / b0, (x or 1) / (s0 or 1))[c] for c in cols] for b, x in pts])
    Y = np.stack([samples[p] for p in pts])                                   # [points, kernels, fields]
    sol = np.linalg.solve(A, Y.reshape(len(pts), -1))                          # [cols, kernels * fields]
    coef = np.zeros((len(BASIS), sol.shape[1]))
    coef[cols] = sol
    coef = coef.T.reshape(Y.shape[1], Y.shape[2], len(BASIS))
    eb, ex = extra
    got = coef @ np.array(basis(eb / b0, (ex or 1) / (s0 or 1)))
    want = samples[extra]
    bad = np.abs(got - want) > TOL * np.maximum(np.abs(want), 1.0)
    if bad.any():
        k, f = map(int, np.argwhere(bad)[0])
        raise ValueError(f"{FIELDS[f]} of kernel #{k} is {want[k, f]:.6g} at batch {eb}, seq {ex}; the fit gives "
                         f"{got[k, f]:.6g}")
    return coef


def _linear(base: np.ndarray, has_seq: bool) -> np.ndarray:
    coef = np.zeros((*base.shape, len(BASIS)))
    w = FIELDS.index("weight_bytes")
    scale = 3 if has_seq else 1       # u*v, or u
    coef[:, :, scale] = base
    coef[:, w, scale] = 0.0
    coef[:, w, 0] = base[:, w]
    return coef


def _device(hw: HardwareProfile, a, dtypes: Sequence[str]) -> dict[str, Any]:
    peaks = {dt: [hw.peak("matrix", dt)[0], hw.peak("vector", dt)[0]] for dt in dtypes}
    g = a.timed_graph
    launch = []
    for node in g.ops():
        cost = g.get(node.name, COST)
        launch.append(evaluate(cost, hw, compute_dtype(node), node=node).t_launch_s)
    return {"name": hw.name, "label": hw.label, "mem_bw_bytes_per_s": hw.mem_bw_bytes_per_s,
            "interconnect_bw_bytes_per_s": hw.interconnect_bw_bytes_per_s or 0.0, "peaks_flops_per_s": peaks,
            "t_launch_s": launch}


def _devices(a, names: Sequence[str], dtypes: Sequence[str]) -> list[dict[str, Any]]:
    out = [_device(a.hw, a, dtypes)]
    seen = {a.hw.name}
    for n in names:
        try:
            hw = load_hardware(n)
        except GraphroofError:
            continue
        if hw.name not in seen:
            seen.add(hw.name)
            out.append(_device(hw, a, dtypes))
    return out


def _traced_dtype(a) -> str:
    """The dtype most kernel bytes are in: what the dtype what-ifs scale from."""
    by: dict[str, float] = {}
    for r in _rows(a):
        by[r["dtype"]] = by.get(r["dtype"], 0.0) + float(r["bytes"])
    return canonical_dtype(max(by, key=lambda k: by[k])) if by else "bf16"


def whatif_costs(model: Any, base, *, devices: Sequence[str] = DEVICES,
                 progress: Callable[[str], None] | None = None, **opts: Any) -> dict[str, Any]:
    """The page's what-if data for *base* (the Analysis of *model* with frontend / count options *opts*, as given
    to :func:`graphroof.api.analyze`): per kernel, fitted cost polynomials; device peaks, bandwidths and launch
    costs; the traced point's figures.  Plain JSON-able values."""
    from ..api import analyze

    kind = _model_kind(model)
    b0, s0 = _traced_shape(base, opts)
    Y0 = _matrix(base)
    names = [r["name"] for r in _rows(base)]
    axes: list[str] = []
    if kind in ("zoo", "hf_config") and not opts.get("input_shapes"):
        axes = ["batch"] + (["seq"] if s0 else [])
    fit, note = "fixed", ("this model takes no batch / sequence options (an op table, an ONNX file or a module "
                          "with given inputs): its traced costs are re-priced for the device, dtypes and TP only")
    coef = np.zeros((*Y0.shape, len(BASIS)))
    coef[:, :, 0] = Y0
    if axes:
        grid, extra = _grid(b0, s0)
        samples: dict = {(b0, s0): Y0}
        fit = "exact"
        note = (f"counted at (batch, seq) {', '.join(f'({b}, {x})' for b, x in grid)} and fitted per kernel on "
                f"1, b, s, b·s, s², b·s²; the fit reproduces the count at ({extra[0]}, {extra[1]}) exactly")
        if s0 is None:
            note = (f"counted at batch {grid[0][0]} and {grid[1][0]} and fitted per kernel on 1, b; the fit "
                    f"reproduces the count at batch {extra[0]} exactly (this model takes no sequence length)")
        try:
            for b, x in [*grid, extra]:
                if (b, x) in samples:
                    continue
                if progress:
                    progress(f"what-if: counting at batch {b}" + (f", seq {x}" if x else ""))
                kw = {**opts, "batch": b, **({"seq": x} if x else {})}
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", GraphroofWarning)
                    a = analyze(model, hw=base.hw, runtime=base.runtime, **kw)
                if [r["name"] for r in _rows(a)] != names:
                    raise ValueError(f"the kernels differ between batch {b0}, seq {s0} and batch {b}, seq {x}")
                samples[(b, x)] = _matrix(a)
            coef = _fit(samples, b0, s0, extra)
        except (ValueError, GraphroofError, np.linalg.LinAlgError) as e:
            fit = "linear"
            coef = _linear(Y0, s0 is not None)
            note = (f"the counted costs are not one polynomial of the shapes ({e}); every cost but the weights "
                    f"scales linearly in batch{' × seq' if s0 else ''} from the traced point: a rough guide")
    traced = _traced_dtype(base)
    dtypes = sorted({*DTYPE_CHOICES, traced, *(r["dtype"] for r in _rows(base))})
    parts = base.time_parts()
    return {
        "version": 1, "axes": axes, "fit": fit, "fit_note": note, "basis": list(BASIS), "fields": list(FIELDS),
        "traced": {"batch": b0, "seq": s0, "dtype": traced, "device": base.hw.name, "runtime": base.runtime,
                   "time_roofline_s": parts["time_roofline_s"], "time_realistic_s": parts["time_realistic_s"],
                   "time_launch_s": parts["time_launch_s"]},
        "dtype_bits": {d: DTYPE_BITS[d] for d in dtypes},
        "dtype_choices": list(DTYPE_CHOICES),
        "kernels": [{"name": r["name"], "kind": r["kind"], "dtype": canonical_dtype(r["dtype"]),
                     "first_op": (r["ops"] or [r["name"]])[0],
                     "c": [[float(v) for v in row] for row in coef[i]]} for i, r in enumerate(_rows(base))],
        "devices": _devices(base, devices, dtypes),
    }


def analyze_whatif(model: Any, inputs: Any = None, *, devices: Sequence[str] = DEVICES, **kw: Any):
    """:func:`graphroof.api.analyze` plus the what-if data on the result (``result.whatif``), for ``-f html``."""
    from ..api import analyze

    a = analyze(model, inputs, **kw)
    fopts = {k: v for k, v in kw.items()
             if k not in ("hw", "peak_flops_per_s", "mem_bw_bytes_per_s", "ideal", "matmul_precision", "runtime",
                          "progress", "depth", "strict", "rules")}
    a.whatif = whatif_costs(model, a, devices=devices, progress=kw.get("progress"), **fopts)
    return a
