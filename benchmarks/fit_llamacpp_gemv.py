"""Fit the ``llama.cpp`` preset's three mat-vec rates on ``graphroof validate --dataset llamacpp`` and report how
they carry over to a GPU they were not fitted on (leave one GPU out).

The rates (``[kernels]`` of graphroof/fuse/presets/llama.cpp.toml; graphroof.timing.gemm_plan.gemv_time_s):
``gemv_mem_bw_efficiency`` (the share of DRAM bandwidth the mat-vec kernels reach), ``gemv_sm_bw_bytes_per_s`` (the
F16 kernel's bytes in flight per SM over the DRAM latency) and ``gemv_quant_sm_bw_bytes_per_s`` (the quantized
kernel's).  Every grid point prices the 88 rows through ``graphroof.validate.validate("llamacpp")`` (the path the
CLI runs), the preset's rates replaced; the error is the validation's (on the time a token).  Printed: the grid point
with the least median |error| over all rows (the preset's constants), and for each GPU the point fitted on the other
GPUs' rows with that GPU's rows' median and worst |error| under it; wall time and peak RSS.

Run: ``python benchmarks/fit_llamacpp_gemv.py [--quick] [--shares 0.95]`` (--quick: a 2 x 2 x 2 grid around the
preset; --shares: the bandwidth shares tried, e.g. only the preset's 0.95: the leave-one-GPU-out search then refits
the two per-SM rates with the share held where the preset holds it).
"""

from __future__ import annotations

import argparse
import itertools
import resource
import statistics
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--shares", default="", help="comma-separated bandwidth shares to try (default 0.90,0.95,1.00)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from graphroof.fuse import runtimes
    from graphroof.validate import validate

    base = runtimes.RUNTIMES["llama.cpp"]
    effs = tuple(float(x) for x in args.shares.split(",")) if args.shares else \
        ((0.95, 1.0) if args.quick else (0.90, 0.95, 1.0))
    sms = (10e9, 11e9) if args.quick else (9e9, 10e9, 11e9)
    qs = (12.5e9, 13.5e9) if args.quick else (11.5e9, 12.5e9, 13.5e9)
    t0 = time.perf_counter()
    errs: dict[tuple[float, float, float], dict[str, float]] = {}
    gpu_of: dict[str, str] = {}
    try:
        for e, s, q in itertools.product(effs, sms, qs):
            runtimes.RUNTIMES["llama.cpp"] = replace(base, gemv_mem_bw_efficiency=e, gemv_sm_bw_bytes_per_s=s,
                                                     gemv_quant_sm_bw_bytes_per_s=q)
            res = validate("llamacpp")
            errs[(e, s, q)] = {r.row_id: abs(r.error) for r in res.rows if r.scored}
            gpu_of.update({r.row_id: r.gpu for r in res.rows if r.scored})
            print(f"eff {e:.2f}, F16 {s / 1e9:.1f} GB/s/SM, quant {q / 1e9:.1f} GB/s/SM: median |error| "
                  f"{100 * statistics.median(errs[(e, s, q)].values()):.1f}%", file=sys.stderr)
    finally:
        runtimes.RUNTIMES["llama.cpp"] = base

    def med(point: tuple, keep) -> float:
        return statistics.median(v for k, v in errs[point].items() if keep(k))

    best = min(errs, key=lambda p: med(p, lambda k: True))
    print(f"all rows: best eff {best[0]:.2f}, F16 {best[1] / 1e9:.1f} GB/s per SM, quant {best[2] / 1e9:.1f} GB/s per "
          f"SM: median |error| {100 * med(best, lambda k: True):.1f}%, worst {100 * max(errs[best].values()):.1f}% "
          f"over {len(errs[best])} rows")
    held: list[float] = []
    for gpu in sorted(set(gpu_of.values())):
        p = min(errs, key=lambda pt: med(pt, lambda k: gpu_of[k] != gpu))
        mine = [v for k, v in errs[p].items() if gpu_of[k] == gpu]
        held += mine
        print(f"  {gpu} held out: fitted on the others eff {p[0]:.2f}, F16 {p[1] / 1e9:.1f}, quant {p[2] / 1e9:.1f}; "
              f"its {len(mine)} rows median |error| {100 * statistics.median(mine):.1f}%, worst {100 * max(mine):.1f}%")
    print(f"leave one GPU out: median |error| {100 * statistics.median(held):.1f}%, worst {100 * max(held):.1f}% "
          f"over {len(held)} rows")
    print(f"wall {time.perf_counter() - t0:.0f} s, peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
