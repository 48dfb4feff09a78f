"""``graphroof.validate()``: every bundled measured dataset through graphroof's own path, scored."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

from ..errors import InputError
from .context import Context
from .holdout import check_holdout, holdout_notes
from .result import Row, ValidationResult

__all__ = ["validate", "DATASETS", "parse_datasets"]


def _vidur_ops(ctx: Context) -> list[Row]:
    from .vidur import ops_rows

    return ops_rows(ctx)


def _vidur_allreduce(ctx: Context) -> list[Row]:
    from .vidur import allreduce_rows

    return allreduce_rows(ctx)


def _gptfast(ctx: Context) -> list[Row]:
    from .llmrows import gptfast_rows

    return gptfast_rows(ctx)


def _trtllm(ctx: Context) -> list[Row]:
    from .llmrows import trtllm_rows

    return trtllm_rows(ctx)


def _vision(ctx: Context) -> list[Row]:
    from .vision import vision_rows

    return vision_rows(ctx)


def _kernels(ctx: Context) -> list[Row]:
    from .kernels import kernel_rows

    return kernel_rows(ctx)


#: Dataset name -> (adapter, what it is).  Order: the order of the report.
DATASETS: dict[str, tuple[Callable[[Context], list[Row]], str]] = {
    "vidur_ops": (_vidur_ops, "Vidur profiling: one Llama-2 layer's non-attention kernels, A100 / H100, TP 1-8"),
    "vidur_allreduce": (_vidur_allreduce, "Vidur profiling: NCCL all-reduce, 2 KB - 64 MB, 2-16 GPUs"),
    "gptfast": (_gptfast, "gpt-fast README: batch-1 decode tok/s with torch.compile, A100"),
    "trtllm": (_trtllm, "TensorRT-LLM v0.5 / v0.6.1 docs: static-batch throughput and first-token latency"),
    "kernels": (_kernels, "MAMF best matmul per accelerator, DeepGEMM fp8 GEMMs"),
    "vision": (_vision, "DeepLearningExamples / TensorRT demo / FasterTransformer: vision and BERT latency"),
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


def validate(datasets: str | Sequence[str] | None = None, *, holdout: str | None = None,
             progress: Callable[[str], None] | None = None, options: Any = None,
             only: Collection[str] | None = None) -> ValidationResult:
    """Price every row of the bundled measured datasets through graphroof's own path (``analyze`` / the ``llm``
    engine / the collective model) and score the errors.

    datasets : names (``vidur_ops``, ``vidur_allreduce``, ``gptfast``, ``trtllm``, ``kernels``, ``vision``; a list
        or comma-separated), default all.
    holdout : ``gpu`` | ``engine`` | ``model``: also score each group with constants not fitted on it
        (:mod:`graphroof.validate.holdout`).
    progress : called with a short message per engine / dataset (the CLI prints them on stderr).
    options : :class:`graphroof.options.Options` (the trace store ...).
    only : price only these rows (``"file.csv:LINE"`` ids, as the per-row table names them).

    >>> r = graphroof.validate("trtllm")                          # doctest: +SKIP
    >>> r.per_dataset()[0]["stats"]["median_abs"]                 # doctest: +SKIP
    """
    names = parse_datasets(datasets)
    kind = check_holdout(holdout)
    t0 = time.perf_counter()
    ctx = Context(kind, progress, options, only)
    rows: list[Row] = []
    for name in names:
        if progress:
            progress(f"dataset {name}")
        rows.extend(DATASETS[name][0](ctx))
    if kind:  # a row no held-out constant touches is its own hold-out (nothing was fitted on its group)
        for r in rows:
            if r.predicted is not None and kind not in r.holdout:
                r.holdout[kind] = r.predicted
    notes = [f"{n}: {DATASETS[n][1]}" for n in names]
    notes.append("measured data bundled in graphroof/validate/data (sources and citations in its README.md); "
                 "rows are excluded from the scores only for a reason their source gives "
                 "(graphroof/validate/data/exclusions.csv)")
    return ValidationResult(rows, names, kind, holdout_notes(kind), time.perf_counter() - t0, notes)
