"""``graphroof validate [--dataset vidur_ops,trtllm] [--holdout gpu] [--rows rows.csv] [--bands bands.json]``:
every bundled measured dataset priced through graphroof's own path, errors per subset
(:func:`graphroof.validate.validate`)."""

from __future__ import annotations

import argparse

from .options import check_output_path, run_options
from .outfile import say_written

NAME = "validate"
HELP = ("score graphroof against the bundled published measurements (Vidur kernels / all-reduce, gpt-fast, "
        "llama.cpp, TensorRT-LLM, NIM, fused MoE, kernel benchmarks, vision / BERT, our own GPU sessions): median / "
        "p90 / worst error per subset")
FORMATS = ("terminal", "markdown", "json", "csv")
#: graphroof.validate.run.DATASETS' names, written out so that building the parser imports nothing (a test keeps
#: the two equal)
DATASET_NAMES = ("vidur_ops", "vidur_allreduce", "gptfast", "llamacpp", "trtllm", "nim", "kernels", "fused_moe",
                 "vision", "torch_gpu")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", default=None, metavar="NAME[,NAME]",
                   help=f"datasets to score (default all): {', '.join(DATASET_NAMES)}")
    p.add_argument("--holdout", default=None, metavar="gpu|engine|model",
                   help="also score each group with constants not fitted on it (gpu: a fitted GPU's [timing] / "
                   "[collectives] constants transferred from the other fitted GPUs; engine: without the constants "
                   "fitted on an engine's rows; model: the A100 / H100 kernel constants refit without the row's "
                   "model)")
    p.add_argument("--rows", default=None, metavar="PATH", help="write one CSV line per measured row (inputs, "
                   "measured, predicted, error, the equivalent command)")
    p.add_argument("--bands", default=None, metavar="PATH", help="write the error bands per regime as JSON "
                   "(figure kind | device | runtime preset)")
    p.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                   help="worker processes pricing the datasets in parallel (default: 2, or 1 on a 1-CPU machine; "
                   "1: one after the other in this process; the rows are the same)")
    p.add_argument("--format", "-f", default="terminal", choices=FORMATS,
                   help="terminal | markdown | json | csv (csv: the per-row table; default terminal)")
    p.add_argument("-o", "--output", default="-", help="output file, or - for stdout (default)")


def run(args: argparse.Namespace) -> int:
    import os
    import sys

    from ..errors import InputError
    from ..report import write_outputs
    from ..report.validate import render_validation, rows_csv
    from ..validate import bands_of, parse_datasets
    from ..validate import validate as run_validate
    from ..validate.holdout import check_holdout

    parse_datasets(args.dataset)  # bad input before any work
    check_holdout(args.holdout)
    jobs = args.jobs if args.jobs is not None else min(2, os.cpu_count() or 1)
    if jobs < 1:
        raise InputError(f"--jobs {jobs}: use 1 or more worker processes")
    for path in (args.output, args.rows, args.bands):
        if path is not None:
            check_output_path(path)

    def progress(msg: str) -> None:
        if not args.quiet:
            print(f"graphroof validate: {msg}", file=sys.stderr, flush=True)

    r = run_validate(args.dataset, holdout=args.holdout, progress=progress, options=run_options(args), jobs=jobs)
    import json

    files: list[tuple[str | bytes, str | os.PathLike]] = []
    if args.rows:
        files.append((rows_csv(r), args.rows))
    if args.bands:
        files.append((json.dumps(bands_of(r), indent=2) + "\n", args.bands))
    files.append((render_validation(r, args.format), args.output))
    write_outputs(files)  # all or nothing
    say_written([str(p) for _, p in files], args.quiet)
    return 0
