"""Kernel-level rows (``kernels.csv``): the best dense matmul per accelerator (ml-engineering's MAMF table) and
DeepGEMM's fp8 GEMMs on H800, priced by :func:`graphroof.analyze` of a one-op graph (one ``aten.mm``, the row's
M x K by K x N in its dtype) under the ``compiled`` preset; the kernel's time without the host launch (both
sources time back-to-back kernels on the device).  TFLOP/s = 2 M N K / time.

The DeepGEMM rows' node runs as the ``deepgemm`` kernel family (``node.attrs["gemm_library"]``, what a user
sets for a model that calls DeepGEMM; :mod:`graphroof.timing.gemm`), its grouped rows (``groups``
GEMMs of ``M`` rows each, every group its own weights, equal groups as the source's benchmark runs them) as one
``aten.bmm``; TFLOP/s = 2 groups M N K / time.

The attention rows (:func:`attention_row_plan`) are scored where the row states everything: a forward pass, integer
batch / heads / length / head dim, ``causal`` True or False, an fp16 / bf16 dtype, a profile with no ``?``, and an
implementation graphroof has a kernel family for (:func:`attention_family`).  Their figure is the kernel time:
``time_ms``, or, where the source printed only TFLOP/s, ``FLOPs / TFLOP/s`` with the source's own FLOPs
(``4 b h s^2 d``, halved when causal: flash-attention's benchmarks/benchmark_flash_attention.py ``flops`` and
``efficiency = flop / time / 1e12``, so the time is recovered to the printed rounding); a row giving both is checked
(:data:`FLOPS_TOLERANCE`).  A fused kernel is priced by :func:`graphroof.validate.torchgpu.attention_time_s` (the
one-op SDPA graph under ``compiled`` with ``[kernels] attention_kernel`` the family); ``PyTorch naive attention``
(benchmark_flash_attention.py ``attention_pytorch``: ``baddbmm`` writes the scores, ``softmax``, ``einsum`` with V,
plain eager PyTorch timed by ``torch.utils.benchmark``, no compile, no CUDA graph) by :func:`naive_attention_time_s`,
the same graph under the naive byte model and ``pytorch-eager``."""

from __future__ import annotations

import re
from typing import Any

from .context import Context
from .data import excluded_reason
from .result import Row

__all__ = ["kernel_time_s", "attention_family", "attention_graph", "attention_time_s", "attention_row_plan",
           "grouped_mm_graph", "grouped_mm_time_s", "grouped_runtime", "kernel_rows", "matmul_graph",
           "matmul_time_s", "naive_attention_time_s", "FLOPS_TOLERANCE", "NAIVE_RUNTIME"]

#: largest relative disagreement between a row's ``tflops * time_ms`` and its shape's FLOPs before the row is left
#: not covered (the two figures then describe different work, and the source does not say which it means)
FLOPS_TOLERANCE = 0.02
#: the runtime the unfused (``naive``) attention rows run under: PyTorch eager, one ATen kernel per op (module doc)
NAIVE_RUNTIME = "pytorch-eager"


def matmul_graph(m: int, n: int, k: int, dtype: str = "bf16", out_dtype: str | None = None,
                 library: str = "", groups: int = 1) -> Any:
    """A one-op graph: ``C[m, n] = A[m, k] @ B[k, n]`` (``aten.mm``) in *dtype*, output in *out_dtype*; *groups*
    > 1: ``aten.bmm`` of *groups* such GEMMs, each with its own B (a grouped GEMM of equal groups).  *library*: the
    kernel family the node runs as (``node.attrs["gemm_library"]``, :mod:`graphroof.timing.gemm`)."""
    from ..graph import OpGraph, OpNode, TensorSpec

    attrs = {"gemm_library": library} if library else {}
    lead: tuple[int, ...] = (groups,) if groups > 1 else ()
    g = OpGraph(f"mm_{m}x{n}x{k}_{dtype}" + (f"_g{groups}" if groups > 1 else ""))
    node = OpNode("mm", "aten.bmm" if lead else "aten.mm",
                  inputs=(TensorSpec((*lead, m, k), dtype), TensorSpec((*lead, k, n), dtype)),
                  outputs=(TensorSpec((*lead, m, n), out_dtype or dtype),), attrs=attrs, scope="mm")
    g.add_op(node, ["a", "b"], ["c"])
    return g


