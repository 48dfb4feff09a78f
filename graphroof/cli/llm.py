"""``graphroof llm MODEL --hw a100 --prompt 1024 --gen 256 --batch 1,8,32 [--weights int4 --kv fp8] [--tp 2]
[--pp 2 --dp 2 --ep 4 --system dgx-h100 --nodes 2]``."""

from __future__ import annotations

import argparse

from .options import check_output_path, hw_from_args, parse_dims, parse_int_list, run_options
from .outfile import resolve_output, say_written

__all__ = ["parse_batches", "add_spec_arguments", "spec_kwargs"]

NAME = "llm"
HELP = "LLM serving estimate: TTFT, TPOT, throughput, KV cache, memory fit, per-layer prefill vs decode"


def parse_batches(text: str) -> list[int]:
    """``"1,8,32"`` -> ``[1, 8, 32]``."""
    return parse_int_list(text, "--batch", "batch sizes", "1,8,32")


def _int(flag: str):
    def conv(text: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} expects an integer, got {text!r}") from None
    return conv


def add_spec_arguments(p: argparse.ArgumentParser) -> None:
    """``--spec-tokens``, ``--spec-acceptance``, ``--spec-draft``, ``--spec-draft-cost`` (``llm``, ``serve``, ``sweep``)."""
    p.add_argument("--spec-tokens", default=None, metavar="K", help="speculative decoding / multi-token prediction: "
                   "K drafted tokens per step (default 0: off)")
    p.add_argument("--spec-acceptance", default=None, metavar="A", help="probability each drafted token is accepted, "
                   "or a comma-separated profile of K values (position i accepted only if 1..i-1 were)")
    p.add_argument("--spec-draft", default=None, metavar="MODEL", help="draft model (zoo name, config.json ...), "
                   "priced from its own traces on the same device at TP 1")
    p.add_argument("--spec-draft-cost", default=None, metavar="F", help="without --spec-draft (MTP heads, "
                   "self-speculation): the draft's time per drafted token as a fraction of a target decode step")


def add_parallel_arguments(p: argparse.ArgumentParser) -> None:
    """``--pp``, ``--dp``, ``--ep``, ``--ep-imbalance``, ``--microbatches``, ``--system``, ``--nodes`` (the parallel
    layout beside ``--tp``; :mod:`graphroof.llm.parallel`)."""
    p.add_argument("--pp", type=_int("--pp"), default=1, help="pipeline-parallel stages (decoder blocks split evenly; "
                   "default 1)")
    p.add_argument("--dp", type=_int("--dp"), default=1, help="attention data-parallel ranks, each with batch/dp "
                   "sequences (default 1); the layout is tp x pp x dp GPUs")
    p.add_argument("--ep", type=_int("--ep"), default=1, help="expert-parallel ranks of a MoE model: 1 (experts "
                   "tensor-split) or tp x dp (experts spread over every rank of a stage, all-to-all dispatch/combine)")
    p.add_argument("--ep-imbalance", type=float, default=None, metavar="X", help="busiest EP rank's routed tokens "
                   "over the mean (default: the expected maximum of a uniform multinomial load at the step's tokens)")
    p.add_argument("--microbatches", type=_int("--microbatches"), default=None, metavar="M",
                   help="micro-batches a prefill batch is split into under --pp (default: pp)")
    p.add_argument("--system", default=None, metavar="NAME", help="system profile (hw_profiles/systems: dgx-h100, "
                   "dgx-a100, gb200-nvl72, mi300x-8, or a .toml): NVLink domain size and the network between nodes; "
                   "--hw defaults to its device")
    p.add_argument("--nodes", type=_int("--nodes"), default=None, metavar="N",
                   help="nodes of --system (default: as many as tp x pp x dp GPUs need)")


