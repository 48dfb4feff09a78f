"""``graphroof profile``: run a model on this machine and compare measured with predicted time per layer
(a measured run, :mod:`graphroof.measure`)."""

from __future__ import annotations

import argparse

from ..errors import InputError
from .options import add_hw_options, add_model_options, frontend_opts, hw_from_args, run_options

NAME = "profile"
HELP = "run a model on this machine and compare measured with predicted time per layer"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from .options import module_doc

    p.formatter_class = argparse.RawDescriptionHelpFormatter
    from .options import plain_text

    p.epilog = "definitions:" + plain_text(module_doc("graphroof.measure.run").split("Definitions (also printed with the report):", 1)[1])
    p.add_argument("model", help="an .onnx file (run with onnxruntime), 'pkg.module:factory', a zoo name or a "
                   "transformers config.json (built with random weights, run with PyTorch eager)")
    add_hw_options(p)
    for action in p._actions:  # profile compares against THIS machine: no default profile makes sense
        if action.dest == "hw":
            action.help = ("required: a profile of this machine (from `graphroof calibrate -o my-cpu.yaml`), "
                           "or give both --peak-flops and --mem-bw")
    add_model_options(p)
    p.add_argument("--device", default="cpu", help="where to run: cpu (the only one measured for now)")
    p.add_argument("--runs", type=int, default=None,
                   help="timed and profiled passes (default: about 2 s worth of each, 5 to 50)")
    p.add_argument("--warmup", type=int, default=2, help="untimed passes first (default 2)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads for torch / onnxruntime (default: theirs)")
    p.add_argument("--ort-opt", default="basic", choices=("disable", "basic", "extended", "all"),
                   help="onnxruntime graph optimisation level (default basic: keeps nodes mappable)")
    p.add_argument("--overhead-factor", type=float, default=2.0,
                   help="a layer > this many times slower than its roofline time is 'overhead'-bound (default 2)")
    p.add_argument("--format", "-f", default="terminal",
                   help="terminal | markdown | json | html (default terminal; html: the roofline chart with the "
                        "measured points beside the predicted ones)")
    p.add_argument("-o", "--output", default=None, help="output file, or - for stdout (default: stdout; an html page goes to MODEL-report.html)")
    p.add_argument("--ops", action="store_true", help="also list every op with work")
    p.add_argument("--top", type=int, default=None, help="with --ops: only the N slowest measured ops")


def run(args: argparse.Namespace) -> int:
    from ..measure.model import check_measure_device, measure_model
    from ..report import render, write_output

    if not args.hw and not (args.peak_flops and args.mem_bw):
        raise InputError("profile needs --hw: a profile of this machine, e.g. from "
                         "`graphroof calibrate -o my-device.yaml`, then --hw my-device.yaml")
    if args.format not in ("terminal", "markdown", "json", "html"):
        raise InputError(f"--format {args.format!r}: use terminal, markdown, json or html")
    if args.overhead_factor <= 1:
        raise InputError("--overhead-factor must be > 1")
    if args.threads is not None and args.threads < 1:
        raise InputError("--threads must be >= 1")
    check_measure_device(args.device)
    from .outfile import resolve_output, say_written

    args.output = resolve_output(args.output, args.format, args.model)  # a page without -o: MODEL-report.html
    hw = hw_from_args(args)
    opts = frontend_opts(args)
    c = measure_model(args.model, hw=hw, runs=args.runs, warmup=args.warmup, depth=args.depth,
                      dims=opts.pop("dims", None), ort_opt=args.ort_opt, threads=args.threads, device=args.device,
                      attention=args.attention, causal=args.causal, overhead_factor=args.overhead_factor,
                      strict=args.strict, options=run_options(args), **opts)
    write_output(render(c, args.format, ops=args.ops, top=args.top), args.output)
    say_written([args.output], args.quiet)
    bad = c.summary.get("bad_profile")
    if bad:
        import sys

        print(f"graphroof: warning: {bad['message']}", file=sys.stderr)
    return 0
