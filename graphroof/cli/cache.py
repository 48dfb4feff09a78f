"""``graphroof cache``: where the store of traced graphs is, what it holds, and ``cache clear`` to empty it."""

from __future__ import annotations

import argparse

NAME = "cache"
HELP = "show or clear the store of traced graphs (zoo models and transformers configs)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="cache_cmd", metavar="{info,clear}")
    sub.required = True
    sub.add_parser("info", help="the store's folder, entries and size")
    sub.add_parser("clear", help="remove every stored graph (the next run of each model traces it again)")


def run(args: argparse.Namespace) -> int:
    from ..frontends import trace_store
    from ..units import fmt_bytes

    folder = trace_store.cache_dir()
    entries, files, size = trace_store.usage()
    if args.cache_cmd == "clear":
        removed = trace_store.clear()
        print(f"removed {removed} stored graph files ({fmt_bytes(size)}) from {folder}")
        return 0
    state = "on" if trace_store.enabled() else "off (GRAPHROOF_CACHE=off or --no-cache)"
    print(f"store of traced graphs: {folder}\n  state: {state}\n  entries: {entries} ({files} files, "
          f"{fmt_bytes(size)}; pruned to {trace_store.limit_bytes() / 1e6:,.0f} MB, oldest first)\n"
          "  an entry is one model + options + code version; a graphroof or package update starts new entries")
    return 0
