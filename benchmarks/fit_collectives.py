"""Fit the NCCL [collectives] constants of the A100 / H100 profiles on the Vidur all-reduce tables.

    PYTHONPATH=. python benchmarks/fit_collectives.py     # fit, print the constants and the per-subset errors
    PYTHONPATH=. python benchmarks/fit_collectives.py h100   # one GPU's fit

Rows: ``vidur_{a100,h100}_dgx_all_reduce.csv`` (../shared/data/measured; Vidur profiling data, microsoft/vidur):
NCCL all-reduce of 2 KB - 64 MB fp16 buffers, the kernel time on rank 0 (kineto, median of 11 back-to-back calls).
Every row is priced by :func:`graphroof.timing.collective_time_with` (the function ``graphroof validate`` and the
comm kernels call) and the fit minimises the mean |log(predicted / measured)| (Nelder-Mead in log space):

* per GPU, on its single-node rows (2, 4, 8 GPUs): ``base_latency_s``, ``launch_skew_s`` (rank 0 waits
  ``launch_skew_s * (H_p - 1)`` for the last of p launches; a fit below :data:`SKEW_FLOOR_S` is written 0: the rows
  show no growth with p) and ``intra_bus_bw_bytes_per_s``
  (``intra_hop_latency_s``, the LL NVLink hop, is held at NCCL's 0.47 us: :data:`LL_NVLINK_HOP_S`); a profile
  with NVLS (H100) has ``nvls_bw_bytes_per_s`` held at :data:`NVLS_SHARE` of the ring bandwidth (a free third
  constant trades against the ring one: the fit then gives the 2-GPU ring 420 GB/s where its > 16 MB rows sustain
  294, and the ring bandwidth no longer transfers between GPUs, see graphroof.validate.holdout);
* the network, on the A100 multi-node rows (2 nodes of 1, 2, 4, 8 GPUs; the only multi-node rows), the A100's
  intra-node constants held: ``inter_hop_latency_s`` (the LL network hop), ``inter_bw_bytes_per_s_per_nic``,
  ``inter_ramp_bytes_per_nic`` and ``nics_per_node`` (1, 2, 4 or 8, the best).  Which algorithm runs (ring or
  tree) is NCCL's tuner's pick (graphroof.timing.nccl_tuner) with ``nccl_graph_bw_per_gpu_bytes_per_s`` held at
  :data:`NCCL_GRAPH_BW_PER_GPU` (not fitted: set from the 16-GPU rows' ring/tree flips, see there).

NCCL's protocol constants (LL / LL128 / Simple bandwidth shares and extra hop latencies) are not fitted: see
:data:`graphroof.timing.collectives.PROTOCOLS`.
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measured import data_dir  # noqa: E402
from fit_kernel_model import nelder_mead  # noqa: E402

from graphroof.hardware import load_hardware  # noqa: E402
from graphroof.timing import collective_time_with  # noqa: E402

PROFILES = {"a100": "a100-80gb-sxm", "h100": "h100-sxm"}


def load(gpu: str) -> list[tuple[int, int, int, float]]:
    with open(data_dir() / f"vidur_{gpu}_dgx_all_reduce.csv") as f:
        return [(int(r["num_workers"]), int(r["devices_per_node"]), int(r["size_bytes"]),
                 float(r["all_reduce_ms"]) * 1e-3) for r in csv.DictReader(f)]


def errors(rows, params) -> list[float]:
    return [collective_time_with("all_reduce", s, p, params, gpus_per_node=g).t_s / t - 1 for p, g, s, t in rows]


def loss(rows, params) -> float:
    return statistics.fmean(abs(math.log1p(e)) for e in errors(rows, params))


#: the LL NVLink ring hop of NCCL's tuning model (src/graph/tuning.cc hwLat): held, not fitted (a free fit sends it to
#: 0 and the base takes it)
LL_NVLINK_HOP_S = 0.47e-6


#: NVLS in-switch all-reduce bandwidth per unit of ring bus bandwidth: the Vidur H100 rows above 16 MB sustain
#: S / t = 223 GB/s at 4 GPUs and 219 GB/s at 8 (NVLS time S / B_nvls: the same at any GPU count) where the 2- and
#: 4-GPU ring sustains a bus bandwidth of 294-334 GB/s: 221 / 314 = 0.70
NVLS_SHARE = 0.7


#: NCCL's ring-graph network bandwidth per GPU on the Vidur A100 cluster: speedArrayInter's 6.0 GB/s step (src/graph/
#: search.cc); with it NCCL's tuning model flips ring -> tree -> ring -> tree at 12.4 / 16 / 19.9 MiB on 16 GPUs (8 per
#: node), where the rows of vidur_a100_dgx_all_reduce.csv (16 GPUs, 8-32 MiB) jump at 12.5 / 16 / 20 MiB; 4.5 or 7.5
#: GB/s move those flips off the rows' (4.5: tree from 9.3 MiB on; 7.5: 15.5 / 16 / 24.9 MiB)
NCCL_GRAPH_BW_PER_GPU = 6.0e9


#: a fitted launch skew below this is written 0 (the log-space fit cannot reach 0; the rows show no growth with p)
SKEW_FLOOR_S = 0.1e-6


def fit_intra(rows, c):
    def params(x):
        bw = math.exp(x[1])
        nvls = {"nvls_bw_bytes_per_s": NVLS_SHARE * bw} if "nvls" in c.algorithms else {}
        skew = math.exp(x[2])
        return replace(c, base_latency_s=math.exp(x[0]), intra_hop_latency_s=LL_NVLINK_HOP_S,
                       intra_bus_bw_bytes_per_s=bw, launch_skew_s=skew if skew >= SKEW_FLOOR_S else 0.0, **nvls)
    x0 = [math.log(c.base_latency_s), math.log(c.intra_bus_bw_bytes_per_s), math.log(max(c.launch_skew_s, 5e-6))]
    x, v = nelder_mead(lambda x: loss(rows, params(x)), x0, step=0.4, iters=400)
    return params(x), v


def fit_network(rows, c):
    best = None
    for nics in (1, 2, 4, 8):
        def params(x, nics=nics):
            return replace(c, inter_hop_latency_s=math.exp(x[0]), inter_bw_bytes_per_s_per_nic=math.exp(x[1]),
                           inter_ramp_bytes_per_nic=math.exp(x[2]), nics_per_node=nics,
                           nccl_graph_bw_per_gpu_bytes_per_s=NCCL_GRAPH_BW_PER_GPU)
        x, v = nelder_mead(lambda x: loss(rows, params(x)), [math.log(5e-6), math.log(6e9), math.log(4e6)],
                           step=0.4, iters=300)
        if best is None or v < best[0]:
            best = (v, params(x))
    return best[1], best[0]


def subsets(rows, params) -> None:
    groups: dict[str, list[float]] = {}
    for r, e in zip(rows, errors(rows, params)):
        key = f"{r[0]:2d}/{r[1]} " + ("inter" if r[1] < r[0] else "intra") + (" small" if r[2] <= 1_000_000 else " large")
        groups.setdefault(key, []).append(abs(e))
    for k, v in sorted(groups.items()):
        print(f"    {k:17s} n {len(v):5d}  median {statistics.median(v):6.1%}  worst {max(v):7.1%}")


def main() -> None:
    fitted = {}
    only = sys.argv[1:]   # e.g. "h100": fit that GPU only
    for gpu, prof in PROFILES.items():
        if only and gpu not in only:
            continue
        rows = load(gpu)
        c = load_hardware(prof).collectives
        c, v = fit_intra([r for r in rows if r[1] >= r[0]], c)
        inter = [r for r in rows if r[1] < r[0]]
        if inter:
            c, vi = fit_network(inter, c)
            print(f"# {gpu} network: mean |log err| {vi:.4f}")
        fitted[gpu] = c
        print(f"# {gpu} ({prof}): intra mean |log err| {v:.4f}")
        for k in ("base_latency_s", "launch_skew_s", "intra_hop_latency_s", "intra_bus_bw_bytes_per_s", "nvls_bw_bytes_per_s",
                  "inter_hop_latency_s", "inter_bw_bytes_per_s_per_nic", "inter_ramp_bytes_per_nic", "nics_per_node",
                  "nccl_graph_bw_per_gpu_bytes_per_s"):
            val = getattr(c, k)
            print(f"{k} = {val if isinstance(val, int) or val is None else float(f'{val:.3g}')}")
        subsets(rows, c)


if __name__ == "__main__":
    main()
