"""``graphroof plot``: the static roofline image (PNG / SVG) for papers and slides."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import InputError
from ..errors import warn as warn_user
from .options import add_hw_options, add_model_options, frontend_opts, hw_from_args, run_options
from .progress import Progress

NAME = "plot"
HELP = "draw the roofline chart (PNG or SVG) for papers and slides"

_IMAGE_SUFFIXES = {".png": "png", ".svg": "svg"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="what `graphroof analyze` takes: .onnx, op table, config.json, module:factory, zoo name")
    add_hw_options(p)
    add_model_options(p)
    p.add_argument("-o", "--output", required=True, help="image file: .png or .svg")
    p.add_argument("--ops", action="store_true", help="one point per op instead of one per layer")
    p.add_argument("--title", default="", help="chart title (default: model on hardware)")
    p.add_argument("--phase", default=None, choices=("prefill", "decode"),
                   help="an LLM's serving phase, as `graphroof llm` estimates it: prefill (the prompt, --seq tokens, "
                   "default 1024) or decode (one step, mean over --gen tokens after the prompt); default: the "
                   "model's forward as `graphroof analyze` runs it")
    p.add_argument("--gen", type=int, default=256, help="with --phase: generated tokens per sequence (default 256)")


def run(args: argparse.Namespace) -> int:
    from ..api import analyze
    from ..report import write_output
    from ..report.chart import chart_data, render_static
    from ..report.content import as_phases

    fmt = _IMAGE_SUFFIXES.get(Path(args.output).suffix.lower())
    if fmt is None:
        raise InputError(f"-o {args.output}: the image type comes from the suffix; use .png or .svg")
    progress = Progress(quiet=args.quiet)
    if args.phase:
        a, what = _llm_phase(args, progress)
    else:
        a = analyze(args.model, hw=hw_from_args(args), strict=args.strict, depth=args.depth,
                    attention=args.attention, causal=args.causal, progress=progress, options=run_options(args),
                    **frontend_opts(args))
        what = ""
    progress("drawing")
    cd = chart_data(as_phases(a))
    level = "op" if args.ops else "layer"
    title = args.title or f"{a.model_name}{what} on {cd.hw_label} ({level}s; size = time share)"
    write_output(render_static(cd, fmt, level=level, title=title), args.output)
    if not args.quiet:
        for note in cd.skipped_notes(level):
            warn_user(note)
    return 0


def _llm_phase(args: argparse.Namespace, progress):
    """(the Analysis of one LLM phase, `` prefill, batch 1, seq 1024`` for the title) via ``graphroof llm``'s
    estimate: the prefill at --seq tokens, or the decode step (mean over the --gen steps after the prompt)."""
    from ..llm.engine import estimate
    from .precheck import check_llm_args

    opts = frontend_opts(args)
    batch, prompt = int(opts.pop("batch", 1)), int(opts.pop("seq", 1024))
    opts.pop("fold_blocks", None)  # the frontend option of analyze: here the run's Options say it
    if args.gen < 2 and args.phase == "decode":
        raise InputError(f"--gen {args.gen}: the decode phase needs at least 2 generated tokens (--gen 2 or more)")
    if args.gen < 1:
        raise InputError(f"--gen must be >= 1, got {args.gen}")
    if opts.pop("input_shapes", None):
        raise InputError("--input does not apply with --phase: the LLM's inputs come from --batch and --seq")
    check_llm_args(args.model, [prompt], [args.gen], [1])
    r = estimate(args.model, hw=hw_from_args(args), prompt=prompt, gen=args.gen, batch=[batch],
                 depth=args.depth, attention=args.attention, causal=args.causal, strict=args.strict,
                 progress=progress, options=run_options(args), **opts)
    c = r.configs[0]
    if args.phase == "prefill":
        return c.prefill.analysis, f" prefill (batch {batch}, seq {prompt})"
    lo, hi = c.decode.context
    return c.decode.analysis, f" decode step (batch {batch}, past {lo}..{hi}, mean)"
