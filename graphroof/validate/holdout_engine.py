"""Engine hold-out of the runtime-preset constants fitted on one engine's rows.

A preset constant fitted on the measured rows of one engine (its ``[sources]`` text says on which rows) is, under
``--holdout engine``, replaced for that engine's rows by what it would be without them (:data:`ENGINE_FITS`): a fit
of the same form on another engine's rows, or the preset's unfitted default.  The rows of that engine priced under
that preset are priced a second time, by the dataset's own adapter (the same path as the plain score), with the
preset's constants replaced (:func:`held_out_runtimes`), and that figure is their held-out prediction
(:func:`engine_holdout`).  The sustained matmul rates fitted on one engine's vision row of a GPU
(:data:`.holdout_rates.RATE_FITS`) are held out the same way: that engine's rows on that GPU are priced again on
the profile with those rates transferred from the GPUs whose rate was fitted on another engine's rows
(:func:`.holdout_rates.engine_held_profile`).  Rows of other engines keep the fitted constants: none was fitted on
their rows.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["EngineFit", "ENGINE_FITS", "TIMING_FITS", "held_out_runtimes", "engine_holdout", "engine_notes", "fits_of"]


@dataclass(frozen=True)
class EngineFit:
    """Preset constants fitted on the rows of one engine, and what they are for that engine's rows when held out."""

    dataset: str                  # the validation dataset holding the engine's rows
    engine: str                   # the start of those rows' Row.engine
    preset: str                   # the runtime preset whose constants were fitted on them
    held_out: dict[str, float]    # Runtime field -> its value without those rows
    why: str                      # where the held-out value comes from


_EAGER_TS = ("no preset constant is fitted on the TorchScript rows: the pytorch-eager level comes from the torch_gpu "
             "rows (PyTorch 2.11, 2026 hosts); what the TorchScript rows fitted is their own host factor, PyTorch 1.8 "
             "on the FT docs' host against that level (graphroof.validate.vision.PYTORCH18_HOST, 1.20) and the T4 / "
             "A10 hosts' FT_HOSTS factors, all dropped (1): the rows are priced at the preset's level as it is")
_EAGER_TG = ("the TorchScript rows' level fit alone, one constant per launch (the form before the torch_gpu rows "
             "split it): the six rows' median 6.785 ms / 237 launches = 28.63 us, less the 5 us launch overhead of "
             "V100 / T4 / A10 = 23.6 us per launch, no library surcharge (PYTORCH18_HOST, measured against the "
             "torch_gpu level, is undefined without those rows: 1)")
_ATEN_STRIDED = ("aten_strided_elements_per_sm_clock (1.45) and aten_softmax_reg_elements_per_sm_clock (1.14) were "
                 "fitted on PyTorch 2.11's non-vectorised elementwise and register softmax kernels measured on an H200 "
                 "(h200_probe/stream_paths.csv and naive_attention_kernels.csv, unscored kernel profiles of this "
                 "engine); no other engine's rows fit those kernels' element rates: the unfitted default, no element "
                 "bound (0)")
