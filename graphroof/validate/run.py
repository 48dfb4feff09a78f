"""``graphroof.validate()``: every bundled measured dataset through graphroof's own path, scored."""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

from ..errors import InputError
from .context import Context
from .holdout import check_holdout, gpu_holdout, holdout_notes
from .holdout_engine import engine_holdout
from .holdout_model import model_holdout
from .result import Row, ValidationResult

__all__ = ["validate", "DATASETS", "parse_datasets"]


def _adapter(module: str, name: str) -> Callable[[Context], list[Row]]:
    """Dataset adapter ``graphroof.validate.<module>.<name>(ctx)``, imported on first call (the adapters pull in
    the LLM engine and the frontends)."""
    def rows(ctx: Context) -> list[Row]:
        return getattr(importlib.import_module(f".{module}", __package__), name)(ctx)

    rows.__name__ = name
    return rows


#: Dataset name -> (adapter, what it is).  Order: the order of the report.
DATASETS: dict[str, tuple[Callable[[Context], list[Row]], str]] = {
    "vidur_ops": (_adapter("vidur", "ops_rows"),
                  "Vidur profiling: one Llama-2 layer's non-attention kernels, A100 / H100, TP 1-8"),
    "vidur_allreduce": (_adapter("vidur", "allreduce_rows"),
                        "Vidur profiling: NCCL all-reduce, 2 KB - 64 MB, 2-16 GPUs"),
    "gptfast": (_adapter("llmrows", "gptfast_rows"), "gpt-fast README: batch-1 decode tok/s with torch.compile, A100"),
    "llamacpp": (_adapter("llamacpp", "llamacpp_rows"),
                 "llama.cpp on one GPU (XiongjieDai's llama-bench tables): batch-1 generation, Llama 3 8B / 70B, "
                 "F16 / Q4_K_M, RTX 3090 to H100 PCIe"),
    "trtllm": (_adapter("llmrows", "trtllm_rows"),
               "TensorRT-LLM v0.5 / v0.6.1 docs: static-batch throughput and first-token latency"),
    "nim": (_adapter("llmrows", "nim_rows"),
            "NVIDIA NIM 1.8 benchmarking tables: TTFT and ITL of one request, Llama-3.1-8B / 3.3-70B fp8 on H100"),
    "kernels": (_adapter("kernels", "kernel_rows"), "MAMF best matmul per accelerator, DeepGEMM fp8 GEMMs"),
    "fused_moe": (_adapter("moe", "moe_rows"),
                  "vLLM's Triton fused-MoE block by its tuning benchmark: H100, H200, A100, L40S, 1-8192 tokens"),
    "vision": (_adapter("vision", "vision_rows"),
               "DeepLearningExamples / TensorRT demo / FasterTransformer: vision and BERT latency"),
    "torch_gpu": (_adapter("torchgpu", "torch_gpu_rows"),
                  "measured by graphroof with PyTorch on one H100 and one H200: GEMMs, attention, a "
                  "Llama-3-8B-shaped decode step and prefill, ResNet-50 / BERT-base"),
}


def parse_datasets(datasets: str | Sequence[str] | None) -> list[str]:
    """``None`` / ``"all"``: every dataset; else the names, checked."""
    if datasets is None:
        return list(DATASETS)
    names = [d.strip() for d in (datasets.split(",") if isinstance(datasets, str) else datasets) if d.strip()]
    if not names or names == ["all"]:
        return list(DATASETS)
    bad = [d for d in names if d not in DATASETS]
    if bad:
        raise InputError(f"--dataset {','.join(bad)}: unknown dataset; use one or more of {', '.join(DATASETS)} "
                         "(comma-separated)")
    return [d for d in DATASETS if d in names]


#: about how long each dataset takes (seconds on this 2-core machine, nothing stored, the datasets one after the
#: other in one process: ``graphroof validate -j 1``, 2026-11-28): the longest start first
COST_S = {"torch_gpu": 51.0, "gptfast": 35.0, "vision": 27.0, "trtllm": 21.0, "vidur_ops": 15.0, "nim": 9.0,
          "llamacpp": 8.0, "fused_moe": 5.0, "vidur_allreduce": 0.2, "kernels": 0.1}
#: what the forked workers of :func:`_in_workers` read (set before the pool forks, cleared after)
_WORK: dict[str, Any] = {}


def _one(name: str) -> tuple[str, list[Row]]:
    """One dataset's rows in a worker (its own :class:`Context`: engines and traces are per process)."""
    w = _WORK
    if w["progress"]:
        w["progress"](f"dataset {name} (worker {os.getpid()})")
    return name, _priced(name, Context(w["holdout"], w["progress"], w["options"], w["only"]))


