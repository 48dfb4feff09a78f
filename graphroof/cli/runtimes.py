"""``graphroof runtimes``: the engine presets ``--runtime`` accepts (``--runtime list`` prints the same)."""

from __future__ import annotations

import argparse

NAME = "runtimes"
HELP = "list the runtime presets (engines) --runtime accepts"

__all__ = ["NAME", "HELP", "add_arguments", "run", "listing"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", default=None,
                   help="show one preset (name, alias or a preset .toml file) with its capabilities and sources")


def listing() -> str:
    """One row per preset: name, aliases, fusion, launch and kernel capabilities."""
    from tabulate import tabulate

    from ..fuse.runtimes import RUNTIMES

    def yn(v: bool) -> str:
        return "yes" if v else "no"

    rows = []
    for rt in RUNTIMES.values():
        fusion = ", ".join(k for k, on in (("chains", rt.fuse_vector_chains), ("epilogues", rt.fuse_epilogues),
                                           ("QKV / gate+up", rt.fuse_horizontal_gemms),
                                           ("BN folded", rt.fold_batch_norm),
                                           ("fused MHA layout", rt.attention_writes_layout),
                                           ("+ layout copies", rt.layout_copies),
                                           ("+ norm / softmax statistics passes", rt.reduction_passes),
                                           ("unfused MHA as 3 kernels", rt.split_unfused_attention)) if on) or "none"
        if rt.overlap_launch:
            launch = "host ahead of device" + (f", +{rt.host_overhead_per_kernel_s * 1e6:g} us/kernel host"
                                               if rt.host_overhead_per_kernel_s else "") + (
                f", +{rt.host_overhead_per_library_call_s * 1e6:g} us/library call"
                if rt.host_overhead_per_library_call_s else "")
        else:
            launch = "added per kernel"
        if rt.cuda_graphs:
            launch += "; decode as CUDA graph"
        if rt.autocast:
            launch += "; autocast weight casts"
        rows.append([rt.name, ", ".join(rt.aliases), fusion, launch, rt.allreduce, yn(rt.gqa_shared_kv),
                     rt.weight_only_gemm, yn(rt.fp8_gemm), (rt.moe_grouped_gemm if isinstance(rt.moe_grouped_gemm, str) else yn(rt.moe_grouped_gemm)), rt.gemm_schedule])
    table = tabulate(rows, headers=["preset", "aliases", "fusion", "launches", "all-reduce", "GQA shared KV",
                                    "weight-only GEMM", "fp8 GEMM", "MoE grouped", "GEMM schedule"],
                     disable_numparse=True)
    return (table + "\n\nuse: --runtime NAME (or a preset .toml file, see graphroof/fuse/presets/); "
            "graphroof runtimes NAME shows one preset with its sources")


def detail(name: str) -> str:
    """One preset: its fields and the [sources] behind each capability claim."""
    from dataclasses import fields

    from ..fuse.runtimes import get_runtime

    rt = get_runtime(name)
    out = [f"{rt.name}: {rt.description}"]
    if rt.engine:
        out.append(f"engine: {rt.engine}")
    for f in fields(rt):
        if f.name not in ("name", "description", "engine", "sources", "path"):
            out.append(f"  {f.name} = {getattr(rt, f.name)!r}")
    if rt.sources:
        out.append("sources:")
        out += [f"  {k}: {v}" for k, v in rt.sources.items()]
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    print(detail(args.name) if args.name else listing())
    return 0
