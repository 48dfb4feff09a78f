"""Hold-out scoring: each group priced with constants not fitted on it.

``gpu``: the NVIDIA profiles' ``[timing]`` / ``[collectives]`` constants were fitted per GPU (a profile whose
``sources.timing`` starts with "fitted"; the others say "derived" and were never fitted on their own rows).  For a
fitted GPU, :func:`held_out_profile` replaces its fitted constants by those transferred from the other fitted GPUs:

* efficiencies, latencies, the overlap exponent, the split-K floor, per-kind streaming efficiencies: the median of
  the others' values;
* bandwidth constants as a fraction of the device's own datasheet figure, median of the others' fractions
  (L2 -> SM bandwidth per unit of fp16 matrix peak, as the derived profiles scale it; the custom all-reduce's P2P
  bandwidth per unit of interconnect bandwidth); NCCL's intra-node bus and NVLS bandwidths per unit of NCCL's
  per-channel ring bandwidth of the device's architecture (its tuning table ``perChMaxRingLL128Bws``: Ampere 20,
  Hopper 36.7 GB/s; :func:`graphroof.timing.collectives.ring_channel_bw`), the interconnect bandwidth where NCCL
  has none.  The per-direction NVLink figures (A100 300, H100 450 GB/s: 1.5x) under-state what the Vidur DGX rows
  sustain: above 16 MB the H100 moves 1.71x / 1.80x / 1.76x the A100's bus bandwidth at 2 / 4 / 8 GPUs; NCCL's
  channel figures say 1.835x (a channel is one thread block: the SM's copy rate, not the link, bounds it; this
  assumes NCCL runs as many ring channels on both NVSwitch nodes).  A bandwidth no other fitted GPU has (NVLS: only
  NVSwitch 3 nodes) keeps its ratio to the transferred ring bandwidth;
* SM count, GEMM tile and smallest tile M stay (datasheet facts of the device and its GEMM library's tiles);
  the inter-node network (a property of the measured cluster, not the GPU: only the A100 cluster has multi-node
  rows) is kept as the profile has it.

A derived profile is its own hold-out (its constants came from another GPU's rows).

``engine``: the CUDA-graph all-reduce constants were fitted on gpt-fast's rows (:data:`ENGINE_FITS`): the gpt-fast
rows are priced with NCCL's own tuning-model figures in their place (:data:`ENGINE_DEFAULTS`: ring LL base latency
6.6 us, LL NVLink hop 0.6 us; fitted 6.8 / 0.2 us).  Every other fitted constant came from the Vidur rows, the only
engine with kernel-level data, so no other engine's fit exists to transfer: the Vidur rows stay in-sample, and the
rows of the engines that never entered a fit score as in the plain run.  ``model``: no constant is fitted per model; the
GPU constants were fitted on all Vidur Llama-2 rows of that GPU, so the Vidur rows of the A100 / H100 are
in-sample in the plain score -- the gpu hold-out is the out-of-sample check for them.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

from ..errors import InputError
from ..hardware import HardwareProfile, list_profiles, load_hardware
from ..timing.collectives import NCCL_NVLINK_LL_HOP_S, NCCL_RING_LL_BASE_LATENCY_S, ring_channel_bw

__all__ = ["HOLDOUTS", "held_out_profile", "fitted_profiles", "holdout_notes", "check_holdout"]

HOLDOUTS = ("gpu", "engine", "model")
_MEDIAN_TIMING = ("gemm_matrix_efficiency", "gemm_mem_bw_efficiency", "gemm_latency_s", "stream_latency_s",
                  "gemm_overlap_exponent", "gemm_split_k_min")
#: per-GPU [collectives] constants; the network ones (inter_hop_latency_s, inter_bw_bytes_per_s_per_nic,
#: inter_ramp_bytes_per_nic, nics_per_node) are the measured cluster's, not the GPU's: kept as the profile has them
_MEDIAN_COLL = ("base_latency_s", "intra_hop_latency_s", "device_latency_s", "custom_latency_s")


def check_holdout(kind: str | None) -> str | None:
    if kind is None or kind == "":
        return None
    if kind not in HOLDOUTS:
        raise InputError(f"--holdout {kind!r}: use one of {', '.join(HOLDOUTS)}")
    return kind


def _fitted(hw: HardwareProfile, section: str) -> bool:
    """Whether the profile's *section* constants were fitted on its own measured rows (the profile's ``origin``
    for [timing]; ``sources.collectives`` for [collectives], else the same origin)."""
    src = hw.sources.get(section, "").strip().lower()
    if section == "collectives" and src:
        return src.startswith("fitted")
    origin = getattr(hw, "origin", None)
    return origin == "fitted" if isinstance(origin, str) else src.startswith("fitted")


def fitted_profiles(section: str = "timing") -> list[HardwareProfile]:
    """The profiles whose *section* constants were fitted on their own measured rows."""
    out = []
    for name in list_profiles():
        hw = load_hardware(name)
        if _fitted(hw, section) and getattr(hw, section) is not None:
            out.append(hw)
    return out


def _med(values: list) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return statistics.median(vals) if vals else None


def held_out_profile(name: str | HardwareProfile, kind: str = "gpu", dataset: str = "") -> HardwareProfile:
    """Profile *name* without the constants fitted on the held-out group (*kind* ``gpu``: the device; ``engine``:
    the engine of a *dataset* row); unchanged when nothing was fitted on that group."""
    hw = load_hardware(name) if not isinstance(name, HardwareProfile) else name
    if kind == "engine":
        return _engine_held_out(hw, dataset)
    if kind != "gpu":
        return hw
    return _gpu_held_out(hw)


#: dataset -> (engine, the words its fit is cited with in sources.collectives, the CollectiveParams fields fitted
#: on its rows): the CUDA-graph all-reduce constants fitted on gpt-fast's tok/s (benchmarks/fit_graph_allreduce.py)
ENGINE_FITS = {"gptfast": ("gpt-fast", "gpt-fast", ("device_latency_s", "device_hop_latency_s"))}
#: what an engine-fitted field becomes in the engine hold-out: NCCL's tuning model (src/graph/tuning.cc baseLat
#: ring LL 6.6 us, hwLat NVLink ring LL 0.6 us; graphroof.timing.collectives), not fitted on any row
ENGINE_DEFAULTS = {"device_latency_s": NCCL_RING_LL_BASE_LATENCY_S, "device_hop_latency_s": NCCL_NVLINK_LL_HOP_S}


def _engine_held_out(hw: HardwareProfile, dataset: str) -> HardwareProfile:
    """The profile without the constants fitted on the rows of *dataset*'s engine (:data:`ENGINE_FITS`): each
    replaced by NCCL's own tuning-model figure (:data:`ENGINE_DEFAULTS`: a call inside a CUDA graph costs NCCL's
    modelled ring LL base latency and LL NVLink hop), or unset where NCCL has none."""
    fit = ENGINE_FITS.get(dataset)
    c = hw.collectives
    if fit is None or c is None or fit[1] not in hw.sources.get("collectives", ""):
        return hw
    unset: dict[str, Any] = {f: ENGINE_DEFAULTS.get(f) for f in fit[2] if hasattr(c, f)}
    if unset.get("device_latency_s") is not None:
        unset["device_latency_s"] = min(unset["device_latency_s"], c.base_latency_s)
    return replace(hw, collectives=replace(c, **unset))


def _bw_unit(hw: HardwareProfile, field: str) -> float | None:
    """What a collective bandwidth constant *field* transfers in units of: NCCL's ring and NVLS bandwidths per unit of
    NCCL's per-channel ring bandwidth of the device's architecture where NCCL has one
    (:func:`graphroof.timing.collectives.ring_channel_bw`), else (and the custom all-reduce's P2P bandwidth) the
    device's datasheet interconnect bandwidth per direction."""
    nccl = ring_channel_bw(hw) if field in ("intra_bus_bw_bytes_per_s", "nvls_bw_bytes_per_s") else None
    return nccl or hw.interconnect_bw_bytes_per_s


def _gpu_held_out(hw: HardwareProfile) -> HardwareProfile:
    changes: dict = {}
    if hw.timing is not None and _fitted(hw, "timing"):
        others = [o for o in fitted_profiles("timing") if o.name != hw.name and o.timing is not None]
        ts = [o.timing for o in others if o.timing is not None]
        if others:
            t = hw.timing
            tc: dict = {}
            for f in _MEDIAN_TIMING:
                v = _med([getattr(ot, f) for ot in ts])
                if v is not None and getattr(t, f) is not None:
                    tc[f] = int(round(v)) if f == "gemm_split_k_min" else v
            ratios = [ot.gemm_l2_bw_bytes_per_s / o.matrix_peak_flops_per_s["fp16"] for o, ot in zip(others, ts)
                      if ot.gemm_l2_bw_bytes_per_s and o.matrix_peak_flops_per_s.get("fp16")]
            if t.gemm_l2_bw_bytes_per_s and ratios and hw.matrix_peak_flops_per_s.get("fp16"):
                tc["gemm_l2_bw_bytes_per_s"] = statistics.median(ratios) * hw.matrix_peak_flops_per_s["fp16"]
            kinds: set[str] = set().union(*(ot.stream_bw_efficiency for ot in ts))
            tc["stream_bw_efficiency"] = {k: statistics.median([ot.stream_bw_efficiency[k] for ot in ts
                                                                if k in ot.stream_bw_efficiency])
                                          for k in sorted(kinds)}
            changes["timing"] = replace(t, **tc)
    if hw.collectives is not None and _fitted(hw, "collectives"):
        others = [o for o in fitted_profiles("collectives") if o.name != hw.name and o.collectives is not None]
        if others:
            c = hw.collectives
            cc: dict = {}
            for f in _MEDIAN_COLL:
                v = _med([getattr(o.collectives, f) for o in others])
                if v is not None and getattr(c, f) is not None:
                    cc[f] = v
            for f in ("intra_bus_bw_bytes_per_s", "nvls_bw_bytes_per_s", "p2p_bw_bytes_per_s"):
                unit = _bw_unit(hw, f)
                ratios = [getattr(o.collectives, f) / u for o in others
                          if getattr(o.collectives, f) and (u := _bw_unit(o, f))]
                if getattr(c, f) and ratios and unit:
                    cc[f] = statistics.median(ratios) * unit
                elif getattr(c, f) and f != "intra_bus_bw_bytes_per_s" and c.intra_bus_bw_bytes_per_s \
                        and "intra_bus_bw_bytes_per_s" in cc:
                    # no other fitted GPU has it (NVLS: only NVSwitch 3 nodes): it keeps its share of the ring
                    # bandwidth, which is transferred
                    cc[f] = getattr(c, f) / c.intra_bus_bw_bytes_per_s * cc["intra_bus_bw_bytes_per_s"]
            changes["collectives"] = replace(c, **cc)
    return replace(hw, **changes) if changes else hw


def holdout_notes(kind: str | None) -> list[str]:
    """What a hold-out refits, in words (printed with the scores)."""
    if kind == "gpu":
        fitted = [hw.name for hw in fitted_profiles("timing")]
        return [f"gpu hold-out: the fitted GPUs ({', '.join(fitted) or 'none'}) are each priced with [timing] / "
                "[collectives] constants transferred from the other fitted GPUs (medians of efficiencies and "
                "latencies; bandwidths as fractions of the device's own datasheet figures, collective bandwidths "
                "of NCCL's per-channel ring bandwidth of its architecture; SM count and tiles kept); derived "
                "profiles (never fitted on their own rows) are scored as in the plain run",
                "with two fitted GPUs the transfer is the other GPU's constants: a check of how far one GPU's fit "
                "carries to the next generation, not a refit"]
    if kind == "engine":
        return ["engine hold-out: the CUDA-graph all-reduce constants (device_latency_s, device_hop_latency_s) were "
                "fitted on the gpt-fast rows (A100; H100 derives them): the gpt-fast rows are priced with NCCL's "
                "tuning-model figures instead (ring LL base latency 6.6 us, LL NVLink hop 0.6 us; "
                "src/graph/tuning.cc)",
                "every other fitted constant ([timing], the rest of [collectives]) was fitted on the Vidur rows, "
                "the only engine with kernel-level data: no other engine's fit exists to transfer, so the Vidur rows "
                "are scored as in the plain run (in-sample); the TensorRT-LLM, kernel and vision rows never entered "
                "a fit (their held-out score equals the plain one); runtime presets are fusion and launch rules, "
                "not fitted"]
    if kind == "model":
        return ["model hold-out: no constant is fitted per model; the A100 / H100 kernel constants were fitted on "
                "the Vidur Llama-2-7B and 70B rows together, so those rows are in-sample in the plain score (no "
                "per-model refit is done here: the fit lives in benchmarks/fit_kernel_model.py); the held-out "
                "score equals the plain score -- use --holdout gpu for an out-of-sample check"]
    return []
