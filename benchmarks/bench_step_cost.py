"""Step cost of a serving simulation (:class:`graphroof.llm.stepcost.StepCost`): engine steps priced per second.

Llama-2-7B on one H100 (config built on the meta device: no download).  Steps are random mixes of decode batches
(0..64 sequences, cached lengths 1..2048) with a prefill chunk in one step of ten (1..1024 tokens after 0..512
cached ones).  Reference in the same run: the scalar path, one counted decode step (``Engine.step``) per step,
on 20 random steps.  Columns: steps, wall s, steps per second, ratio to the scalar path's rate, peak RSS MB.

Run: ``python benchmarks/bench_step_cost.py [--steps 1000000]``.
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from tabulate import tabulate  # noqa: E402


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--model", default="llama-2-7b")
    ap.add_argument("--hw", default="h100")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from graphroof.llm import Engine

    t0 = time.perf_counter()
    eng = Engine(args.model, hw=args.hw)
    sc = eng.step_cost(max_batch=64, max_context=2048, max_chunk=1024)
    build = time.perf_counter() - t0
    rng = random.Random(0)
    t0 = time.perf_counter()
    worst = 0.0
    for _ in range(20):
        m, x = rng.randrange(1, 65), rng.randrange(1, 2048)
        ref = eng.step("decode", m, x).totals.t_realistic_s
        worst = max(worst, abs(float(sc(decode_seqs=m, decode_context=m * x)) / ref - 1))
    scalar = 20 / (time.perf_counter() - t0)
    rows = [["scalar path (Engine.step), reference", 20, 20 / scalar, scalar, 1.0, rss_mb()]]
    g = np.random.default_rng(0)
    for n in (10_000, 100_000, args.steps):
        pre = np.where(np.arange(n) % 10 == 0, g.integers(1, 1025, n), 0)
        off = g.integers(0, 513, n)
        seqs = g.integers(0, 65, n)
        ctx = seqs * g.integers(1, 2049, n)
        t0 = time.perf_counter()
        sc(pre, off, seqs, ctx)
        wall = time.perf_counter() - t0
        rows.append(["StepCost (vectorised)", n, wall, n / wall, n / wall / scalar, rss_mb()])
    print(f"{args.model} on {args.hw}: step-cost tables built in {build:.2f} s (traces included); vectorised vs "
          f"scalar path at 20 random decode steps: worst relative difference {worst:.1e}")
    print(tabulate(rows, headers=["run", "steps", "wall s", "steps/s", "vs scalar", "peak RSS MB"], floatfmt=".3g"))


if __name__ == "__main__":
    main()
