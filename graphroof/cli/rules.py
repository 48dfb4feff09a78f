"""``graphroof rules [--unknown MODEL]``: the registered counting rules."""

from __future__ import annotations

import argparse

from .options import add_model_options, frontend_opts, run_options

NAME = "rules"
HELP = "list the registered counting rules (or a model's ops without one)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--unknown", metavar="MODEL", help="list the op keys of MODEL that have no rule")
    add_model_options(p)


def run(args: argparse.Namespace) -> int:
    from ..counters import REGISTRY

    if args.unknown:
        from collections import Counter

        from ..frontends import load

        g = load(args.unknown, options=run_options(args), **frontend_opts(args))
        missing = Counter(op.op for op in g.ops() if op.op not in REGISTRY)
        for k, v in sorted(missing.items()):
            print(f"{k}\t{v}")
        if not missing:
            print("every op has a rule")
        return 0
    for k in REGISTRY.keys():
        print(f"{k}\t{'free' if REGISTRY.is_free(k) else 'rule'}")
    return 0
