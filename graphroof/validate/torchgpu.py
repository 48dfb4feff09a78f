"""Rows measured by graphroof's developers with PyTorch on one NVIDIA H100 SXM and one H200 SXM
(``data/h100_session/``, ``data/h200_session/``, ``tools/measure_gpu.py``), and two blind sets measured later on
shapes and models nothing was fitted on (``data/h200_unseen/``, ``data/h100_unseen/``: ``tools/measure_gpu.py --set
unseen``; engine label :data:`BLIND`), and ``data/h200_probe/`` (``grouped_sweep.csv``, ``naive_attention.csv``:
``tools/probe_moe_gpu.py``, ``tools/probe_kernels_gpu.py``).  No timing constant was fitted on them (the H200's
timing constants are derived from the H100's; the H100's were fitted on other rows) except ``pytorch-eager``'s host
dispatch, fitted on the fourteen host-bound eager rows of the two sessions, and ``torch_grouped_sm_bw_bytes_per_s``,
fitted on the H100 ``grouped.csv`` rows (the profiles' [sources]); every other row is a check of the model, priced
through the paths users run:

* ``gemm.csv``: ``torch.mm`` bf16 and ``torch._scaled_mm`` fp8 (bf16 out), M = 1 .. 16384 on Llama-3 linear shapes
  -> the one-op ``aten.mm`` graph of :mod:`.kernels` under ``compiled`` (kernel time, no host launch: the source
  replays back-to-back calls from a CUDA graph);
* ``attention.csv``: ``F.scaled_dot_product_attention`` (flash and cuDNN backends), prefill and one-token decode
  -> a one-op ``aten.scaled_dot_product_attention`` graph, same pricing, under ``compiled`` with its
  ``attention_kernel`` set to the row's backend (:data:`BACKEND_KERNEL`, as a user picks the kernel family in a
  preset file; PyTorch 2.11 with cuDNN 9.19 runs cuDNN by default on these GPUs, the flash backend is
  FlashAttention-2);
* ``decode.csv``: a Llama-shaped decoder step in plain torch ops replayed from a CUDA graph (static K/V cache of
  ``context`` positions) -> that step as a module (:mod:`graphroof.frontends.torch.decoder_step`, the one the
  source runs) through ``graphroof.analyze`` under ``pytorch-cuda-graph``: totals.time_realistic_s (the step
  measured is not transformers' Llama: no rotary, fused QKV and gate+up GEMMs; ``graphroof llm`` prices
  transformers' program);
* ``models.csv``: ResNet / ViT / BERT fp16 forward passes (eager and CUDA-graph replay) -> ``graphroof analyze``
  (:data:`ANALYZE_TARGET`) under ``pytorch-eager`` / ``pytorch-cuda-graph``; a Llama-shaped transformers model's eager
  prefill (and ``moe_models.csv``'s whole MoE models) -> ``graphroof llm`` TTFT under ``pytorch-eager``;
* ``naive_attention.csv`` (``h200_probe``): unfused fp16 attention as FlashAttention's benchmark runs its PyTorch
  baseline -> the one-op attention graph under the naive byte model and ``pytorch-eager``, as kernels.csv's naive
  rows (:func:`.kernels.naive_attention_time_s`);
* ``grouped.csv`` / ``grouped_sweep.csv``: ``torch._grouped_mm`` bf16 MoE expert GEMMs (``tokens * top_k`` rows
  spread evenly over the experts; the sweep's ``rows_per_expert`` on each of ``experts_touched`` experts) -> the
  one-op ``aten._grouped_mm`` graph of :mod:`.kernels` (:func:`.kernels.grouped_mm_graph`, the experts that receive
  rows as its ``moe_experts_touched``), same pricing as ``gemm.csv`` under ``compiled``, whose
  ``moe_grouped_gemm = "torch"`` makes the call one grouped kernel on these sm90 devices
  (:func:`.kernels.grouped_runtime`).
"""

from __future__ import annotations

from typing import Any

from .context import Context, priced_points
from .data import DATA_DIR, excluded_reason
from .kernels import (
    NAIVE_RUNTIME,
    attention_graph,
    attention_time_s,
    grouped_mm_time_s,
    matmul_time_s,
    naive_attention_time_s,
)
from .result import Row

__all__ = ["torch_gpu_rows", "attention_graph", "attention_time_s", "grouped_shape", "SESSIONS"]

