"""``graphroof calibrate``: measure this device's GEMM / vector FLOP/s and memory bandwidth into a hardware profile."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import InputError

NAME = "calibrate"
HELP = "measure this device's GEMM/vector FLOP/s and memory bandwidth into a hardware profile"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("-o", "--output", default=None,
                   help="write the measured hardware profile here (.yaml/.yml or .json; '-' = YAML on stdout, "
                        "the report then goes to stderr); without -o only the report is printed")
    p.add_argument("--name", default=None, help="profile name (default: the output file's stem, else 'local')")
    p.add_argument("--compare", action="append", metavar="PROFILE", default=None,
                   help="also print measured vs this profile (name, alias or file; repeatable)")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes and few repeats: a smoke test of the pipeline (about 1 s of measuring); the "
                        "profile is marked as a smoke profile")
    p.add_argument("--budget", default=None,
                   help="time per benchmark with its unit, e.g. 4s or 500ms (warm-up + samples; default 4s, quick "
                        "50ms): fewer samples, and GEMM sizes skipped, when a kernel is slow")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--repeats", type=int, default=None, help="timed samples per benchmark (default 7; quick 3)")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls before timing (default 2; quick 0)")
    p.add_argument("--gemm-sizes", default=None, help="GEMM sizes n (n x n x n), comma-separated (default 1024,2048)")
    p.add_argument("--dtypes", default=None, help="dtypes to try, comma-separated from fp64,fp32,bf16,fp16 (default all)")
    from .options import module_doc

    p.formatter_class = argparse.RawDescriptionHelpFormatter
    from .options import plain_text

    p.epilog = "what is measured:" + plain_text(module_doc("graphroof.measure.calibrate")).split("What is measured", 1)[1].split(":", 1)[1].split(
        "Timing goes through")[0]


def run(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from ..hardware import load_hardware
    from ..measure.calibrate import calibrate, check_device, compare_rows, default_plan, parse_dtypes, parse_sizes
    from ..report import write_output

    out = args.output
    if out not in (None, "-") and Path(out).suffix not in (".yaml", ".yml", ".json"):
        raise InputError(f"-o {out!r}: the profile is YAML or JSON; give a name ending in .yaml, .yml or .json")
    if args.threads is not None and args.threads < 1:
        raise InputError("--threads must be >= 1")
    refs = [load_hardware(c) for c in (args.compare or [])]  # bad names fail before minutes of measuring
    budget_s = None
    if args.budget is not None:
        from ..units import parse_time_s, warn_implausible

        budget_s = parse_time_s(args.budget, "--budget")
        warn_implausible(budget_s, "--budget", "time")
    plan = default_plan(args.quick, repeats=args.repeats, warmup=args.warmup, budget_s=budget_s,
                        gemm_sizes=parse_sizes(args.gemm_sizes, "--gemm-sizes"), dtypes=parse_dtypes(args.dtypes))
    plan.check()
    check_device(args.device)
    report = sys.stderr if out == "-" else sys.stdout
    progress = None if args.quiet else (lambda s: print(f"graphroof: measuring {s}", file=sys.stderr))
    cal = calibrate(args.device, plan, threads=args.threads, progress=progress)
    name = args.name or (Path(out).stem if out not in (None, "-") else "local")

    h = cal.host
    print(f"device: {h['model']} ({args.device}, {h['threads']} threads), torch {h['torch']}, {h['date']}", file=report)
    print(f"median of {plan.repeats} samples after {plan.warmup} warm-up; spread = (max - min) / median", file=report)
    print(tabulate(cal.rows(), headers=["figure", "benchmark", "median/call", "rate", "spread", "calls/sample"],
                   disable_numparse=True), file=report)
    for s in cal.skipped:
        print(f"skipped {s}", file=report)
    for s in cal.notes:
        print(f"note: {s}", file=report)
    for w in cal.warnings:
        print(f"graphroof: warning: {w}", file=sys.stderr)
    for ref in refs:
        print(f"\nmeasured vs {ref.label} [{ref.name}] (profile peaks, not derated by its efficiency factors)",
              file=report)
        print(tabulate(compare_rows(cal, ref), headers=["figure", "measured", ref.name, "measured / profile"],
                       disable_numparse=True), file=report)
    if out is not None:
        text = (json.dumps(cal.profile_dict(name), indent=2) + "\n") if str(out).endswith(".json") \
            else cal.to_yaml(name)
        write_output(text, out)
        if out != "-":
            print(f"\nwrote {out}: use it with --hw {out}", file=report)
    return 0
