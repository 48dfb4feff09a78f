"""``graphroof serve`` against published serving measurements: TensorRT-LLM's "Throughput Measurements" of
Llama 3.1 8B, Llama 3.3 70B and Llama 3.1 405B in FP8 on H100 SXM and H200 SXM
(``benchmarks/data/published/trtllm_perf_overview_fp8_hopper.csv``: its source, engine settings and traffic are
stated in the file's header).

Every request is queued at once (the source's "infinite rate": here a constant rate of 10^6 requests/s), input and
output lengths fixed, the source's request counts (``--requests-scale`` < 1: fewer); graphroof prices FP8 weights,
activations and KV cache (``Pricing(weights="fp8", activations="fp8", kv="fp8")``) under the ``tensorrt-llm``
preset (TensorRT-LLM 1.0's PyTorch backend, decode under CUDA graphs; ``--runtime`` to compare), 95% of the device
memory for the engine (``--kv_cache_free_gpu_mem_fraction 0.95``), continuous batching with an 8,192-token step
budget and up to 2,048 running sequences (the benchmark's CUDA-graph batch sizes go to 8,192; its scheduler caps are
not stated), and TensorRT-LLM's default capacity policy, guaranteed-no-evict (``admission="reserve"``: a request is
admitted only with KV blocks for its whole output; ``--admission on-demand`` is vLLM's, with preemption by
recompute).  Models: Llama 3.1's configs (131,072 positions, llama3 rope scaling; 8B and 70B from
``graphroof/validate/data/models``, 405B from ``benchmarks/data/published/llama-3.1-405b.json``).  Printed: per row
the published and predicted output tokens/s and the error (predicted / published - 1); per table and overall the
median and worst absolute error; wall time and peak RSS.

Run: ``python benchmarks/serve_published.py [--requests-scale 0.2] [--tables 8b-h100,70b-h200]``.
"""

from __future__ import annotations

import argparse
import csv
import resource
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tabulate import tabulate  # noqa: E402

HERE = Path(__file__).resolve().parent / "data" / "published"
DATA = HERE / "trtllm_perf_overview_fp8_hopper.csv"
MODELS = Path(__file__).resolve().parents[1] / "graphroof" / "validate" / "data" / "models"
CONFIGS = {"llama-3.1-8b": MODELS / "llama-3.1-8b" / "config.json",
           "llama-3.3-70b": MODELS / "llama-3.3-70b" / "config.json",
           "llama-3.1-405b": HERE / "llama-3.1-405b.json"}


def rows() -> list[dict]:
    with DATA.open(encoding="utf-8") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def table_of(r: dict) -> str:
    """``8b-h100``: the model's size and the GPU, the name ``--tables`` selects by."""
    return f"{r['model'].rsplit('-', 1)[1]}-{r['gpu'].split('-')[0]}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests-scale", type=float, default=1.0)
    ap.add_argument("--admission", default="reserve", choices=("reserve", "on-demand"))
    ap.add_argument("--runtime", default="tensorrt-llm")
    ap.add_argument("--tables", default="", help="comma-separated: 8b-h100, 8b-h200, 70b-h100, 70b-h200, "
                    "405b-h100, 405b-h200 (default all)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from graphroof.llm import Pricing
    from graphroof.serving import serve

    want = {t.strip() for t in args.tables.split(",") if t.strip()}
    out, errs = [], {}
    t0 = time.perf_counter()
    for r in rows():
        name = table_of(r)
        if want and name not in want:
            continue
        isl, osl, n, tp = int(r["isl"]), int(r["osl"]), int(r["num_requests"]), int(r["tp"])
        n = max(200, int(n * args.requests_scale))
        pricing = Pricing(tp=tp, weights="fp8", activations="fp8", kv="fp8", gpu_mem_util=0.95, runtime=args.runtime)
        res = serve(str(CONFIGS[r["model"]]), hw=r["gpu"], rate=[1e6], arrival="constant", requests=n,
                    prompt_len=f"fixed:{isl}", gen_len=f"fixed:{osl}", max_batched_tokens=8192, max_num_seqs=2048,
                    pricing=pricing, admission=args.admission)
        p = res.points[0]
        pred, meas = p.output_tokens_per_s, float(r["output_tokens_per_s"])
        err = pred / meas - 1
        errs.setdefault(name, []).append(abs(err))
        out.append([name, f"TP{tp}", f"{isl}/{osl}", n, meas, round(pred), f"{100 * err:+.1f}%", f"{p.kv_used_max:.0%}",
                    p.preemptions])
        print(f"{name} {isl}/{osl}: {meas:.0f} vs {pred:.0f} ({100 * err:+.1f}%)", file=sys.stderr)
    wall = time.perf_counter() - t0
    print(f"TensorRT-LLM v1.0 perf-overview, FP8 on H100 / H200 SXM, all requests queued at once; graphroof runtime "
          f"{args.runtime}, admission {args.admission}")
    print(tabulate(out, headers=["table", "TP", "ISL/OSL", "requests", "published out tok/s", "graphroof out tok/s",
                                 "error", "KV peak", "preempted"], floatfmt=".0f"))
    every = [e for v in errs.values() for e in v]
    for name, v in errs.items():
        print(f"{name}: median |error| {100 * statistics.median(v):.1f}%, worst {100 * max(v):.1f}% ({len(v)} rows)")
    print(f"all: median |error| {100 * statistics.median(every):.1f}%, worst {100 * max(every):.1f}% over {len(every)} "
          f"rows; wall {wall:.1f} s, peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
