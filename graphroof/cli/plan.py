"""``graphroof plan MODEL --hw h100,h200 --rate 4,16,64 --slo-ttft 2s --slo-tpot 50ms [--tp 1,2,4,8] [--weights
bf16,fp8] [--kv fp8] [--max-num-seqs 64,128,256] [--max-batched-tokens 2048,8192] [--gpu-budget 64] [--jobs N |
--ray ADDRESS|local]``: search deployment configurations (:func:`graphroof.plan`; docs/plan.md).

Every argument is checked before the model is built: a bad list, SLO, rate, engine name or a GPU budget below
one replica is one line ``graphroof: error: ...``, exit 1, and no output file.
"""

from __future__ import annotations

import argparse

from ..errors import InputError
from .options import check_output_path, parse_int_list, parse_one_int, parse_seconds, run_options
from .outfile import resolve_output, say_written
from .serve import parse_rates

__all__ = ["plan_kwargs", "FORMATS"]

NAME = "plan"
HELP = ("search deployment configurations (devices x TP x dtypes x batch limits) for request rates under SLOs: the "
        "Pareto frontier of tok/s per GPU vs tok/s per user, the cheapest configuration per rate, engine flags")

FORMATS = ("terminal", "markdown", "json", "csv", "html")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="zoo name (llama-3-70b), transformers config.json (or its folder), or "
                   "'pkg.module:factory'")
    p.add_argument("--hw", required=True, help="devices to search, comma-separated (h100,h200,mi300x)")
    p.add_argument("--rate", required=True, help="offered request rates in req/s, comma-separated")
    p.add_argument("--slo-ttft", required=True, help="SLO: time to first token with its unit, e.g. 2s")
    p.add_argument("--slo-tpot", default=None, help="SLO: time per output token with its unit, e.g. 50ms")
    p.add_argument("--slo-percentile", default="99", help="percentile the SLOs hold at (default 99)")
    p.add_argument("--tp", default="1,2,4,8", help="tensor-parallel degrees (default 1,2,4,8)")
    p.add_argument("--pp", default="1", help="pipeline-parallel degrees (when this build prices PP; default 1)")
    p.add_argument("--ep", default="1", help="expert-parallel degrees (when this build prices EP; default 1)")
    p.add_argument("--dp", default="1", help="attention data-parallel degrees (when priced; default 1)")
    p.add_argument("--weights", default=None, help="weight dtypes, comma-separated (bf16,fp8; default the model's)")
    p.add_argument("--kv", default=None, help="KV-cache dtypes, comma-separated (bf16,fp8; default the model's)")
    p.add_argument("--max-num-seqs", default="64,128,256", help="batch limits: running sequences (default 64,128,256)")
    p.add_argument("--max-batched-tokens", default="2048,8192", help="batch limits: tokens per step (default "
                   "2048,8192)")
    p.add_argument("--prompt-len", default="lognormal:1024:512", help="prompt tokens: fixed:N, uniform:A:B, "
                   "lognormal:MEAN:STD, file:PATH (default lognormal:1024:512)")
    p.add_argument("--gen-len", default="lognormal:256:128", help="output tokens, same forms (default "
                   "lognormal:256:128)")
    p.add_argument("--arrival", default="poisson", help="poisson (default), gamma:CV or constant")
    p.add_argument("--seed", default="0", help="seed of the request stream (default 0)")
    p.add_argument("--requests", default="1000", help="requests per simulation of the frontier and the picks "
                   "(default 1000)")
    p.add_argument("--search-requests", default="200", help="requests per simulation while searching (default 200)")
    p.add_argument("--gpu-budget", default=None, help="most GPUs in all")
    p.add_argument("--usd-per-hour", default=None, help="$ per GPU-hour: one number, or hw=price pairs "
                   "(h100=3.0,h200=4.5); default the profiles' list prices")
    p.add_argument("--engines", default="vllm,sglang,trtllm", help="engines to write flags for (default all three)")
    p.add_argument("--jobs", "-j", default=None, help="local processes (default: the CPU count)")
    p.add_argument("--ray", default=None, metavar="ADDRESS", help="fan out over a Ray cluster (an address, or "
                   "'local' to start one here); needs pip install 'graphroof[ray]'")
    p.add_argument("--runtime", default="serving", metavar="PRESET",
                   help="engine preset the steps are priced under (default serving; `graphroof runtimes` lists them)")
    p.add_argument("--gpu-mem-util", default="0.9", help="share of device memory the engine may use (default 0.9)")
    p.add_argument("--format", "-f", default="terminal", choices=FORMATS, help="terminal | markdown | json | csv | "
                   "html (the frontier chart and the tables)")
    p.add_argument("-o", "--output", default=None, help="output file, or - for stdout (default: stdout; an html "
                   "page goes to MODEL-report.html)")