#: SDPA backend (attention.csv's ``backend`` column) -> graphroof's attention kernel family
#: (graphroof.timing.attention): PyTorch's flash backend builds FlashAttention-2 (aten/src/ATen/native/transformers/
#: cuda/flash_attn); cuDNN's fused attention is Hopper-native (the family the H100 attention constants describe)
BACKEND_KERNEL = {"flash": "flash2", "cudnn": "cudnn"}
#: data folder -> the profile its GPU is priced on
SESSIONS = {"h100_session": "h100-sxm", "h200_session": "h200-sxm", "h200_unseen": "h200-sxm",
            "h100_unseen": "h100-sxm", "h200_probe": "h200-sxm"}
#: models.csv's ``model`` -> what ``graphroof analyze`` prices: the zoo's vision models as they are; transformers'
#: ``BertModel`` (no masked-LM head, unlike the zoo's bert-base / bert-large) as the encoder configs in data/models
ANALYZE_TARGET = {"resnet-18": "resnet-18", "resnet-50": "resnet-50", "resnet-101": "resnet-101",
                  "vit-b-16": "vit-b-16", "bert-base": str(DATA_DIR / "models" / "bert-base-encoder" / "config.json"),
                  "bert-large": str(DATA_DIR / "models" / "bert-large-encoder" / "config.json")}
ENGINE = "PyTorch 2.11 (cu130), measured by graphroof"
#: folders measured blind (shapes and models chosen before measuring, no constant changed after): their own engine
#: label, so every table keeps them apart (the engine hold-out groups them with the rest: same start)
BLIND = {"h200_unseen": ENGINE + ", blind set", "h100_unseen": ENGINE + ", blind set"}
DATASET = "torch_gpu"
#: the decode.csv steps are replayed from a CUDA graph (tools/measure_gpu.py)
DECODE_RUNTIME = "pytorch-cuda-graph"


def _optional_rows(ctx: Context, folder: str, name: str) -> list[tuple[str, dict[str, str]]]:
    """The rows of *folder*'s *name*, none where that session did not measure it (not every folder has every file)."""
    return ctx.rows(f"{folder}/{name}") if (DATA_DIR / folder / name).exists() else []


def _m_regime(m: int) -> str:
    return "M <= 64" if m <= 64 else "M 65-512" if m <= 512 else "M > 512"


def _row(ctx: Context, hw: str, where: str, r: dict, family: str, regime: str, figure: str, runtime: str,
         inputs: dict, measured: float) -> Row:
    engine = BLIND.get(where.split("/", 1)[0], ENGINE)
    row = Row(DATASET, where, engine, hw, "", family, regime, figure, runtime, "time_s", "s", inputs, measured)
    row.excluded = excluded_reason(DATASET, r, ctx.rules)
    return row


def _grouped_regime(rows: int, visited: int) -> str:
    """The token regime of a grouped GEMM: rows per expert that receives rows."""
    per = rows / max(1, visited)
    return "bf16 grouped GEMM, rows/expert " + ("<= 16" if per <= 16 else "16-256" if per <= 256 else "> 256")


def grouped_shape(r: dict) -> tuple[int, int, int, int, int, int, int]:
    """(experts, experts receiving rows, rows, tokens, top_k, K, N) of a ``grouped.csv`` / ``grouped_sweep.csv``
    row (:func:`_grouped_row` says how each file spreads its rows)."""
    if "experts_touched" in r:
        e, visited, per, k, n = (int(r[c]) for c in ("experts", "experts_touched", "rows_per_expert", "K", "N"))
        return e, visited, visited * per, visited * per, 1, k, n
    e, t, top_k, k, n = (int(r[c]) for c in ("experts", "tokens", "top_k", "K", "N"))
    return e, min(e, t * top_k), t * top_k, t, top_k, k, n