def kernel_time_s(graph: Any, hw: Any, runtime: Any, **kw: Any) -> float:
    """The kernel time (no host launch) ``graphroof.analyze`` gives a one-op *graph* on *hw* under *runtime*: its
    kernels' ``time_realistic_s - t_launch_s`` (the benchmarks replay back-to-back calls: no host launch)."""
    from ..api import analyze

    ks = analyze(graph, hw=hw, runtime=runtime, **kw).to_dict()["kernels"]
    return float(sum(x["time_realistic_s"] - x.get("t_launch_s", 0.0) for x in ks))


def matmul_time_s(hw: Any, m: int, n: int, k: int, dtype: str, out_dtype: str | None = None, library: str = "",
                  groups: int = 1) -> float:
    """The kernel time (no host launch) graphroof.analyze gives the one-op matmul on *hw*."""
    return kernel_time_s(matmul_graph(m, n, k, dtype, out_dtype, library, groups), hw, "compiled")


def attention_graph(batch: int, heads: int, kv_heads: int, q_len: int, kv_len: int, head_dim: int, causal: bool,
                    dtype: str = "bf16") -> Any:
    """A one-op graph: ``aten.scaled_dot_product_attention(q, k, v, is_causal=causal)``."""
    from ..graph import OpGraph, OpNode, TensorSpec

    q = TensorSpec((batch, heads, q_len, head_dim), dtype)
    k = TensorSpec((batch, kv_heads, kv_len, head_dim), dtype)
    g = OpGraph(f"sdpa_{batch}x{heads}x{q_len}x{kv_len}")
    node = OpNode("sdpa", "aten.scaled_dot_product_attention", inputs=(q, k, k), outputs=(q,),
                  attrs={"is_causal": causal}, scope="sdpa")
    g.add_op(node, ["q", "k", "v"], ["o"])
    return g


def attention_time_s(hw: Any, *shape: Any, kernel: str = "auto") -> float:
    """The kernel time (no host launch) ``graphroof.analyze`` gives the one-op attention graph on *hw* under
    ``compiled`` running the attention kernel family *kernel*."""
    from dataclasses import replace

    from ..fuse.runtimes import get_runtime

    return kernel_time_s(attention_graph(*shape), hw, replace(get_runtime("compiled"), attention_kernel=kernel))


def grouped_mm_graph(experts: int, rows: int, k: int, n: int, dtype: str = "bf16", top_k: int = 1,
                     experts_touched: float | None = None) -> Any:
    """A one-op graph: ``torch._grouped_mm(x[rows, k], w[experts, k, n], offs=offs[experts])`` -> ``[rows, n]``
    (``aten._grouped_mm``, MoE expert GEMMs: each row of ``x`` times its expert's weight), as a traced MoE layer's
    node (:func:`graphroof.frontends.moe.mark_moe_routing`): ``w`` is a weight, the routing facts are node attrs
    (``moe_experts``, ``moe_top_k``, ``moe_tokens`` = rows / *top_k*) and, given, ``moe_experts_touched`` (the
    experts that receive rows, which the counting rule reads the weights of; None: the uniform-routing
    expectation).  ``moe_balanced``: the benchmark splits the rows evenly over the experts (tools/measure_gpu.py
    ``grouped``), not by a router's random draw: no spread of rows per expert (timing.moe.group_m_tiles)."""
    from ..graph import OpGraph, OpNode, Role, TensorSpec

    attrs: dict[str, Any] = {"moe_experts": experts, "moe_top_k": top_k, "moe_tokens": rows // max(top_k, 1),
                             "moe_balanced": True}
    if experts_touched is not None:
        attrs["moe_experts_touched"] = float(experts_touched)
    g = OpGraph(f"grouped_mm_{experts}x{rows}x{n}x{k}_{dtype}")
    node = OpNode("grouped_mm", "aten._grouped_mm",
                  inputs=(TensorSpec((rows, k), dtype), TensorSpec((experts, k, n), dtype, Role.WEIGHT),
                          TensorSpec((experts,), "int32"), None),
                  outputs=(TensorSpec((rows, n), dtype),), attrs=attrs, scope="moe")
    g.add_op(node, ["x", "w", "offs", None], ["y"])
    return g


