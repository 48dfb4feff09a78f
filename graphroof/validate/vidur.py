"""Vidur profiling data (microsoft/vidur): one Llama-2 decoder layer's non-attention kernels (vLLM-style fp16
serving kernels, TP 1-8, 1-4096 tokens in the batch) and the NCCL all-reduce tables.

Layer rows are priced by the LLM pipeline users run (``graphroof llm --tp T --runtime sarathi-serve``,
:class:`graphroof.llm.Engine` with ``Pricing(tp=T, runtime=PRESET)``, the model in fp16; :data:`PRESET`: the
``serving`` preset's kernels on the torch 2.2 / cuBLAS 12.1 Vidur's profiler ran, whole-wave GEMM schedules): the
prefill step of one sequence of N tokens, its per-op breakdown (``Engine.step("prefill", 1, N)``), layer 0's
kernels without the attention kernel and the KV-cache store (both inside Vidur's attention timing), the kernel time
without the host launch (Vidur times the kernels on the device).  To price 1,000 token counts per (model, TP) from three traces the breakdown is the
evaluator's per-kernel-group pricing on the prefill grid (what ``graphroof llm`` prices its breakdown tables
with), one grid per (model, TP) priced on both GPUs' profiles (counting and fusion do not depend on the device);
tests check a row against ``Engine.step`` on its own device to 1e-9.

All-reduce rows are priced by the collective model as the comm kernels call it
(:func:`graphroof.timing.collective_time` with the profile's [collectives], NCCL, host-launched calls: rank 0's
kernel also waits for the last of the row's GPUs to launch, ``launch_skew_s * (H_p - 1)``), with the row's GPUs per
node.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .context import Context
from .refit import GPU_PROFILE, MODELS
from .result import Row

__all__ = ["ops_rows", "allreduce_rows", "GPU_PROFILE", "MODELS", "PRESET", "layer_kernel_times"]

#: measured columns of one layer and how often each runs (the embedding is per model, not per layer)
LAYER = {"input_layernorm_ms": 1, "attn_pre_proj_ms": 1, "attn_rope_ms": 1, "attn_post_proj_ms": 1,
         "post_attention_layernorm_ms": 1, "mlp_up_proj_ms": 1, "mlp_act_ms": 1, "mlp_down_proj_ms": 1,
         "add_ms": 2}
ENGINE = "vLLM-style kernels (Vidur profiling)"
#: the runtime preset of the kernels Vidur profiled (sarathi-serve's vidur branch, torch 2.2.2 / cuBLAS 12.1)
PRESET = "sarathi-serve"
#: the prefill grid the breakdown is interpolated on: three contexts span the data's 1 .. 4096 tokens
GRID_X = (1, 2048, 4096)


def _regime(tokens: int) -> str:
    return "decode-size (<= 32 tokens)" if tokens <= 32 else "prefill (> 32 tokens)"


def _layer0_groups(kgrid: Any, kernels: Any) -> list[int]:
    """The kernel groups of layer 0's kernels, attention and the pure KV-cache store left out (one entry per kernel)."""
    out = []
    for gi, members in enumerate(kgrid.names):
        for n in members:
            nd = kernels.node(n)
            if not (nd.scope == "model.layers.0" or nd.scope.startswith("model.layers.0.")):
                continue
            keys = set(nd.attrs.get("op_keys") or (nd.op,))
            if nd.attrs.get("kernel_kind") in ("attention", "comm") or keys <= {"kv_cache.append"}:
                continue
            out.append(gi)
    return out


def layer_kernel_times(eng: Any, tokens: list[int], hws: list[Any]) -> list[np.ndarray]:
    """Per profile in *hws*: layer 0's non-attention kernel time (s, no host launch) at each token count, on the
    engine's prefill breakdown grid."""
    from ..llm.evaluator import PhasePricer
    from ..llm.poly import DEGREE, GridPlan

    plan = GridPlan((1,), GRID_X, DEGREE["prefill"])
    pipe = eng.pipeline
    kgrid, _, counted = pipe.breakdown("prefill", plan, ())  # the grid graphroof llm prices its breakdown on
    groups = _layer0_groups(kgrid, counted[0].kernels)
    distinct = sorted(set(groups))
    times = np.asarray([groups.count(gi) for gi in distinct], dtype=float)
    out = []
    for hw in hws:  # every token count at once: one pass per kernel group (the rows group_means gives a step)
        rows = PhasePricer(kgrid, hw, runtime=eng.runtime).kernel_rows_at(1, tokens, distinct)
        out.append(times @ (rows[:, 1] - rows[:, 5]))  # realistic minus the host launch
    return out


