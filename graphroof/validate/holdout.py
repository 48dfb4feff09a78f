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

A derived profile's [timing] / [collectives] came from another GPU's rows; the one kind of constant a derived profile
fits on its own rows, a sustained matmul rate (``[timing.gemm_achievable_flops_per_s]`` entries that sources.timing
cites as "<dtype> <rate> TFLOP/s, fitted": T4, A10, V100, on vision rows), is transferred from the other GPUs'
fitted rates of that kind as the lower of the device's board power x their FLOP per joule of board power (those
held below full clock by their power limit) and its datasheet peak x their full-clock sustained / peak ratio (those
that were not; else the MAMF-table ratio) (:mod:`.holdout_rates`); a latency level a derived profile fits on its
own rows (``latency level <k>, fitted``: the V100's) is dropped, its latencies the derived ones.  Rows whose
adapter prices by profile name and sets no held-out figure (torch_gpu) are priced again with the name loading the
held-out profile (:func:`gpu_holdout`).

``engine``: no [collectives] constant is fitted per engine any more (the CUDA-graph all-reduce constants once
fitted on gpt-fast's rows are NCCL's tuning-model figures now), so :func:`held_out_profile` leaves every profile as
it is; the runtime-preset constants fitted on an engine's rows (TensorRT-LLM's per-request time, FasterTransformer's
and PyTorch eager's host costs) and the sustained rates fitted on one engine's vision row of a GPU are replaced for
that engine's rows by :mod:`.holdout_engine`, which prices them again.
Every other fitted constant came from the Vidur rows, the only engine with kernel-level data, so no other engine's
fit exists to transfer: the Vidur rows stay in-sample.  ``model``: the A100 / H100 GEMM and streaming constants,
fitted on the Vidur Llama-2-7B and 70B rows (and the H100's on GEMMs of five more models), are refit without the
row's model (:mod:`.holdout_model`, :mod:`.refit`).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Any

from ..errors import InputError
from ..hardware import HardwareProfile, list_profiles, load_hardware, profiles_replaced
from ..timing.collectives import ring_channel_bw
from .holdout_model import model_held_profile, model_notes
from .holdout_rates import achievable_held_out as _achievable_held_out
from .holdout_rates import rate_notes

__all__ = ["HOLDOUTS", "held_out_profile", "fitted_profiles", "holdout_notes", "check_holdout", "gpu_holdout"]

HOLDOUTS = ("gpu", "engine", "model")
_MEDIAN_TIMING = ("gemm_matrix_efficiency", "gemm_mem_bw_efficiency", "gemm_latency_s", "stream_latency_s",
                  "gemm_overlap_exponent", "gemm_split_k_min", "triton_mma_efficiency")
#: per-GPU [collectives] constants; the network ones (inter_hop_latency_s, inter_bw_bytes_per_s_per_nic,
#: inter_ramp_bytes_per_nic, nics_per_node) are the measured cluster's, not the GPU's: kept as the profile has them
_MEDIAN_COLL = ("base_latency_s", "launch_skew_s", "intra_hop_latency_s", "device_latency_s", "custom_latency_s")


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


def held_out_profile(name: str | HardwareProfile, kind: str = "gpu", dataset: str = "",
                     model: str = "") -> HardwareProfile:
    """Profile *name* without the constants fitted on the held-out group (*kind* ``gpu``: the device; ``model``:
    the row's *model*, :mod:`.holdout_model`); unchanged when nothing was fitted on that group (every profile under
    ``engine``: the engine-fitted rates are held out by :mod:`.holdout_engine`, per row engine; *dataset* is kept
    for the callers)."""
    hw = load_hardware(name) if not isinstance(name, HardwareProfile) else name
    if kind == "model":
        return model_held_profile(hw, model) if model else hw
    if kind != "gpu":  # engine: the engine-fitted rates and presets are held out per row by holdout_engine
        return hw
    return _achievable_held_out(_gpu_held_out(hw))


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
            if t.torch_grouped_sm_bw_bytes_per_s is not None:  # fitted on this GPU's rows: the others' median,
                tc["torch_grouped_sm_bw_bytes_per_s"] = _med(  # none (no per-SM limit) where no other has one
                    [ot.torch_grouped_sm_bw_bytes_per_s for ot in ts])
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
                "latencies, of PyTorch's grouped-GEMM per-SM rate too, none where no other fitted GPU has one; "
                "bandwidths as fractions of the device's own datasheet figures, collective bandwidths "
                "of NCCL's per-channel ring bandwidth of its architecture; SM count and tiles kept); the other "
                "(derived) profiles keep their [timing] / [collectives] (never fitted on their own rows)",
                "with two fitted GPUs the transfer is the other GPU's constants: a check of how far one GPU's fit "
                "carries to the next generation, not a refit",
                "sustained matmul rates fitted on a GPU's own vision rows are transferred from the other GPUs' "
                "fitted rates of that kind (fp16 / bf16 tensor, fp32 SGEMM) as the lower of the device's board "
                "power x the FLOP per joule of those held below full clock by their power limit (rate under "
                "the generic MAMF-table ratio x peak) and its datasheet peak x the sustained / peak ratio of "
                "those at full clock (else the generic ratio): " + "; ".join(rate_notes()),
                "rows an adapter prices by profile name (torch_gpu) are priced again with that name loading the "
                "held-out profile"]
    if kind == "engine":
        from .holdout_engine import engine_notes

        return engine_notes()
    if kind == "model":
        return model_notes()
    return []


def gpu_holdout(rows: list[Any], adapter: Callable[[Any], list[Any]],
                context: Callable[[Collection[str]], Any]) -> None:
    """Set ``row.holdout["gpu"]`` of the priced rows the dataset's adapter left without one (an adapter that prices
    by profile name only) whose profile has constants fitted on its own rows: priced again by *adapter* in a
    fresh ``context(only=row ids)`` where the profile's name loads its held-out profile (:func:`held_out_profile`),
    one device at a time."""
    for name in sorted({r.gpu for r in rows if r.gpu and r.predicted is not None and "gpu" not in r.holdout}):
        own = load_hardware(name)
        held = held_out_profile(own)
        mine = [r for r in rows if r.gpu == name and r.predicted is not None and "gpu" not in r.holdout]
        if held == own or not mine:
            continue
        with profiles_replaced([held]):
            again = {r.row_id: r.predicted for r in adapter(context({r.row_id for r in mine}))}
        for r in mine:
            if again.get(r.row_id) is not None:
                r.holdout["gpu"] = again[r.row_id]
