"""Command line: a thin layer over the Python API.  Expected errors -> one line on stderr, exit 1."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable, Sequence

from .errors import GraphroofError, InputError
from .units import parse_quantity

__all__ = ["main", "build_parser", "COMMANDS"]

#: Sub-command name -> (add_arguments(parser), run(args) -> exit code).  Feature modules add theirs here.
COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {}


def command(name: str, help: str):
    def deco(fn_pair):
        COMMANDS[name] = (help, *fn_pair)
        return fn_pair
    return deco


def parse_dims(items: Sequence[str] | None) -> dict[str, int]:
    """``["batch=8", "seq=512"]`` -> ``{"batch": 8, "seq": 512}``."""
    out: dict[str, int] = {}
    for it in items or ():
        name, sep, val = it.partition("=")
        if not sep or not name.strip():
            raise InputError(f"--dim {it!r}: expected NAME=VALUE, e.g. --dim seq=512")
        v = parse_quantity(val, f"--dim {name}")
        if v < 0 or v != int(v):
            raise InputError(f"--dim {name}: must be a non-negative integer, got {val!r}")
        out[name.strip()] = int(v)
    return out


def parse_shape(text: str, flag: str = "--input") -> tuple[int, ...]:
    """``"1x3x224x224"`` -> ``(1, 3, 224, 224)``."""
    try:
        dims = tuple(int(d) for d in text.lower().replace(",", "x").split("x") if d.strip())
    except ValueError:
        raise InputError(f"{flag} {text!r}: expected a shape like 1x3x224x224") from None
    if not dims or any(d <= 0 for d in dims):
        raise InputError(f"{flag} {text!r}: every dimension must be a positive integer")
    return dims


def parse_inputs(items: Sequence[str] | None) -> dict[str, tuple[int, ...]] | list[tuple[int, ...]]:
    """``--input input_ids=1x512`` (named) or ``--input 1x3x224x224`` (positional)."""
    named: dict[str, tuple[int, ...]] = {}
    positional: list[tuple[int, ...]] = []
    for it in items or ():
        name, sep, shape = it.rpartition("=")
        if sep:
            named[name.strip()] = parse_shape(shape)
        else:
            positional.append(parse_shape(it))
    if named and positional:
        raise InputError("--input: use either NAME=SHAPE for every input or plain shapes, not both")
    return named or positional


def add_hw_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hw", default=None, help="hardware profile name or alias (see `graphroof hw list`) or a "
                   ".toml/.yaml path (default: a100, or an ad-hoc device when --peak-flops and --mem-bw are given)")
    p.add_argument("--peak-flops", default=None, help="what-if: every peak FLOP/s set to this (e.g. 4.6T, 4608e9)")
    p.add_argument("--mem-bw", default=None, help="what-if: memory bandwidth (e.g. 96GB/s, 2.039e12)")
    p.add_argument("--ideal", action="store_true", help="100%% efficiency and no launch overhead in the realistic time")


def add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dim", action="append", metavar="NAME=VALUE", help="bind a symbolic dim (repeatable)")
    p.add_argument("--input", action="append", metavar="[NAME=]SHAPE",
                   help="input shape, e.g. 1x3x224x224 or input_ids=1x512 (repeatable)")
    p.add_argument("--batch", type=int, default=None, help="batch size for zoo / config models (default 1)")
    p.add_argument("--seq", type=int, default=None, help="sequence length for zoo / config models (default 1024)")
    p.add_argument("--dtype", default=None, help="model dtype for zoo / config models, e.g. bf16 "
                   "(default: the checkpoint's)")
    p.add_argument("--strict", action="store_true", help="fail when an op has no counting rule")
    p.add_argument("--depth", type=int, default=None, help="layer depth of the rollup (default: automatic)")
    p.add_argument("--attention", default="flash", choices=("flash", "naive"),
                   help="attention byte model: flash = scores stay on chip (default); naive = scores written and read")
    p.add_argument("--causal", default="kernel", choices=("kernel", "full"),
                   help="causal attention: count what a causal kernel computes (~half the square, default) or the full square")


def hw_from_args(args: argparse.Namespace):
    from .api import resolve_hardware

    peak = parse_quantity(args.peak_flops, "--peak-flops") if args.peak_flops else None
    bw = parse_quantity(args.mem_bw, "--mem-bw") if args.mem_bw else None
    for flag, v in (("--peak-flops", peak), ("--mem-bw", bw)):
        if v is not None and v <= 0:
            raise InputError(f"{flag} must be > 0")
    return resolve_hardware(args.hw, peak_flops_per_s=peak, mem_bw_bytes_per_s=bw, ideal=args.ideal)


def frontend_opts(args: argparse.Namespace) -> dict:
    opts: dict = {}
    dims = parse_dims(args.dim)
    if dims:
        opts["dims"] = dims
    shapes = parse_inputs(args.input)
    if shapes:
        opts["input_shapes"] = shapes
    if args.batch is not None:
        if args.batch < 1:
            raise InputError("--batch must be >= 1")
        opts["batch"] = args.batch
    if args.seq is not None:
        if args.seq < 1:
            raise InputError("--seq must be >= 1")
        opts["seq"] = args.seq
    if getattr(args, "dtype", None):
        from .dtypes import canonical_dtype

        opts["dtype"] = canonical_dtype(args.dtype)
    return opts


# -- analyze -------------------------------------------------------------------------------------------

def _analyze_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="an .onnx file, an op table (.csv/.yaml/.json), a transformers config.json, "
                   "'pkg.module:factory', or a zoo name")
    add_hw_options(p)
    add_model_options(p)
    p.add_argument("--format", "-f", default="terminal",
                   help="terminal | markdown | json | csv | html (default terminal); html is one self-contained "
                   "file with an interactive roofline; markdown with -o FILE.md writes the chart PNG beside it")
    p.add_argument("-o", "--output", default="-", help="output file, or - for stdout (default)")
    p.add_argument("--ops", action="store_true", help="also list every op (terminal / markdown); csv: op rows")
    p.add_argument("--top", type=int, default=None, help="with --ops: only the N slowest ops")


def _analyze_run(args: argparse.Namespace) -> int:
    from .api import analyze
    from .progress import Progress
    from .report import FORMATS, write_report

    if args.format not in FORMATS:
        raise InputError(f"unknown format {args.format!r}; use one of: {', '.join(FORMATS)}")
    hw = hw_from_args(args)
    opts = frontend_opts(args)
    progress = Progress(quiet=args.quiet)
    a = analyze(args.model, hw=hw, strict=args.strict, depth=args.depth, attention=args.attention,
                causal=args.causal, progress=progress, **opts)
    progress(f"writing the {args.format} report")
    write_report(a, args.format, args.output, ops=args.ops, top=args.top)
    return 0


command("analyze", "per-op and per-layer roofline of a model")((_analyze_args, _analyze_run))


# -- hw ------------------------------------------------------------------------------------------------

def _hw_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="hw_cmd", metavar="{list,show}")
    sub.required = True
    sub.add_parser("list", help="list the shipped hardware profiles")
    s = sub.add_parser("show", help="show one profile with its sources")
    s.add_argument("name", help="profile name, alias or file path")


def _hw_run(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from .hardware import list_profiles, load_hardware
    from .units import fmt_bytes, fmt_rate

    if args.hw_cmd == "list":
        rows = []
        for p in list_profiles():
            bf16 = p.matrix_peak_flops_per_s.get("bf16") or p.matrix_peak_flops_per_s.get("fp16")
            rows.append([p.name, ", ".join(p.aliases), fmt_rate(bf16) if bf16 else "-",
                         fmt_rate(p.mem_bw_bytes_per_s, "B/s"),
                         fmt_bytes(p.mem_capacity_bytes) if p.mem_capacity_bytes else "-",
                         f"{p.ridge_point('bf16'):.0f}"])
        print(tabulate(rows, headers=["name", "aliases", "bf16/fp16 matrix (dense)", "memory bw", "capacity",
                                      "ridge (FLOP/B)"], disable_numparse=True))
        return 0
    p = load_hardware(args.name)
    print(f"{p.label}  [{p.name}]  {p.vendor} {p.kind}; file: {p.path}")
    if p.aliases:
        print(f"aliases: {', '.join(p.aliases)}")
    rows = [[f"matrix.{k}", fmt_rate(v), f"{v / p.mem_bw_bytes_per_s:.1f}"] for k, v in p.matrix_peak_flops_per_s.items()]
    rows += [[f"vector.{k}", fmt_rate(v), f"{v / p.mem_bw_bytes_per_s:.1f}"] for k, v in p.vector_peak_flops_per_s.items()]
    print(tabulate(rows, headers=["peak (dense)", "FLOP/s", "ridge FLOP/B"], disable_numparse=True))
    print(f"memory: {fmt_rate(p.mem_bw_bytes_per_s, 'B/s')}" +
          (f", capacity {fmt_bytes(p.mem_capacity_bytes)}" if p.mem_capacity_bytes else "") +
          (f", on-chip cache {fmt_bytes(p.onchip_cache_bytes)}" if p.onchip_cache_bytes else ""))
    if p.interconnect_bw_bytes_per_s:
        print(f"interconnect: {p.interconnect_name} {fmt_rate(p.interconnect_bw_bytes_per_s, 'B/s')} per direction")
    print(f"efficiency (realistic mode): matrix {p.matrix_efficiency:g}, vector {p.vector_efficiency:g}, "
          f"memory {p.mem_bw_efficiency:g}, interconnect {p.interconnect_efficiency:g}, "
          f"launch overhead {p.launch_overhead_s:g} s/op")
    for k, v in p.sources.items():
        print(f"source [{k}]: {v}")
    return 0


command("hw", "list or show hardware profiles")((_hw_args, _hw_run))


# -- rules ---------------------------------------------------------------------------------------------

def _rules_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--unknown", metavar="MODEL", help="list the op keys of MODEL that have no rule")
    add_model_options(p)


def _rules_run(args: argparse.Namespace) -> int:
    from .counters import REGISTRY

    if args.unknown:
        from collections import Counter

        from .frontends import load

        g = load(args.unknown, **frontend_opts(args))
        missing = Counter(op.op for op in g.ops() if op.op not in REGISTRY)
        for k, v in sorted(missing.items()):
            print(f"{k}\t{v}")
        if not missing:
            print("every op has a rule")
        return 0
    for k in REGISTRY.keys():
        print(f"{k}\t{'free' if REGISTRY.is_free(k) else 'rule'}")
    return 0


command("rules", "list the registered counting rules (or a model's ops without one)")((_rules_args, _rules_run))


# -- main ----------------------------------------------------------------------------------------------

#: Modules that register further sub-commands with ``command(...)`` when imported (one line per feature).
FEATURE_MODULES: tuple[str, ...] = (
    "graphroof.report_cli",
    "graphroof.llm.cli",
    "graphroof.cli_zoo",
    "graphroof.calibrate_cli",
)


def build_parser() -> argparse.ArgumentParser:
    import importlib

    from ._version import __version__

    for mod in FEATURE_MODULES:
        importlib.import_module(mod)

    p = argparse.ArgumentParser(prog="graphroof", description="Roofline analysis of real model graphs: "
                                "FLOPs, bytes, bound and time per op and layer.")
    p.add_argument("--version", action="version", version=f"graphroof {__version__}")
    p.add_argument("--quiet", "-q", action="store_true", help="no warnings or progress on stderr")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    for name, (help_, add, _run) in COMMANDS.items():
        add(sub.add_parser(name, help=help_, description=help_))
    return p


def _warn_line(message, category, filename, lineno, file=None, line=None):  # noqa: ARG001
    print(f"graphroof: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.cmd:
        parser.print_help()
        return 1
    warnings.showwarning = _warn_line
    if args.quiet:
        warnings.simplefilter("ignore")
    else:
        from .errors import GraphroofWarning

        warnings.simplefilter("always", GraphroofWarning)
    _help, _add, run = COMMANDS[args.cmd]
    try:
        code = run(args)
    except GraphroofError as e:
        print(f"graphroof: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("graphroof: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return code


def entry() -> None:  # pragma: no cover - console script wrapper
    sys.exit(main())
