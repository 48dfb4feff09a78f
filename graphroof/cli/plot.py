"""``graphroof plot``: the static roofline image (PNG / SVG) for papers and slides."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import InputError
from ..errors import warn as warn_user
from .options import add_hw_options, add_model_options, frontend_opts, hw_from_args
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


def run(args: argparse.Namespace) -> int:
    from ..api import analyze
    from ..report import write_output
    from ..report.chart import chart_data, render_static
    from ..report.content import as_phases

    fmt = _IMAGE_SUFFIXES.get(Path(args.output).suffix.lower())
    if fmt is None:
        raise InputError(f"-o {args.output}: the image type comes from the suffix; use .png or .svg")
    progress = Progress(quiet=args.quiet)
    a = analyze(args.model, hw=hw_from_args(args), strict=args.strict, depth=args.depth, attention=args.attention,
                causal=args.causal, progress=progress, **frontend_opts(args))
    progress("drawing")
    cd = chart_data(as_phases(a))
    level = "op" if args.ops else "layer"
    title = args.title or f"{a.model_name} on {cd.hw_label} ({level}s; size = time share)"
    write_output(render_static(cd, fmt, level=level, title=title), args.output)
    if not args.quiet:
        for note in cd.skipped_notes(level):
            warn_user(note)
    return 0
