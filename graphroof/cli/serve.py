"""``graphroof serve MODEL --hw h100 --rate 1,2,4,8,16 --prompt-len lognormal:1000:500 --gen-len
lognormal:250:100 --slo-ttft 2s --slo-tpot 50ms``: a request-level simulation of a serving engine under traffic.

Requests arrive at each offered rate, an engine (continuous batching, chunked prefill, paged KV cache) schedules
them step by step, and every step is priced by graphroof's step cost: TTFT / TPOT / e2e percentiles, throughput,
KV use and preemptions per rate, the goodput and the maximum rate meeting the SLO, the replicas for a target rate
(:func:`graphroof.serving.serve`; docs/serve.md).  Everything checkable from the arguments is checked before the
model is built or traced.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from ..errors import InputError
from ..units import parse_quantity
from .options import check_output_path, parse_one_int, parse_seconds, run_options
from .outfile import resolve_output, say_written

__all__ = ["parse_rates", "parse_seconds", "length_cap", "serve_kwargs", "FORMATS"]

NAME = "serve"
HELP = ("simulate serving under traffic: TTFT / TPOT percentiles, throughput, KV use and goodput per request "
        "rate, the maximum rate meeting an SLO, replicas for a target rate")

FORMATS = ("terminal", "markdown", "json", "csv", "html")

def parse_rates(text: str, flag: str = "--rate") -> list[float]:
    """``"1,2,4,8"`` -> ``[1.0, 2.0, 4.0, 8.0]`` requests per second (each > 0, finite, no repeats)."""
    out: list[float] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            v = parse_quantity(part, flag)
        except InputError:
            raise InputError(f"{flag} {text!r}: expected request rates in req/s separated by commas, e.g. "
                             f"{flag} 1,2,4,8") from None
        if not (v > 0 and math.isfinite(v)):
            raise InputError(f"{flag} {text!r}: every rate must be > 0 req/s")
        if v in out:
            raise InputError(f"{flag} {text!r}: rate {v:g} is given twice")
        out.append(v)
    if not out:
        raise InputError(f"{flag} needs at least one rate in req/s, e.g. {flag} 1,2,4,8")
    return out


def length_cap(field: str, spec: str) -> int | None:
    """*spec* parsed as :func:`graphroof.serving.inputs.parse_lengths` does (``fixed:N``, ``uniform:A:B``,
    ``lognormal:MEAN:STD``, ``file:PATH``); N of ``fixed:N`` (every request that long: checked against the model's
    positions before it is built), else None (the simulator clips the lengths it draws to the positions)."""
    from ..serving.inputs import parse_lengths

    if str(spec).strip().isdigit():
        raise InputError(f"{field} {spec!r}: name the distribution, e.g. {field} fixed:{spec.strip()}")
    d = parse_lengths(field, spec)
    return int(d.a) if d.kind == "fixed" else None


def _fraction(text: str | None, flag: str, low_open: bool = False) -> float | None:
    if text is None:
        return None
    try:
        v = float(text)
    except ValueError:
        raise InputError(f"{flag} {text!r}: expected a number") from None
    ok = (0 < v <= 1) if low_open else (0 <= v < 1)
    if not ok:
        raise InputError(f"{flag} {text!r}: must be in {'(0, 1]' if low_open else '[0, 1)'}")
    return v


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="zoo name (llama-3-8b), transformers config.json (or its folder), Hugging Face "
                   "model id (org/name: its config.json only), or 'pkg.module:factory'")
    p.add_argument("--hw", default=None, help="hardware profile name, alias or file (default a100, or --system's "
                   "device)")
    p.add_argument("--rate", default="1", help="offered request rates in req/s, comma-separated: one simulation "
                   "each (default 1)")
    p.add_argument("--requests", default="1000", help="requests simulated per rate (default 1000)")
    p.add_argument("--arrival", default="poisson", help="arrival process: poisson (default), gamma:CV (burstier "
                   "for CV > 1), constant, closed:N (N users, each sending again when answered, started spread "
                   "over one request's time; the figures are their steady state)")
    p.add_argument("--trace", default=None, metavar="FILE", help="replay a trace instead of drawing requests: CSV "
                   "(with a header) or JSONL with arrival_s, input_tokens, output_tokens")
    p.add_argument("--prompt-len", default="fixed:1024", help="prompt tokens per request: fixed:N, uniform:A:B, "
                   "lognormal:MEAN:STD or file:PATH (one count per line) (default fixed:1024)")
    p.add_argument("--gen-len", default="fixed:256", help="generated tokens per request, same forms (default "
                   "fixed:256)")
    p.add_argument("--prefix-share", default=None, help="share of each prompt that is a prefix common to all "
                   "requests and cached (0 to <1; default 0)")
    p.add_argument("--seed", default="0", help="random seed of arrivals and lengths (default 0)")
    p.add_argument("--mode", default="continuous", help="batching: continuous (default) or static")
    p.add_argument("--max-batched-tokens", default="8192", help="token budget of one engine step (chunked "
                   "prefill; a DP rank's under --dp; default 8192)")
    p.add_argument("--max-num-seqs", default="256", help="sequences running at once at most (a DP "
                   "rank's under --dp; default 256)")
    p.add_argument("--policy", default="decode-first", help="scheduling policy (default decode-first)")
    p.add_argument("--admission", default="on-demand",
                   help="KV admission: on-demand (vLLM: blocks as tokens are computed, preemption by recompute) or "
                        "reserve (TensorRT-LLM guaranteed-no-evict: blocks for the whole output at admission)")
    p.add_argument("--slo-ttft", default=None, help="SLO: time to first token with its unit, e.g. 2s or 500ms")
    p.add_argument("--slo-tpot", default=None, help="SLO: time per output token with its unit, e.g. 50ms")
    p.add_argument("--slo-percentile", default="99", help="percentile the SLO holds at (default 99)")
    p.add_argument("--target-rate", default=None, help="req/s to serve: the replicas needed (and $ per million "
                   "tokens with --usd-per-hour)")
    p.add_argument("--usd-per-hour", default=None, help="price of one GPU-hour, e.g. 2.5: $ per million tokens")
    p.add_argument("--tp", default="1", help="tensor-parallel degree(s), comma-separated to compare (default 1)")
    p.add_argument("--weights", default=None, help="what-if dtype(s) of the weights (int4, int8, fp8, bf16 ...), "
                                                   "comma-separated to compare")
    p.add_argument("--activations", default=None, help="what-if dtype of the activations (bf16, fp8 ...)")
    p.add_argument("--kv", default=None, help="what-if dtype(s) of the KV cache (fp8, int8, bf16 ...), "
                                              "comma-separated to compare")
    p.add_argument("--runtime", default="serving", metavar="PRESET",
                   help="fusion + launch preset the steps are priced under (default serving)")
    p.add_argument("--gpu-mem-util", default="0.9", help="share of device memory the engine may use (default 0.9)")
    from .llm import add_parallel_arguments, add_spec_arguments

    add_spec_arguments(p)
    add_parallel_arguments(p)
    p.add_argument("--kv-block", default="16", help="paged-KV block size in tokens (default 16)")
    p.add_argument("--replicas", default="1", help="aggregated replicas sharing the traffic, round robin (default 1)")
    g = p.add_argument_group("disaggregated prefill / decode (docs/serve.md)")
    g.add_argument("--disagg", default=None, metavar="XpYd", help="x prefill and y decode replicas, e.g. 1p1d, 2p1d; "
                   "auto: the fewest-GPU x:y meeting --slo-ttft and --slo-tpot at --target-rate")
    for pool in ("prefill", "decode"):
        g.add_argument(f"--{pool}-hw", default=None, help=f"the {pool} pool's hardware (default --hw)")
        g.add_argument(f"--{pool}-tp", default=None, help=f"the {pool} pool's TP degree (default --tp)")
        g.add_argument(f"--{pool}-weights", default=None, help=f"the {pool} pool's weight dtype (default --weights)")
        g.add_argument(f"--{pool}-kv", default=None, help=f"the {pool} pool's KV dtype (default --kv)")
    g.add_argument("--kv-link-bw", default=None, help="KV link bandwidth per prefill replica, e.g. 400GB/s or inf "
                   "(default: the profiles' [collectives] inter_bw_bytes_per_s_per_nic x nics_per_node)")
    g.add_argument("--kv-link-latency", default=None, help="KV link latency, e.g. 10us or 0 (default: the profiles' "
                   "inter_hop_latency_s)")
    g.add_argument("--max-pool-replicas", default="8", help="--disagg auto: the most replicas tried per pool "
                   "(default 8)")
    g.add_argument("--config", action="append", default=None, metavar="KEY=VAL ...",
                   help="one configuration to compare (repeat the flag), keys tp, hw, weights, kv, replicas, disagg, "
                   "prefill-tp ... e.g. --config tp=8 --config 'tp=4 replicas=2' --config 'disagg=1p1d prefill-tp=4 "
                   "decode-tp=4'")
    p.add_argument("--csv-rate", default=None, metavar="RATE", help="with -f csv: the records of this rate only "
                   "(one of --rate; default: every rate, told apart by the rate_rps column)")
    p.add_argument("--format", "-f", default="terminal", choices=FORMATS,
                   help="terminal | markdown | json | csv (per-request records) | html (latency / throughput / "
                   "timeline charts and the rate table)")
    p.add_argument("-o", "--output", default=None, help="output file, or - for stdout (default: stdout; an html "
                   "page goes to MODEL-report.html)")


def _number(text: str | None, flag: str, *, low: float = 0.0, high: float = math.inf,
            strict: bool = True) -> float | None:
    if text is None:
        return None
    try:
        v = float(str(text).strip().lstrip("$"))
    except ValueError:
        raise InputError(f"{flag} {text!r}: expected a number") from None
    if not math.isfinite(v) or (v <= low if strict else v < low) or v > high:
        raise InputError(f"{flag} {text!r}: must be {'>' if strict else '>='} {low:g}"
                         + (f" and <= {high:g}" if math.isfinite(high) else ""))
    return v


def serve_kwargs(args: argparse.Namespace) -> dict:
    """Every argument of :func:`graphroof.serving.serve` from the command line, checked (no model is built)."""
    from ..llm import Pricing
    from .llm import parallel_kwargs, spec_kwargs

    layout = parallel_kwargs(args)  # with --system and no --hw: the system's device
    if args.hw is None:
        args.hw = "a100"
    rates = parse_rates(args.rate)
    seed = args.seed
    try:
        seed = int(seed)
    except ValueError:
        raise InputError(f"--seed {args.seed!r}: expected an integer") from None
    from ..serving.inputs import parse_arrivals, read_trace

    parse_arrivals(args.arrival)
    prompt_max = length_cap("--prompt-len", args.prompt_len)
    gen_max = length_cap("--gen-len", args.gen_len)
    if args.trace is not None:
        read_trace(str(Path(args.trace).expanduser()))  # read whole now: a bad row fails before the model
        prompt_max = gen_max = None
    tps = [parse_one_int(t.strip(), "--tp") for t in str(args.tp).split(",") if t.strip()] or [1]
    hws = [h.strip() for h in str(args.hw).split(",") if h.strip()]
    if not hws:
        raise InputError("--hw needs at least one hardware profile")
    weights = [w.strip() for w in args.weights.split(",") if w.strip()] if args.weights else [None]
    kvs = [k.strip() for k in args.kv.split(",") if k.strip()] if args.kv else [None]
    tp = tps[0]
    pct = _number(args.slo_percentile, "--slo-percentile", high=100.0)
    kw = dict(hw=hws if len(hws) > 1 else hws[0], rate=rates, requests=parse_one_int(args.requests, "--requests"),
              arrival=args.arrival,
              prompt_len=args.prompt_len, gen_len=args.gen_len, trace=args.trace,
              prefix_share=_fraction(args.prefix_share, "--prefix-share") or 0.0, seed=seed, mode=args.mode,
              max_batched_tokens=parse_one_int(args.max_batched_tokens, "--max-batched-tokens"),
              max_num_seqs=parse_one_int(args.max_num_seqs, "--max-num-seqs"), policy=args.policy, admission=args.admission,
              slo_ttft_s=parse_seconds(args.slo_ttft, "--slo-ttft"),
              slo_tpot_s=parse_seconds(args.slo_tpot, "--slo-tpot"), slo_percentile=pct,
              target_rate=_number(args.target_rate, "--target-rate"),
              usd_per_hour=_number(args.usd_per_hour, "--usd-per-hour", strict=False))
    for w in weights:  # every dtype checked before the model is built
        for k in kvs:
            Pricing(weights=w, activations=args.activations, kv=k)
    if len(tps) > 1 or len(weights) > 1 or len(kvs) > 1:
        kw.update(tp=tps, weights=weights, kv=kvs)
    kw["pricing"] = Pricing(tp=tp, weights=weights[0], activations=args.activations, kv=kvs[0],
                            runtime=args.runtime, gpu_mem_util=_fraction(args.gpu_mem_util, "--gpu-mem-util", True) or 0.9,
                            kv_block=parse_one_int(args.kv_block, "--kv-block"), **spec_kwargs(args), **layout)
    kw.update(_disagg_kwargs(args))
    if kw.get("configs"):
        for c in kw["configs"]:
            tps += [v for k, v in c.items() if k.endswith("tp") and isinstance(v, int)]
    tps += [kw[k] for k in ("prefill_tp", "decode_tp") if kw.get(k)]
    from .precheck import check_llm_args

    try:
        check_llm_args(args.model, [prompt_max or 1], [gen_max or 1], sorted(set(tps)))
    except InputError as e:  # the loader's message names llm's flags
        raise InputError(str(e).replace("--prompt ", "--prompt-len ").replace("--gen ", "--gen-len ")) from None
    return kw


def _link_bw(text: str | None) -> float | None:
    if text is None:
        return None
    if str(text).strip().lower() in ("inf", "infinite"):
        return math.inf
    v = parse_quantity(text, "--kv-link-bw")
    if not (v > 0 and math.isfinite(v)):
        raise InputError(f"--kv-link-bw {text!r}: must be > 0 bytes/s, e.g. 400GB/s, or inf")
    return v


def _latency(text: str | None) -> float | None:
    if text is not None and str(text).strip() in ("0", "0s"):
        return 0.0
    return parse_seconds(text, "--kv-link-latency")


_CONFIG_INT = ("tp", "replicas", "prefill-tp", "decode-tp")
_CONFIG_KEYS = ("hw", "weights", "kv", "disagg", "prefill-hw", "decode-hw", "prefill-weights", "decode-weights",
                "prefill-kv", "decode-kv", *_CONFIG_INT)


def _config(text: str) -> dict:
    """``"tp=4 replicas=2"`` (or comma-separated) -> ``{"tp": 4, "replicas": 2}``."""
    out: dict = {}
    for part in str(text).replace(",", " ").split():
        key, eq, val = part.partition("=")
        key = key.strip().lstrip("-")
        if not eq or key not in _CONFIG_KEYS or not val:
            raise InputError(f"--config {text!r}: expected KEY=VAL pairs with keys {', '.join(_CONFIG_KEYS)}")
        out[key.replace("-", "_")] = parse_one_int(val, f"--config {key}") if key in _CONFIG_INT else val
    if not out:
        raise InputError("--config needs KEY=VAL pairs, e.g. --config 'disagg=1p1d prefill-tp=4 decode-tp=4'")
    return out


def _disagg_kwargs(args: argparse.Namespace) -> dict:
    """The disaggregation, replica and --config keywords of :func:`graphroof.serving.serve`, checked."""
    from ..serving.disagg_api import parse_disagg

    kw: dict = {}
    if args.disagg is not None:
        parse_disagg(args.disagg)
        kw["disagg"] = args.disagg
    for pool in ("prefill", "decode"):
        for key in ("hw", "tp", "weights", "kv"):
            v = getattr(args, f"{pool}_{key}")
            if v is not None:
                if args.disagg is None and not args.config:
                    raise InputError(f"--{pool}-{key} sets a pool of disaggregated serving: give --disagg too "
                                     "(e.g. --disagg 1p1d)")
                kw[f"{pool}_{key}"] = parse_one_int(v, f"--{pool}-{key}") if key == "tp" else v
    for key, flag, val in (("kv_link_bw_bytes_per_s", "--kv-link-bw", _link_bw(args.kv_link_bw)),
                           ("kv_link_latency_s", "--kv-link-latency", _latency(args.kv_link_latency))):
        if val is not None:
            if args.disagg is None and not args.config:
                raise InputError(f"{flag} sets the link of disaggregated serving: give --disagg too")
            kw[key] = val
    pool_max = parse_one_int(args.max_pool_replicas, "--max-pool-replicas")
    if pool_max != 8:
        kw["max_pool_replicas"] = pool_max
    reps = parse_one_int(args.replicas, "--replicas")
    if reps != 1:
        kw["replicas"] = reps
    if args.config:
        configs = [_config(c) for c in args.config]
        for c in configs:
            if "disagg" in c:
                parse_disagg(c["disagg"])
        kw["configs"] = configs
    return kw


def _csv_rate(args: argparse.Namespace, rates: list[float]) -> int | None:
    if args.csv_rate is None:
        return None
    if args.format != "csv":
        raise InputError(f"--csv-rate picks the records of one rate in the CSV: use it with -f csv (not "
                         f"-f {args.format})")
    want = parse_rates(args.csv_rate, "--csv-rate")[0]
    for i, r in enumerate(rates):
        if math.isclose(r, want, rel_tol=1e-9):
            return i
    raise InputError(f"--csv-rate {args.csv_rate}: not one of --rate {', '.join(f'{r:g}' for r in rates)}")


def run(args: argparse.Namespace) -> int:
    from ..report import render, write_output
    from .progress import Progress

    args.output = resolve_output(args.output, args.format, args.model)  # a page without -o: MODEL-report.html
    check_output_path(args.output)
    kw = serve_kwargs(args)
    rate_index = _csv_rate(args, kw["rate"])
    progress = Progress(quiet=args.quiet)
    from ..serving import serve

    r = serve(args.model, progress=progress, options=run_options(args), **kw)
    progress(f"writing the {args.format} report")
    write_output(render(r, args.format, rate=rate_index), args.output)
    say_written([args.output], args.quiet)
    progress.done()
    return 0
