"""``graphroof.plan`` cost: wall time, peak RSS, configurations, simulations and pruned counts of a search of Llama-3-70B
(zoo, built on meta) over 4 devices x TP 1/2/4/8 x weights bf16/fp8 x KV bf16/fp8 x 6 max_num_seqs x 3
max_batched_tokens (1,152 configurations) x 8 request rates, fanned out over local processes.

Reference in the same run: one ``graphroof.serving.serve_one`` call (engine build + one simulation of the same
requests at one rate, TP 8 on an H100), what a user would run per configuration without the planner; the ratio
is the plan's wall time over it.

Run: ``python benchmarks/bench_plan.py [--jobs N] [--search-requests 200] [--requests 1000] [--small]``
(``--small``: 2 devices x TP 4/8 x bf16 x 2 x 1 batch limits x 3 rates, a quick check of the script;
``--medium``: 24 configurations x 8 rates).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def rss_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


def cpu_s() -> float:
    """CPU seconds of this process and its finished children (the workers): the cost on a shared machine."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--search-requests", type=int, default=200)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--medium", action="store_true")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from graphroof.llm import Pricing
    from graphroof.planner import plan
    from graphroof.serving.api import serve_one

    traffic = dict(prompt_len="lognormal:1024:512", gen_len="lognormal:256:128")
    t, c0 = time.perf_counter(), cpu_s()
    ref = serve_one("llama-3-70b", hw="h100", rate=[4.0], requests=args.search_requests, pricing=Pricing(tp=8),
                    max_num_seqs=256, max_batched_tokens=8192, **traffic)
    ref_s, ref_cpu = time.perf_counter() - t, cpu_s() - c0
    print(f"reference: serve_one(llama-3-70b, h100, tp 8, 1 rate, {args.search_requests} requests): {ref_s:.1f} s "
          f"({ref_cpu:.1f} CPU s; TPOT p50 {ref.points[0].tpot_s['p50'] * 1e3:.1f} ms)", file=sys.stderr)
    if args.medium:  # 2 devices x TP 4/8 x bf16/fp8 weights x 3 batch limits = 24 configurations x 8 rates
        space = dict(hw=["h100", "h200"], tp=[4, 8], weights=["bf16", "fp8"], kv=[None], max_num_seqs=[64, 128, 256],
                     max_batched_tokens=[8192], rate=[0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
    elif args.small:
        space = dict(hw=["h100", "h200"], tp=[4, 8], weights=[None], kv=[None], max_num_seqs=[64, 256],
                     max_batched_tokens=[8192], rate=[2.0, 8.0, 32.0])
    else:
        space = dict(hw=["h100", "h200", "a100", "mi300x"], tp=[1, 2, 4, 8], weights=["bf16", "fp8"],
                     kv=["bf16", "fp8"], max_num_seqs=[16, 32, 64, 128, 256, 512],
                     max_batched_tokens=[2048, 4096, 8192], rate=[0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
    t, c0 = time.perf_counter(), cpu_s()
    r = plan("llama-3-70b", slo_ttft_s=2.0, slo_tpot_s=0.05, search_requests=args.search_requests,
             requests=args.requests, jobs=args.jobs, progress=lambda m: print(f"  {time.perf_counter() - t:7.1f} s "
                                                                             f"{m}", file=sys.stderr), **space, **traffic)
    wall, cpu = time.perf_counter() - t, cpu_s() - c0
    c = r.counts
    print(f"plan: {c['configurations']} configurations x {len(space['rate'])} rates on {r.settings['fanout']['jobs']} "
          f"processes ({r.settings['fanout']['groups']} groups)")
    print(f"  wall {wall:.1f} s ({wall / ref_s:.1f} x the reference {ref_s:.1f} s), CPU {cpu:.1f} s ({cpu / ref_cpu:.1f} x "
          f"the reference's {ref_cpu:.1f} s); peak RSS parent "
          f"{rss_mb(resource.RUSAGE_SELF):.0f} MB, largest worker {rss_mb(resource.RUSAGE_CHILDREN):.0f} MB")
    print(f"  simulated {c['simulated']} (no capacity {c['no_capacity']}), pruned {c['pruned']}, rejected "
          f"{c['rejected']}; {c['simulations']} simulations ({args.search_requests} requests while searching), "
          f"{c['refined_points']} points re-simulated at {args.requests}; pruned points {c['pruned_points']}")
    for k, v in sorted(c["by_reason"].items()):
        print(f"    {k}: {v}")
    print(f"  timing: {', '.join(f'{k} {v:.1f}' for k, v in r.timing.items())}")
    for row in r.cheapest:
        p = row["by_gpus"]
        print(f"  {row['rate_rps']:g} req/s: " + (f"{p['config']} x {p['replicas']} = {p['gpus']} GPUs, TTFT p99 "
                                                f"{p['ttft_s'] * 1e3:.0f} ms, TPOT p99 {p['tpot_s'] * 1e3:.1f} ms"
                                                if p else "none meets the SLOs"))
    print(f"  frontier: {len(r.frontier)} points")


if __name__ == "__main__":
    main()