def _grouped_row(ctx: Context, hw: Any, hw_name: str, where: str, r: dict) -> Row:
    """A ``grouped.csv`` row: ``torch._grouped_mm`` of ``tokens * top_k`` rows over ``experts`` experts, priced as
    the one-op grouped-GEMM graph of :mod:`.kernels`.  The measurement spreads the rows evenly over the experts
    (tools/measure_gpu.py ``grouped``: the first ``rows % E`` get one more; with fewer rows than experts the
    first ``rows`` get one each): ``min(E, rows)`` experts receive rows, the graph's ``moe_experts_touched``.
    A ``grouped_sweep.csv`` row (tools/probe_moe_gpu.py) gives ``rows_per_expert`` rows to each of its first
    ``experts_touched`` experts (top-k 1)."""
    e, visited, rows, t, top_k, k, n = grouped_shape(r)
    row = _row(ctx, hw_name, where, r, "grouped-gemm", _grouped_regime(rows, visited), "kernel-time", "compiled",
               {"shape": r["shape"], "experts": e, "tokens": t, "top_k": top_k, "rows": rows, "K": k, "N": n,
                "experts_touched": visited}, float(r["time_s"]))
    if not row.excluded:
        row.predicted = grouped_mm_time_s(hw, e, rows, k, n, "bf16", top_k, visited)
        row.vendor = hw.vendor
    row.command = (f"graphroof.analyze(graphroof.validate.kernels.grouped_mm_graph({e}, {rows}, {k}, {n}, 'bf16', "
                   f"top_k={top_k}, experts_touched={visited}), hw='{hw_name}', runtime='compiled' "
                   "(moe_grouped_gemm = 'torch': one grouped kernel on sm90 / sm100)): "
                   "kernel time_realistic_s - t_launch_s")
    return row


def _kernels(ctx: Context, folder: str, hw_name: str) -> list[Row]:
    hw, out = ctx.hw(hw_name), []
    for where, r in _optional_rows(ctx, folder, "gemm.csv"):
        m, n, k, dt = int(r["M"]), int(r["N"]), int(r["K"]), r["dtype"]
        row = _row(ctx, hw_name, where, r, "gemm", f"{dt} GEMM, {_m_regime(m)}", "kernel-time", "compiled",
                   {"shape": r["shape"], "M": m, "N": n, "K": k, "dtype": dt}, float(r["time_s"]))
        out_dt = "bf16" if dt == "fp8" else None
        if not row.excluded:
            row.predicted = matmul_time_s(hw, m, n, k, dt, out_dt)
            row.vendor = hw.vendor
        row.command = (f"graphroof.analyze(graphroof.validate.kernels.matmul_graph({m}, {n}, {k}, '{dt}'"
                       + (f", '{out_dt}'" if out_dt else "") + f"), hw='{hw_name}', runtime='compiled'): "
                       "kernel time_realistic_s - t_launch_s")
        out.append(row)
    for where, r in _optional_rows(ctx, folder, "attention.csv"):
        b, h, kvh, lq, lk, d = (int(r[c]) for c in ("batch", "heads", "kv_heads", "q_len", "kv_len", "head_dim"))
        causal = r["causal"] == "True"
        kind, fam = r["kind"], BACKEND_KERNEL[r["backend"]]
        regime = f"{kind} attention ({r['backend']})" + (", causal" if causal else "")
        row = _row(ctx, hw_name, where, r, "attention", regime, "kernel-time", "compiled",
                   {"backend": r["backend"], "batch": b, "heads": h, "q_len": lq, "kv_len": lk, "head_dim": d,
                    "causal": causal}, float(r["time_s"]))
        if not row.excluded:
            row.predicted = attention_time_s(hw, b, h, kvh, lq, lk, d, causal, kernel=fam)
            row.vendor = hw.vendor
        row.command = (f"graphroof.analyze(graphroof.validate.torchgpu.attention_graph({b}, {h}, {kvh}, {lq}, {lk}, "
                       f"{d}, {causal}), hw='{hw_name}', runtime=<compiled with [kernels] attention_kernel = '{fam}'>):"
                       " kernel time_realistic_s - t_launch_s")
        out.append(row)
    for where, r in _optional_rows(ctx, folder, "grouped.csv") + _optional_rows(ctx, folder, "grouped_sweep.csv"):
        out.append(_grouped_row(ctx, hw, hw_name, where, r))
    for where, r in _optional_rows(ctx, folder, "naive_attention.csv"):
        out.append(_naive_row(ctx, hw, hw_name, where, r))
    return out


