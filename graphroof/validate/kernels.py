"""Kernel-level rows (``kernels.csv``): the best dense matmul per accelerator (ml-engineering's MAMF table) and
DeepGEMM's fp8 GEMMs on H800, priced by :func:`graphroof.analyze` of a one-op graph (one ``aten.mm``, the row's
M x K by K x N in its dtype) under the ``compiled`` preset; the kernel's time without the host launch (both
sources time back-to-back kernels on the device).  TFLOP/s = 2 M N K / time.

The DeepGEMM rows' node runs as the ``deepgemm`` kernel family (``node.attrs["gemm_library"]``, what a user
sets for a model that calls DeepGEMM; :mod:`graphroof.timing.gemm`), its grouped rows (``groups``
GEMMs of ``M`` rows each, every group its own weights, equal groups as the source's benchmark runs them) as one
``aten.bmm``; TFLOP/s = 2 groups M N K / time.  The attention rows are reported as not covered."""

from __future__ import annotations

import re
from typing import Any

from .context import Context
from .data import excluded_reason
from .result import Row

__all__ = ["grouped_mm_graph", "grouped_mm_time_s", "grouped_runtime", "kernel_rows", "matmul_graph", "matmul_time_s"]


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


def matmul_time_s(hw: Any, m: int, n: int, k: int, dtype: str, out_dtype: str | None = None, library: str = "",
                  groups: int = 1) -> float:
    """The kernel time (no host launch) graphroof.analyze gives the one-op matmul on *hw*."""
    from ..api import analyze

    a = analyze(matmul_graph(m, n, k, dtype, out_dtype, library, groups), hw=hw, runtime="compiled")
    ks = a.to_dict()["kernels"]
    return float(sum(x["time_realistic_s"] - x.get("t_launch_s", 0.0) for x in ks))


def grouped_mm_graph(experts: int, rows: int, k: int, n: int, dtype: str = "bf16", top_k: int = 1,
                     experts_touched: float | None = None) -> Any:
    """A one-op graph: ``torch._grouped_mm(x[rows, k], w[experts, k, n], offs=offs[experts])`` -> ``[rows, n]``
    (``aten._grouped_mm``, MoE expert GEMMs: each row of ``x`` times its expert's weight), as a traced MoE layer's
    node (:func:`graphroof.frontends.moe.mark_moe_routing`): ``w`` is a weight, the routing facts are node attrs
    (``moe_experts``, ``moe_top_k``, ``moe_tokens`` = rows / *top_k*) and, given, ``moe_experts_touched`` (the
    experts that receive rows, which the counting rule reads the weights of; None: the uniform-routing
    expectation)."""
    from ..graph import OpGraph, OpNode, Role, TensorSpec

    attrs: dict[str, Any] = {"moe_experts": experts, "moe_top_k": top_k, "moe_tokens": rows // max(top_k, 1)}
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
    from ..api import analyze

    g = grouped_mm_graph(experts, rows, k, n, dtype, top_k, experts_touched)
    ks = analyze(g, hw=hw, runtime=grouped_runtime()).to_dict()["kernels"]
    return float(sum(x["time_realistic_s"] - x.get("t_launch_s", 0.0) for x in ks))


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
        prof, why = _profile(r["graphroof_hw"])
        dtype = _dtype(r["dtype"])
        gemm = src in ("MLENG_MAMF", "DEEPGEMM_README")
        family = "gemm" if gemm else "attention"
        engine = {"MLENG_MAMF": "torch.mm (MAMF best shape)", "DEEPGEMM_README": "DeepGEMM"}.get(src, src)
        inputs = {k: r[k] for k in ("M", "N", "K", "groups", "batch", "nheads", "seqlen", "headdim", "causal",
                                    "direction") if r.get(k)}
        inputs["dtype"] = r["dtype"]
        inputs["gpu"] = r["gpu"]
        meas = float(r["tflops"]) if r["tflops"] else float("nan")
        kind = ("grouped GEMM" if "grouped" in r["kernel"].lower() else "dense GEMM") if gemm else "attention"
        regime = f"{dtype or r['dtype']} {kind}"
        row = Row("kernels", where, engine, prof, "", family, regime, "tflops", "compiled", "tflops", "TFLOP/s",
                  inputs, meas, is_rate=True)
        row.excluded = excluded_reason("kernels", r, ctx.rules)
        if not gemm:
            row.not_covered = "attention benchmark: no one-op attention graph in the validation yet"
        elif "grouped" in r["kernel"].lower() and src != "DEEPGEMM_README":
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
