"""End-to-end LLM rows priced by the ``graphroof llm`` path (:class:`graphroof.llm.Engine`, one engine per model,
device and pricing, many points per engine through ``Engine.price``).

* gpt-fast (pytorch-labs/gpt-fast README, A100-80GB SXM power-limited to 330 W, MI250X): batch 1, a 5-token
  prompt, 200 generated tokens, gpt-fast's runtime preset (``data/presets/gpt-fast.toml``: torch.compile
  mode=reduce-overhead, decode replayed as CUDA graphs), the row's TP and weights
  (bf16, or weight-only int8 / int4); tokens/s = generated tokens / e2e (the tiny prefill included), as the source
  defines it.
* TensorRT-LLM v0.5 / v0.6.1 static batching: the row's batch, TP, input / output lengths; H100 and L40S rows fp8
  weights and KV cache with fp8 GEMMs (their FP8Linear quantizes each GEMM input and returns fp16: norms, context
  attention and all-reduces stay fp16, so no ``--activations fp8``), A100 fp16; runtime preset
  ``tensorrt-llm-v0.5`` (its fusion, gate and up projections as two GEMMs, no CUDA graphs, NCCL all-reduce,
  per-head decode attention, one-pass fused residual + RMSNorm kernels, its fitted runtime time per request;
  ``serving`` where that preset is absent).
  ``output_tokens_per_s_per_gpu`` = batch x output_len / e2e / TP; ``first_token_latency_ms`` = TTFT of batch 1
  (the whole generate call, one token).
* NVIDIA NIM for LLMs 1.8 benchmarking tables (Llama-3.1-8B-Instruct on one H100, Llama-3.3-70B-Instruct TP2 on
  two; fp8 profiles; AIPerf, streaming over HTTP): at concurrency 1, TTFT and ITL (mean time between streamed
  tokens after the first: graphroof's TPOT) of one request, runtime preset ``nim`` (the ``tensorrt-llm-engine``
  kernels, decode without CUDA graphs, the server's fitted time per request in TTFT), ``--weights fp8 --kv fp8``
  (the tables say "fp8"; an 8-bit KV cache is inferred from their rows at concurrency 25-50 and 5,000-20,000-token
  prompts, whose decode steps read mostly KV: a 16-bit cache puts them 26-65% slower, an 8-bit one within 15%:
  ``tools/nim_serve.py``); at concurrency 1 the output tokens/s of one user is graphroof's gen / e2e.  Rows at
  concurrency > 1 are a closed-loop serving run, scored by ``tools/nim_serve.py`` through ``graphroof.serve``
  (too slow for this suite's budget: each prompt length traces its own step-cost grid), not here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from .context import Context, preset, price_on, priced_points
from .data import DATA_DIR, excluded_reason, profile_or_none
from .result import Row

__all__ = ["gptfast_rows", "trtllm_rows", "nim_rows", "TRT_GPU"]

TRT_GPU = {"h100": "h100-sxm", "a100": "a100-80gb-sxm", "l40s": "l40s-48gb-pcie"}
GPTFAST_DTYPE = "bf16"
#: gpt-fast's runtime preset (torch.compile mode=reduce-overhead: decode as CUDA graphs); TensorRT-LLM v0.5 / 0.6's
GPTFAST_PRESET = DATA_DIR / "presets" / "gpt-fast.toml"
TRTLLM_PRESET = "tensorrt-llm-v0.5"
NIM_PRESET = "nim"


def _weights(text: str) -> str | None:
    t = text.lower()
    if t.startswith("int8"):
        return "int8"
    if t.startswith("int4"):
        return "int4"
    return None


def _first_word(text: str) -> str:
    """``'llama-3-8b (3.1: same shapes, rope scaling)'`` -> ``'llama-3-8b'``."""
    return re.split(r"\s|\(", text.strip(), maxsplit=1)[0] if text.strip() else ""


class Batch:
    """Points of one engine priced together (one ``Engine.price`` call: one grid, many points)."""

    def __init__(self) -> None:
        self.jobs: dict[tuple, list[tuple[Row, int, int, int, Callable[[Any, int], float]]]] = {}

    def add(self, key: tuple, row: Row, b: int, p: int, g: int, value: Callable[[Any, int], float]) -> None:
        self.jobs.setdefault(key, []).append((row, b, p, g, value))

    def run(self, ctx: Context, dataset: str) -> None:
        """Each engine prices the points of every row of its model, so the engines of one model (devices, TP
        degrees, dtypes) sample the same grid: its traces are traced once and its counted graphs shared across
        devices (a point's figures do not depend on the other points the grid was placed for); an engine that does
        not interpolate (:func:`~.context.priced_points`) prices its own rows' points."""
        points: dict[str, list[tuple[int, int, int]]] = {}
        for (model, *_), jobs in self.jobs.items():
            points.setdefault(model, []).extend((b, p, g) for _, b, p, g, _ in jobs)
        for (model, prof, pricing, dtype), jobs in self.jobs.items():
            eng = ctx.engine(model, prof, pricing, dtype=dtype)
            pts = priced_points(eng, points[model], ((b, p, g) for _, b, p, g, _ in jobs))
            b, p, g = ([pt[i] for pt in pts] for i in (0, 1, 2))
            figs = [("", eng.price(b, p, g))]
            held = ctx.holdout_hw(prof, dataset, model)
            if held is not None and ctx.holdout:
                figs.append((ctx.holdout, price_on(eng, held, b, p, g)))
            for row, rb, rp, rg, value in jobs:
                i = pts.index((rb, rp, rg))
                row.vendor = eng.hw.vendor
                for kind, fig in figs:
                    v = value(fig, i)
                    if not math.isfinite(v):
                        row.not_covered = row.not_covered or "no figure (NaN)"
                    elif kind:
                        row.holdout[kind] = v
                    else:
                        row.predicted = v


def _per_user(b: int) -> Callable[[Any, int], float]:
    return lambda f, i: float(f.tokens_per_s[i]) / b


def _per_gpu(tp: int) -> Callable[[Any, int], float]:
    return lambda f, i: float(f.tokens_per_s[i]) / tp


def _ttft(f: Any, i: int) -> float:
    return float(f.ttft_s[i])


def gptfast_rows(ctx: Context) -> list[Row]:
    from ..llm.engine import Pricing

    out: list[Row] = []
    batch = Batch()
    runtime = preset(str(GPTFAST_PRESET), "compiled")
    label = "gpt-fast" if runtime != "compiled" else "compiled"
    for where, r in ctx.rows("gptfast_decode.csv"):
        model, prof = _first_word(r["graphroof_model"]), _first_word(r["graphroof_hw"])
        tp, b, p, g = int(r["tp"]), int(r["batch_size"]), int(r["input_len"]), int(r["output_len"])
        w = _weights(r["weight_dtype"])
        inputs = {"model": model or r["model"], "tp": tp, "batch": b, "prompt": p, "gen": g,
                  "weights": w or GPTFAST_DTYPE, "gpu": r["gpu"]}
        family = model or r["model"]
        regime = "decode batch 1, TP 1" if tp == 1 else "decode batch 1, TP > 1 (NVLink all-reduces)"
        row = Row("gptfast", where, "gpt-fast (torch.compile)", prof, "", family, regime, "tokens-per-s", label,
                  r["metric"], r["unit"], inputs, float(r["value"]), is_rate=True)
        row.excluded = excluded_reason("gptfast", r, ctx.rules)
        if not model:
            row.not_covered = f"no zoo model mapped for {r['model']!r}"
        elif "mi250x" in prof:
            row.not_covered = ("gpt-fast runs on one MI250X GCD; the mi250x-128gb-oam profile is the whole 2-GCD "
                               "card (no one-GCD profile)")
        elif profile_or_none(prof) is None:
            row.not_covered = f"no hardware profile {prof!r}"
        if not row.excluded and not row.not_covered:
            batch.add((model, prof, Pricing(tp=tp, weights=w, runtime=runtime), GPTFAST_DTYPE), row, b, p, g,
                      _per_user(b))
            row.command = (f"graphroof llm {model} --hw {prof} --tp {tp} --batch {b} --prompt {p} --gen {g} "
                           f"--runtime {runtime} --dtype {GPTFAST_DTYPE}" + (f" --weights {w}" if w else "") +
                           " -f json: configs[0].output_tokens_per_s")
            if "330 W" in r["gpu"]:
                row.inputs["note"] = "A100 power-limited to 330 W (the profile is the 400 W part)"
        out.append(row)
    batch.run(ctx, "gptfast")
    return out


def trtllm_rows(ctx: Context) -> list[Row]:
    from ..llm.engine import Pricing

    out: list[Row] = []
    batch = Batch()
    runtime = preset(TRTLLM_PRESET, "serving")
    for where, r in ctx.rows("trtllm_v05_v061_static.csv"):
        gpu, dtype, model = r["gpu"], r["dtype"], r["model"]
        b, tp, p, g = int(r["batch"]), int(r["tp"]), int(r["input_len"]), int(r["output_len"])
        prof = TRT_GPU.get(gpu, "")
        ttft = r["metric"] == "first_token_latency_ms"
        fp8 = dtype == "fp8"
        inputs = {"model": model, "tp": tp, "batch": b, "input_len": p, "output_len": g, "dtype": dtype}
        regime = "first token, batch 1" if ttft else f"static batch, {'prefill' if p > g else 'decode'}-heavy"
        row = Row("trtllm", where, "TensorRT-LLM v0.5/v0.6.1 (static)", prof, "", model, regime,
                  "ttft" if ttft else "throughput", runtime, r["metric"], "s" if ttft else "tok/s/GPU", inputs,
                  float(r["value"]) * (1e-3 if ttft else 1.0), is_rate=not ttft)
        row.excluded = excluded_reason("trtllm", r, ctx.rules)
        if not prof:
            row.not_covered = f"no hardware profile for {gpu!r}"
        if not row.excluded and not row.not_covered:
            q = "fp8" if fp8 else None
            batch.add((model, prof, Pricing(tp=tp, runtime=runtime, weights=q, kv=q), "fp16"), row,
                      b, p, g, _ttft if ttft else _per_gpu(tp))
            flags = " --weights fp8 --kv fp8" if fp8 else ""
            what = "configs[0].ttft_s" if ttft else f"configs[0].output_tokens_per_s / {tp}"
            row.command = (f"graphroof llm {model} --hw {prof} --tp {tp} --batch {b} --prompt {p} --gen {g} "
                           f"--runtime {runtime} --dtype fp16{flags} -f json: {what}")
        out.append(row)
    batch.run(ctx, "trtllm")
    return out


def _tpot(f: Any, i: int) -> float:
    return float(f.tpot_s[i])


def nim_rows(ctx: Context) -> list[Row]:
    from ..llm.engine import Pricing

    out: list[Row] = []
    batch = Batch()
    runtime = preset(NIM_PRESET, "serving")
    for where, r in ctx.rows("nim_llm_h100.csv"):
        model, prof, metric = r["graphroof_model"], r["graphroof_hw"], r["metric"]
        tp, p, g, conc = int(r["tp"]), int(r["input_tokens"]), int(r["output_tokens"]), int(r["concurrency"])
        figure = {"ttft_ms": "ttft", "itl_ms": "tpot"}.get(metric, "throughput")
        inputs = {"model": r["model"], "tp": tp, "batch": 1, "input_tokens": p, "output_tokens": g,
                  "concurrency": conc, "precision": r["precision"]}
        regime = (f"concurrency 1, prompt {'<= 1000' if p <= 1000 else '> 1000'} tokens" if conc == 1
                  else "concurrency > 1 (serving)")
        ms = r["unit"] == "ms"
        row = Row("nim", where, "NVIDIA NIM 1.8 (TensorRT-LLM engine)", prof, "", model, regime, figure, runtime,
                  metric, "s" if ms else r["unit"], inputs, float(r["value"]) * (1e-3 if ms else 1.0),
                  is_rate=not ms)
        row.excluded = excluded_reason("nim", r, ctx.rules)
        if conc > 1:
            row.not_covered = ("concurrency > 1: a closed-loop serving run (graphroof serve --arrival closed:N), "
                               "scored by tools/nim_serve.py, not by validate")
        elif profile_or_none(prof) is None:
            row.not_covered = f"no hardware profile {prof!r}"
        if not row.excluded and not row.not_covered:
            config = str(DATA_DIR / "models" / model / "config.json")
            value = {"ttft": _ttft, "tpot": _tpot}.get(figure, _per_user(1))
            batch.add((config, prof, Pricing(tp=tp, runtime=runtime, weights="fp8", kv="fp8"), "bf16"), row, 1, p, g,
                      value)
            what = {"ttft": "configs[0].ttft_s", "tpot": "configs[0].tpot_s"}.get(figure,
                                                                                "configs[0].output_tokens_per_s")
            row.command = (f"graphroof llm graphroof/validate/data/models/{model}/config.json --hw {prof} --tp {tp} "
                           f"--batch 1 --prompt {p} --gen {g} --runtime {runtime} --weights fp8 --kv fp8 -f json: {what}")
        out.append(row)
    batch.run(ctx, "nim")
    return out
