"""``graphroof compare``: one model on several hardware profiles, side by side (:func:`graphroof.compare`)."""

from __future__ import annotations

import argparse

from ..errors import InputError
from .options import add_model_options, frontend_opts, run_options
from .progress import Progress

__all__ = ["split_profiles"]

NAME = "compare"
HELP = "one model on several hardware profiles, side by side"


def split_profiles(text: str) -> list[str]:
    """``"a100,h100"`` -> ``["a100", "h100"]``; empty or repeated names are errors."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise InputError("--hw: give one or more profiles separated by commas, e.g. --hw a100,h100,mi300x")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"--hw: {dup[0]!r} is listed twice")
    return names


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="what `graphroof analyze` takes")
    p.add_argument("--hw", required=True, help="comma-separated profiles (names, aliases or files), e.g. "
                   "a100,h100,mi300x,tpu-v5e; speed-ups are relative to the first")
    p.add_argument("--ideal", action="store_true", help="100%% efficiency and no launch overhead in the realistic time")
    add_model_options(p)
    p.add_argument("--format", "-f", default="terminal", help="terminal | markdown | json | csv | html")
    p.add_argument("-o", "--output", default=None, help="output file, or - for stdout (default: stdout; an html page goes to MODEL-report.html)")


def run(args: argparse.Namespace) -> int:
    from ..api import compare
    from ..report import FORMATS_BY_KIND, render, write_output

    if args.format not in FORMATS_BY_KIND["compare"]:
        raise InputError(f"unknown format {args.format!r}; use one of: {', '.join(FORMATS_BY_KIND['compare'])}")
    from .outfile import resolve_output, say_written
    from .precheck import check_seq

    args.output = resolve_output(args.output, args.format, args.model)  # a page without -o: MODEL-report.html
    check_seq(args.model, args.seq)
    result = compare(args.model, hw=split_profiles(args.hw), strict=args.strict, depth=args.depth, ideal=args.ideal,
                     attention=args.attention, causal=args.causal, progress=Progress(quiet=args.quiet),
                     options=run_options(args), **frontend_opts(args))
    write_output(render(result, args.format), args.output)
    say_written([args.output], args.quiet)
    return 0
