"""Model hold-out: the A100 / H100 kernel constants refit without one model's Vidur rows.

The fitted NVIDIA profiles (``a100-80gb-sxm``, ``h100-sxm``) took their continuous kernel constants from Vidur's
per-kernel profiling of Llama-2-7B and Llama-2-70B together (benchmarks/fit_kernel_model.py): the GEMM efficiencies
and fixed time (``gemm_matrix_efficiency``, ``gemm_mem_bw_efficiency``, ``gemm_latency_s``) and the streaming
kernels' (``stream_latency_s``, ``stream_bw_efficiency`` per kind).  ``--holdout model`` prices one of those models'
rows with these constants refit on the *other* model's rows alone (:func:`refit_profile`), by the fitter's own
method: each measured kernel's shape from the CSV's model columns (:func:`kernels_of`), its time by
:func:`graphroof.timing.gemm_time_with` at unit efficiencies under the profile's discrete constants (CTA tile,
smallest tile height, split-K floor, tile policy, L2 bandwidth, overlap exponent ``p``: facts of the device's GEMM
library, kept), then Nelder-Mead on the mean ``|log(predicted / measured)|`` from the fitter's own starting point
(never the profile's constants, which saw the left-out model)::

    gemm:   t = ((t_c / e)^p + (t_m / e_bw)^p)^(1/p) + L          (max(t_c / e, t_m / e_bw) without p)
    stream: t = L_s + bytes / (mem_bw * e_kind)                    e_kind <= the profile's elementwise efficiency

The elementwise efficiency is the streaming ceiling: a kernel cannot stream faster than a device-to-device copy
(the H100's 0.905 is such a measurement, not a Vidur fit: kept).  The H100's GEMM fit also weighed 294 bf16 and
294 fp8 GEMMs of our own (benchmarks/data, not bundled); the refit uses the Vidur rows alone, so it holds out more
than the one model.  Everything else (attention, collectives, achievable rates) is as the profile has it: no
other constant was fitted on a Llama-2 model's rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..hardware import HardwareProfile
from ..timing import gemm_time_with
from ..timing.precision import gemm_ceiling

__all__ = ["Kernel", "OpsRow", "OPS_COLUMNS", "STREAM_KINDS", "GPU_PROFILE", "MODELS", "kernels_of", "ops_row", "nelder_mead", "unit_eff",
           "gemm_rows", "refit_gemm", "refit_stream", "refit_profile"]

FP16 = 2      # bytes per element: every Vidur kernel is fp16
ID_BYTES = 8  # int64 token ids / positions
#: measured column -> kernel class
OPS_COLUMNS = {
    "input_layernorm_ms": "norm", "post_attention_layernorm_ms": "norm", "attn_pre_proj_ms": "gemm_qkv",
    "attn_rope_ms": "rope", "attn_post_proj_ms": "gemm_o", "mlp_up_proj_ms": "gemm_up", "mlp_act_ms": "act",
    "mlp_down_proj_ms": "gemm_down", "add_ms": "add", "emb_ms": "embedding",
}
STREAM_KINDS = ("norm", "rotary", "act_mul", "elementwise", "gather")
#: the Vidur files' GPU names and models (vidur_{gpu}_{model}_ops.csv) as graphroof names them
GPU_PROFILE = {"a100": "a100-80gb-sxm", "h100": "h100-sxm"}
MODELS = {"Llama-2-7b-hf": "llama-2-7b", "Llama-2-70b-hf": "llama-2-70b"}


@dataclass(frozen=True)
class Kernel:
    """A measured kernel's shape: a GEMM (m, n, k) or a streaming kernel (bytes, kind)."""

    column: str
    cls: str
    gemm: tuple[int, int, int] | None = None
    stream_bytes: float = 0.0
    stream_kind: str = ""


@dataclass(frozen=True)
class OpsRow:
    """One Vidur layer row: the model, token count and TP, each kernel's shape and its measured seconds."""

    gpu: str
    model: str
    tokens: int
    tp: int
    kernels: dict[str, Kernel]
    measured_s: dict[str, float]


