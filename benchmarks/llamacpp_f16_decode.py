"""``graphroof llm`` decode against llama.cpp's published F16 decode speeds on one GPU, including the December 2023
LLaMA-1 rows that ``graphroof validate --dataset llamacpp`` (the May 2024 Llama 3 tables) does not hold.

Data: ``benchmarks/data/published/llamacpp_f16_decode.csv`` (XiongjieDai/GPU-Benchmarks-on-LLM-Inference, cited in the
file's header): llama-bench "tg N", N tokens generated one at a time from an empty context, F16 weights, on RTX 3090,
RTX 4090, RTX A6000 and H100 PCIe.  Each row is priced as ``graphroof llm MODEL --hw HW --dtype fp16 --prompt 1 --gen N
--runtime R`` and its tokens/s taken as 1 / TPOT (the mean decode step over the N - 1 steps), under three presets:
``llama.cpp`` (ggml's kernels: graphroof/fuse/presets/llama.cpp.toml, fitted on the validate rows), ``eager`` (every
op its own kernel, a launch each, no CUDA graph) and ``serving`` (fused norms / rotary / QKV, decode under a CUDA
graph) beside it.  F16 decode at
batch 1 streams every weight once per token (a GEMV), the regime where engines differ least.

Printed: per row the published and predicted tokens/s and the error (predicted / published - 1); per preset the median
and worst absolute error; wall time and peak RSS.  Run: ``python benchmarks/llamacpp_f16_decode.py``.
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

DATA = Path(__file__).resolve().parent / "data" / "published" / "llamacpp_f16_decode.csv"
PRESETS = ("llama.cpp", "eager", "serving")


def rows() -> list[dict]:
    return published_rows(DATA.name)


def main() -> None:
    warnings.simplefilter("ignore")
    from graphroof.llm import Engine, Pricing

    t0 = time.perf_counter()
    engines: dict[tuple[str, str, str], Engine] = {}
    out, errs = [], {p: [] for p in PRESETS}
    for r in rows():
        gen, meas = int(r["gen"]), float(r["tokens_per_s"])
        line = [r["gpu"], r["model"], gen, "" if r["gen_stated"] == "yes" else "assumed", meas]
        for preset in PRESETS:
            key = (r["zoo_model"], r["graphroof_hw"], preset)
            if key not in engines:
                engines[key] = Engine(r["zoo_model"], hw=r["graphroof_hw"], pricing=Pricing(runtime=preset),
                                      dtype="fp16")
            # llama-bench's first token has no prompt before it; graphroof needs one: tg 8192 of an 8,192-position
            # model is priced as 8,191 generated tokens after 1 (the mean step over 8,190 steps instead of 8,191)
            cfg = engines[key].estimate(prompt=1, gen=min(gen, 8191), batch=1).configs[0]
            pred = 1.0 / cfg.tpot_s
            err = pred / meas - 1
            errs[preset].append(abs(err))
            line += [round(pred, 2), f"{100 * err:+.1f}%"]
        out.append(line)
    wall = time.perf_counter() - t0
    print("llama.cpp F16 decode (XiongjieDai/GPU-Benchmarks-on-LLM-Inference) vs graphroof llm --prompt 1 --gen N")
    print(tabulate(out, headers=["GPU", "model", "gen", "gen", "published tok/s",
                                 *[h for p in PRESETS for h in (f"{p} tok/s", f"{p} error")]]))
    for p in PRESETS:
        print(f"{p}: median |error| {100 * statistics.median(errs[p]):.1f}%, worst {100 * max(errs[p]):.1f}% over "
              f"{len(errs[p])} rows")
    print(f"wall {wall:.1f} s, peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
