"""graphroof's predictions against the H100 measurements in benchmarks/data/h100_2026-11-27 (gpu_measure.py).

    PYTHONPATH=. python benchmarks/compare_h100_measured.py [--data DIR]

Everything is predicted through the code path users run, never a side model:

* **GEMMs**: ``graphroof.analyze("llama-3-8b", hw="h100", runtime="serving", dtype="bf16", seq=N)`` (what
  ``graphroof analyze llama-3-8b --hw h100 --runtime serving --dtype bf16 --seq N`` prints); layer 0's GEMM
  kernels (fused QKV, O, fused gate+up, down) and the LM head, matched by (M, N, K) to the measured bf16 rows.
  The measured times are CUDA-graph replays (no launch gaps), so the prediction compared is the kernel's realistic
  time minus its launch overhead; both columns are printed.
* **Whole model, PyTorch eager**: ``graphroof.llm.estimate("llama-3-8b", hw="h100", runtime="eager", ...)``
  against transformers' eager ``LlamaForCausalLM`` (sdpa attention, random bf16 weights): TTFT against the
  measured prefill wall time, TPOT (a 2-token generation: one decode step at the prompt's context) against the
  measured decode-step wall time; the profiler's GPU kernel time is printed beside (wall - kernels = host time).

Prints median and worst |predicted / measured - 1| per group, then each row; wall time and peak RSS at the end.
"""

from __future__ import annotations

import argparse
import csv
import resource
import statistics
import sys
import time
from pathlib import Path

from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import graphroof  # noqa: E402
from graphroof.llm import estimate  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "h100_2026-11-27"


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _err(p: float, m: float) -> float:
    return p / m - 1


def _summary(name: str, errs: list[float]) -> list:
    a = [abs(e) for e in errs]
    return [name, len(a), f"{100 * statistics.median(a):.1f}%", f"{100 * max(a):.1f}%",
            f"{100 * statistics.mean(errs):+.1f}%"]


def gemms(data: Path) -> tuple[list, list]:
    measured = {(int(r["M"]), int(r["N"]), int(r["K"])): float(r["time_ms"]) / 1e3
                for r in _rows(data / "measure_gemm.csv")
                if r["model"] == "llama-3-8b" and r["dtype"] == "bf16" and r["time_ms"]}
    names = {"q_proj": "qkv", "o_proj": "o", "gate_proj": "gate_up", "down_proj": "down", "lm_head": "lm_head"}
    rows, summary = [], []
    by_gemm: dict[str, list[float]] = {}
    for seq in (1, 8, 32, 128, 512, 1024, 4096):
        a = graphroof.analyze("llama-3-8b", hw="h100", runtime="serving", dtype="bf16", seq=seq)
        for k in a.to_dict()["kernels"]:
            scope = k["scope"]
            if not k["gemm_mnk"] or not (scope.startswith("model.layers.0.") or scope == "lm_head"):
                continue
            key = tuple(k["gemm_mnk"])
            if key not in measured:
                continue
            name = names.get(scope.rsplit(".", 1)[-1], scope)
            pred = k["time_realistic_s"] - k["t_launch_s"]
            e = _err(pred, measured[key])
            by_gemm.setdefault(name, []).append(e)
            rows.append([name, *key, f"{measured[key] * 1e6:.1f}", f"{pred * 1e6:.1f}",
                         f"{k['time_realistic_s'] * 1e6:.1f}", f"{100 * e:+.1f}%"])
    for name, errs in by_gemm.items():
        summary.append(_summary(f"GEMM {name} (bf16, H100)", errs))
    summary.append(_summary("GEMM all", [e for v in by_gemm.values() for e in v]))
    return summary, rows


def model(data: Path) -> tuple[list, list]:
    rows, summary = [], []
    errs = {"prefill": [], "decode": []}
    for r in _rows(data / "measure_model.csv"):
        b, ctx = int(r["batch"]), int(r["context"])
        wall, gpu = float(r["wall_ms"]) / 1e3, float(r["gpu_kernel_ms"]) / 1e3
        if r["phase"] == "prefill":
            p = int(r["prompt"])
            c = estimate("llama-3-8b", hw="h100", prompt=p, gen=1, batch=b, runtime="eager").configs[0]
            pred = c.ttft_s
        else:
            c = estimate("llama-3-8b", hw="h100", prompt=ctx, gen=2, batch=b, runtime="eager").configs[0]
            pred = c.tpot_s
            p = 1
        e = _err(pred, wall)
        errs[r["phase"]].append(e)
        rows.append([r["phase"], b, p, ctx, f"{wall * 1e3:.2f}", f"{gpu * 1e3:.2f}", f"{pred * 1e3:.2f}",
                     f"{100 * e:+.1f}%"])
    for ph, es in errs.items():
        summary.append(_summary(f"llama-3-8b eager {ph} (H100)", es))
    return summary, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    a = ap.parse_args()
    t0 = time.perf_counter()
    s1, r1 = gemms(a.data)
    s2, r2 = model(a.data)
    head = ["group", "n", "median |err|", "worst |err|", "mean err"]
    print(tabulate(s1 + s2, headers=head, tablefmt="github"))
    print()
    print(tabulate(r1, headers=["gemm", "M", "N", "K", "measured us", "predicted us (no launch)",
                                "realistic us", "err"], tablefmt="github"))
    print()
    print(tabulate(r2, headers=["phase", "batch", "prompt", "context", "measured wall ms", "measured GPU ms",
                                "predicted ms", "err"], tablefmt="github"))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
    print(f"\nwall {time.perf_counter() - t0:.1f} s, peak RSS {rss:.0f} MB")


if __name__ == "__main__":
    main()