def _naive_row(ctx: Context, hw: Any, hw_name: str, where: str, r: dict) -> Row:
    """A ``naive_attention.csv`` row (tools/probe_kernels_gpu.py): FlashAttention's benchmark baseline, unfused
    fp16 attention run eagerly (Q / K copied into batched-GEMM order, a scaled batched Q K^T, softmax, P V), priced
    as the kernels.csv naive rows are: the one-op attention graph under the naive byte model and pytorch-eager
    (:func:`.kernels.naive_attention_time_s`)."""
    b, h, s, d = (int(r[c]) for c in ("batch", "nheads", "seqlen", "headdim"))
    regime = "naive attention (eager), " + ("<= 2048 keys" if s <= 2048 else "> 2048 keys")
    row = _row(ctx, hw_name, where, r, "attention", regime, "kernel-time", NAIVE_RUNTIME,
               {"batch": b, "heads": h, "q_len": s, "kv_len": s, "head_dim": d, "causal": False, "dtype": "fp16"},
               float(r["time_s"]))
    if not row.excluded:
        row.predicted = naive_attention_time_s(hw, b, h, h, s, s, d, False, "fp16")
        row.vendor = hw.vendor
    row.command = (f"graphroof.analyze(graphroof.validate.torchgpu.attention_graph({b}, {h}, {h}, {s}, {s}, {d}, "
                   f"False, 'fp16'), hw='{hw_name}', runtime='{NAIVE_RUNTIME}', attention='naive', causal='full'): "
                   "kernel time_realistic_s - t_launch_s")
    return row


def _llm(ctx: Context, folder: str, hw_name: str, todo: list[tuple[Row, str, str, str, int, int]]) -> list[Row]:
    """The session's LLM prefill rows; each live one is added to *todo* as ``(row, model, runtime, profile, batch,
    prompt)`` and priced by :func:`_price_llm` once every session's rows are known."""
    out: list[Row] = []
    pre = [(w, r) for w, r in _optional_rows(ctx, folder, "models.csv") if r["model"].startswith("llama")]
    pre += _optional_rows(ctx, folder, "moe_models.csv")  # whole MoE models' eager prefill (zoo configs)
    runtime = "pytorch-eager"
    for where, r in pre:
        model = r["model"].removesuffix("-shaped")  # e.g. llama-3-8b-shaped: the zoo's llama-3-8b
        b, seq = int(r["batch"]), int(r["seq"])
        prompt = min(seq, 8190)  # the zoo model's 8,192 positions cap the 8,192-token prefill (0.02% fewer tokens)
        row = _row(ctx, hw_name, where, r, model, f"prefill {'<= 512' if seq <= 512 else '> 512'} tokens", "ttft",
                   runtime, {"batch": b, "prompt": prompt, "gen": 2}, float(r["time_s"]))
        row.command = (f"graphroof llm {model} --hw {hw_name} --batch {b} --prompt {prompt} --gen 2 --runtime "
                       f"{runtime} --dtype bf16 -f json: configs[0].ttft_s")
        out.append(row)
        if not row.excluded:
            todo.append((row, model, runtime, hw_name, b, prompt))
    return out


def _decode(ctx: Context, folder: str, hw_name: str, todo: list[tuple[Row, str, int, int, str]]) -> list[Row]:
    """The session's ``decode.csv`` rows: the plain-op decoder step the source times
    (:mod:`graphroof.frontends.torch.decoder_step`), priced by ``graphroof.analyze`` under ``pytorch-cuda-graph``
    (the step is replayed from a CUDA graph); each live one is added to *todo* as ``(row, model, batch, context,
    profile)`` and priced by :func:`_price_decode` once every session's rows are known."""
    out: list[Row] = []
    for where, r in _optional_rows(ctx, folder, "decode.csv"):
        model = r["model"].removesuffix("-shaped")
        b, ctx_len = int(r["batch"]), int(r["context"])
        regime = f"decode batch {'1' if b == 1 else '8-64' if b <= 64 else '> 64'}"
        row = _row(ctx, hw_name, where, r, model, regime, "tpot", DECODE_RUNTIME,
                   {"batch": b, "context": ctx_len}, float(r["time_s"]))
        row.command = (f"graphroof.analyze(*graphroof.frontends.torch.decoder_step.decoder_step({b}, {ctx_len}, "
                       f"'{model}'), hw='{hw_name}', runtime='{DECODE_RUNTIME}'): totals.time_realistic_s")
        if not row.excluded:
            todo.append((row, model, b, ctx_len, hw_name))
        out.append(row)
    return out