#: (dataset, engine, preset) -> held-out constants.  One entry per fit named in a preset's [sources] (the test
#: tests/test_holdout_fits.py checks every "fitted" preset constant has one).
ENGINE_FITS: tuple[EngineFit, ...] = (
    EngineFit("trtllm", "TensorRT-LLM", "tensorrt-llm-v0.5", {"request_overhead_s": 0.0},
              "request_overhead_s (0.8 ms) was fitted on trtllm rows 17, 21, 23; no other engine's rows fit a "
              "per-request time: the preset's unfitted default, no time per request beyond the steps"),
    EngineFit("nim", "NVIDIA NIM", "nim", {"request_overhead_s": 0.0008, "host_per_sequence_s": 0.0},
              "request_overhead_s (4.4 ms) was fitted on the nim Llama-3.1-8B rows at concurrency 1; the time per "
              "request fitted on another engine's rows, TensorRT-LLM v0.5's generate call (the tensorrt-llm-v0.5 "
              "preset's 0.8 ms, trtllm rows 17, 21, 23); host_per_sequence_s (64.6 us, fitted on the 8B rows at "
              "concurrency 150-250, which tools/nim_serve.py scores) has no fit on another engine's rows: none"),
    EngineFit("serve_published", "TensorRT-LLM 1.0", "tensorrt-llm", {"host_per_sequence_s": 0.0},
              "host_per_sequence_s (35 us) was fitted on two rows of benchmarks/data/published/"
              "trtllm_perf_overview_fp8_hopper.csv (Llama 3.1 8B, 128 / 128, H100 and H200), which benchmarks/"
              "serve_published.py scores, not graphroof validate; the per-sequence floor fitted on another engine's "
              "rows, NIM's 64.6 us, is its HTTP server's streaming, not this executor's: none"),
    EngineFit("vision", "FasterTransformer TF custom op", "fastertransformer", {"host_overhead_per_kernel_s": 8.8e-6},
              "host_overhead_per_kernel_s 8.5 us was fitted on the FT TF-op row V100 fp16 batch 1 seq 32; the same "
              "one-row fit on the FT PyTorch-op row beside it (bert_guide.md#L1554, 1.31 ms), less the op's Python "
              "wrapper (9 PyTorch 1.8 ATen ops at the pytorch-eager host cost on that host, 9 x 1.20 x (5 + 9) us = "
              "151.2 us: graphroof.validate.vision.FT_PYTORCH_PREP_OPS, PYTORCH18_HOST): (1.31 ms - 151.2 us) / 84 "
              "kernels = 13.8 us, less "
              "the V100's 5 us launch overhead = 8.8 us"),
    EngineFit("vision", "TensorFlow + XLA", "tf-xla", {"host_overhead_per_kernel_s": 8.5e-6},
              "host_overhead_per_kernel_s 3.77 us was fitted on the TF + XLA row V100 fp32 batch 1 seq 32; the "
              "host time per kernel fitted on another engine's row of the same TensorFlow runtime and host, the FT "
              "TF-op row V100 fp16 batch 1 seq 32 (the fastertransformer preset's 8.5 us)"),
    EngineFit("vision", "Paddle Inference + TensorRT", "paddle-tensorrt", {"call_overhead_s": 0.0},
              "call_overhead_s 390 us was fitted on the Paddle + TensorRT row ResNet-50 fp16 batch 1 on A30; no other "
              "engine's rows fit a per-call host time: the preset's unfitted default, none"),
    EngineFit("llamacpp", "llama.cpp", "llama.cpp",
              {"gemv_mem_bw_efficiency": 0.0, "gemv_sm_bw_bytes_per_s": 0.0, "gemv_quant_sm_bw_bytes_per_s": 0.0},
              "the three mat-vec rates were fitted on the llamacpp rows; no other engine's rows fit a mat-vec kernel's "
              "rates: none, so the mat-vec kernels stream at the profile's GEMM share of the bandwidth with no per-SM "
              "limit (the unfitted defaults)"),
    # no constant replaced: holding the preset out swaps it for an equal copy, the signal that drops the rows' host
    # factors (graphroof.validate.vision._host_runtime)
    *(EngineFit("vision", "PyTorch TorchScript", p, {}, _EAGER_TS) for p in ("pytorch-eager", "pytorch-eager-amp")),
    *(EngineFit("torch_gpu", "PyTorch 2.11", p,
                {"host_overhead_per_kernel_s": 23.6e-6, "host_overhead_per_library_call_s": 0.0,
                 "aten_strided_elements_per_sm_clock": 0.0, "aten_softmax_reg_elements_per_sm_clock": 0.0},
                _EAGER_TG + "; " + _ATEN_STRIDED)
      for p in ("pytorch-eager", "pytorch-eager-amp")),
    EngineFit("torch_gpu", "PyTorch 2.11", "pytorch-cuda-graph",
              {"aten_strided_elements_per_sm_clock": 0.0, "aten_softmax_reg_elements_per_sm_clock": 0.0},
              _ATEN_STRIDED),
)


#: profile [timing] constants fitted on one engine's rows: (dataset, engine) -> (field, held-out value, why); the
#: engine's rows are priced again on every profile whose field differs from the held-out value
TIMING_FITS: dict[tuple[str, str], tuple[str, float | None, str]] = {
    ("fused_moe", "vLLM Triton fused_moe"): (
        "triton_mma_efficiency", 1.0,
        "triton_mma_efficiency (0.70 on Hopper profiles) was fitted on the fused_moe rows (vLLM's Triton kernel) at "
        ">= 1,024 tokens; no other engine's rows fit a Triton kernel's rate: the unfitted default, the cuBLAS rate"),
    ("torch_gpu", "PyTorch 2.11"): (
        "torch_grouped_sm_bw_bytes_per_s", None,
        "torch_grouped_sm_bw_bytes_per_s (21 GB/s per SM on the H100 / H200) was fitted on the H100 "
        "torch._grouped_mm rows of this dataset; no other engine's rows fit that kernel's per-SM rate: the unfitted "
        "default, no per-SM limit"),
}


def _timing_profiles(dataset: str, engine: str) -> list[Any]:
    """The profiles whose [timing] constant fitted on *engine*'s rows of *dataset* (:data:`TIMING_FITS`) differs
    from its held-out value, with the held-out value."""
    from ..hardware import list_profiles, load_hardware

    fit = TIMING_FITS.get((dataset, engine))
    if fit is None:
        return []
    field, value, _ = fit
    out = []
    for name in list_profiles():
        hw = load_hardware(name)
        if hw.timing is not None and getattr(hw.timing, field) != value:
            changes: dict[str, Any] = {field: value}
            out.append(replace(hw, timing=replace(hw.timing, **changes)))
    return out


def fits_of(dataset: str) -> dict[str, list[EngineFit]]:
    """Engine -> the preset fits made on its rows in *dataset* (an engine with only device-rate fits: no entry)."""
    out: dict[str, list[EngineFit]] = {}
    for f in ENGINE_FITS:
        if f.dataset == dataset:
            out.setdefault(f.engine, []).append(f)
    return out


