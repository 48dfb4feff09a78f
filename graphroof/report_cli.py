"""``graphroof plot`` (static roofline image) and ``graphroof compare`` (one model, several devices)."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

from .cli import add_hw_options, add_model_options, command, frontend_opts, hw_from_args
from .errors import GraphroofWarning, InputError
from .progress import Progress

__all__ = ["analyze_on_profiles", "split_profiles"]

_IMAGE_SUFFIXES = {".png": "png", ".svg": "svg"}


# -- plot ----------------------------------------------------------------------------------------------

def _plot_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="what `graphroof analyze` takes: .onnx, op table, config.json, module:factory, zoo name")
    add_hw_options(p)
    add_model_options(p)
    p.add_argument("-o", "--output", required=True, help="image file: .png or .svg")
    p.add_argument("--ops", action="store_true", help="one point per op instead of one per layer")
    p.add_argument("--title", default="", help="chart title (default: model on hardware)")


def _plot_run(args: argparse.Namespace) -> int:
    from .api import analyze
    from .report import write_output
    from .report.chart import chart_data, render_static
    from .report.content import as_phases

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
            warnings.warn(note, GraphroofWarning, stacklevel=1)
    return 0


command("plot", "draw the roofline chart (PNG or SVG) for papers and slides")((_plot_args, _plot_run))


# -- compare -------------------------------------------------------------------------------------------

def split_profiles(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise InputError("--hw: give one or more profiles separated by commas, e.g. --hw a100,h100,mi300x")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"--hw: {dup[0]!r} is listed twice")
    return names


def analyze_on_profiles(model, profiles: list, *, strict: bool = False, depth: int | None = None,
                        attention: str = "flash", causal: str = "kernel", progress=None, **opts) -> list:
    """One Analysis per hardware profile, loading (tracing) the model once.

    ``count`` and ``evaluate_graph`` write costs and bounds into the graph's nodes, so every profile gets its
    own copy of the loaded graph (``map_ops(identity)``: new nodes, same OpNodes).
    """
    from .api import count_graph, load_verb
    from .counters.settings import CountSettings
    from .frontends import load

    settings = CountSettings(attention=attention, causal=causal)
    if progress:
        progress(f"{load_verb(model)} {model}")
    graph = load(model, **opts)
    meta = {"model": graph.meta.get("model", graph.name), "capture": graph.meta.get("capture", "")}
    out = []
    for i, hw in enumerate(profiles):
        if progress:
            progress(f"counting {len(graph)} ops on {hw.name}")
        with warnings.catch_warnings():
            if i:  # unknown-op warnings are the same for every device: say them once
                warnings.simplefilter("ignore", GraphroofWarning)
            out.append(count_graph(graph, hw, strict=strict, dims=opts.get("dims"),
                                   depth=depth, meta=meta, settings=settings))
    return out


def _compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="what `graphroof analyze` takes")
    p.add_argument("--hw", required=True, help="comma-separated profiles (names, aliases or files), e.g. "
                   "a100,h100,mi300x,tpu-v5e; speed-ups are relative to the first")
    p.add_argument("--ideal", action="store_true", help="100%% efficiency and no launch overhead in the realistic time")
    add_model_options(p)
    p.add_argument("--format", "-f", default="terminal", help="terminal | markdown | json | csv | html")
    p.add_argument("-o", "--output", default="-", help="output file, or - for stdout (default)")


def _compare_run(args: argparse.Namespace) -> int:
    from .api import resolve_hardware
    from .report import write_output
    from .report.compare import COMPARE_FORMATS, compare, render_compare

    if args.format not in COMPARE_FORMATS:
        raise InputError(f"unknown format {args.format!r}; use one of: {', '.join(COMPARE_FORMATS)}")
    profiles = [resolve_hardware(n, ideal=args.ideal) for n in split_profiles(args.hw)]
    progress = Progress(quiet=args.quiet)
    analyses = analyze_on_profiles(args.model, profiles, strict=args.strict, depth=args.depth,
                                   attention=args.attention, causal=args.causal, progress=progress,
                                   **frontend_opts(args))
    write_output(render_compare(compare(analyses), args.format), args.output)
    return 0


command("compare", "one model on several hardware profiles, side by side")((_compare_args, _compare_run))
