"""``graphroof serve`` against published serving measurements: TensorRT-LLM's "Throughput Measurements" of
Llama 3.1 8B, Llama 3.3 70B, Llama 3.1 405B and Qwen3-235B-A22B (MoE) in FP8 on H100 SXM and H200 SXM
(``benchmarks/data/published/trtllm_perf_overview_fp8_hopper.csv``: its source, engine settings and traffic are
stated in the file's header).

Every request is queued at once (the source's "infinite rate": here a constant rate of 10^6 requests/s), input and
output lengths fixed, the source's request counts (``--requests-scale`` < 1: fewer, a smaller batch than the
source ran: not comparable for the large models); graphroof prices FP8 weights and KV cache
(``Pricing(weights="fp8", kv="fp8")``; the preset's fp8 GEMMs quantize each GEMM input, and the residual stream,
norms and all-reduces stay in the model dtype, as ModelOpt FP8 checkpoints run in TensorRT-LLM; ``--activations-fp8``
prices every activation in fp8, the bound) under the ``tensorrt-llm``
preset (TensorRT-LLM 1.0's PyTorch backend, decode under CUDA graphs; ``--runtime`` to compare), 95% of the device
memory for the engine (``--kv_cache_free_gpu_mem_fraction 0.95``), continuous batching with the step budget and
the running-sequence cap trtllm-bench sets when none is given (:func:`bench_caps`: its
``tensorrt_llm/bench/build/tuning.py`` ``calc_engine_setting`` / ``finetune_setting``, from the checkpoint's size,
the KV bytes per token, the device memory and the row's lengths), and TensorRT-LLM's default capacity policy, guaranteed-no-evict (``admission="reserve"``: a request is
admitted only with KV blocks for its whole output; ``--admission on-demand`` is vLLM's, with preemption by
recompute).  The MoE rows run as the source runs MoE models (attention data-parallel over the 8 GPUs, experts
expert-parallel; the source does not give the EP degree: 8 assumed, the CSV's ``attention_dp`` / ``ep``): graphroof
prices them with ``Pricing(tp=1, dp=8, ep=8)``, trtllm-bench's caps (from its TP 8 mapping, as its tuning computes
them) taken per attention-DP rank (each rank schedules its own batch: ``graphroof serve`` takes ``max_num_seqs`` /
``max_batched_tokens`` as a DP rank's), so the replica's caps are 8x those and a prompt's chunk at most one rank's.  Models:
Qwen3-235B-A22B's config (``benchmarks/data/published/qwen3-235b-a22b.json``); Llama 3.1's configs (131,072 positions, llama3 rope scaling; 8B and 70B from
``graphroof/validate/data/models``, 405B from ``benchmarks/data/published/llama-3.1-405b.json``).  Printed: per row
the published and predicted output tokens/s and the error (predicted / published - 1); per table and overall the
median and worst absolute error; wall time and peak RSS.

Run: ``python benchmarks/serve_published.py [--requests-scale 0.2] [--tables 8b-h100,70b-h200] [--ep-imbalance 2]``.
``--ep-imbalance`` prices the MoE rows with that busiest-rank load (2026-11-28, four of the rows: H200 128/2048 and
2048/128, H100 128/2048 and 5000/500 are +18 / +80 / +86 / +72% by default, +0 / +14 / +58 / +28% at 2.0: the
prefill-heavy error follows the imbalance, the H100 decode-heavy one does not).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _published import published_rows  # noqa: E402
from tabulate import tabulate  # noqa: E402

HERE = Path(__file__).resolve().parent / "data" / "published"
DATA = HERE / "trtllm_perf_overview_fp8_hopper.csv"
MODELS = Path(__file__).resolve().parents[1] / "graphroof" / "validate" / "data" / "models"
CONFIGS = {"llama-3.1-8b": MODELS / "llama-3.1-8b" / "config.json",
           "llama-3.3-70b": MODELS / "llama-3.3-70b" / "config.json",
           "llama-3.1-405b": HERE / "llama-3.1-405b.json",
           "qwen3-235b-a22b": HERE / "qwen3-235b-a22b.json"}


def rows() -> list[dict]:
    return published_rows(DATA.name)


def llama_params(c: dict) -> float:
    """Parameters of a Llama-shaped config (embeddings, attention, gated MLP, norms, LM head); a Qwen3-MoE one's MLP
    is its experts and router (``num_experts`` x 3 x hidden x ``moe_intermediate_size`` + hidden x experts)."""
    h, i, n, v = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    hd = c.get("head_dim") or h // c["num_attention_heads"]
    attn = h * hd * (2 * c["num_attention_heads"] + 2 * c["num_key_value_heads"])
    mlp = c["num_experts"] * 3 * h * c["moe_intermediate_size"] + h * c["num_experts"] if "num_experts" in c \
        else 3 * h * i
    return float(2 * v * h + n * (attn + mlp + 2 * h) + h)


def bench_caps(c: dict, tp: int, isl: int, osl: int, device_gib: float, fraction: float = 0.95) -> tuple[int, int]:
    """(max batch size, max num tokens) as trtllm-bench picks them when not given (TensorRT-LLM
    ``tensorrt_llm/bench/build/tuning.py``): FP8 weights and KV (1 byte per element), the KV heads at least one per
    TP rank, the requests that fit ``fraction`` of the memory left beside the weights at ``isl + osl`` tokens each,
    capped at 4,096; the batch rounded up to 64 / 128 / 256 steps, the tokens to batch x (1 + isl / osl), capped at
    32,768, at least 2,048, rounded up to 256 / 512 / 1,024 steps."""
    hd = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    per_token_gib = 2 * c["num_hidden_layers"] * max(tp, c["num_key_value_heads"]) * hd * 1.0 / 1024 ** 3
    avail = device_gib * tp - llama_params(c) * 1.0 / 1024 ** 3
    raw_bs = min(avail * fraction / (per_token_gib * (isl + osl)), 4096)
    raw_tok = min(raw_bs * (1 + isl / osl), 32768)
    if raw_bs < 256:
        bs = max(64, 32 * math.ceil(raw_bs / 32))
    else:
        bs = (128 if raw_bs < 1024 else 256) * math.ceil(raw_bs / (128 if raw_bs < 1024 else 256))
    if raw_tok < 4096:
        tok = max(2048, 256 * math.ceil(raw_tok / 256))
    else:
        tok = (512 if raw_tok < 8192 else 1024) * math.ceil(raw_tok / (512 if raw_tok < 8192 else 1024))
    return int(bs), int(tok)


def table_of(r: dict) -> str:
    """``8b-h100``: the model's size and the GPU, the name ``--tables`` selects by."""
    return f"{r['model'].rsplit('-', 1)[1]}-{r['gpu'].split('-')[0]}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests-scale", type=float, default=1.0)
    ap.add_argument("--admission", default="reserve", choices=("reserve", "on-demand"))
    ap.add_argument("--runtime", default="tensorrt-llm")
    ap.add_argument("--activations-fp8", action="store_true", help="price every activation in fp8 (a bound)")
    ap.add_argument("--ep-imbalance", type=float, default=None, help="the MoE rows' busiest EP rank's routed tokens "
                    "over the mean (default: the multinomial maximum of uniform routing, about 1 here)")
    ap.add_argument("--tables", default="", help="comma-separated: 8b-h100, 8b-h200, 70b-h100, 70b-h200, "
                    "405b-h100, 405b-h200, a22b-h100, a22b-h200 (default all)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from graphroof.hardware import load_hardware
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
        dp, ep = int(r["attention_dp"]), int(r["ep"])
        n = max(200, int(n * args.requests_scale))
        layout = dict(tp=tp // dp, dp=dp, ep=ep) if dp > 1 else dict(tp=tp)
        if ep > 1 and args.ep_imbalance is not None:
            layout["ep_imbalance"] = args.ep_imbalance
        pricing = Pricing(**layout, weights="fp8", activations="fp8" if args.activations_fp8 else None, kv="fp8",
                          gpu_mem_util=0.95, runtime=args.runtime)
        cfg = json.loads(CONFIGS[r["model"]].read_text(encoding="utf-8"))
        bs, tok = bench_caps(cfg, tp, isl, osl, load_hardware(r["gpu"]).mem_capacity_bytes / 1024 ** 3)
        # the caps are an attention-DP rank's: graphroof serve gives each of the dp ranks its own scheduler
        res = serve(str(CONFIGS[r["model"]]), hw=r["gpu"], rate=[1e6], arrival="constant", requests=n,
                    prompt_len=f"fixed:{isl}", gen_len=f"fixed:{osl}", max_batched_tokens=tok, max_num_seqs=bs,
                    pricing=pricing, admission=args.admission)
        p = res.points[0]
        pred, meas = p.output_tokens_per_s, float(r["output_tokens_per_s"])
        err = pred / meas - 1
        errs.setdefault(name, []).append(abs(err))
        out.append([name, f"TP{tp}" if dp == 1 else f"DP{dp} EP{ep}", f"{isl}/{osl}", n, f"{bs} / {tok}", meas, round(pred), f"{100 * err:+.1f}%",
                    f"{p.kv_used_max:.0%}"])
        print(f"{name} {isl}/{osl}: {meas:.0f} vs {pred:.0f} ({100 * err:+.1f}%)", file=sys.stderr)
    wall = time.perf_counter() - t0
    print(f"TensorRT-LLM v1.0 perf-overview, FP8 on H100 / H200 SXM, all requests queued at once; graphroof runtime "
          f"{args.runtime}, admission {args.admission}")
    print(tabulate(out, headers=["table", "TP", "ISL/OSL", "requests", "max seqs / tokens", "published out tok/s",
                                 "graphroof out tok/s", "error", "KV peak"], floatfmt=".0f"))
    every = [e for v in errs.values() for e in v]
    for kind, names in (("dense", [k for k in errs if not k.startswith("a22b")]),
                        ("MoE", [k for k in errs if k.startswith("a22b")])):
        part = [e for k in names for e in errs[k]]
        if part and len(names) < len(errs):
            print(f"{kind}: median |error| {100 * statistics.median(part):.1f}%, worst {100 * max(part):.1f}% over "
                  f"{len(part)} rows")
    for name, v in errs.items():
        print(f"{name}: median |error| {100 * statistics.median(v):.1f}%, worst {100 * max(v):.1f}% ({len(v)} rows)")
    print(f"all: median |error| {100 * statistics.median(every):.1f}%, worst {100 * max(every):.1f}% over {len(every)} "
          f"rows; wall {wall:.1f} s, peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
