"""``graphroof sweep MODEL --hw a100,h100 --batch 1,8,64 --prompt 512,2048 --gen 256 --weights bf16,fp8 --tp 1,2
--max-tpot 50ms --usd-per-hour a100=1.8,h100=3.2``: every point, the frontier per device, the SLO picks.

A language model (zoo LLM, decoder config.json, ONNX with a KV cache, or any model with ``--prompt`` / ``--gen``
given) is swept as an LLM (:func:`graphroof.sweeps.sweep_llm`); any other model over ``--batch`` only
(:func:`graphroof.sweeps.batch_sweep`: bound, latency, throughput per batch, the compute-bound batch solved).
Everything checkable from the arguments is checked before the model is built or traced.
"""

from __future__ import annotations

import argparse

from ..errors import InputError
from ..sweeps.limits import MAX_POINTS, check_grid
from ..units import parse_quantity
from .llm import add_spec_arguments, parse_batches, spec_kwargs
from .options import check_output_path, parse_int_list, parse_seconds, run_options
from .outfile import resolve_output, say_written

NAME = "sweep"
HELP = "sweep batch / prompt / gen / dtypes / TP / devices: every point, the throughput-latency frontier, SLO picks"

FORMATS = ("terminal", "markdown", "json", "csv", "html", "png")


def _csv(text: str | None) -> list[str]:
    return [t.strip() for t in str(text).split(",") if t.strip()] if text else []


def _ints(text: str | None, flag: str) -> list[int] | None:
    return None if text is None else parse_int_list(text, flag)


def parse_prices(text: str | None, devices: list[str]) -> dict[str, float]:
    """``a100=1.8,h100=3.2`` (or one number when one device is swept) -> ``{"a100": 1.8, "h100": 3.2}``."""
    out: dict[str, float] = {}
    for item in _csv(text):
        name, sep, val = item.rpartition("=")
        if not sep:
            if len(devices) != 1:
                raise InputError(f"--usd-per-hour {item!r}: with several devices give DEVICE=PRICE for each, "
                                 "e.g. --usd-per-hour a100=1.8,h100=3.2")
            name, val = devices[0], item
        out[name.strip()] = parse_quantity(val.strip().lstrip("$"), f"--usd-per-hour {name}")
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="zoo name, config.json (or folder), .onnx, op table or 'pkg.module:factory'")
    p.add_argument("--hw", default="a100", help="hardware profiles, comma-separated (default a100)")
    p.add_argument("--batch", default="1,4,16,64", help="batch sizes, comma-separated (default 1,4,16,64)")
    p.add_argument("--prompt", default=None, help="LLM prompt lengths, comma-separated (default 1024)")
    p.add_argument("--gen", default=None, help="LLM generated tokens, comma-separated (default 256)")
    p.add_argument("--weights", default=None, help="what-if weight dtypes, comma-separated (e.g. bf16,fp8,int4)")
    p.add_argument("--activations", default=None, help="what-if activation dtypes, comma-separated")
    p.add_argument("--kv", default=None, help="what-if KV-cache dtypes, comma-separated")
    p.add_argument("--tp", default="1", help="tensor-parallel degrees, comma-separated (default 1)")
    p.add_argument("--dtype", default=None, help="model dtype for zoo / config models (default: the config's)")
    p.add_argument("--max-ttft", default=None, help="SLO: time to first token with its unit, e.g. 500ms or 0.5s")
    p.add_argument("--max-tpot", default=None, help="SLO: time per output token with its unit, e.g. 50ms")
    p.add_argument("--usd-per-hour", default=None, help="price per GPU-hour: a100=1.8,h100=3.2 (or one number "
                   "for one device): adds $ per million output tokens")
    p.add_argument("--ideal", action="store_true", help="ideal roofline only (100%% of peaks, no launch overhead)")
    p.add_argument("--strict", action="store_true", help="fail when an op has no counting rule")
    p.add_argument("--format", "-f", default="terminal", choices=FORMATS,
                   help="terminal | markdown | json | csv | html (frontier chart + table) | png (frontier chart)")
    p.add_argument("-o", "--output", default=None, help="output file, or - for stdout (default: stdout; an html page goes to MODEL-report.html)")
    p.add_argument("--force", action="store_true", help="run a grid of more than 100,000 points (the product of "
                   "the list options; each costs about 3 KB of memory, unless --stream)")
    p.add_argument("--stream", action="store_true", help="with -f csv: write each point's row as it is priced "
                   "(constant memory for any grid; no frontier / slo_pick columns: the frontier and the SLO picks "
                   "are printed on stderr at the end)")
    add_spec_arguments(p)
    g = p.add_argument_group("disaggregated prefill / decode pairs (graphroof.sweeps.disagg)")
    g.add_argument("--disagg", default=None, metavar="XpYd", help="every point as x prefill replicas (the point's "
                   "device and TP) and y decode replicas, e.g. 1p1d, 2p1d: TTFT from the prefill engine, TPOT from "
                   "the decode engine plus the KV transfer, tokens/s per GPU over both pools")
    g.add_argument("--decode-hw", default=None, help="the decode pool's hardware (default: the point's)")
    g.add_argument("--decode-tp", default=None, help="the decode pool's TP degree (default: the point's)")
    g.add_argument("--kv-link-bw", default=None, help="KV link bandwidth per prefill replica, e.g. 400GB/s or inf "
                   "(default: the profiles' [collectives] inter_bw_bytes_per_s_per_nic x nics_per_node)")
    g.add_argument("--kv-link-latency", default=None, help="KV link latency, e.g. 10us or 0 (default: the "
                   "profiles' inter_hop_latency_s)")