def grouped_runtime() -> Any:
    """The plain ``compiled`` preset: its ``[kernels] moe_grouped_gemm = "torch"`` prices ``torch._grouped_mm`` as
    PyTorch runs it on the device (graphroof.timing.moe.grouped_gemm_on): on the H100 / H200 of the grouped rows
    (compute capability 9.0, bf16) one CUTLASS grouped GEMM over all the experts (aten/src/ATen/native/cuda/GroupMM.cu,
    ``bf16bf16_grouped_gemm_impl_sm90_sm100``, the problem sizes per group from ``offs``), not a launch per expert."""
    from ..fuse.runtimes import get_runtime

    return get_runtime("compiled")


def grouped_mm_time_s(hw: Any, experts: int, rows: int, k: int, n: int, dtype: str = "bf16", top_k: int = 1,
                      experts_touched: float | None = None) -> float:
    """The kernel time (no host launch) graphroof.analyze gives the one-op grouped GEMM on *hw* under
    :func:`grouped_runtime` (``compiled``: ``torch._grouped_mm`` as PyTorch runs it on *hw*)."""
    return kernel_time_s(grouped_mm_graph(experts, rows, k, n, dtype, top_k, experts_touched), hw, grouped_runtime())


def naive_attention_time_s(hw: Any, batch: int, heads: int, kv_heads: int, q_len: int, kv_len: int, head_dim: int,
                           causal: bool, dtype: str = "fp16") -> float:
    """The kernel time (no host launch) ``graphroof.analyze`` gives the one-op attention graph
    (:func:`graphroof.validate.torchgpu.attention_graph`) on *hw* under the naive byte model (scores and
    probabilities written and read back, the whole square: ``causal="full"``) and :data:`NAIVE_RUNTIME`."""
    g = attention_graph(batch, heads, kv_heads, q_len, kv_len, head_dim, causal, dtype)
    return kernel_time_s(g, hw, NAIVE_RUNTIME, attention="naive", causal="full")


def attention_family(implementation: str) -> str | None:
    """graphroof's attention kernel family for a row's ``implementation`` (``naive``: the unfused byte model),
    None where it has none (Triton kernels, anything else)."""
    t = implementation.strip().lower()
    if "triton" in t:
        return None
    if t.startswith("fa2") or "fav2" in t or "(flash2)" in t:
        return "flash2"
    if t.startswith("fa3") or "flash_v3" in t or "fav3" in t:
        return "flash3"
    if t.startswith("cudnn"):
        return "cudnn"
    if t == "pytorch naive attention":
        return "naive"
    return None


def _int(text: str) -> int | None:
    return int(text) if re.fullmatch(r"\d+", text.strip()) else None