def ops_rows(ctx: Context) -> list[Row]:
    """Every layer row; one engine per (model, TP) prices both GPUs' rows (counting and fusion do not depend on
    the device: the kernel grid is priced on each profile)."""
    from ..llm.engine import Pricing

    out: list[Row] = []
    for src, model in MODELS.items():
        jobs: dict[int, list[tuple[str, str, dict]]] = {}   # tp -> (gpu, file:line, row)
        for gpu in GPU_PROFILE:
            for where, r in ctx.rows(f"vidur_{gpu}_{src}_ops.csv"):
                jobs.setdefault(int(r["num_tensor_parallel_workers"]), []).append((gpu, where, r))
        for tp, rows in sorted(jobs.items()):
            first = GPU_PROFILE[rows[0][0]]
            eng = ctx.engine(model, first, Pricing(tp=tp, runtime=PRESET), dtype="fp16")
            for gpu, prof in GPU_PROFILE.items():
                mine = [(w, r) for g, w, r in rows if g == gpu]
                if not mine:
                    continue
                tokens = [int(r["num_tokens"]) for _, r in mine]
                hw = eng.hw if prof == first else ctx.hw(prof)
                held = ctx.holdout_hw(prof, "vidur_ops", model)
                hws = [hw] + ([held] if held is not None else [])
                ctx.progress(f"vidur {model} tp {tp} on {prof}: {len(tokens)} token counts")
                times = layer_kernel_times(eng, tokens, hws)
                for j, (where, r) in enumerate(mine):
                    meas = sum(k * float(r[c]) * 1e-3 for c, k in LAYER.items())
                    n = tokens[j]
                    row = Row("vidur_ops", where, ENGINE, prof, hw.vendor, model, _regime(n), "layer-kernels",
                              PRESET, "one layer's non-attention kernels (2 norms, QKV, rope, O, gate+up, act, "
                              "down, 2 adds)", "s", {"model": model, "tokens": n, "tp": tp, "dtype": "fp16"}, meas,
                              float(times[0][j]),
                              command=(f"Engine('{model}', hw='{prof}', pricing=Pricing(tp={tp}, runtime='{PRESET}'), "
                                       f"dtype='fp16').step('prefill', 1, {n}): layer 0 kernels minus attention and "
                                       "KV store, time_realistic_s - t_launch_s (same layers: graphroof llm "
                                       f"{model} --hw {prof} --tp {tp} --prompt {n} --dtype fp16 --runtime {PRESET})"))
                    if len(times) > 1 and ctx.holdout:
                        row.holdout[ctx.holdout] = float(times[1][j])
                    out.append(row)
    return out


def allreduce_rows(ctx: Context) -> list[Row]:
    from ..timing import collective_time

    out: list[Row] = []
    for gpu, prof in GPU_PROFILE.items():
        hw = ctx.hw(prof)
        held = ctx.holdout_hw(prof, "vidur_allreduce")
        for where, r in ctx.rows(f"vidur_{gpu}_dgx_all_reduce.csv"):
            n, g, size = int(r["num_workers"]), int(r["devices_per_node"]), int(r["size_bytes"])
            inter = g < n
            t = collective_time("all_reduce", size, n, hw, gpus_per_node=g).t_s
            regime = ("inter-node" if inter else "intra-node") + (" small (<= 1 MB)" if size <= 1_000_000 else
                                                                  " large (> 1 MB)")
            row = Row("vidur_allreduce", where, "NCCL (Vidur profiling)", prof, hw.vendor, "all-reduce", regime,
                      "allreduce", "", "all_reduce_ms", "s", {"gpus": n, "gpus_per_node": g, "size_bytes": size},
                      float(r["all_reduce_ms"]) * 1e-3, t,
                      command=(f"graphroof.timing.collective_time('all_reduce', {size}, {n}, "
                               f"load_hardware('{prof}'), gpus_per_node={g}).t_s"))
            if held is not None and ctx.holdout:
                row.holdout[ctx.holdout] = collective_time("all_reduce", size, n, held, gpus_per_node=g).t_s
            out.append(row)
    return out