def _disagg_kwargs(args: argparse.Namespace, llm: bool) -> dict:
    """--disagg and its pool / link flags as sweep keywords, checked (no model built)."""
    from ..sweeps.disagg import parse_pair
    from .serve import _latency, _link_bw

    kw = {"decode_hw": args.decode_hw, "decode_tp": None if args.decode_tp is None else
          parse_int_list(args.decode_tp, "--decode-tp")[0], "kv_link_bw_bytes_per_s": _link_bw(args.kv_link_bw),
          "kv_link_latency_s": _latency(args.kv_link_latency)}
    given = [k for k, v in kw.items() if v is not None]
    if args.disagg is None:
        if given:
            flag = {"decode_hw": "--decode-hw", "decode_tp": "--decode-tp", "kv_link_bw_bytes_per_s": "--kv-link-bw",
                    "kv_link_latency_s": "--kv-link-latency"}[given[0]]
            raise InputError(f"{flag} sets a disaggregated pair: give --disagg too (e.g. --disagg 1p1d)")
        return {}
    if not llm:
        raise InputError(f"--disagg applies to language models; {args.model} is swept over --batch only")
    parse_pair(args.disagg)
    return {"disagg": args.disagg, **{k: v for k, v in kw.items() if v is not None}}


def run(args: argparse.Namespace) -> int:
    from ..report import render, write_output
    from .progress import Progress

    if args.stream and args.format != "csv":
        raise InputError(f"--stream writes CSV rows as the points are priced: use it with -f csv (not "
                         f"-f {args.format})")
    if args.format == "png" and args.output is None:
        raise InputError("--format png writes an image: give a file with -o, e.g. -o frontier.png")
    args.output = resolve_output(args.output, args.format, args.model)  # a page without -o: MODEL-report.html
    check_output_path(args.output)
    if args.format == "png" and args.output == "-":
        raise InputError("--format png writes an image: give a file with -o, e.g. -o frontier.png")
    devices = _csv(args.hw)
    if not devices:
        raise InputError("--hw needs at least one hardware profile")
    batches = parse_batches(args.batch)
    tps = _ints(args.tp, "--tp")
    prompts, gens = _ints(args.prompt, "--prompt"), _ints(args.gen, "--gen")
    max_ttft, max_tpot = parse_seconds(args.max_ttft, "--max-ttft"), parse_seconds(args.max_tpot, "--max-tpot")
    prices = parse_prices(args.usd_per_hour, devices)
    progress = Progress(quiet=args.quiet)
    opts: dict = {"dtype": args.dtype} if args.dtype else {}
    opts["options"] = run_options(args)
    limit = None if args.force else MAX_POINTS
    from ..sweeps import is_language_model, sweep

    llm = bool(prompts or gens) or is_language_model(args.model)
    sizes = {"--hw": len(set(devices)), "--batch": len(set(batches))}
    if llm:
        sizes.update({"--prompt": len(set(prompts or [1])), "--gen": len(set(gens or [1])),
                      "--weights": len(set(_csv(args.weights))), "--activations": len(set(_csv(args.activations))),
                      "--kv": len(set(_csv(args.kv))), "--tp": len(set(tps or [1]))})
    check_grid(sizes, limit)
    pair = _disagg_kwargs(args, llm)
    if llm:
        from .precheck import check_llm_args

        check_llm_args(args.model, prompts or [1024], gens or [256], tps or [1])
        kw = dict(hw=devices, batch=batches, prompt=prompts or [1024], gen=gens or [256],
                  weights=_csv(args.weights) or None, activations=_csv(args.activations) or None,
                  kv=_csv(args.kv) or None, tp=tps, ideal=args.ideal, usd_per_hour=prices, max_ttft_s=max_ttft,
                  max_tpot_s=max_tpot, strict=args.strict, progress=progress, max_points=limit, **opts,
                  **spec_kwargs(args), **pair)
        if args.stream:
            return _streamed(args, sweep, kw, progress)
        r = sweep(args.model, **kw)
    else:
        for flag in ("weights", "activations", "kv", "max_ttft", "max_tpot", "usd_per_hour"):
            if getattr(args, flag):
                raise InputError(f"--{flag.replace('_', '-')} applies to language models; {args.model} is swept "
                                 "over --batch only (give --prompt/--gen to sweep it as an LLM)")
        if tps != [1]:
            raise InputError("--tp applies to language models; give --prompt/--gen to sweep this model as an LLM")
        if args.stream:
            raise InputError(f"--stream applies to language-model sweeps; {args.model} is swept over --batch only "
                             "(a short table): drop --stream")
        r = sweep(args.model, hw=devices, batch=batches, ideal=args.ideal, strict=args.strict, progress=progress,
                  **opts)
    progress(f"writing the {args.format} report")
    write_output(render(r, args.format), args.output)
    say_written([args.output], args.quiet)
    progress.done()
    return 0