def attention_row_plan(r: dict[str, str]) -> tuple[dict[str, Any], str]:
    """(plan, why not) for an attention row of kernels.csv: *plan* holds ``batch``, ``heads``, ``seqlen``,
    ``head_dim``, ``causal``, ``dtype``, ``profile``, ``family``, ``flops`` and ``time_s`` (the measured kernel
    time) where the row is fully stated; else *why not* lists every missing or unmatched fact."""
    why: list[str] = []
    if r["direction"].strip() != "fwd":
        why.append(f"direction {r['direction']!r} is not a stated forward pass")
    dims = {k: _int(r[c]) for k, c in (("batch", "batch"), ("heads", "nheads"), ("seqlen", "seqlen"),
                                       ("head_dim", "headdim"))}
    missing = [c for k, c in (("batch", "batch"), ("heads", "nheads"), ("seqlen", "seqlen"),
                              ("head_dim", "headdim")) if dims[k] is None]
    if missing:
        why.append(f"{', '.join(missing)} not stated as an integer")
    causal = {"True": True, "False": False}.get(r["causal"].strip())
    if causal is None:
        why.append(f"causal {r['causal']!r} not stated")
    words = r["dtype"].split()
    dtype = words[0] if words and words[0] in ("fp16", "bf16") and "not stated" not in r["dtype"] else None
    if dtype is None:
        why.append(f"dtype {r['dtype']!r} not stated")
    prof, pwhy = _profile(r["graphroof_hw"])
    if pwhy:
        why.append(pwhy)
    else:
        from .data import profile_or_none

        if profile_or_none(prof) is None:
            why.append(f"no graphroof profile {prof!r}")
    family = attention_family(r["implementation"])
    if family is None:
        why.append(f"no graphroof kernel family for {r['implementation']!r}")
    plan: dict[str, Any] = {}
    if not why:
        b, h, s, d = (int(dims[k] or 0) for k in ("batch", "heads", "seqlen", "head_dim"))
        flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
        tflops = float(r["tflops"]) if r["tflops"].strip() else None
        time_s = float(r["time_ms"]) / 1e3 if r["time_ms"].strip() else None
        if time_s is not None and tflops is not None:
            implied = tflops * 1e12 * time_s
            if abs(implied / flops - 1.0) > FLOPS_TOLERANCE:
                why.append(f"time_ms x tflops = {implied:.4g} FLOPs, the shape's 4bhs^2d{' / 2' if causal else ''} "
                           f"= {flops:.4g} ({implied / flops - 1:+.1%}): the source does not say which work it timed")
        elif time_s is None and tflops is not None:
            time_s = flops / (tflops * 1e12)  # the source printed flops / time / 1e12 (module doc)
        elif time_s is None:
            why.append("neither time_ms nor tflops in the row")
        plan = {"batch": b, "heads": h, "seqlen": s, "head_dim": d, "causal": bool(causal), "dtype": dtype,
                "profile": prof, "family": family, "flops": flops, "time_s": time_s,
                "time_from": "time_ms" if r["time_ms"].strip() else "flops / tflops"}
    return (plan if not why else {}), "; ".join(why)


def _attention_row(ctx: Context, where: str, r: dict[str, str]) -> Row:
    """An attention row of kernels.csv: the kernel time, scored where :func:`attention_row_plan` allows."""

    plan, why = attention_row_plan(r)
    inputs: dict[str, Any] = {k: r[k] for k in ("batch", "nheads", "seqlen", "headdim", "causal", "direction")
                              if r.get(k)}
    inputs["dtype"] = r["dtype"]
    inputs["gpu"] = r["gpu"]
    fam = plan.get("family") or attention_family(r["implementation"]) or "none"
    naive = fam == "naive"
    runtime = NAIVE_RUNTIME if naive else "compiled"
    regime = f"{r['direction']} attention ({fam})" + (", causal" if r["causal"].strip() == "True" else "")
    measured = float(plan["time_s"]) if plan else (float(r["time_ms"]) / 1e3 if r["time_ms"].strip() else float("nan"))
    row = Row("kernels", where, r["implementation"], plan.get("profile", ""), "", "attention", regime, "kernel-time",
              runtime, "time_s", "s", inputs, measured)
    row.excluded = excluded_reason("kernels", r, ctx.rules)
    if why:
        row.not_covered = why
        return row
    inputs["time_from"] = plan["time_from"]
    b, h, s, d, causal, dt, prof = (plan[k] for k in ("batch", "heads", "seqlen", "head_dim", "causal", "dtype",
                                                       "profile"))
    shape = (b, h, h, s, s, d, causal, dt)

    def price(hw: Any) -> float:
        return naive_attention_time_s(hw, *shape) if naive else attention_time_s(hw, *shape, kernel=fam)

    hw = ctx.hw(prof)
    row.vendor = hw.vendor
    row.predicted = price(hw)
    held = ctx.holdout_hw(prof, "kernels")
    if held is not None and ctx.holdout:
        row.holdout[ctx.holdout] = price(held)
    args = f"{b}, {h}, {h}, {s}, {s}, {d}, {causal}, '{dt}'"
    if naive:
        row.command = (f"graphroof.analyze(graphroof.validate.torchgpu.attention_graph({args}), hw='{prof}', "
                       f"runtime='{NAIVE_RUNTIME}', attention='naive', causal='full'): "
                       "kernel time_realistic_s - t_launch_s")
    else:
        row.command = (f"graphroof.validate.torchgpu.attention_time_s('{prof}', {args}, kernel='{fam}') = "
                       f"graphroof.analyze(graphroof.validate.torchgpu.attention_graph({args}), hw='{prof}', "
                       f"runtime=<compiled with [kernels] attention_kernel = '{fam}'>): "
                       "kernel time_realistic_s - t_launch_s")
    return row


