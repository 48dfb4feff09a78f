"""``graphroof zoo list``: the bundled model zoo (names usable wherever a model is expected)."""

from __future__ import annotations

import argparse

NAME = "zoo"
HELP = "list the bundled model zoo"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="zoo_cmd", metavar="{list}")
    sub.required = True
    sub.add_parser("list", help="list the bundled models (built on the meta device, no download)")


def run(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from ..frontends.zoo import ZOO

    rows = [[m.name, m.family, m.params, m.dtype,
             "transformers config" if m.source == "hf" else "torch module", m.description] for m in ZOO.values()]
    print(tabulate(rows, headers=["name", "family", "params", "dtype", "built from", "description"],
                   disable_numparse=True))
    print("\nuse: graphroof analyze NAME [--batch N] [--seq N] --hw a100   (defaults: batch 1, seq 1024 or the "
          "model's maximum; vision models take 224x224 images)")
    return 0
