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
    use = trace_store.usage()
    entries, files, size = use
    if args.cache_cmd == "clear":
        removed = trace_store.clear()  # InputError when the folder is not this user's own and private
        print(f"removed {removed} stored graph files ({fmt_bytes(size)}) from {folder}")
        return 0
    refused = trace_store.refusal()
    if refused:
        state = f"off: {refused}; a store must be your own private folder (chmod 700, owned by you)"
    else:
        state = "on" if trace_store.enabled() else "off (GRAPHROOF_CACHE=off or --no-cache)"
    extra = "".join(f", {n} {what}" for n, what in ((use.temp, "unfinished writes"),
                                                    (use.old, "of an older format, never read")) if n)
    print(f"store of traced graphs: {folder}\n  state: {state}\n  entries: {entries} ({files} files{extra}, "
          f"{fmt_bytes(size)}; pruned to {trace_store.limit_bytes() / 1e6:,.0f} MB, least recently used first)\n"
          "  an entry is one model + options + code version; a graphroof or package update starts new entries\n"
          "  entries are sealed with your own key (store.key): a store is not shared between users")
    return 0
