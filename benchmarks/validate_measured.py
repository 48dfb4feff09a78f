"""Compare graphroof with the Vidur profiling data (layer kernels and NCCL all-reduce): a thin call into
``graphroof validate`` (the datasets ``vidur_ops`` and ``vidur_allreduce``, priced through the product's own path).

    PYTHONPATH=. python benchmarks/validate_measured.py [--holdout gpu|engine|model] [-f terminal|markdown|json]

Same as ``graphroof validate --dataset vidur_ops,vidur_allreduce``; every bundled dataset:
``graphroof validate`` (see graphroof/validate/).
"""

from __future__ import annotations

import sys

from graphroof.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    return cli_main(["validate", "--dataset", "vidur_ops,vidur_allreduce", *args])


if __name__ == "__main__":
    sys.exit(main())
