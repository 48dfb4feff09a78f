"""``graphroof diff``: what changed between two analyses (the JSON files of ``graphroof analyze ... -f json``), per
layer, per kernel and in total (:mod:`graphroof.diff`)."""

from __future__ import annotations

import argparse

from ..errors import InputError

NAME = "diff"
HELP = "what changed between two analyses (JSON from `analyze -f json`): per layer, per kernel and in total"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("before", help="analysis JSON written by `graphroof analyze MODEL -f json -o before.json`")
    p.add_argument("after", help="the analysis JSON to compare with it (e.g. after a model change or a quantization)")
    p.add_argument("--format", "-f", default="terminal", help="terminal | markdown | json (default terminal)")
    p.add_argument("-o", "--output", default="-", help="output file, or - for stdout (default)")
    p.add_argument("--top", type=int, default=20,
                   help="the N layers and kernels whose time changed most (default 20; 0: every changed row; the "
                        "JSON always holds every row)")


def run(args: argparse.Namespace) -> int:
    from ..diff import diff_files
    from ..report import write_output
    from ..report.diff import DIFF_FORMATS, render_diff

    if args.format not in DIFF_FORMATS:
        raise InputError(f"--format {args.format!r}: use one of {', '.join(DIFF_FORMATS)}")
    if args.top < 0:
        raise InputError("--top must be >= 0 (0: every changed row)")
    d = diff_files(args.before, args.after)
    write_output(render_diff(d, args.format, top=args.top or None), args.output)
    return 0