def kernels_of(h: int, heads: int, kv_heads: int, ffn: int, tokens: int, tp: int) -> dict[str, Kernel]:
    """The shapes of one layer's non-attention kernels (per-GPU shard at tensor parallelism *tp*)."""
    t = tokens
    d = h // heads
    qkv_n = (heads + 2 * kv_heads) * d // tp
    q_k = (heads + kv_heads) * d // tp  # rotated channels per token (q and k)
    norm_b = 2 * t * h * FP16 + h * FP16  # read x, write y, read gamma
    return {
        "input_layernorm_ms": Kernel("input_layernorm_ms", "norm", stream_bytes=norm_b, stream_kind="norm"),
        "post_attention_layernorm_ms": Kernel("post_attention_layernorm_ms", "norm", stream_bytes=norm_b,
                                              stream_kind="norm"),
        "attn_pre_proj_ms": Kernel("attn_pre_proj_ms", "gemm_qkv", gemm=(t, qkv_n, h)),
        # rotary in place on q and k: read + write each, read the positions and one cos/sin row per token
        "attn_rope_ms": Kernel("attn_rope_ms", "rope", stream_bytes=2 * t * q_k * FP16 + t * d * FP16 + t * ID_BYTES,
                               stream_kind="rotary"),
        "attn_post_proj_ms": Kernel("attn_post_proj_ms", "gemm_o", gemm=(t, h, heads * d // tp)),
        "mlp_up_proj_ms": Kernel("mlp_up_proj_ms", "gemm_up", gemm=(t, 2 * ffn // tp, h)),
        # SiLU(gate) * up: read gate and up, write the product
        "mlp_act_ms": Kernel("mlp_act_ms", "act", stream_bytes=3 * t * (ffn // tp) * FP16, stream_kind="act_mul"),
        "mlp_down_proj_ms": Kernel("mlp_down_proj_ms", "gemm_down", gemm=(t, h, ffn // tp)),
        "add_ms": Kernel("add_ms", "add", stream_bytes=3 * t * h * FP16, stream_kind="elementwise"),
        # embedding gather: read the ids and one row per token, write the rows
        "emb_ms": Kernel("emb_ms", "embedding", stream_bytes=2 * t * h * FP16 + t * ID_BYTES, stream_kind="gather"),
    }


def ops_row(gpu: str, model: str, r: dict[str, str]) -> OpsRow | None:
    """A Vidur ops CSV row as an :class:`OpsRow` (None for a model without a gated MLP)."""
    if r.get("use_gated_mlp", "True") != "True":
        return None
    t, tp = int(r["num_tokens"]), int(r["num_tensor_parallel_workers"])
    ks = kernels_of(int(r["n_embd"]), int(r["n_head"]), int(r["n_kv_head"]), int(r["n_expanded_embd"]), t, tp)
    meas = {c: float(r[c]) * 1e-3 for c in OPS_COLUMNS if r.get(c) not in (None, "")}
    return OpsRow(gpu, model, t, tp, ks, meas)


def nelder_mead(f: Callable[[np.ndarray], float], x0: Sequence[float] | np.ndarray, step: float = 0.3, iters: int = 400,
                tol: float = 1e-7) -> tuple[np.ndarray, float]:
    """Minimise *f* over R^n (plain Nelder-Mead; callers pass parameters in log space)."""
    n = len(x0)
    pts = [np.array(x0, float)] + [np.array(x0, float) + step * np.eye(n)[i] for i in range(n)]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if abs(vals[-1] - vals[0]) < tol:
            break
        c = np.mean(pts[:-1], axis=0)
        xr = c + (c - pts[-1])
        fr = f(xr)
        if fr < vals[0]:
            xe = c + 2 * (c - pts[-1])
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = c + 0.5 * (pts[-1] - c)
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                pts = [pts[0]] + [pts[0] + 0.5 * (p - pts[0]) for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
    i = int(np.argmin(vals))
    return pts[i], vals[i]


def unit_eff(x: float) -> float:
    """A log-space parameter as an efficiency in (0, 1]."""
    return min(1.0, math.exp(x))


def gemm_rows(rows: Sequence[OpsRow]) -> list[tuple[tuple[int, int, int], float]]:
    """((M, N, K), measured s) of every GEMM kernel of *rows*."""
    return [(k.gemm, r.measured_s[c]) for r in rows for c, k in r.kernels.items() if k.gemm and c in r.measured_s]


def refit_gemm(hw: HardwareProfile, rows: Sequence[OpsRow]) -> tuple[dict, float]:
    """(``gemm_matrix_efficiency``, ``gemm_mem_bw_efficiency``, ``gemm_latency_s``) refit on *rows*' GEMMs, the
    profile's discrete constants and overlap exponent kept (module doc), from benchmarks/fit_kernel_model.py's
    starting point (0.75, 0.8, 4 us), not the profile's own fit; and the fit's mean |log error|."""
    t = hw.timing
    assert t is not None
    g = gemm_rows(rows)
    unit = replace(t, gemm_matrix_efficiency=1.0, gemm_mem_bw_efficiency=1.0, gemm_latency_s=0.0)
    peak = hw.matrix_peak_flops_per_s["fp16"]
    ceiling = gemm_ceiling(hw, peak, "matrix.fp16")[0]
    parts = [gemm_time_with(m, n, k, timing=unit, peak_flops_per_s=peak, mem_bw_bytes_per_s=hw.mem_bw_bytes_per_s,
                            in_bytes=2.0, out_bytes=2.0, achievable_flops_per_s=ceiling,
                            l2_bytes=hw.onchip_cache_bytes, schedule="auto") for (m, n, k), _ in g]
    tc = np.array([p.t_compute_s for p in parts])
    tm = np.array([p.t_memory_s for p in parts])
    meas = np.array([m for _, m in g])
    p = t.gemm_overlap_exponent

    def loss(x: np.ndarray) -> float:
        a, b = tc / unit_eff(x[0]), tm / unit_eff(x[1])
        both = np.maximum(a, b) if p is None else (a ** p + b ** p) ** (1 / p)
        return float(np.mean(np.abs(np.log((both + math.exp(x[2])) / meas))))

    x, v = nelder_mead(loss, [math.log(0.75), math.log(0.8), math.log(4e-6)])
    return {"gemm_matrix_efficiency": unit_eff(x[0]), "gemm_mem_bw_efficiency": unit_eff(x[1]),
            "gemm_latency_s": math.exp(x[2])}, v


def refit_stream(hw: HardwareProfile, rows: Sequence[OpsRow], cap: float | None = None) -> tuple[dict, float]:
    """``stream_latency_s`` and ``stream_bw_efficiency`` per kind refit on *rows*' streaming kernels, each kind at
    most *cap* (None: the profile's elementwise efficiency, the copy ceiling; benchmarks/fit_kernel_model.py
    passes 1.0), from the fitter's starting point (2 us, 0.6 each; a second, finer pass); and the mean |log
    error|."""
    t = hw.timing
    assert t is not None
    s = [(k.stream_kind, k.stream_bytes, r.measured_s[c]) for r in rows for c, k in r.kernels.items()
         if k.stream_kind and c in r.measured_s]
    kinds = np.array([STREAM_KINDS.index(k) for k, _, _ in s])
    nbytes = np.array([b for _, b, _ in s])
    meas = np.array([m for _, _, m in s])
    top = min(1.0, t.stream_bw_efficiency.get("elementwise", 1.0)) if cap is None else cap
    bw = hw.mem_bw_bytes_per_s

    def loss(x: np.ndarray) -> float:
        eff = np.minimum(top, np.exp(x[1:]))[kinds]
        return float(np.mean(np.abs(np.log((math.exp(x[0]) + nbytes / (bw * eff)) / meas))))

    x, v = nelder_mead(loss, [math.log(2e-6)] + [math.log(0.6)] * len(STREAM_KINDS), iters=2000)
    x, v = nelder_mead(loss, x, step=0.1, iters=2000)
    effs = {k: min(top, math.exp(x[1 + i])) for i, k in enumerate(STREAM_KINDS)}
    return {"stream_latency_s": math.exp(x[0]), "stream_bw_efficiency": effs}, v


def refit_profile(hw: HardwareProfile, rows: Sequence[OpsRow]) -> HardwareProfile:
    """*hw* with its GEMM and streaming constants refit on *rows* (module doc)."""
    assert hw.timing is not None
    gemm, _ = refit_gemm(hw, rows)
    stream, _ = refit_stream(hw, rows)
    return replace(hw, timing=replace(hw.timing, **gemm, **stream))