def _rate_profiles(dataset: str, engine: str) -> list[Any]:
    """The profiles held out for *engine*'s rows in *dataset*: those with a rate fitted on them
    (:data:`.holdout_rates.RATE_FITS`), the rates transferred."""
    from ..hardware import load_hardware
    from .holdout_rates import LATENCY_FITS, RATE_FITS, engine_held_profile

    names = sorted({p for (p, _), fit in RATE_FITS.items() if fit == (dataset, engine)}
                   | {p for p, fit in LATENCY_FITS.items() if fit == (dataset, engine)})
    return [engine_held_profile(load_hardware(p), dataset, engine) for p in names]


@contextmanager
def held_out_runtimes(fits: Collection[EngineFit]) -> Iterator[None]:
    """While inside, the presets named by *fits* resolve (``get_runtime``, by name or alias) with their held-out
    constants; restored on exit."""
    from ..fuse import runtimes

    saved = {f.preset: runtimes.RUNTIMES[f.preset] for f in fits if f.preset in runtimes.RUNTIMES}
    try:
        for f in fits:
            if f.preset in runtimes.RUNTIMES:  # a field the preset no longer has is skipped (the tests check)
                values: dict[str, Any] = {k: v for k, v in f.held_out.items()
                                          if hasattr(runtimes.RUNTIMES[f.preset], k)}
                runtimes.RUNTIMES[f.preset] = replace(runtimes.RUNTIMES[f.preset], **values)
        yield
    finally:
        runtimes.RUNTIMES.update(saved)


def engine_holdout(dataset: str, rows: list[Any], adapter: Callable[[Any], list[Any]],
                   context: Callable[..., Any]) -> None:
    """Set ``row.holdout["engine"]`` of every priced row of *dataset* whose engine had constants fitted on its rows
    (a preset's, a GPU's sustained rate): the row priced again by *adapter* (the dataset's own) in a fresh
    ``context(row ids, share_profiles)`` with the held-out preset constants (:func:`held_out_runtimes`) and
    profiles (:func:`graphroof.hardware.profiles_replaced`)."""
    from ..hardware import profiles_replaced
    from .holdout_rates import LATENCY_FITS, RATE_FITS

    presets_of = fits_of(dataset)
    engines = sorted(set(presets_of) | {e for d, e in (*RATE_FITS.values(), *LATENCY_FITS.values()) if d == dataset}
                     | {e for d, e in TIMING_FITS if d == dataset})
    for engine in engines:
        fits = presets_of.get(engine, [])
        presets = {f.preset for f in fits}
        profiles = _rate_profiles(dataset, engine) + _timing_profiles(dataset, engine)
        gpus = {p.name for p in profiles}
        mine = [r for r in rows if r.engine.startswith(engine) and (r.runtime in presets or r.gpu in gpus)
                and r.predicted is not None]
        if not mine:
            continue
        with held_out_runtimes(fits), profiles_replaced(profiles):
            again = {r.row_id: r.predicted for r in adapter(context({r.row_id for r in mine}, not profiles))}
        for r in mine:
            if again.get(r.row_id) is not None:
                r.holdout["engine"] = again[r.row_id]


def engine_notes() -> list[str]:
    """What the engine hold-out replaces, in words (printed with the scores)."""
    out = ["engine hold-out: preset constants fitted on one engine's rows are replaced for that engine's rows, "
           "which are priced again through the same path: "
           + "; ".join(f"{f.dataset} {f.engine} rows, preset {f.preset}: "
                       + (", ".join(f"{k} = {v * 1e6:.3g} us" if k.endswith("_s") and not k.endswith("_per_s")
                                    else f"{k} = {v:g}" for k, v in f.held_out.items())
                          or "no constant replaced") + f" ({f.why})"
                       for f in ENGINE_FITS if f.preset != "pytorch-eager-amp")]
    from .holdout_rates import rate_notes

    out.append("sustained matmul rates (and latency levels) fitted on one engine's rows of a GPU: that engine's rows "
               "on that GPU are priced again with the rate transferred from the GPUs whose rate of the kind was fitted "
               "on another engine's rows (the latency level dropped: the derived latencies): "
               + "; ".join(rate_notes(engine=True)))
    out.append("[timing] constants fitted on one engine's rows: that engine's rows are priced again with the "
               "constant's unfitted value on every profile that has it: "
               + "; ".join(f"{d} {e} rows: {f} = {'none' if v is None else f'{v:g}'} ({why})"
                         for (d, e), (f, v, why) in TIMING_FITS.items()))
    out.append("no [collectives] constant is fitted per engine (the CUDA-graph all-reduce latencies are NCCL's "
               "tuning-model figures, not a gpt-fast fit: the gpt-fast rows score as in the plain run); the fitted "
               "[timing] / [collectives] constants came from the Vidur rows (the only engine with kernel-level data: "
               "no other engine's fit exists to transfer, so the Vidur rows are in-sample) and, on the H100, also from "
               "graphroof's own PyTorch measurements of benchmarks/data/h100_2026-11-27 (another session than the "
               "torch_gpu rows; not held out here); rows of engines no constant was fitted on score as in the plain "
               "run")
    return out