def parallel_kwargs(args: argparse.Namespace) -> dict:
    """The :class:`~graphroof.llm.engine.Pricing` layout fields given on the command line (checked by Pricing);
    with ``--system`` and no ``--hw``, ``args.hw`` becomes the system's device."""
    out: dict = {}
    for k in ("pp", "dp", "ep", "ep_imbalance", "microbatches", "system", "nodes"):
        v = getattr(args, k, None)
        if v is not None and not (k in ("pp", "dp", "ep") and v == 1):
            out[k] = v
    if out.get("system") is not None and getattr(args, "hw", None) is None:
        from ..hardware.system import load_system

        args.hw = load_system(out["system"]).device
    return out


def spec_kwargs(args: argparse.Namespace) -> dict:
    """The :class:`~graphroof.llm.engine.Pricing` spec fields given on the command line (checked by Pricing)."""
    from ..errors import InputError

    def num(text: str, flag: str) -> float:
        try:
            return float(text)
        except ValueError:
            raise InputError(f"{flag} {text!r}: expected a number") from None

    out: dict = {}
    if args.spec_tokens is not None:
        try:
            out["spec_tokens"] = int(args.spec_tokens)
        except ValueError:
            raise InputError(f"--spec-tokens {args.spec_tokens!r}: expected an integer >= 0") from None
    if args.spec_acceptance is not None:
        parts = [v.strip() for v in str(args.spec_acceptance).split(",") if v.strip()]
        vals = [num(v, "--spec-acceptance") for v in parts]
        out["spec_acceptance"] = vals if len(parts) > 1 else (vals[0] if vals else None)
    if args.spec_draft is not None:
        out["spec_draft"] = args.spec_draft
    if args.spec_draft_cost is not None:
        out["spec_draft_cost"] = num(args.spec_draft_cost, "--spec-draft-cost")
    if out and not out.get("spec_tokens"):
        raise InputError("--spec-acceptance / --spec-draft / --spec-draft-cost need --spec-tokens K (K >= 1)")
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="zoo name (llama-2-7b), transformers config.json (or its folder), Hugging Face "
                   "model id (org/name: its config.json only), .onnx with "
                   "past_key_values inputs, or 'pkg.module:factory'")
    p.add_argument("--hw", default=None, help="hardware profile name, alias or file (default a100)")
    p.add_argument("--prompt", type=_int("--prompt"), default=1024, help="prompt tokens per sequence (default 1024)")
    p.add_argument("--decoder-prompt", type=_int("--decoder-prompt"), default=None, metavar="N",
                   help="encoder-decoder models (T5, BART, Whisper): decoder tokens fed in the prefill (default 1, the "
                   "decoder start token); --prompt is then the encoder input (source tokens)")
    p.add_argument("--gen", type=_int("--gen"), default=256, help="generated tokens per sequence (default 256)")
    p.add_argument("--batch", default="1", help="batch sizes, comma-separated: a sweep (default 1)")
    p.add_argument("--weights", default=None, help="what-if dtype of the weights (int4, int8, fp8, bf16 ...)")
    p.add_argument("--activations", default=None, help="what-if dtype of the activations (bf16, fp8, int8 ...)")
    p.add_argument("--kv", default=None, help="what-if dtype of the KV cache (fp8, int8, bf16 ...)")
    p.add_argument("--dtype", default=None, help="model dtype for zoo / config models (default: the config's)")
    p.add_argument("--tp", type=_int("--tp"), default=1, help="tensor-parallel degree (Megatron split; default 1)")
    p.add_argument("--gpu-mem-util", type=float, default=0.9,
                   help="share of device memory the serving engine may use (default 0.9, as vLLM)")
    p.add_argument("--kv-block", type=int, default=16, help="paged-KV block size in tokens (default 16, as vLLM)")
    p.add_argument("--max-batched-tokens", type=int, default=None,
                   help="prefill chunk budget in tokens: TTFT sums the chunked prefill steps, the activations hold one "
                   "chunk (default: the whole prompt batch at once)")
    p.add_argument("--runtime", default="serving", metavar="PRESET",
                   help="fusion + launch preset the kernels are priced under (default serving: fused norms, rotary, "
                   "activations, QKV and gate+up GEMMs, decode under CUDA graphs)")
    p.add_argument("--ideal", action="store_true", help="report the ideal roofline only (100%% of peaks, no launch "
                   "overhead); default: realistic with the ideal beside it")
    p.add_argument("--peak-flops", default=None, help="what-if: every peak FLOP/s set to this (e.g. 312T)")
    p.add_argument("--mem-bw", default=None, help="what-if: memory bandwidth with its unit (e.g. 4TB/s)")
    p.add_argument("--dim", action="append", metavar="NAME=VALUE", help="bind another symbolic dim of an ONNX model")
    p.add_argument("--depth", type=_int("--depth"), default=None,
                   help="layer-table depth (default: one level below the repeated decoder block)")
    p.add_argument("--no-fold", action="store_true", help="one row per block instead of folding identical blocks")
    p.add_argument("--no-fold-blocks", dest="fold_blocks", action="store_false",
                   help="trace every block (default: identical blocks are traced three times, checked op by op and "
                   "replicated; same graphs, faster)")
    p.add_argument("--attention", default="flash", choices=("flash", "naive"), help="attention byte model")
    p.add_argument("--causal", default="kernel", choices=("kernel", "full"), help="causal attention counting")
    p.add_argument("--experts-touched", type=float, default=None, metavar="N",
                   help="mixture of experts: experts whose weights each step reads per MoE layer (default: the "
                   "expectation under uniform routing, E*(1-(1-k/E)^T) for T tokens in the step)")
    p.add_argument("--strict", action="store_true", help="fail when an op has no counting rule")
    add_spec_arguments(p)
    add_parallel_arguments(p)
    p.add_argument("--format", "-f", default="terminal", choices=("terminal", "markdown", "json", "html"),
                   help="terminal | markdown | json | html (default terminal; html: one page with the batch sweep "
                        "chart, memory bars and prefill / decode layer tables side by side)")
    p.add_argument("-o", "--output", default=None, help="output file, or - for stdout (default: stdout; an html page goes to MODEL-report.html)")


