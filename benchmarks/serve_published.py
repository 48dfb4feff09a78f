"""``graphroof serve`` against a published serving measurement: TensorRT-LLM's "Throughput Measurements" of
Llama 3.1 8B on one H100 SXM in FP8 (``benchmarks/data/published/trtllm_perf_overview_llama31_8b_h100.csv``: its
source, engine settings and traffic are stated in the file's header).

Every request is queued at once (the source's "infinite rate": here a constant rate of 10^6 requests/s), input and
output lengths fixed, the source's request counts; graphroof prices FP8 weights, activations and KV cache
(``Pricing(weights="fp8", activations="fp8", kv="fp8")``), 95% of the device memory for the engine
(``--kv_cache_free_gpu_mem_fraction 0.95``), continuous batching with an 8,192-token step budget and up to 2,048
running sequences (the benchmark's CUDA-graph batch sizes go to 8,192; its scheduler caps are not stated), and
TensorRT-LLM's default capacity policy, guaranteed-no-evict (``admission="reserve"``: a request is admitted only
with KV blocks for its whole output; ``--admission on-demand`` is vLLM's, with preemption by recompute).  The
model is the zoo's Llama-3-8B config with Llama 3.1's 131,072 positions (same shapes).  Printed: per row the
published and predicted output tokens/s and the error; then median and worst absolute error, and wall time.

Run: ``python benchmarks/serve_published.py [--requests-scale 0.2]`` (scale < 1 simulates fewer requests per row).
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tabulate import tabulate  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "published" / "trtllm_perf_overview_llama31_8b_h100.csv"
ZOO = Path(__file__).resolve().parents[1] / "graphroof" / "frontends" / "zoo_configs" / "llama-3-8b.json"


def rows() -> list[dict]:
    with DATA.open(encoding="utf-8") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests-scale", type=float, default=1.0)
    ap.add_argument("--admission", default="reserve", choices=("reserve", "on-demand"))
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from graphroof.llm import Pricing
    from graphroof.serving import serve

    cfg = json.loads(ZOO.read_text(encoding="utf-8"))
    cfg["max_position_embeddings"] = 131072
    tmp = Path(tempfile.mkdtemp()) / "config.json"
    tmp.write_text(json.dumps(cfg), encoding="utf-8")
    pricing = Pricing(weights="fp8", activations="fp8", kv="fp8", gpu_mem_util=0.95)
    out, errs = [], []
    t0 = time.perf_counter()
    for r in rows():
        isl, osl, n = int(r["isl"]), int(r["osl"]), int(r["num_requests"])
        n = max(200, int(n * args.requests_scale))
        res = serve(str(tmp), hw="h100", rate=[1e6], arrival="constant", requests=n, prompt_len=f"fixed:{isl}",
                    gen_len=f"fixed:{osl}", max_batched_tokens=8192, max_num_seqs=2048, pricing=pricing,
                    admission=args.admission)
        p = res.points[0]
        pred, meas = p.output_tokens_per_s, float(r["output_tokens_per_s"])
        err = pred / meas - 1
        errs.append(abs(err))
        out.append([f"{isl}/{osl}", n, meas, round(pred), f"{100 * err:+.1f}%", f"{p.kv_used_max:.0%}",
                    p.preemptions])
    wall = time.perf_counter() - t0
    print("TensorRT-LLM v1.0 perf-overview, Llama 3.1 8B FP8 on 1x H100 SXM, all requests queued at once; "
          f"graphroof admission {args.admission}")
    print(tabulate(out, headers=["ISL/OSL", "requests", "published out tok/s", "graphroof out tok/s", "error",
                                 "KV peak", "preempted"], floatfmt=".0f"))
    print(f"median |error| {100 * statistics.median(errs):.1f}%, worst {100 * max(errs):.1f}% over {len(errs)} rows; "
          f"wall {wall:.1f} s, peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