def _names(text: str | None) -> list[str | None] | None:
    if text is None:
        return None
    vals = [v.strip() for v in text.split(",") if v.strip()]
    return [None if v in ("native", "none") else v for v in vals] or None


def _prices(text: str | None) -> float | dict[str, float] | None:
    if text is None:
        return None
    try:
        if "=" not in text:
            return float(text.strip().lstrip("$"))
        out = {}
        for part in text.split(","):
            k, _, v = part.partition("=")
            out[k.strip()] = float(v.strip().lstrip("$"))
        return out
    except ValueError:
        raise InputError(f"--usd-per-hour {text!r}: expected a number or hw=price pairs, e.g. h100=3.0,h200=4.5") \
            from None


def plan_kwargs(args: argparse.Namespace) -> dict:
    """Every argument of :func:`graphroof.plan` from the command line (checked there before any model is built)."""
    try:
        pct = float(args.slo_percentile)
    except ValueError:
        raise InputError(f"--slo-percentile {args.slo_percentile!r}: expected a number") from None
    try:
        frac = float(args.gpu_mem_util)
    except ValueError:
        raise InputError(f"--gpu-mem-util {args.gpu_mem_util!r}: expected a number") from None
    try:
        seed = int(args.seed)
    except ValueError:
        raise InputError(f"--seed {args.seed!r}: expected an integer") from None
    return dict(hw=[h.strip() for h in args.hw.split(",") if h.strip()], rate=parse_rates(args.rate),
                slo_ttft_s=parse_seconds(args.slo_ttft, "--slo-ttft"),
                slo_tpot_s=parse_seconds(args.slo_tpot, "--slo-tpot"), slo_percentile=pct,
                tp=parse_int_list(args.tp, "--tp"), pp=parse_int_list(args.pp, "--pp"),
                ep=parse_int_list(args.ep, "--ep"), dp=parse_int_list(args.dp, "--dp"),
                weights=_names(args.weights), kv=_names(args.kv),
                max_num_seqs=parse_int_list(args.max_num_seqs, "--max-num-seqs"),
                max_batched_tokens=parse_int_list(args.max_batched_tokens, "--max-batched-tokens"),
                prompt_len=args.prompt_len, gen_len=args.gen_len, arrival=args.arrival, seed=seed,
                requests=parse_one_int(args.requests, "--requests"),
                search_requests=parse_one_int(args.search_requests, "--search-requests"),
                gpu_budget=None if args.gpu_budget is None else parse_one_int(args.gpu_budget, "--gpu-budget"),
                usd_per_hour=_prices(args.usd_per_hour), engines=[e for e in args.engines.split(",") if e.strip()],
                jobs=None if args.jobs is None else parse_one_int(args.jobs, "--jobs"), ray=args.ray,
                runtime=args.runtime, gpu_mem_util=frac)


def run(args: argparse.Namespace) -> int:
    from ..planner import plan
    from ..report import render, write_output
    from .progress import Progress

    args.output = resolve_output(args.output, args.format, args.model)
    check_output_path(args.output)
    kw = plan_kwargs(args)
    progress = Progress(quiet=args.quiet)
    r = plan(args.model, progress=progress, options=run_options(args), **kw)
    progress(f"writing the {args.format} report")
    write_output(render(r, args.format), args.output)
    say_written([args.output], args.quiet)
    progress.done()
    return 0