def run(args: argparse.Namespace) -> int:
    from ..llm.engine import estimate
    from ..report import render, write_output
    from .precheck import check_llm_args
    from .progress import Progress

    args.output = resolve_output(args.output, args.format, args.model)  # a page without -o: MODEL-report.html
    check_output_path(args.output)
    batches = parse_batches(args.batch)
    check_llm_args(args.model, [args.prompt], [args.gen], [args.tp])
    progress = Progress(quiet=args.quiet)
    layout = parallel_kwargs(args)  # before hw_from_args: --system names the default device
    hw = hw_from_args(args)
    opts: dict = {}
    dims = parse_dims(args.dim)
    if dims:
        opts["dims"] = dims
    if args.dtype:
        opts["dtype"] = args.dtype
    if args.decoder_prompt is not None:
        opts["decoder_prompt"] = args.decoder_prompt
    if args.experts_touched is not None:
        opts["experts_touched"] = args.experts_touched
    opts.update(spec_kwargs(args))
    opts.update(layout)
    r = estimate(args.model, hw=hw, prompt=args.prompt, gen=args.gen, batch=batches,
                 weights=args.weights, activations=args.activations, kv=args.kv, tp=args.tp, ideal=args.ideal,
                 depth=args.depth, fold=not args.no_fold, attention=args.attention, causal=args.causal,
                 strict=args.strict, runtime=args.runtime, gpu_mem_util=args.gpu_mem_util,
                 kv_block=args.kv_block, max_batched_tokens=args.max_batched_tokens, progress=progress,
                 options=run_options(args), **opts)
    write_output(render(r, args.format), args.output)
    say_written([args.output], args.quiet)
    progress.done()
    return 0
