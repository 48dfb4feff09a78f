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

__all__ = ["main", "build_parser", "entry", "COMMANDS"]

#: Sub-command name -> its module.
COMMANDS: dict[str, ModuleType] = {m.NAME: m for m in (analyze, hw, rules, plot, compare, diff, llm, sweep, serve,
                                                       plan, zoo, runtimes, calibrate, profile, cache, validate)}


def build_parser() -> argparse.ArgumentParser:
    from .._version import __version__

    p = argparse.ArgumentParser(prog="graphroof", description="Roofline analysis of real model graphs: "
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


#: allocations between young-generation collections while a command runs (Python's default: 700)
GC_THRESHOLD = 10_000


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
    args = parser.parse_args(argv)
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
    # walk them all every few thousand allocations (measured on `llm deepseek-v3 --tp 8`: 700 -> 10,000 saves
    # ~15% of the CPU time at the same peak RSS; 50,000 saves ~23% but holds ~115 MB more garbage)
    gc.set_threshold(max(old[0], GC_THRESHOLD), *old[1:])
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
