"""``graphroof.serve`` cost: wall time, peak RSS and requests simulated per second at 1,000 / 10,000 / 100,000
requests, and the max-rate search time, for Llama-3-8B (zoo, built on meta) on one H100.

Reference in the same run: the engine build plus ``Engine.estimate`` (what one static estimate costs) and the
step-cost build.  The simulations reuse one engine (``graphroof.serving.api`` builds it per call, so each row's
"wall" includes building the engine; "sim s" is the simulation alone).  Workload: Poisson arrivals at --rate
requests/s, prompts lognormal(1024, 512), outputs lognormal(256, 128), vLLM defaults (8192 batched tokens, 256
sequences).

A disaggregated 1p1d row (one H100 per pool, the profile's inter-node KV link) beside the aggregated run of as many
requests (``min(10,000, --max-requests)``): wall, peak RSS, figures and the wall ratio.

Run: ``python benchmarks/bench_serve.py [--max-requests 100000] [--rate 12]``.
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-requests", type=int, default=100_000)
    ap.add_argument("--rate", type=float, default=12.0)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import graphroof.serving.api as api
    from graphroof.llm import Engine, Pricing

    t = time.perf_counter()
    eng = Engine("llama-3-8b", hw="h100", pricing=Pricing(max_batched_tokens=8192))
    est = eng.estimate(prompt=1024, gen=256, batch=[1, 64])
    ref = time.perf_counter() - t
    print(f"reference: Engine('llama-3-8b', h100) + estimate(1024, 256, batch=[1, 64]): {ref:.2f} s "
          f"(TTFT {est.configs[0].ttft_s * 1e3:.1f} ms, TPOT {est.configs[0].tpot_s * 1e3:.2f} ms at batch 1)")
    sim_time = [0.0]
    original = api.simulate

    def timed(*a, **k):
        t0 = time.perf_counter()
        out = original(*a, **k)
        sim_time[0] += time.perf_counter() - t0
        return out

    api.simulate = timed
    rows = []
    kw = dict(hw="h100", prompt_len="lognormal:1024:512", gen_len="lognormal:256:128")
    for n in (1_000, 10_000, 100_000):
        if n > args.max_requests:
            break
        sim_time[0] = 0.0
        t = time.perf_counter()
        r = api.serve_one("llama-3-8b", rate=(args.rate,), requests=n, **kw)
        wall = time.perf_counter() - t
        p = r.points[0]
        rows.append([n, f"{wall:.2f}", f"{sim_time[0]:.2f}", f"{n / sim_time[0]:,.0f}", f"{rss_mb():.0f}",
                     f"{p.throughput_rps:.2f}", f"{p.ttft_s['p50'] * 1e3:.0f}", f"{p.tpot_s['p50'] * 1e3:.1f}",
                     p.preemptions])
        print(f"{n:,} requests simulated in {rows[-1][2]} s", file=sys.stderr, flush=True)  # progress
    print(tabulate(rows, headers=["requests", "wall s", "sim s", "requests/s simulated", "peak RSS MB",
                                  "throughput rps", "TTFT p50 ms", "TPOT p50 ms", "preemptions"]))
    # disaggregated 1p1d (each pool one H100, the profile's inter-node link) vs the aggregated row of as many requests
    from graphroof.serving import serve

    n = min(10_000, args.max_requests)
    t = time.perf_counter()
    agg = api.serve_one("llama-3-8b", rate=(args.rate,), requests=n, **kw)
    agg_wall = time.perf_counter() - t
    t = time.perf_counter()
    dis = serve("llama-3-8b", rate=(args.rate,), requests=n, disagg="1p1d", **kw)
    dis_wall = time.perf_counter() - t
    rows = []
    for name, r, wall in (("aggregated, 1 x H100", agg, agg_wall), ("disaggregated 1p1d, 2 x H100", dis, dis_wall)):
        p = r.points[0]
        xfer = p.transfer_s["p50"] * 1e3 if p.transfer_s else None
        rows.append([name, n, f"{wall:.2f}", f"{rss_mb():.0f}", f"{p.throughput_rps:.2f}",
                     f"{p.ttft_s['p50'] * 1e3:.0f}", f"{p.tpot_s['p50'] * 1e3:.1f}",
                     "-" if xfer is None else f"{xfer:.2f}"])
    print(tabulate(rows, headers=["configuration", "requests", "wall s", "peak RSS MB", "throughput rps",
                                  "TTFT p50 ms", "TPOT p50 ms", "transfer p50 ms"]))
    print(f"disaggregated / aggregated wall: {dis_wall / agg_wall:.2f}x")
    sim_time[0] = 0.0
    t = time.perf_counter()
    r = api.serve_one("llama-3-8b", rate=(args.rate,), requests=1000, slo_ttft_s=0.5, slo_tpot_s=0.05, **kw)
    wall = time.perf_counter() - t
    m = r.max_rate or {}
    print(f"max-rate search (p99 TTFT <= 0.5 s, TPOT <= 50 ms, 1,000 requests per trial): wall {wall:.1f} s, "
          f"simulation {sim_time[0]:.1f} s, {m.get('iterations')} trials, max rate {m.get('rate_rps')} requests/s "
          f"(binding {m.get('binding_slo')}); peak RSS {rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