def _dtype(text: str) -> str | None:
    t = text.lower()
    if t.startswith("fp8"):
        return "fp8"
    if t.startswith("bf16"):
        return "bf16"
    if t.startswith("fp16"):
        return "fp16"
    return None


def _profile(text: str) -> tuple[str, str]:
    """(profile, why not) from the row's ``graphroof_hw``: a ``?`` or an empty mapping is not covered."""
    name = re.split(r"\s|\(", text.strip(), maxsplit=1)[0] if text.strip() else ""
    if not name:
        return "", "no graphroof profile for this accelerator"
    if name.endswith("?"):
        return "", f"uncertain profile mapping {text!r} (the source does not say which variant)"
    return name, ""


def kernel_rows(ctx: Context) -> list[Row]:
    out: list[Row] = []
    for where, r in ctx.rows("kernels.csv"):
        src = r["source_id"]
        if src not in ("MLENG_MAMF", "DEEPGEMM_README"):
            out.append(_attention_row(ctx, where, r))
            continue
        prof, why = _profile(r["graphroof_hw"])
        dtype = _dtype(r["dtype"])
        engine = {"MLENG_MAMF": "torch.mm (MAMF best shape)", "DEEPGEMM_README": "DeepGEMM"}[src]
        inputs = {k: r[k] for k in ("M", "N", "K", "groups") if r.get(k)}
        inputs["dtype"] = r["dtype"]
        inputs["gpu"] = r["gpu"]
        meas = float(r["tflops"]) if r["tflops"] else float("nan")
        kind = "grouped GEMM" if "grouped" in r["kernel"].lower() else "dense GEMM"
        regime = f"{dtype or r['dtype']} {kind}"
        row = Row("kernels", where, engine, prof, "", "gemm", regime, "tflops", "compiled", "tflops", "TFLOP/s",
                  inputs, meas, is_rate=True)
        row.excluded = excluded_reason("kernels", r, ctx.rules)
        if "grouped" in r["kernel"].lower() and src != "DEEPGEMM_README":
            row.not_covered = "grouped (MoE) GEMM: no one-op grouped-GEMM graph in the validation yet"
        elif why:
            row.not_covered = why
        elif dtype is None:
            row.not_covered = f"dtype {r['dtype']!r} not stated"
        elif not r["tflops"]:
            row.not_covered = "no TFLOP/s in the row"
        else:
            hw = ctx.hw(prof)
            m, n, k = int(r["M"]), int(r["N"]), int(r["K"])
            g = int(r["groups"] or 1)  # DeepGEMM's grouped tables: groups x (M per group) rows, a B per group
            out_dtype = "bf16" if dtype == "fp8" else None
            lib = "deepgemm" if src == "DEEPGEMM_README" else ""
            flops = 2.0 * g * m * n * k
            t = matmul_time_s(hw, m, n, k, dtype, out_dtype, lib, g)
            row.vendor = hw.vendor
            row.predicted = flops / t / 1e12
            held = ctx.holdout_hw(prof, "kernels")
            if held is not None and ctx.holdout:
                row.holdout[ctx.holdout] = flops / matmul_time_s(held, m, n, k, dtype, out_dtype, lib, g) / 1e12
            args = (f", '{out_dtype or dtype}'" if out_dtype or lib else "") + (f", '{lib}'" if lib else "") + (
                f", groups={g}" if g > 1 else "")
            row.command = (f"graphroof.analyze(graphroof.validate.kernels.matmul_graph({m}, {n}, {k}, '{dtype}'"
                           + args + f"), hw='{prof}', runtime='compiled'): "
                           + ("2 groups MNK" if g > 1 else "2MNK") + " / (kernel time_realistic_s - t_launch_s)")
        out.append(row)
    return out
