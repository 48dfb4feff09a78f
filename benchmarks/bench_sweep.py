"""``graphroof sweep`` cost per point: wall, time beyond the traces, peak RSS, 100 -> 10^6 points.

The model is the hand-built toy decoder of the tests (graphs built by binding symbolic dims, so "tracing" is
cheap and the table shows the sweep's own cost: counting, per-point evaluation, memory fit).  Reference in the
same run: the same 100 points through ``graphroof.llm.estimate`` one call per point (what a script would do
without ``sweep``).  Columns: points, wall s, of which traces s, beyond traces s (counting the sampled graphs and
pricing every point), ms per point (beyond traces), ratio of that per-point cost to the 100-point sweep's and to
the reference's, peak RSS MB (whole process, so far).  A sweep samples each phase on a small grid of traces
(``graphroof.llm.poly``: prefill 2 batches x 3 prompts, decode 2 batches x 2 contexts) and prices every point
from them.

Run: ``python benchmarks/bench_sweep.py [--max-points 1000000]``.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tabulate import tabulate  # noqa: E402


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def grid(n: int) -> dict:
    """A sweep of about *n* points over batch x prompt x gen x devices x weight dtypes."""
    if n <= 100:
        return dict(hw=["a100"], batch=[1, 2, 4, 8, 16], prompt=[64, 128, 256, 512, 1024], gen=[16, 32, 64, 128])
    if n <= 1000:
        return dict(hw=["a100"], batch=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
                    prompt=[64 * k for k in range(1, 11)], gen=[16 * k for k in range(1, 11)])
    hw5 = ["a100", "h100", "mi300x", "l40s", "h200"]
    if n <= 10_000:
        return dict(hw=hw5, weights=[None, "int4"], batch=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
                    prompt=[64 * k for k in range(1, 11)], gen=[16 * k for k in range(1, 11)])
    if n <= 100_000:  # 5 x 2 x 50 x 20 x 10
        return dict(hw=hw5, weights=[None, "int4"], batch=list(range(1, 51)), prompt=[32 * k for k in range(1, 21)],
                    gen=[16 * k for k in range(1, 11)])
    # 5 x 2 x 100 x 40 x 25
    return dict(hw=hw5, weights=[None, "int4"], batch=list(range(1, 101)), prompt=[16 * k for k in range(1, 41)],
                gen=[8 * k for k in range(1, 26)])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-points", type=int, default=1_000_000)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from graphroof.llm import estimate
    from graphroof.sweeps import sweep
    from tests.llm.toy import RULES, toy_source

    rows = []
    g = grid(100)
    t0 = time.perf_counter()
    n_ref = 0
    for b in g["batch"]:
        for p in g["prompt"]:
            for n in g["gen"]:
                estimate(toy_source(), hw="a100", batch=b, prompt=p, gen=n, rules=RULES)
                n_ref += 1
    ref_s = time.perf_counter() - t0
    ref_per = 1e3 * ref_s / n_ref
    rows.append(["estimate() per point (reference)", n_ref, ref_s, None, None, n_ref / ref_s, ref_per, None, 1.0,
                 rss_mb()])
    base = None
    for size in (100, 1000, 10_000, 100_000, 1_000_000):
        if size > args.max_points:
            break
        t0 = time.perf_counter()
        r = sweep(toy_source(), rules=RULES, max_points=None, **grid(size))
        r.frontier_indices()
        r.best_indices()
        wall = time.perf_counter() - t0
        beyond = wall - r.trace_s
        n = len(r)
        per = 1e3 * beyond / n
        base = base or per
        rows.append([f"sweep ({r.traces} graphs)", n, wall, r.trace_s, beyond, n / beyond, per, per / base,
                     per / ref_per, rss_mb()])
    print(tabulate(rows, headers=["run", "points", "wall s", "traces s", "beyond traces s", "points/s beyond",
                                  "ms/point", "per-point vs 100", "per-point vs reference", "peak RSS MB"],
                   floatfmt=".3g", missingval="-"))


if __name__ == "__main__":
    main()
