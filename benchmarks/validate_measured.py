"""Compare graphroof.timing's kernel-level model with every row of the measured data (Vidur profiling data).

    PYTHONPATH=. python benchmarks/validate_measured.py [--data DIR] [--holdout]

For each row of ``vidur_{gpu}_{model}_ops.csv`` (one Llama-2 decoder layer's non-attention kernels, fp16, TP 1-8,
1-4096 tokens) the kernels' shapes are built from the model columns (benchmarks/_measured.py) and priced with
graphroof.timing on the A100-80GB SXM / H100 SXM profiles; for each row of ``vidur_{gpu}_dgx_all_reduce.csv`` the
all-reduce is priced with graphroof.timing.allreduce_time.  Prints the median and worst relative error
|predicted / measured - 1| per kernel class and GPU, per layer (2 norms, QKV, rope, O, gate+up, act, down, 2 adds),
and per all-reduce configuration; ``--holdout`` refits the kernel constants on one model's rows and reports the
other's (needs numpy).  Also prints graphroof's eager-op figure of today (the profile's [efficiency] factors and
per-op launch on the same kernels) for comparison.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measured import GPU_PROFILE, LAYER, data_dir, load_allreduce, load_ops  # noqa: E402

from graphroof.hardware import load_hardware  # noqa: E402
from graphroof.timing import allreduce_time, gemm_time_with, stream_time_with, timing_of  # noqa: E402

GOALS = "goals: per-layer median <= 10%, worst <= 25%; all-reduce median <= 15%"


def predict(kernel, hw, timing) -> float:
    if kernel.gemm:
        m, n, k = kernel.gemm
        return gemm_time_with(m, n, k, timing=timing, peak_flops_per_s=hw.matrix_peak_flops_per_s["fp16"],
                              mem_bw_bytes_per_s=hw.mem_bw_bytes_per_s).t_s
    return stream_time_with(kernel.stream_bytes, timing=timing, mem_bw_bytes_per_s=hw.mem_bw_bytes_per_s,
                            kind=kernel.stream_kind).t_s


def predict_eager_today(kernel, hw) -> float:
    """graphroof's realistic time of today for the same kernel: roofline / [efficiency] factors + one launch."""
    if kernel.gemm:
        m, n, k = kernel.gemm
        tc = 2 * m * n * k / (hw.matrix_peak_flops_per_s["fp16"] * hw.matrix_efficiency)
        tm = 2 * (m * k + k * n + m * n) / (hw.mem_bw_bytes_per_s * hw.mem_bw_efficiency)
        return max(tc, tm) + hw.launch_overhead_s
    return kernel.stream_bytes / (hw.mem_bw_bytes_per_s * hw.mem_bw_efficiency) + hw.launch_overhead_s


def _stats(errs):
    a = [abs(e) for e in errs]
    return statistics.median(a), max(a), statistics.mean(errs)


def _pct(x):
    return f"{100 * x:.1f}%"


def kernel_table(rows, timings, eager=False):
    """Rows of (gpu, class, n, median, worst, bias) and per-layer rows."""
    per_class = defaultdict(list)
    per_layer = defaultdict(list)
    for r in rows:
        hw = load_hardware(GPU_PROFILE[r.gpu])
        tmg = None if eager else timings[(r.gpu, r.model)] if isinstance(timings, dict) else timings(hw)
        lay_p = lay_m = 0.0
        for col, ker in r.kernels.items():
            if col not in r.measured_s or r.measured_s[col] <= 0:
                continue
            p = predict_eager_today(ker, hw) if eager else predict(ker, hw, tmg)
            per_class[(r.gpu, ker.cls)].append(p / r.measured_s[col] - 1)
            if col in LAYER:
                lay_p += LAYER[col] * p
                lay_m += LAYER[col] * r.measured_s[col]
        per_layer[(r.gpu, r.model)].append(lay_p / lay_m - 1)
    return per_class, per_layer


def allreduce_table(rows):
    out = defaultdict(list)
    for r in rows:
        hw = load_hardware(GPU_PROFILE[r.gpu])
        p = allreduce_time(r.size_bytes, r.n_gpus, hw, gpus_per_node=r.gpus_per_node)
        where = "intra" if r.gpus_per_node >= r.n_gpus else "inter"
        out[(r.gpu, where, f"{r.n_gpus}x{r.gpus_per_node}/node")].append((p.t_s / r.measured_s - 1, p.algorithm))
    return out