def _streamed(args: argparse.Namespace, sweep, kw: dict, progress) -> int:
    """``--stream``: CSV rows written as the points are priced; the frontier and the picks on stderr at the end."""
    import sys

    from ..report.stream import OutputStream
    from ..report.tables import csv_text
    from ..units import fmt_time

    with OutputStream(args.output) as out:
        cols: list[str] = []

        def row(p) -> None:
            d = p.to_dict()
            if not cols:
                cols.extend(d)
                out.write(csv_text([], cols))
            out.write(csv_text([d], cols).split("\n", 1)[1])

        r = sweep(args.model, on_point=row, **kw)
    progress.done()
    say_written([args.output], args.quiet)
    if not args.quiet:
        assert r.streamed is not None
        lines = [f"sweep: {r.streamed.n} points streamed; frontier and SLO picks per device:"]
        for hw, front in r.frontier().items():
            pick = r.best().get(hw)
            picked = (f"pick {pick.label}: TTFT {fmt_time(pick.ttft_s)}, TPOT {fmt_time(pick.tpot_s)}, "
                      f"{pick.tokens_per_s_per_gpu:,.1f} tok/s/GPU" if pick is not None else "no point meets the SLO")
            lines.append(f"  {hw}: frontier {', '.join(p.label for p in front)}; {picked}")
        print("\n".join(lines), file=sys.stderr)
    return 0
