"""``graphroof analyze``: per-op and per-layer roofline of a model."""

from __future__ import annotations

import argparse

from ..errors import InputError
from .options import (
    add_hw_options,
    add_model_options,
    check_output_path,
    frontend_opts,
    hw_from_args,
    parse_int_list,
    run_options,
)
from .outfile import resolve_output, say_written

NAME = "analyze"
HELP = "per-op and per-layer roofline of a model"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="an .onnx file, an op table (.csv/.yaml/.json), a transformers config.json, "
                   "a Hugging Face model id (org/name: its config.json only), 'pkg.module:factory', or a zoo name")
    add_hw_options(p)
    add_model_options(p)
    p.add_argument("--format", "-f", default="terminal",
                   help="terminal | markdown | json | csv | html (default terminal); html is one self-contained "
                   "file with an interactive roofline; markdown with -o FILE.md writes the chart PNG beside it")
    p.add_argument("-o", "--output", default=None,
                   help="output file, or - for stdout (the default, except html: <model>-report.html here)")
    p.add_argument("--ops", action="store_true", help="also list every op (terminal / markdown); csv: op rows")
    p.add_argument("--top", type=int, default=None, help="with --ops: only the N slowest ops")
    p.add_argument("--runtime", default=None, metavar="PRESET",
                   help="engine preset the kernels are priced under: a name (pytorch-eager, compiled, tensorrt, "
                   "onnxruntime, serving / vllm, ...; 'list' lists them) or a preset .toml file (default: compiled "
                   "for models, eager for op tables); the eager figure is shown beside it")
    p.add_argument("--kernels", action="store_true", help="also list every kernel (terminal / markdown)")
    p.add_argument("--loop-trips", type=int, default=None, metavar="N",
                   help="ONNX: iterations to count for a Loop whose trip count is unknown or unbounded (default 1)")
    p.add_argument("--no-whatif", dest="whatif", action="store_false",
                   help="html: leave out the what-if panel (batch, sequence, dtypes, TP, device re-priced in the page; "
                   "it counts a zoo / config model at 6 more shapes)")
    p.add_argument("--no-fold", dest="fold", action="store_false",
                   help="one row per repeated block (default: identical blocks folded into one row, "
                        "'model.layers.* ×32')")


def run(args: argparse.Namespace) -> int:
    from ..api import analyze
    from ..report import FORMATS, check_chart_beside, write_report
    from .progress import Progress

    if args.runtime == "list":
        from .runtimes import listing

        print(listing())
        return 0
    if args.format not in FORMATS:
        raise InputError(f"unknown format {args.format!r}; use one of: {', '.join(FORMATS)}")
    from .precheck import check_seq

    args.output = resolve_output(args.output, args.format, args.model)
    check_output_path(args.output)
    check_seq(args.model, args.seq)
    hw = hw_from_args(args)
    batches = parse_int_list(args.batch, "--batch", "batch sizes", "1,4,16") if args.batch else []
    if len(batches) > 1:
        return _batch_sweep(args, hw, batches)
    if args.format == "markdown":
        check_chart_beside(args.output)  # a foreign x_roofline.png beside x.md: say so before minutes of tracing
    opts = frontend_opts(args)
    opts["options"] = run_options(args)
    if args.loop_trips is not None:
        if args.loop_trips < 0:
            raise InputError("--loop-trips must be >= 0")
        opts["loop_trips"] = args.loop_trips
    progress = Progress(quiet=args.quiet)
    a = analyze(args.model, hw=hw, strict=args.strict, depth=args.depth, attention=args.attention,
                causal=args.causal, runtime=args.runtime, progress=progress, **opts)
    if args.format == "html" and args.whatif:  # the page's what-if panel: only html pays for the extra counts
        from ..sweeps.whatif_costs import whatif_costs

        a.whatif = whatif_costs(args.model, a, progress=progress, attention=args.attention, causal=args.causal,
                                **opts)
    progress(f"writing the {args.format} report")
    paths = write_report(a, args.format, args.output, ops=args.ops, top=args.top, kernels=args.kernels,
                         fold=args.fold)
    say_written(paths, args.quiet)
    return 0


def _batch_sweep(args: argparse.Namespace, hw, batches: list[int]) -> int:
    """``--batch 1,4,16``: the model at every batch (bound, latency, throughput; the compute-bound batch
    solved), as ``graphroof sweep MODEL --batch ...`` on one device."""
    from ..report import render, write_output
    from ..sweeps import batch_sweep
    from .progress import Progress

    for flag, given in (("--ops", args.ops), ("--kernels", args.kernels), ("--runtime", args.runtime),
                        ("--top", args.top is not None)):
        if given:
            raise InputError(f"{flag} shows one analysis; with several --batch values give one batch, or drop {flag}")
    if args.format == "png" and args.output == "-":
        raise InputError("--format png writes an image: give a file with -o, e.g. -o batches.png")
    opts = frontend_opts(argparse.Namespace(**{**vars(args), "batch": None}))
    opts["options"] = run_options(args)
    progress = Progress(quiet=args.quiet)
    r = batch_sweep(args.model, hw=[hw], batch=batches, ideal=args.ideal, strict=args.strict, progress=progress,
                    **opts)
    progress(f"writing the {args.format} report")
    write_output(render(r, args.format), args.output)
    progress.done()
    say_written([args.output], args.quiet)
    return 0