def _priced(name: str, ctx: Context) -> list[Row]:
    """Dataset *name*'s rows priced in *ctx*; under the engine hold-out, the rows of an engine whose preset
    constants were fitted on its rows priced again without them (:func:`.holdout_engine.engine_holdout`); under the
    gpu and model hold-outs, rows the adapter gave no held-out figure priced again on their held-out profile
    (:func:`.holdout.gpu_holdout`, :func:`.holdout_model.model_holdout`)."""
    rows = DATASETS[name][0](ctx)
    if ctx.holdout == "engine":
        engine_holdout(name, rows, DATASETS[name][0], ctx.sharing)
    if ctx.holdout == "gpu":  # an adapter that prices by profile name (torch_gpu): its rows priced again
        gpu_holdout(rows, DATASETS[name][0], lambda ids: ctx.sharing(ids, share_profiles=False))
    if ctx.holdout == "model":  # likewise, per (device, model)
        model_holdout(rows, DATASETS[name][0], lambda ids: ctx.sharing(ids, share_profiles=False))
    return rows


def _in_workers(names: list[str], jobs: int, holdout: str | None, progress: Callable[[str], None] | None,
                options: Any, only: Collection[str] | None) -> dict[str, list[Row]] | None:
    """Each dataset priced in one of *jobs* forked worker processes (the same code as in one process, so the same
    rows), longest first; None where workers cannot be forked safely (no ``fork``, or torch already imported:
    its thread pools do not survive a fork) -- the caller then runs them in turn."""
    import multiprocessing as mp

    if "torch" in sys.modules or "fork" not in mp.get_all_start_methods():
        return None
    _WORK.update(holdout=holdout, progress=progress, options=options, only=only)
    out: dict[str, list[Row]] = {}
    t0 = time.perf_counter()
    try:
        with mp.get_context("fork").Pool(min(jobs, len(names))) as pool:
            for name, rows in pool.imap_unordered(_one, sorted(names, key=lambda n: -COST_S.get(n, 1.0))):
                out[name] = rows
                if progress:
                    progress(f"dataset {name} done ({len(out)}/{len(names)}, {time.perf_counter() - t0:.0f} s so far)")
    finally:
        _WORK.clear()
    return out


def validate(datasets: str | Sequence[str] | None = None, *, holdout: str | None = None,
             progress: Callable[[str], None] | None = None, options: Any = None,
             only: Collection[str] | None = None, jobs: int = 1) -> ValidationResult:
    """Price every row of the bundled measured datasets through graphroof's own path (``analyze`` / the ``llm``
    engine / the collective model) and score the errors.

    datasets : names (``vidur_ops``, ``vidur_allreduce``, ``gptfast``, ``llamacpp``, ``trtllm``, ``nim``, ``kernels``,
        ``fused_moe``, ``vision``, ``torch_gpu``: :data:`DATASETS`; a list or comma-separated), default all.
    holdout : ``gpu`` | ``engine`` | ``model``: also score each group with constants not fitted on it
        (:mod:`graphroof.validate.holdout`).
    progress : called with a short message per engine / dataset (the CLI prints them on stderr).
    options : :class:`graphroof.options.Options` (the trace store ...).
    only : price only these rows (``"file.csv:LINE"`` ids, as the per-row table names them).
    jobs : worker processes (``graphroof validate --jobs``): the datasets are priced in parallel, each by the same
        code in its own process (the rows are the same as with 1); 1: in this process, one after the other.

    >>> r = graphroof.validate("trtllm")                          # doctest: +SKIP
    >>> r.per_dataset()[0]["stats"]["median_abs"]                 # doctest: +SKIP
    """
    names = parse_datasets(datasets)
    kind = check_holdout(holdout)
    t0 = time.perf_counter()
    done = _in_workers(names, jobs, kind, progress, options, only) if jobs > 1 and len(names) > 1 else None
    rows: list[Row] = []
    if done is not None:
        for name in names:  # the report's order
            rows.extend(done[name])
    else:
        ctx = Context(kind, progress, options, only)
        for i, name in enumerate(names):
            if progress:
                progress(f"dataset {name} ({i + 1}/{len(names)}, {time.perf_counter() - t0:.0f} s so far)")
            rows.extend(_priced(name, ctx))
    if kind:  # a row no held-out constant touches is its own hold-out (nothing was fitted on its group)
        for r in rows:
            if r.predicted is not None and kind not in r.holdout:
                r.holdout[kind] = r.predicted
    notes = [f"{n}: {DATASETS[n][1]}" for n in names]
    notes.append("measured data bundled in graphroof/validate/data (sources and citations in its README.md); "
                 "rows are excluded from the scores only for a reason their source gives "
                 "(graphroof/validate/data/exclusions.csv)")
    return ValidationResult(rows, names, kind, holdout_notes(kind), time.perf_counter() - t0, notes)
