"""llama.cpp batch-1 generation (``data/llamacpp_tg.csv``: XiongjieDai/GPU-Benchmarks-on-LLM-Inference, llama-bench
``tg N`` on one GPU) priced by the ``graphroof llm`` path under the ``llama.cpp`` preset.

Each row is ``graphroof llm MODEL --hw HW --runtime llama.cpp --dtype fp16 [--weights int4] --prompt 1 --gen N``:
llama-bench generates N tokens from an empty context, graphroof needs a one-token prompt, so the mean decode step
(TPOT) over the N - 1 steps after it is the row's time a token (tokens/s = 1 / TPOT; a model of 8,192 positions
prices tg 8192 as 8,191 tokens).  GGUF Q4_K_M weights are priced as ``int4`` with the preset's scale group (32):
5.0 bits a weight against the file's 4.9 (8B) / 4.82 (70B).  The figure is TPOT, so these rows set the TPOT error
band of the ``llama.cpp`` preset.
"""

from __future__ import annotations

from .context import Context, preset
from .data import excluded_reason, profile_or_none
from .llmrows import Batch
from .result import Row

__all__ = ["llamacpp_rows", "PRESET"]

PRESET = "llama.cpp"
DTYPE = "fp16"
#: llama-bench generates from an empty context; graphroof's configs give a model at most its positions
MAX_POSITIONS = 8192


def _rate(f, i: int) -> float:
    """Tokens per second of the decode steps: 1 / TPOT."""
    return 1.0 / float(f.tpot_s[i])


def llamacpp_rows(ctx: Context) -> list[Row]:
    from ..llm.engine import Pricing

    out: list[Row] = []
    batch = Batch()
    runtime = preset(PRESET, "eager")
    for where, r in ctx.rows("llamacpp_tg.csv"):
        model, prof, gen = r["graphroof_model"], r["graphroof_hw"], int(r["gen"])
        w = r["graphroof_weights"] if r["graphroof_weights"] != DTYPE else None
        g = min(gen, MAX_POSITIONS - 1)
        inputs = {"model": model, "gpu": r["gpu"], "weights": r["weights"], "gen": gen}
        size = "70B" if "70b" in model else "8B"
        regime = f"tg, {size} {r['weights']}"
        # the measured figure is a rate of decode steps, TPOT's inverse (Row.is_rate: scored on the time a token)
        row = Row("llamacpp", where, "llama.cpp (ggml CUDA, 2024)", prof, "", model, regime, "tpot", runtime,
                  r["metric"], r["unit"], inputs, float(r["value"]), is_rate=True)
        row.excluded = excluded_reason("llamacpp", r, ctx.rules)
        if profile_or_none(prof) is None:
            row.not_covered = f"no hardware profile {prof!r}"
        if not row.excluded and not row.not_covered:
            batch.add((model, prof, Pricing(weights=w, runtime=runtime), DTYPE), row, 1, 1, g, _rate)
            row.command = (f"graphroof llm {model} --hw {prof} --runtime {runtime} --dtype {DTYPE}"
                           + (f" --weights {w}" if w else "") + f" --prompt 1 --gen {g} -f json: configs[0].tpot_s"
                           " (tokens/s = 1 / TPOT)")
        out.append(row)
    batch.run(ctx, "llamacpp")
    return out