def holdout_timings(ops):
    """Kernel constants refitted on one model's rows, applied to the other model (generalisation check)."""
    import fit_kernel_model as fk

    out = {}
    for gpu in sorted({r.gpu for r in ops}):
        base = timing_of(load_hardware(GPU_PROFILE[gpu]))
        for fit_on, apply_to in (("7b", "70b"), ("70b", "7b")):
            d, _ = fk.fit_gpu(gpu, ops, [], models={fit_on})
            d = dict(d, gemm_tile=tuple(d["gemm_tile"]))
            out[(gpu, apply_to)] = replace(base, **d)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None, help="the measured data directory (default ../shared/data/measured)")
    ap.add_argument("--holdout", action="store_true", help="refit on one model's rows, report the other's error")
    ap.add_argument("--no-eager", action="store_true", help="skip the eager-op comparison")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    d = args.data or data_dir()
    if not d.is_dir():
        print(f"validate_measured: error: measured data directory {d} not found", file=sys.stderr)
        return 1
    ops, ar = load_ops(d), load_allreduce(d)
    print(f"Vidur profiling data: {len(ops)} layer rows, {len(ar)} all-reduce rows from {d}")
    print(GOALS)

    per_class, per_layer = kernel_table(ops, timing_of)
    tab = [[gpu, cls, len(e), *map(_pct, _stats(e))] for (gpu, cls), e in sorted(per_class.items())]
    print("\nper kernel class (fitted profile constants)")
    print(tabulate(tab, headers=["gpu", "kernel", "rows", "median |err|", "worst |err|", "mean err"]))
    tab = [[gpu, model, len(e), *map(_pct, _stats(e))] for (gpu, model), e in sorted(per_layer.items())]
    alle = [x for e in per_layer.values() for x in e]
    tab.append(["all", "all", len(alle), *map(_pct, _stats(alle))])
    print("\nper layer (2 norms + QKV + rope + O + gate/up + act + down + 2 adds)")
    print(tabulate(tab, headers=["gpu", "model", "rows", "median |err|", "worst |err|", "mean err"]))

    if args.holdout:
        _, hl = kernel_table(ops, holdout_timings(ops))
        tab = [[gpu, model, f"fitted on {'70b' if model == '7b' else '7b'}", len(e), *map(_pct, _stats(e))]
               for (gpu, model), e in sorted(hl.items())]
        print("\nper layer, held out (constants refitted on the other model's rows only)")
        print(tabulate(tab, headers=["gpu", "model", "constants", "rows", "median |err|", "worst |err|", "mean err"]))

    if not args.no_eager:
        ec, el = kernel_table(ops, None, eager=True)
        tab = [[gpu, model, len(e), *map(_pct, _stats(e))] for (gpu, model), e in sorted(el.items())]
        print("\nfor comparison: graphroof's eager realistic time of today on the same kernels "
              "([efficiency] factors + launch per kernel)")
        print(tabulate(tab, headers=["gpu", "model", "rows", "median |err|", "worst |err|", "mean err"]))

    arr = allreduce_table(ar)
    tab = []
    for (gpu, where, cfg), v in sorted(arr.items()):
        e = [x for x, _ in v]
        algs = ",".join(sorted({a for _, a in v}))
        tab.append([gpu, where, cfg, len(e), *map(_pct, _stats(e)), algs])
    for gpu in sorted({k[0] for k in arr}):
        for where in ("intra", "inter"):
            e = [x for (g, w, _), v in arr.items() if g == gpu and w == where for x, _ in v]
            if e:
                tab.append([gpu, where, "all", len(e), *map(_pct, _stats(e)), ""])
    e = [x for v in arr.values() for x, _ in v]
    tab.append(["all", "all", "all", len(e), *map(_pct, _stats(e)), ""])
    print("\nall-reduce (NCCL, 2 KB - 64 MB)")
    print(tabulate(tab, headers=["gpu", "where", "GPUs", "rows", "median |err|", "worst |err|", "mean err", "algorithms"]))
    print(f"\nwall time {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
