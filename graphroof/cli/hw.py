"""``graphroof hw list | show NAME``: the shipped hardware profiles."""

from __future__ import annotations

import argparse

NAME = "hw"
HELP = "list or show hardware profiles"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="hw_cmd", metavar="{list,show}")
    sub.required = True
    sub.add_parser("list", help="list the shipped hardware profiles")
    s = sub.add_parser("show", help="show one profile with its sources")
    s.add_argument("name", help="profile name, alias or file path")


def run(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from ..hardware import list_profiles, load_hardware
    from ..units import fmt_bytes, fmt_rate

    if args.hw_cmd == "list":
        rows = []
        for p in list_profiles():
            bf16 = p.matrix_peak_flops_per_s.get("bf16") or p.matrix_peak_flops_per_s.get("fp16")
            rows.append([p.name, ", ".join(p.aliases), fmt_rate(bf16) if bf16 else "-",
                         fmt_rate(p.mem_bw_bytes_per_s, "B/s"),
                         fmt_bytes(p.mem_capacity_bytes) if p.mem_capacity_bytes else "-",
                         f"{p.ridge_point('bf16'):.0f}"])
        print(tabulate(rows, headers=["name", "aliases", "bf16/fp16 matrix (dense)", "memory bw", "capacity",
                                      "ridge (FLOP/B)"], disable_numparse=True))
        return 0
    p = load_hardware(args.name)
    print(f"{p.label}  [{p.name}]  {p.vendor} {p.kind}; {p.origin} timing constants; file: {p.path}")
    if p.aliases:
        print(f"aliases: {', '.join(p.aliases)}")
    rows = [[f"matrix.{k}", fmt_rate(v), f"{v / p.mem_bw_bytes_per_s:.1f}"] for k, v in p.matrix_peak_flops_per_s.items()]
    rows += [[f"vector.{k}", fmt_rate(v), f"{v / p.mem_bw_bytes_per_s:.1f}"] for k, v in p.vector_peak_flops_per_s.items()]
    print(tabulate(rows, headers=["peak (dense)", "FLOP/s", "ridge FLOP/B"], disable_numparse=True))
    print(f"memory: {fmt_rate(p.mem_bw_bytes_per_s, 'B/s')}" +
          (f", capacity {fmt_bytes(p.mem_capacity_bytes)}" if p.mem_capacity_bytes else "") +
          (f", on-chip cache {fmt_bytes(p.onchip_cache_bytes)}" if p.onchip_cache_bytes else ""))
    if p.interconnect_bw_bytes_per_s:
        print(f"interconnect: {p.interconnect_name} {fmt_rate(p.interconnect_bw_bytes_per_s, 'B/s')} per direction")
    print(f"efficiency (realistic mode): matrix {p.matrix_efficiency:g}, vector {p.vector_efficiency:g}, "
          f"memory {p.mem_bw_efficiency:g}, interconnect {p.interconnect_efficiency:g}, "
          f"launch overhead {p.launch_overhead_s:g} s/op")
    if p.usd_per_hour is not None:
        print(f"list price: ${p.usd_per_hour:g} per GPU-hour on demand ({p.price_source}, {p.price_date}); "
              "`graphroof sweep` uses it when --usd-per-hour is not given")
    for k, v in p.sources.items():
        print(f"source [{k}]: {v}")
    return 0