def _price_decode(ctx: Context, todo: list[tuple[Row, str, int, int, str]]) -> None:
    """Price the decode rows of every session: per model, the step's graph at each (batch, context) of its rows,
    captured (through the trace store: :func:`~graphroof.frontends.torch.decoder_step.decoder_step_graph`) at the
    corners of the rows' batches x contexts and interpolated between them where the graph is linear in both (checked
    against one more capture: :func:`.traces.graphs_at`), so both devices' rows of a shape share one graph."""
    from ..api import analyze
    from ..frontends.torch.decoder_step import decoder_step_graph
    from .traces import graphs_at

    for model in sorted({t[1] for t in todo}):
        mine = [t for t in todo if t[1] == model]

        def capture(b: int, c: int | None, model: str = model) -> Any:
            assert c is not None
            return decoder_step_graph(b, c, model, options=ctx.options)

        graphs, _ = graphs_at(capture, [(b, c) for _, _, b, c, _ in mine], ctx.progress)
        for row, _, b, c, hw_name in mine:
            a = analyze(graphs[b, c], hw=hw_name, runtime=DECODE_RUNTIME)
            row.predicted, row.vendor = float(a.totals.t_realistic_s), ctx.hw(hw_name).vendor


def _price_llm(ctx: Context, todo: list[tuple[Row, str, str, str, int, int]]) -> None:
    """Price the LLM prefill rows of every session: each (model, runtime, profile) engine prices the points of all
    the model's rows, so the engines of one model sample the same grid (:class:`~graphroof.llm.price.PricedModel`):
    its traces are shared by both devices (the values at a point do not depend on which other points the grid was
    placed for: it interpolates polynomials exactly)."""
    from ..llm.engine import Pricing

    points: dict[str, list[tuple[int, int]]] = {}
    groups: dict[tuple[str, str, str], list[tuple[Row, tuple[int, int]]]] = {}
    for row, model, runtime, hw_name, b, p in todo:
        points.setdefault(model, []).append((b, p))
        groups.setdefault((model, runtime, hw_name), []).append((row, (b, p)))
    for (model, runtime, hw_name), rows in groups.items():
        eng = ctx.engine(model, hw_name, Pricing(runtime=runtime), dtype="bf16")
        pts = priced_points(eng, points[model], (pt for _, pt in rows))
        figs = eng.price([b for b, _ in pts], [p for _, p in pts], [2] * len(pts))
        for row, pt in rows:
            row.predicted, row.vendor = float(figs.ttft_s[pts.index(pt)]), eng.hw.vendor


def _vision(ctx: Context, folder: str, hw_name: str) -> list[Row]:
    from ..api import analyze

    out: list[Row] = []
    for where, r in _optional_rows(ctx, folder, "models.csv"):
        if r["model"] not in ANALYZE_TARGET:
            continue
        target = ANALYZE_TARGET[r["model"]]
        seq = int(r["seq"]) if r["model"].startswith("bert") else None
        b = int(r["batch"])
        runtime = "pytorch-cuda-graph" if r["mode"] == "cuda-graph" else "pytorch-eager"
        regime = f"{r['mode']}, batch {'<= 8' if b <= 8 else '> 8'}"
        row = _row(ctx, hw_name, where, r, r["model"], regime, "vision-latency", runtime,
                   {"batch": b, "dtype": "fp16"} | ({"seq": seq} if seq else {}), float(r["time_s"]))
        seq_arg = f" --seq {seq}" if seq else ""
        row.command = (f"graphroof analyze {target} --hw {hw_name} --batch {b} --dtype fp16{seq_arg} --runtime {runtime} "
                       "-f json: totals.time_realistic_s")
        if not row.excluded:
            kw: dict[str, Any] = {"seq": seq} if seq else {}
            a = analyze(target, hw=hw_name, batch=b, dtype="fp16", runtime=runtime, **kw)
            row.predicted = float(a.totals.t_realistic_s)  # the JSON's totals.time_realistic_s
            row.vendor = ctx.hw(hw_name).vendor
        out.append(row)
    return out


def torch_gpu_rows(ctx: Context) -> list[Row]:
    out: list[Row] = []
    todo: list[tuple[Row, str, str, str, int, int]] = []
    steps: list[tuple[Row, str, int, int, str]] = []
    for folder, hw in SESSIONS.items():
        ctx.progress(f"{hw}: kernels")
        out += _kernels(ctx, folder, hw)
        out += _llm(ctx, folder, hw, todo)
        out += _decode(ctx, folder, hw, steps)
        ctx.progress(f"{hw}: resnet-50 / bert-base")
        out += _vision(ctx, folder, hw)
    ctx.progress("decoder-step rows (llama-3-8b, llama-2-13b shapes)")
    _price_decode(ctx, steps)
    ctx.progress("LLM rows (llama-3-8b, llama-2-13b, MoE prefill)")
    _price_llm(ctx, todo)
    return out
