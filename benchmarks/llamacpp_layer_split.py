"""The ``llama.cpp`` preset out of sample: llama.cpp's multi-GPU decode (its default layer split) against
``graphroof llm --runtime llama.cpp --pp N``.

Data: ``benchmarks/data/published/llamacpp_layer_split.csv`` (XiongjieDai/GPU-Benchmarks-on-LLM-Inference, the
"GPU * N" rows; cited in the file's header): llama-bench ``tg 512 - 8192`` of Llama 3 8B / 70B, F16 and Q4_K_M, on
2-8 RTX 3090 / 4090 and 4 RTX A6000 / A40 / L40S / A100 / H100 PCIe.  llama.cpp splits the layers over the GPUs and
a token passes them one after the other; graphroof prices each row as ``graphroof llm MODEL --hw HW --pp N
--runtime llama.cpp --dtype fp16 [--weights int4] --prompt 1 --gen min(N, 8191)`` (one sequence: a decode round is
the stages' sum plus the boundary sends, graphroof.llm.pp), tokens/s = 1 / TPOT.  The preset's three rates were
fitted on the single-GPU rows only (graphroof validate --dataset llamacpp): none of these rows was used.

Printed: per configuration the median error and its rows; per GPU count and overall the median and worst |error|
(the validation's convention: on the time a token, positive = graphroof too slow); wall time and peak RSS.
Run: ``python benchmarks/llamacpp_layer_split.py``.
"""

from __future__ import annotations

import resource
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _published import published_rows  # noqa: E402
from tabulate import tabulate  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "published" / "llamacpp_layer_split.csv"


def rows() -> list[dict]:
    return published_rows(DATA.name)


def main() -> None:
    warnings.simplefilter("ignore")
    from graphroof.llm import Engine, Pricing

    t0 = time.perf_counter()
    groups: dict[tuple[str, str, str, int], list[dict]] = {}
    for r in rows():
        groups.setdefault((r["graphroof_model"], r["graphroof_hw"], r["graphroof_weights"], int(r["gpus"])), []).append(r)
    table, errs, by_n = [], [], {}
    for (model, hw, w, n), rs in groups.items():
        eng = Engine(model, hw=hw, dtype="fp16",
                     pricing=Pricing(pp=n, runtime="llama.cpp", weights=None if w == "fp16" else w))
        f = eng.price([1] * len(rs), [1] * len(rs), [min(int(r["gen"]), 8191) for r in rs])
        e = [float(r["tokens_per_s"]) * float(t) - 1 for r, t in zip(rs, f.tpot_s)]  # measured / predicted - 1
        errs += e
        by_n.setdefault(n, []).extend(e)
        table.append([rs[0]["gpu"], rs[0]["model"].replace("Meta-Llama-3-", ""), len(rs),
                      f"{100 * statistics.median(e):+.1f}%", " ".join(f"{100 * x:+.0f}" for x in e)])
    wall = time.perf_counter() - t0
    print("llama.cpp layer split (XiongjieDai/GPU-Benchmarks-on-LLM-Inference) vs graphroof llm --runtime llama.cpp "
          "--pp N; error on the time a token (+: graphroof too slow)")
    print(tabulate(table, headers=["GPUs", "model", "rows", "median error", "tg 512 / 1024 / 4096 / 8192 (%)"]))
    for n in sorted(by_n):
        a = [abs(x) for x in by_n[n]]
        print(f"{n} GPUs: median |error| {100 * statistics.median(a):.1f}%, worst {100 * max(a):.1f}% over {len(a)} rows")
    a = [abs(x) for x in errs]
    print(f"all: median |error| {100 * statistics.median(a):.1f}%, worst {100 * max(a):.1f}% over {len(a)} rows; "
          f"wall {wall:.0f} s, peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
