"""Fused mixture-of-experts blocks (``fused_moe_triton.csv``): vLLM's Triton fused-MoE kernel timed by the
engine's own tuning benchmark (benchmarks/kernels/benchmark_moe.py and tuners that share its harness), one row per
(device, expert shape, tokens in the batch), the tuned config of the shape the engine ships.

What such a row times (benchmark_moe.py ``benchmark_config``): the routing of T tokens from given gating logits
(softmax, top-k, renormalise), ``moe_align_block_size`` (each expert's rows padded to the tile height), the gate+up
grouped GEMM, the activation-and-multiply, the down grouped GEMM with the routing weight applied, and the sum over
the top-k, under a CUDA graph (no host launch); not the router's linear layer (its logits are the input).

Priced by the ``graphroof llm`` pipeline users run, on a one-layer model of the row's expert shape (a Qwen3-MoE
``config.json`` under ``data/models/moe-*``: hidden size, experts, top-k and per-GPU expert width of the row;
:func:`config_name`): the prefill step of one sequence of T tokens (``Engine.step("prefill", 1, T)``, the per-op
breakdown ``graphroof llm`` and ``graphroof analyze`` print), under the ``vllm`` preset (``moe_grouped_gemm =
"triton"``: the Triton fused-MoE kernel family, :mod:`graphroof.timing.moe`), weights in the row's dtype (fp8
per-tensor rows: ``--weights fp8``, W8A8 GEMMs), and the figure is the sum over layer 0's MoE kernels
(:func:`moe_block_kernel`: the routing and expert kernels and the top-k combine; the router's linear layer left
out) of the kernel time without its host launch.  The gpu hold-out prices the rows again by profile name
(:func:`graphroof.validate.holdout.gpu_holdout`).
"""

from __future__ import annotations

from typing import Any

from .context import Context
from .data import DATA_DIR, excluded_reason, profile_or_none
from .result import Row

__all__ = ["moe_rows", "moe_block_kernel", "moe_block_time_s", "config_name", "PRESET"]

PRESET = "vllm"
ENGINE = "vLLM Triton fused_moe (benchmark_moe.py)"


def config_name(experts: int, hidden: int, n_per_gpu: int, top_k: int) -> str:
    """The bundled one-layer model of an expert shape: ``data/models/<name>/config.json``."""
    return f"moe-e{experts}-h{hidden}-n{n_per_gpu}-k{top_k}"


def moe_block_kernel(row: dict[str, Any]) -> bool:
    """Whether a kernel row of a one-layer MoE model's breakdown is part of the fused-MoE block a row times: layer
    0's expert scope (routing, the grouped GEMMs, the activation), or the layer's kernel that sums the top-k expert
    outputs (module doc); not the router's linear layer (``mlp.gate``)."""
    scope = str(row.get("scope", ""))
    if scope.startswith("model.layers.0.mlp.experts"):
        return True
    ops = " ".join(str(o) for o in row.get("ops", ()))
    return scope == "model.layers.0" and "sum" in ops


def moe_block_time_s(analysis: Any) -> float:
    """The fused-MoE block's kernel time without host launches in a step's breakdown (:func:`moe_block_kernel`)."""
    return sum(k["time_realistic_s"] - k["t_launch_s"] for k in analysis.kernel_rows if moe_block_kernel(k))


def _regime(tokens: int) -> str:
    return "tokens <= 512 (expert weights streamed)" if tokens <= 512 else "tokens > 512 (compute)"


def _plan(eng: Any, tokens: set[int]) -> None:
    """The engine's prefill graphs on a grid of three token counts of the shape's rows (the ends and the middle):
    the graph at any other count is interpolated from those traces, as ``graphroof llm`` samples its grids
    (:meth:`graphroof.llm.phases.Pipeline.plan_grid`; every dim of the one-layer model is of degree <= 2 in the
    tokens, so the interpolation is the trace itself: tests/test_triton_moe_kernel.py compares an interpolated row
    with ``graphroof analyze``).  Three or fewer counts: each traced."""
    from ..llm.poly import DEGREE, GridPlan, grid_points

    # one token is priced on an engine of its own (moe_rows): its attention runs without the causal flag (nothing
    # to mask) and a view keeps its -1 elsewhere, so its graph is no point of the others' polynomial
    many = {t for t in tokens if t > 1}
    if len(many) > DEGREE["prefill"] + 1 and "prefill" not in eng.pipeline.plans:
        eng.pipeline.plan_grid("prefill", GridPlan((1,), grid_points(many, DEGREE["prefill"]), DEGREE["prefill"]))


def moe_rows(ctx: Context) -> list[Row]:
    from ..llm.engine import Engine, Pricing

    out: list[Row] = []
    rows = list(ctx.rows("fused_moe_triton.csv"))
    tokens: dict[str, set[int]] = {}  # per expert shape, every token count its rows ask for
    alone: dict[tuple, Any] = {}      # the one-token rows' engines (no grid)
    for _, r in rows:
        key = config_name(*(int(r[c]) for c in ("experts", "hidden", "n_per_gpu", "top_k")))
        tokens.setdefault(key, set()).add(int(r["tokens"]))
    for where, r in rows:
        prof, dtype = r["graphroof_hw"], r["dtype"]
        e, h, n, k, t = (int(r[c]) for c in ("experts", "hidden", "n_per_gpu", "top_k", "tokens"))
        model = config_name(e, h, n, k)
        inputs = {"experts": e, "hidden": h, "n_per_gpu": n, "top_k": k, "tokens": t, "dtype": dtype}
        row = Row("fused_moe", where, ENGINE, prof, "", model, _regime(t), "moe-block", PRESET, "time_us", "s",
                  inputs, float(r["time_us"]) * 1e-6)
        row.excluded = excluded_reason("fused_moe", r, ctx.rules)
        hw = profile_or_none(prof)
        if hw is None:
            row.not_covered = f"no hardware profile {prof!r}"
        elif dtype not in ("bf16", "fp8"):
            row.not_covered = f"dtype {dtype!r}: bf16 or per-tensor fp8 (W8A8) only"
        if not row.excluded and not row.not_covered:
            config = str(DATA_DIR / "models" / model / "config.json")
            weights = "fp8" if dtype == "fp8" else None
            pricing = Pricing(runtime=PRESET, weights=weights)
            eng = ctx.engine(config, prof, pricing, dtype="bf16")
            if t > 1:
                _plan(eng, tokens[model])
            else:  # outside the grid's polynomial: the model's own one-token trace, on an engine without the grid
                one = (config, prof, pricing)
                if one not in alone:
                    alone[one] = Engine(ctx.source(config, dtype="bf16"), hw=ctx.hw(prof), pricing=pricing)
                eng = alone[one]
            row.predicted = moe_block_time_s(eng.step("prefill", 1, t))
            row.vendor = eng.hw.vendor
            row.command = (f"Engine('graphroof/validate/data/models/{model}/config.json', hw='{prof}', "
                           f"pricing=Pricing(runtime='{PRESET}'" + (", weights='fp8'" if weights else "") + "), "
                           f"dtype='bf16').step('prefill', 1, {t}): layer 0's mlp.experts kernels and its top-k sum, "
                           "time_realistic_s - t_launch_s" + ("" if weights else (
                               " (the same kernels: graphroof analyze "
                               f"graphroof/validate/data/models/{model}/config.json --hw {prof} --seq {t} --runtime "
                               f"{PRESET} --kernels -f json)")))
        out.append(row)
    return out
