"""Score ``graphroof serve`` on the NIM benchmarking rows at concurrency > 1 (the serving simulator under load).

    PYTHONPATH=. python tools/nim_serve.py [--models 8b,70b] [--concurrency 5,25] [--kv fp8] [--rows out.csv]

``graphroof/validate/data/nim_llm_h100.csv`` holds NVIDIA NIM for LLMs 1.8's published tables (Llama-3.1-8B-Instruct
on one H100, Llama-3.3-70B-Instruct TP2 on two, fp8 profiles; each (input, output) length pair at concurrency 1 to
250; AIPerf streaming TTFT, ITL and output tokens/s).  ``graphroof validate --dataset nim`` scores the concurrency-1
rows through ``graphroof llm``; this tool scores the others through ``graphroof.serve``: a closed loop of N users
(``arrival='closed:N'``: each user sends its next request when the last one finished, as the benchmark's concurrency
mode does), ``runtime='nim'``, ``weights='fp8'``, ``kv`` (default fp8), TensorRT-LLM's guaranteed-no-evict admission
(``admission='reserve'``: a request starts only with KV blocks for its prompt and whole output, its default capacity
scheduler policy), ``max_batched_tokens`` 8192 (trtllm-build's default ``max_num_tokens``), ``max_num_seqs`` 256,
``max(40, 5 N)`` requests (the point's figures are the steady state: each user's first and last request left out).  Nothing is fitted here.

Scored: ITL (the simulation's mean TPOT) and output tokens/s (``error`` as ``graphroof validate`` takes it: on a
throughput, measured / predicted - 1).  TTFT is printed but not scored: under concurrency it is mostly queueing, and
a deterministic closed loop of equal requests that all start at t = 0 stays in step (every user's prefill lands in
the same few steps), which a real server's jitter and the benchmark's warm-up break up.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

from graphroof.validate.data import DATA_DIR
from graphroof.validate.result import stats_of

DATA = "nim_llm_h100.csv"
MAX_BATCHED_TOKENS = 8192
MAX_NUM_SEQS = 256


def configs(models: set[str], conc: set[int] | None) -> dict[tuple, dict[str, float]]:
    """(graphroof model, tp, input, output, concurrency) -> metric -> measured value, concurrency > 1 only."""
    out: dict[tuple, dict[str, float]] = {}
    with (DATA_DIR / DATA).open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            c = int(r["concurrency"])
            if c <= 1 or (conc and c not in conc) or not any(r["graphroof_model"].endswith(m) for m in models):
                continue
            key = (r["graphroof_model"], int(r["tp"]), int(r["input_tokens"]), int(r["output_tokens"]), c)
            out.setdefault(key, {})[r["metric"]] = float(r["value"])
    return out


def simulate(key: tuple, sources: dict, kv: str):
    """One closed-loop ``serve`` run of *key*; the point's figures."""
    from graphroof.hardware import load_hardware
    from graphroof.llm import Pricing, open_source
    from graphroof.serving.api import serve_one

    model, tp, p, g, c = key
    if model not in sources:
        sources[model] = open_source(str(DATA_DIR / "models" / model / "config.json"))
    res = serve_one(sources[model], hw=load_hardware("h100-sxm"),
                    pricing=Pricing(tp=tp, weights="fp8", kv=kv, runtime="nim"), arrival=f"closed:{c}",
                    prompt_len=f"fixed:{p}", gen_len=f"fixed:{g}", requests=max(40, 5 * c), admission="reserve",
                    max_batched_tokens=MAX_BATCHED_TOKENS, max_num_seqs=MAX_NUM_SEQS)
    return res.points[0]


def _stats(errs: list[float]) -> str:
    """n / median / p90 / worst |error| and the signed median, as ``graphroof validate`` states them."""
    s = stats_of(errs)
    if s is None:
        return "n 0"
    return (f"n {s.n}, median {100 * s.median_abs:.1f}%, p90 {100 * s.p90_abs:.1f}%, worst {100 * s.worst_abs:.1f}%, "
            f"signed median {100 * s.signed_median:+.1f}%")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="8b,70b", help="model name endings, comma-separated (default 8b,70b)")
    ap.add_argument("--concurrency", default="", help="only these concurrencies, comma-separated (default all > 1)")
    ap.add_argument("--kv", default="fp8", help="KV-cache dtype (default fp8)")
    ap.add_argument("--rows", type=Path, help="write one row per figure to this CSV")
    a = ap.parse_args(argv)
    conc = {int(x) for x in a.concurrency.split(",") if x.strip()} or None
    todo = configs({m.strip() for m in a.models.split(",") if m.strip()}, conc)
    sources: dict = {}
    out, t0 = [], time.perf_counter()
    for i, key in enumerate(sorted(todo)):
        pt = simulate(key, sources, a.kv)
        m = todo[key]
        itl, tps, ttft = float(pt.tpot_s["mean"]), float(pt.output_tokens_per_s), float(pt.ttft_s["mean"])
        e_itl, e_tps = itl / (m["itl_ms"] * 1e-3) - 1, m["output_tokens_per_s"] / tps - 1
        out.append((key, m, itl, tps, ttft, e_itl, e_tps))
        print(f"[{i + 1}/{len(todo)} {time.perf_counter() - t0:.0f} s] {key[0]} TP{key[1]} {key[2]}/{key[3]} "
              f"concurrency {key[4]}: ITL {m['itl_ms']:.2f} ms vs {1e3 * itl:.2f} ({100 * e_itl:+.1f}%), "
              f"tok/s {m['output_tokens_per_s']:.0f} vs {tps:.0f} ({100 * e_tps:+.1f}%), "
              f"TTFT {m['ttft_ms']:.0f} ms vs mean {1e3 * ttft:.0f} (not scored)", file=sys.stderr)
    for model in sorted({k[0] for k in todo}):
        mine = [o for o in out if o[0][0] == model]
        print(f"{model} ITL: {_stats([o[5] for o in mine])}")
        print(f"{model} output tok/s: {_stats([o[6] for o in mine])}")
    print(f"all ITL and tok/s: {_stats([e for o in out for e in (o[5], o[6])])}")
    if a.rows:
        with a.rows.open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["model", "tp", "input_tokens", "output_tokens", "concurrency", "itl_ms", "itl_pred_ms",
                        "itl_error", "tok_s", "tok_s_pred", "tok_s_error", "ttft_ms", "ttft_mean_pred_ms"])
            for key, m, itl, tps, ttft, e_itl, e_tps in out:
                w.writerow([*key, m["itl_ms"], f"{1e3 * itl:.4f}", f"{e_itl:.4f}", m["output_tokens_per_s"],
                            f"{tps:.2f}", f"{e_tps:.4f}", m["ttft_ms"], f"{1e3 * ttft:.2f}"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
