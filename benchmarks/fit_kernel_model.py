"""Fit the [timing] and [collectives] constants of the A100 / H100 profiles on the Vidur profiling data.

    PYTHONPATH=. python benchmarks/fit_kernel_model.py            # fit on all rows, print TOML to paste
    PYTHONPATH=. python benchmarks/fit_kernel_model.py --holdout  # also fit on 7B only / 70B only, report cross error
    PYTHONPATH=. python benchmarks/fit_kernel_model.py --kernels  # weight-only dequant + attention constants (H100)
    PYTHONPATH=. python benchmarks/fit_kernel_model.py --gemm [--keep-grid] [--schedules split]  # GEMM only (H100)
    PYTHONPATH=. python benchmarks/fit_kernel_model.py --grouped  # PyTorch grouped GEMM per-SM rate (H100)

GEMM: ``gemm_matrix_efficiency`` is fitted as a fraction of the profile's achievable matmul rate
(``[timing.gemm_achievable_flops_per_s]``, the MAMF table, kept as the profile has it) where it lists one.
``--kernels`` fits ``gemm_dequant_flops_per_mac`` on our H100 tinygemm int4 rows (measure_int4.csv, M 1-256) and
``attn_matrix_efficiency`` / ``attn_exp_per_s`` / ``attn_fill_keys`` on our H100 SDPA rows (measure_attn.csv,
prefill 512-16k tokens at head dim 64 / 128, decode batch 1-64 x context 512-8192), every other constant as the
profile has it; the A100 values are derived (sources.timing says how).

The formulas are graphroof.timing's (tiles, waves, bandwidth, latency); this script only chooses their constants:
the discrete ones (CTA tile, smallest tile M, split-K floor, NICs per node) by grid search, the continuous ones
(efficiencies, latencies, bandwidths) by Nelder-Mead on the mean |log(predicted / measured)| (robust to the data's
1 us rounding).  Needs numpy.  Data: Vidur profiling data (see benchmarks/_measured.py).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measured import GPU_PROFILE, load_allreduce, load_ops  # noqa: E402

from graphroof.hardware import load_hardware  # noqa: E402
from graphroof.timing import CollectiveParams, KernelTiming, collective_time_with, gemm_time_with  # noqa: E402
from graphroof.timing.gemm import schedule_of  # noqa: E402
from graphroof.timing.precision import gemm_ceiling  # noqa: E402
from graphroof.validate.refit import gemm_rows, nelder_mead, refit_stream  # noqa: E402 (nelder_mead: also fit_collectives)
from graphroof.validate.refit import unit_eff as _eff  # noqa: E402

TILES = [(128, 128), (128, 256), (256, 128)]
TILE_M_MIN = [16, 64]
SPLIT_K_MIN = [256, 1024]
L2_RIDGE = [0, 24, 32, 48, 64, 96]
POLICIES = ["best", "cover_m"]
OVERLAP = [None, 2.0, 3.0, 4.0, 6.0]  # p of the compute / memory p-norm (None: max)  # FLOP/B: the L2 bandwidth as peak / ridge (0: no L2 limit)


def h100_gemm_rows(data=None):
    """((M, N, K), measured s, dtype) of our H100 GEMMs (measure_gemm.csv: bf16 cuBLAS via torch.matmul and fp8
    e4m3 torch._scaled_mm with bf16 out, CUDA-graph replays, M 1-8192, the per-layer GEMMs of five models)."""
    return [((int(r["M"]), int(r["N"]), int(r["K"])), float(r["time_ms"]) * 1e-3,
             "fp8" if r["dtype"].startswith("fp8") else "fp16")
            for r in _csv((data or H100_DATA) / "measure_gemm.csv") if r["time_ms"]]


def fit_gemm(rows, hw, sm_count, extra=None, schedules=("auto", "auto"), grid=None, tile_m_min=None,
             efficiency_only=False):
    """Best (tile, tile_m_min, split_k_min, efficiency, bw efficiency, latency) for these GEMM rows (and the
    *extra* ((M, N, K), measured s) rows, weighted as much in total as the Vidur rows).  *schedules*: the runtime
    ``gemm_schedule`` each set is priced under (graphroof.timing.gemm.schedule_of: the Vidur rows' cuBLAS 12.1
    ``waves``, our 2026 rows' ``stream_k``); *grid*: the discrete constants to search (default all); *tile_m_min*: the
    smallest tile height as a fact of the device's library (:data:`GPU_INFO`), not searched (None: TILE_M_MIN);
    *efficiency_only*: fit gemm_matrix_efficiency alone, the bandwidth efficiency, latency and p as the profile has
    them."""
    held = hw.timing if efficiency_only else None
    g = gemm_rows(rows)
    extra = extra or []
    sched = [schedules[0]] * len(g) + [schedules[1]] * len(extra)
    wts = np.array([1.0 / len(g)] * len(g) + ([1.0 / len(extra)] * len(extra) if extra else []))
    wts /= wts.sum()
    g = [(shape, m, "fp16") for shape, m in g] + [tuple(e) if len(e) == 3 else (*e, "fp16") for e in extra]
    meas = np.array([m for _, m, _ in g])
    bw = hw.mem_bw_bytes_per_s
    # the efficiency is a fraction of the achievable (MAMF) rate where the profile lists one, else of the peak;
    # fp8 rows (our measure_gemm.csv) at the fp8 peak and ceiling, 1-byte inputs and bf16 out
    peaks = {d: hw.matrix_peak_flops_per_s[d] for d in {d for _, _, d in g}}
    ceilings = {d: gemm_ceiling(hw, peaks[d], f"matrix.{d}")[0] for d in peaks}
    best = None
    tmins = [tile_m_min] if tile_m_min else TILE_M_MIN
    for tile, tmin, skmin, ridge, pol in grid or itertools.product(TILES, tmins, SPLIT_K_MIN, L2_RIDGE, POLICIES):
        l2 = float(f"{peaks['fp16'] / ridge:.3g}") if ridge else None
        unit = KernelTiming(sm_count=sm_count, gemm_tile=tile, gemm_tile_m_min=tmin, gemm_split_k_min=skmin,
                            gemm_l2_bw_bytes_per_s=l2, gemm_tile_policy=pol,
                            gemm_matrix_efficiency=1.0, gemm_mem_bw_efficiency=1.0, gemm_latency_s=0.0,
                            gemm_stream_k=bool(hw.timing and hw.timing.gemm_stream_k))
        parts = [gemm_time_with(m, n, k, timing=unit, peak_flops_per_s=peaks[d], mem_bw_bytes_per_s=bw,
                                in_bytes=1.0 if d == "fp8" else 2.0, out_bytes=2.0,
                                achievable_flops_per_s=ceilings[d], l2_bytes=hw.onchip_cache_bytes, schedule=s)
                 for ((m, n, k), _, d), s in zip(g, sched)]
        tc = np.array([p.t_compute_s for p in parts]); tm = np.array([p.t_memory_s for p in parts])
        # rows whose schedule takes max(compute, memory) whatever p is (stream_k on a stream-K device)
        use_max = np.array([schedule_of(unit, s)[0] and s == "stream_k" for s in sched])

        for ov in [held.gemm_overlap_exponent] if held else OVERLAP:
            def loss(x, ov=ov):
                if held:  # x = [log efficiency]: the other two held
                    x = [x[0], math.log(held.gemm_mem_bw_efficiency), math.log(held.gemm_latency_s)]
                a, b = tc / _eff(x[0]), tm / _eff(x[1])
                both = np.maximum(a, b) if ov is None else (a ** ov + b ** ov) ** (1 / ov)
                both = np.where(use_max, np.maximum(a, b), both)
                return float(np.sum(wts * np.abs(np.log((both + math.exp(x[2])) / meas))))

            x, v = nelder_mead(loss, [math.log(0.75)] if held else [math.log(0.75), math.log(0.8), math.log(4e-6)])
            if held:
                x = [x[0], math.log(held.gemm_mem_bw_efficiency), math.log(held.gemm_latency_s)]
            if best is None or v < best[0]:
                best = (v, dict(gemm_tile=list(tile), gemm_tile_m_min=tmin, gemm_split_k_min=skmin,
                                gemm_tile_policy=pol, **({"gemm_l2_bw_bytes_per_s": l2} if l2 else {}),
                                **({"gemm_overlap_exponent": ov} if ov else {}),
                                gemm_matrix_efficiency=round(_eff(x[0]), 3),
                                gemm_mem_bw_efficiency=round(_eff(x[1]), 3),
                                gemm_latency_s=float(f"{math.exp(x[2]):.3g}")))
    return best[1], best[0]


# -- streaming kernels -----------------------------------------------------------------------------------------

def fit_stream(rows, hw):
    """Streaming constants on *rows* (graphroof.validate.refit.refit_stream: no cap below 1), rounded for the TOML."""
    d, v = refit_stream(hw, rows, cap=1.0)
    return dict(stream_latency_s=float(f"{d['stream_latency_s']:.3g}"),
                stream_bw_efficiency={k: round(e, 3) for k, e in d["stream_bw_efficiency"].items()}), v


# -- weight-only GEMMs and attention (our H100 measurements, benchmarks/data/h100_2026-11-27) -------------------

H100_DATA = Path(__file__).resolve().parent / "data" / "h100_2026-11-27"


def _csv(path):
    import csv

    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def int4_rows(data=H100_DATA):
    """(M, N, K, group, measured s) of measure_int4.csv: tinygemm int4 (torch._weight_int4pack_mm), bf16
    activations, Llama-3-8B shapes, M = 1 ... 256."""
    return [(int(r["M"]), int(r["N"]), int(r["K"]), int(r["group"]), float(r["time_ms"]) * 1e-3)
            for r in _csv(data / "measure_int4.csv") if r["time_ms"]]


def fit_dequant(hw, rows):
    """gemm_dequant_flops_per_mac on the weight-only int4 rows (every other constant as the profile has it)."""
    from dataclasses import replace

    from graphroof.timing import gemm_time

    meas = np.array([r[4] for r in rows])

    def loss(x):
        h = replace(hw, timing=replace(hw.timing, gemm_dequant_flops_per_mac=math.exp(x[0])))
        pred = np.array([gemm_time(m, n, k, h, "bf16", weight_dtype="int4", quant_group=g).t_s
                         for m, n, k, g, _ in rows])
        return float(np.mean(np.abs(np.log(pred / meas))))

    x, v = nelder_mead(loss, [math.log(8.0)], step=0.3, iters=200)
    return {"gemm_dequant_flops_per_mac": round(math.exp(x[0]), 2)}, v


def attn_rows(data=H100_DATA):
    """(cost fields, dims, measured s) of measure_attn.csv: SDPA bf16 causal prefill (batch 1, 32 query heads,
    8 KV heads at dim 128 / 32 at dim 64, 512-16k tokens) and one-token decode over a KV cache (dim 128)."""
    from graphroof.timing.attention import AttentionDims

    out = []
    for r in _csv(data / "measure_attn.csv"):
        b, hq, hkv, d = int(r["batch"]), int(r["heads"]), int(r["kv_heads"]), int(r["head_dim"])
        q, ctx = int(r["q_len"]), int(r["context"])
        pairs = q * (q + 1) / 2 if r["phase"] == "prefill" else ctx  # causal incl. the diagonal / all keys
        cost = {"matrix_flops": 2.0 * b * hq * pairs * 2 * d, "vector_flops": 0.0, "weight_bytes": 0.0,
                "act_read_bytes": 2.0 * b * hq * q * d, "act_write_bytes": 2.0 * b * hq * q * d,
                "kv_read_bytes": 2.0 * 2 * b * hkv * ctx * d, "kv_write_bytes": 0.0}
        out.append((r["phase"], cost, AttentionDims(d, d, hq // hkv, 2.0, r["phase"] == "prefill"),
                    float(r["time_ms"]) * 1e-3))
    return out


def fit_attention(hw, rows):
    """attn_matrix_efficiency, attn_exp_per_s, attn_fill_keys on the attention rows."""
    from dataclasses import replace

    from graphroof.timing.attention import attention_time

    meas = np.array([r[3] for r in rows])

    def timing_of(x):
        return replace(hw, timing=replace(hw.timing, attn_matrix_efficiency=math.exp(x[0]),
                                          attn_exp_per_s=math.exp(x[1]), attn_fill_keys=math.exp(x[2])))

    def loss(x):
        h = timing_of(x)
        pred = np.array([attention_time(c, d, h, "bf16") for _, c, d, _ in rows])
        return float(np.mean(np.abs(np.log(pred / meas))))

    x, v = nelder_mead(loss, [0.0, math.log(4e12), math.log(300.0)], step=0.3, iters=600)
    return {"attn_matrix_efficiency": round(math.exp(x[0]), 3), "attn_exp_per_s": float(f"{math.exp(x[1]):.3g}"),
            "attn_fill_keys": round(math.exp(x[2]), 1)}, v


# -- collectives -----------------------------------------------------------------------------------------------

def fit_collectives(rows, algorithms, hw):
    intra = [r for r in rows if r.gpus_per_node >= r.n_gpus]
    inter = [r for r in rows if r.gpus_per_node < r.n_gpus]
    nvls = "nvls" in algorithms

    def params(x, nics=8, xi=None):
        kw = dict(algorithms=tuple(algorithms), base_latency_s=math.exp(x[0]), intra_hop_latency_s=math.exp(x[1]),
                  intra_bus_bw_bytes_per_s=math.exp(x[2]))
        if nvls:
            kw["nvls_bw_bytes_per_s"] = math.exp(x[3])
        if xi is not None:
            kw.update(inter_hop_latency_s=math.exp(xi[0]), inter_bw_bytes_per_s_per_nic=math.exp(xi[1]),
                      nics_per_node=nics)
        return CollectiveParams(**kw)

    def loss_of(rs, p):
        return float(np.mean([abs(math.log(collective_time_with("all_reduce", r.size_bytes, r.n_gpus, p,
                                                                 gpus_per_node=r.gpus_per_node).t_s / r.measured_s))
                              for r in rs]))

    link = hw.interconnect_bw_bytes_per_s or 300e9
    x0 = [math.log(20e-6), math.log(1e-6), math.log(0.6 * link)] + ([math.log(link)] if nvls else [])
    x, v = nelder_mead(lambda x: loss_of(intra, params(x)), x0, step=0.5, iters=600)
    out = dict(algorithms=list(algorithms), base_latency_s=float(f"{math.exp(x[0]):.3g}"),
               intra_hop_latency_s=float(f"{math.exp(x[1]):.3g}"),
               intra_bus_bw_bytes_per_s=float(f"{math.exp(x[2]):.3g}"))
    if nvls:
        out["nvls_bw_bytes_per_s"] = float(f"{math.exp(x[3]):.3g}")
    fits = {"intra": v}
    if inter:
        best = None
        for nics in (1, 2, 4, 8):
            xi, vi = nelder_mead(lambda xi: loss_of(inter, params(x, nics, xi)), [math.log(5e-6), math.log(10e9)],
                                 step=0.5, iters=300)
            if best is None or vi < best[0]:
                best = (vi, nics, xi)
        vi, nics, xi = best
        out.update(inter_hop_latency_s=float(f"{math.exp(xi[0]):.3g}"),
                   inter_bw_bytes_per_s_per_nic=float(f"{math.exp(xi[1]):.3g}"), nics_per_node=nics)
        fits["inter"] = vi
    return out, fits


GRAPH_LAUNCH_S = 20e-6  # not in the data (the rows time single kernels): an assumption, see sources.timing
#: tile_m_min: the smallest tile height of the device's cuBLAS, a fact of its kernel set (not searched): Ampere's
#: smallest tensor-core GEMM tile is 32 rows (sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize32x32x64_stage6_
#: warpsize2x2x1_tensor16x8x16: 2 warps along M x a 16-row mma.m16n8k16)
GPU_INFO = {"a100": dict(sm_count=108, algorithms=["ring", "tree"], tile_m_min=32),
            # no multi-node H100 rows: inter-node constants derived (8 x 400 Gb/s NDR per DGX H100 node, 80%)
            "h100": dict(sm_count=132, algorithms=["ring", "tree", "nvls"],
                         collectives_default=dict(inter_hop_latency_s=10e-6, inter_bw_bytes_per_s_per_nic=40e9,
                                                  nics_per_node=8))}


#: [collectives] constants not fitted here, kept as the profile has them: device_latency_s / device_hop_latency_s are
#: fitted on the gpt-fast CUDA-graph rows by benchmarks/fit_graph_allreduce.py; the custom all-reduce's are derived
#: (sources.collectives)
KEPT_COLLECTIVES = ("device_latency_s", "device_hop_latency_s", "custom_latency_s", "p2p_bw_bytes_per_s",
                    "custom_max_bytes", "inter_ramp_bytes_per_nic", "library")  # + benchmarks/fit_collectives.py


def kept_collectives(hw):
    import tomllib

    have = tomllib.loads(Path(hw.path).read_text()).get("collectives", {})
    return {k: have[k] for k in KEPT_COLLECTIVES if k in have}


#: [timing] constants not fitted on the Vidur rows, kept as the profile has them (sources.timing says where each
#: comes from): the MAMF ceiling table, and the weight-only / attention constants (refit on H100 with --kernels)
KEPT_TIMING = ("gemm_stream_k", "l2_read_bw_bytes_per_s", "gemm_achievable_flops_per_s", "gemm_dequant_flops_per_mac",
               "attn_matrix_efficiency", "attn_exp_per_s", "attn_fill_keys", "attn_sync_matrix_flops_per_s",
               "triton_mma_efficiency", "smem_per_sm_bytes", "torch_grouped_sm_bw_bytes_per_s")


def kept_timing(hw):
    import tomllib

    have = tomllib.loads(Path(hw.path).read_text()).get("timing", {})
    return {k: have[k] for k in KEPT_TIMING if k in have}


#: the runtime gemm_schedule each GEMM set ran under (``--schedules split``): Vidur's rows sarathi-serve's torch
#: 2.2.2 / cuBLAS 12.1 (whole waves), our measure_gemm.csv rows PyTorch 2.11 cu130 (stream-K): the sarathi-serve /
#: compiled presets.  ``auto`` (the default, what the profiles' constants were fitted with): the profile's own.
SCHEDULES = ("waves", "stream_k")


def grouped_rows(folders=("h100_session", "h100_unseen")):
    """(experts, rows, K, N, top_k, experts receiving rows, measured s) of the bundled torch._grouped_mm rows of
    *folders* (graphroof/validate/data/*/grouped.csv: the tokens x top-k rows spread evenly over the experts)."""
    from graphroof.validate.data import DATA_DIR
    from graphroof.validate.torchgpu import grouped_shape

    out = []
    for folder in folders:
        for r in _csv(DATA_DIR / folder / "grouped.csv"):
            e, visited, rows, _, top_k, k, n = grouped_shape(r)
            out.append((e, rows, k, n, top_k, visited, float(r["time_s"])))
    return out


def fit_grouped(hw, rows, grid=tuple(x * 0.5e9 for x in range(20, 81))):
    """``torch_grouped_sm_bw_bytes_per_s`` by grid search (0.5 GB/s steps, 10-40 GB/s per SM) on the mean
    |log(predicted / measured)| of *rows* priced through graphroof validate's path
    (:func:`graphroof.validate.kernels.grouped_mm_time_s`), every other constant as *hw* has it."""
    from dataclasses import replace

    from graphroof.validate.kernels import grouped_mm_time_s

    def loss(v):
        h = replace(hw, timing=replace(hw.timing, torch_grouped_sm_bw_bytes_per_s=v))
        return sum(abs(math.log(grouped_mm_time_s(h, e, m, k, n, "bf16", tk, vis) / t))
                   for e, m, k, n, tk, vis, t in rows) / len(rows)

    best = min(grid, key=loss)
    return {"torch_grouped_sm_bw_bytes_per_s": best}, loss(best), loss(None)


def fit_gemm_of(gpu, rows, hw, grid=None, split=False, efficiency_only=False):
    """The GEMM fit of *gpu*: H100: the Vidur rows (2024 cuBLAS) and our own 2026 bf16 / fp8 rows, half the weight
    each; with *split* each set priced under its own schedule (:data:`SCHEDULES`), else both under the profile's."""
    return fit_gemm(rows, hw, GPU_INFO[gpu]["sm_count"], h100_gemm_rows() if gpu == "h100" else None,
                    SCHEDULES if split else ("auto", "auto"), grid, GPU_INFO[gpu].get("tile_m_min"), efficiency_only)


def fit_gpu(gpu, ops, ar, models=None):
    hw = load_hardware(GPU_PROFILE[gpu])
    rows = [r for r in ops if r.gpu == gpu and (models is None or r.model in models)]
    gemm, gl = fit_gemm_of(gpu, rows, hw)
    stream, sl = fit_stream(rows, hw)
    return {"sm_count": GPU_INFO[gpu]["sm_count"], **gemm, **kept_timing(hw), **stream}, {"gemm": gl, "stream": sl}


MARKER = "# -- fitted by benchmarks/fit_kernel_model.py (sources.timing / sources.collectives say on what) --"


def toml_of(section, d, extra=None):
    lines = [f"[{section}]"]
    for k, v in {**d, **(extra or {})}.items():
        if not isinstance(v, dict):
            lines.append(f"{k} = {v!r}".replace("'", '"'))
    for k, v in d.items():
        if isinstance(v, dict):
            lines.append(f"\n[{section}.{k}]")
            lines += [f"{kk} = {vv!r}" for kk, vv in v.items()]
    return "\n".join(lines)


def write_profile(path, blocks, sources=None):
    """Replace the fitted block at the end of a profile file (from MARKER on) with *blocks*; set *sources* keys
    (``timing = "..."``) in its [sources] table."""
    text = path.read_text()
    head = text.split(MARKER)[0].rstrip("\n")
    for key, val in (sources or {}).items():
        line = f"{key} = {json.dumps(val)}"
        lines = head.split("\n")
        start = lines.index("[sources]")
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
        hit = [i for i in range(start + 1, end) if lines[i].startswith(f"{key} = ")]
        if hit:
            lines[hit[0]] = line
        else:
            while end > start + 1 and not lines[end - 1].strip():
                end -= 1
            lines.insert(end, line)
        head = "\n".join(lines)
    path.write_text(head + "\n\n" + MARKER + "\n" + "\n\n".join(blocks) + "\n")


# Profiles without data of their own: the fitted constants of the same-class reference GPU, with the device's SM
# count (NVIDIA architecture whitepapers / datasheets: CUDA cores / cores per SM) and the L2 bandwidth scaled with its
# fp16 peak (same L2 ridge point).  (profile, reference, SMs, where the SM count comes from)
DERIVED = [
    ("a100-40gb-sxm", "a100", 108, "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 108 SMs"),
    ("a100-80gb-pcie", "a100", 108, "NVIDIA A100 whitepaper (2020): 108 SMs"),
    ("a10-24gb-pcie", "a100", 72, "NVIDIA A10 datasheet: 9,216 CUDA cores / 128 per GA102 SM = 72 SMs"),
    ("a10g-24gb", "a100", 80, "80 SMs (this profile's chip configuration note)"),
    ("l4-24gb-pcie", "a100", 58, "NVIDIA L4 datasheet: 7,424 CUDA cores / 128 per Ada SM = 58 SMs"),
    ("l40s-48gb-pcie", "a100", 142, "NVIDIA L40S datasheet: 18,176 CUDA cores / 128 per Ada SM = 142 SMs"),
    ("rtx-4090-24gb", "a100", 128, "NVIDIA Ada GPU architecture whitepaper: RTX 4090 16,384 CUDA cores / 128 = 128 SMs"),
    ("jetson-agx-orin-64gb", "a100", 16, "NVIDIA Jetson AGX Orin technical brief: 2,048 CUDA cores / 128 = 16 SMs"),
    ("t4-16gb-pcie", "a100", 40, "NVIDIA T4 datasheet: 2,560 CUDA cores / 64 per Turing SM = 40 SMs"),
    ("v100-sxm2-32gb", "a100", 80, "NVIDIA Tesla V100 whitepaper (2017): 80 SMs"),
    ("h100-pcie", "h100", 114, "NVIDIA H100 architecture whitepaper (2022): H100 PCIe 114 SMs"),
    ("h200-sxm", "h100", 132, "NVIDIA H200: the GH100 of H100 SXM, 132 SMs"),
    ("b200-sxm", "h100", 148, "Chips and Cheese, 'Nvidia's B200: Keeping the CUDA Juggernaut Rolling' (2025): 2 dies x 74 SMs"),
]


def derived_block(ref_timing, ref_hw, hw, sms):
    d = dict(ref_timing, sm_count=sms)
    if d.get("gemm_l2_bw_bytes_per_s"):
        ratio = hw.peak("matrix", "fp16")[0] / ref_hw.peak("matrix", "fp16")[0]
        d["gemm_l2_bw_bytes_per_s"] = float(f"{d['gemm_l2_bw_bytes_per_s'] * ratio:.3g}")
    return toml_of("timing", d, {"launch_overhead_s": hw.launch_overhead_s, "graph_launch_overhead_s": GRAPH_LAUNCH_S})


def write_derived(gpu, hw, timing):
    for name, ref, sms, sm_src in DERIVED:
        if ref != gpu:
            continue
        dev = load_hardware(name)
        src = (f"derived: the {GPU_PROFILE[gpu]} constants fitted by benchmarks/fit_kernel_model.py on the "
               f"Vidur profiling data (no measurements of this device), L2 bandwidth scaled by the fp16 peak "
               f"ratio; sm_count {sms}: {sm_src}")
        import tomllib

        have = tomllib.loads(Path(dev.path).read_text()).get("collectives")  # derived apart: kept as it is
        write_profile(Path(dev.path), [derived_block(timing, hw, dev, sms)]
                      + ([toml_of("collectives", have)] if have else []), {"timing": src})
        print(f"# wrote {dev.path} (derived from {gpu})")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--holdout", action="store_true", help="also fit on one model and report the other's error")
    ap.add_argument("--gpu", choices=sorted(GPU_INFO), action="append")
    ap.add_argument("--write", action="store_true", help="write the fitted sections into hw_profiles/*.toml")
    ap.add_argument("--derive-only", action="store_true",
                    help="no fit: rewrite the derived profiles from the A100 / H100 profiles' current [timing]")
    ap.add_argument("--kernels", action="store_true",
                    help="fit only the weight-only dequant and attention constants on the H100 rows (print them)")
    ap.add_argument("--gemm", action="store_true",
                    help="fit only the GEMM constants (print them); with --keep-grid the profile's tile, smallest "
                         "tile M, L2 bandwidth and policy are kept and only the split-K floor is searched")
    ap.add_argument("--grouped", action="store_true",
                    help="fit only torch_grouped_sm_bw_bytes_per_s on the H100 torch._grouped_mm rows (print it)")
    ap.add_argument("--keep-grid", action="store_true")
    ap.add_argument("--efficiency-only", action="store_true",
                    help="with --gemm --keep-grid: fit gemm_matrix_efficiency alone (bandwidth efficiency, latency, "
                         "p and split-K floor as the profile has them)")
    ap.add_argument("--schedules", choices=["auto", "split"], default="auto",
                    help="split: price the Vidur GEMM rows 'waves' and the 2026 rows 'stream_k' (default: both "
                         "under the profile's schedule, as the profiles' constants were fitted)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.gemm:
        ops = load_ops()
        for gpu in args.gpu or ["h100"]:
            hw = load_hardware(GPU_PROFILE[gpu])
            t = hw.timing
            l2 = t.gemm_l2_bw_bytes_per_s
            ridge = round(hw.matrix_peak_flops_per_s["fp16"] / l2) if l2 else 0
            grid = ([(tuple(t.gemm_tile), t.gemm_tile_m_min, sk, ridge, t.gemm_tile_policy) for sk in
                     ([t.gemm_split_k_min] if args.efficiency_only else SPLIT_K_MIN)] if args.keep_grid else None)
            split = args.schedules == "split"
            fit, v = fit_gemm_of(gpu, [r for r in ops if r.gpu == gpu], hw, grid, split, args.efficiency_only)
            print(f"# {gpu} GEMM, schedules {SCHEDULES if split else 'auto'}: mean |log err| {v:.4f}\n"
                  f"{toml_of('timing', fit)}")
        print(f"# wall time {time.perf_counter() - t0:.1f} s")
        return
    if args.grouped:
        fit, v, v0 = fit_grouped(load_hardware("h100-sxm"), grouped_rows())
        print(f"# h100 on graphroof/validate/data/h100_session + h100_unseen grouped.csv: mean |log err| {v:.4f} "
              f"(no per-SM limit: {v0:.4f})\n{toml_of('timing', fit)}")
        return
    if args.kernels:
        hw = load_hardware("h100-sxm")
        for name, (fit, v) in (("measure_int4.csv", fit_dequant(hw, int4_rows())),
                               ("measure_attn.csv", fit_attention(hw, attn_rows()))):
            print(f"# h100 on {name}: mean |log err| {v:.3f}\n{toml_of('timing', fit)}")
        return
    if args.derive_only:
        import tomllib

        for gpu in args.gpu or sorted(GPU_INFO):
            hw = load_hardware(GPU_PROFILE[gpu])
            timing = tomllib.loads(Path(hw.path).read_text())["timing"]
            for k in ("launch_overhead_s", "graph_launch_overhead_s"):
                timing.pop(k, None)
            write_derived(gpu, hw, timing)
        return
    ops, ar = load_ops(), load_allreduce()
    for gpu in args.gpu or sorted(GPU_INFO):
        hw = load_hardware(GPU_PROFILE[gpu])
        timing, losses = fit_gpu(gpu, ops, ar)
        print(f"# {gpu}: fitted on all Vidur {gpu} Llama-2-7B + 70B rows (TP1-8, tokens 1-4096); "
              f"mean |log err| gemm {losses['gemm']:.3f}, stream {losses['stream']:.3f}")
        t_block = toml_of("timing", timing, {"launch_overhead_s": hw.launch_overhead_s,
                                             "graph_launch_overhead_s": GRAPH_LAUNCH_S})
        print(t_block)
        if args.holdout:
            for fit_on in ("7b", "70b"):
                t, _ = fit_gpu(gpu, ops, ar, models={fit_on})
                print(f"# {gpu} fitted on {fit_on} only: {t}")
        coll, fits = fit_collectives([r for r in ar if r.gpu == gpu], GPU_INFO[gpu]["algorithms"], hw)
        coll = {**GPU_INFO[gpu].get("collectives_default", {}), **coll, **kept_collectives(hw)}
        print(f"# {gpu} collectives: mean |log err| {fits}")
        c_block = toml_of("collectives", coll)
        print(c_block)
        if args.write:
            write_profile(Path(hw.path), [t_block, c_block])
            print(f"# wrote {hw.path}")
            write_derived(gpu, hw, timing)
    print(f"# wall time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
