"""Command line: a thin layer over the Python API.  Expected errors -> one line on stderr, exit 1.

One module per sub-command (``NAME``, ``HELP``, ``add_arguments(parser)``, ``run(args) -> exit code``), shared
options in :mod:`graphroof.cli.options`; :data:`COMMANDS` lists them in ``--help`` order.
"""

from __future__ import annotations

import argparse
import gc
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from ..errors import GraphroofError, sanitize_terminal
from . import (
    analyze,
    cache,
    calibrate,
    compare,
    diff,
    hw,
    llm,
    plan,
    plot,
    profile,
    rules,
    runtimes,
    serve,
    sweep,
    validate,
    zoo,
)

__all__ = ["main", "build_parser", "entry", "COMMANDS", "GC_THRESHOLD", "gc_thresholds"]

#: Sub-command name -> its module.
COMMANDS: dict[str, ModuleType] = {m.NAME: m for m in (analyze, hw, rules, plot, compare, diff, llm, sweep, serve,
                                                       plan, zoo, runtimes, calibrate, profile, cache, validate)}


class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's error convention: a usage error (an unknown flag, a missing required one, a bad
    choice) is one line naming the problem and where the flags are listed, exit code 1 -- as every other bad
    input -- instead of argparse's usage block and exit code 2.  Sub-command parsers are of this class too
    (``add_subparsers`` makes its parsers of the parent's class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"{self.prog}: error: {sanitize_terminal(message)}; see `{self.prog} --help`\n")


def build_parser() -> argparse.ArgumentParser:
    from .._version import __version__

    p = _Parser(prog="graphroof", description="Roofline analysis of real model graphs: "
                                "FLOPs, bytes, bound and time per op and layer.")
    p.add_argument("--version", action="version", version=f"graphroof {__version__}")
    _global_flags(p, None)
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    for name, mod in COMMANDS.items():
        sp = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(sp)
        # the global flags work after the sub-command too, as users type them (`analyze MODEL --no-cache`); a
        # flag absent there leaves the value given before the sub-command
        _global_flags(sp, argparse.SUPPRESS)
    return p


def _global_flags(p: argparse.ArgumentParser, default: object) -> None:
    quiet_default = False if default is None else default
    cache_default = True if default is None else default
    p.add_argument("--quiet", "-q", action="store_true", default=quiet_default,
                   help="no warnings or progress on stderr")
    p.add_argument("--no-cache", dest="cache", action="store_false", default=cache_default,
                   help="trace transformers / zoo models afresh: neither read nor write the store of traced graphs "
                   "(default: on, in $GRAPHROOF_CACHE_DIR or ~/.cache/graphroof; GRAPHROOF_CACHE=off also turns "
                   "it off)")


#: the collector's thresholds while a command runs (Python's defaults: 700, 10, 10): allocations between
#: young-generation collections, young collections between middle ones, middle ones between full ones
GC_THRESHOLD = (10_000, 50, 1_000)


def gc_thresholds(old: Sequence[int]) -> tuple[int, ...]:
    """The collector's thresholds a command runs under: each of *old* raised to :data:`GC_THRESHOLD`'s (a
    caller's higher one is kept)."""
    return tuple(max(a, b) for a, b in zip(old, GC_THRESHOLD))


def _warn_line(message, category, filename, lineno, file=None, line=None):  # noqa: ARG001
    if _ours(category, filename):
        print(f"graphroof: warning: {message}", file=sys.stderr)


def _ours(category: type[Warning], filename: str) -> bool:
    """Whether a warning is graphroof's to print: a GraphroofWarning, or any warning raised from graphroof's own
    modules.  Third-party deprecation notices and UserWarnings raised while a model is captured (transformers'
    FutureWarnings, replayed once per traced graph by the store) are not the user's to act on."""
    import os

    from ..errors import GraphroofWarning

    if issubclass(category, GraphroofWarning):
        return True
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    return os.path.abspath(filename or "").startswith(pkg)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # named after the sub-command whose flags they are not (argparse names the top-level parser)
        prog = f"graphroof {args.cmd}" if getattr(args, "cmd", None) else "graphroof"
        print(f"{prog}: error: unrecognized arguments: {sanitize_terminal(' '.join(extra))}; see `{prog} --help`",
              file=sys.stderr)
        return 1
    if not args.cmd:
        parser.print_help()
        return 1
    warnings.showwarning = _warn_line
    if args.quiet:
        warnings.simplefilter("ignore")
    else:
        from ..errors import GraphroofWarning

        warnings.simplefilter("always", GraphroofWarning)
    old = gc.get_threshold()
    # a traced model holds ~1e5-1e6 live objects (modules, fake tensors, graph nodes): the default thresholds
    # walk them all every few thousand allocations (measured on `llm deepseek-v3 --tp 8`: 700 -> 10,000 young
    # saves ~15% of the CPU time at the same peak RSS; 50,000 saves ~23% but holds ~115 MB more garbage).  A full
    # collection walks the whole heap (~0.6 s once the traces of 70B models are held) each time it grew a quarter:
    # 3-6 of them in a run.  Rare middle and full collections (2026-11-28, this 2-core machine): `validate` with
    # nothing stored 120 -> 105 s (224 -> 196 s of CPU), `llm deepseek-v3 --tp 8` 3.2 -> 1.4 s collecting, the
    # same peak RSS in both and in `serve llama-3-8b` (cyclic garbage is young: fake tensors die within a trace)
    gc.set_threshold(*gc_thresholds(old))
    from .stdout import guarded

    stdout = sys.stdout
    sys.stdout = guarded(stdout)  # a full disk under stdout: one line, like every other error
    try:
        code = COMMANDS[args.cmd].run(args)  # each command passes run_options(args) (--no-cache ...) on
        sys.stdout.flush()
    except GraphroofError as e:
        print(f"graphroof: error: {sanitize_terminal(str(e))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("graphroof: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    finally:
        gc.set_threshold(*old)
        sys.stdout = stdout
    return code


def entry() -> None:  # pragma: no cover - console script wrapper
    from .stdout import discard_unwritten

    code = main()
    discard_unwritten()  # output a full disk or a closed pipe refused is not retried (with a traceback) at exit
    sys.exit(code)
