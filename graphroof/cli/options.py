"""Options shared by the sub-commands: hardware (--hw, what-if peaks), model (--dim, --input, --batch ...) and
their parsing into API arguments."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ..errors import InputError
from ..options import Options
from ..units import check_dims, parse_bandwidth, parse_flop_rate, parse_quantity, warn_implausible

__all__ = ["run_options", "parse_dims", "parse_shape", "parse_inputs", "add_hw_options", "add_model_options", "hw_from_args",
           "frontend_opts", "check_output_path", "module_doc", "plain_text", "parse_int_list"]


def module_doc(name: str) -> str:
    """The docstring of module *name* read from its source, without importing it (``--help`` epilogs quote the
    measurement modules, which pull in the whole pipeline)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]  # the graphroof package (find_spec would import the parents)
    path = root.joinpath(*name.split(".")[1:]).with_suffix(".py")
    try:
        return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    except OSError:
        return ""


def check_output_path(out: str) -> None:
    """``-o PATH`` checked before any work: its folder must exist and it must not be a folder itself."""
    if str(out) == "-":
        return
    from pathlib import Path

    path = Path(out).expanduser()
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"cannot write {out}: directory {parent} does not exist; create it or choose another -o path")
    if path.is_dir():
        raise InputError(f"cannot write {out}: it is a directory; give a file name with -o")


def plain_text(doc: str) -> str:
    """A docstring excerpt for ``--help``: reST roles and literals (``:class:`x` ``, ````x````, ``*x*``) as plain text."""
    import re

    doc = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", doc)
    doc = re.sub(r"``([^`]+)``", r"\1", doc)
    doc = re.sub(r"(?<![\w*])\*\*?([^*\s][^*]*?)\*\*?(?![\w*])", r"\1", doc)
    return doc


def parse_int_list(text: str, flag: str, what: str = "values", example: str = "") -> list[int]:
    """``"1,8,32"`` -> ``[1, 8, 32]`` for a comma-separated integer flag; each value >= 1, at least one."""
    hint = f", e.g. {flag} {example}" if example else ""
    out = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            v = int(part)
        except ValueError:
            raise InputError(f"{flag} {text!r}: expected integers separated by commas{hint}") from None
        if v < 1:
            raise InputError(f"{flag} {text!r}: {what} must be >= 1")
        out.append(v)
    if not out:
        raise InputError(f"{flag} needs at least one value{hint}")
    return out



def parse_one_int(text: str, flag: str) -> int:
    """One integer >= 1 (:func:`parse_int_list` of exactly one value)."""
    vals = parse_int_list(text, flag)
    if len(vals) != 1:
        raise InputError(f"{flag} {text!r}: takes one integer")
    return vals[0]

def parse_dims(items: Sequence[str] | None) -> dict[str, int]:
    """``["batch=8", "seq=512"]`` -> ``{"batch": 8, "seq": 512}``."""
    out: dict[str, int] = {}
    for it in items or ():
        name, sep, val = it.partition("=")
        if not sep or not name.strip():
            raise InputError(f"--dim {it!r}: expected NAME=VALUE, e.g. --dim seq=512")
        try:
            v = parse_quantity(val, f"--dim {name}")
        except InputError:
            v = -1.0
        if v < 0 or v != int(v):
            raise InputError(f"--dim {name}: must be a positive integer, got {val!r}")
        out[name.strip()] = int(v)
    check_dims(out)
    return out



def parse_shape(text: str, flag: str = "--input") -> tuple[int, ...]:
    """``"1x3x224x224"`` -> ``(1, 3, 224, 224)``."""
    try:
        dims = tuple(int(d) for d in text.lower().replace(",", "x").split("x") if d.strip())
    except ValueError:
        raise InputError(f"{flag} {text!r}: expected a shape like 1x3x224x224") from None
    if not dims or any(d <= 0 for d in dims):
        raise InputError(f"{flag} {text!r}: every dimension must be a positive integer")
    return dims


def parse_inputs(items: Sequence[str] | None) -> dict[str, tuple[int, ...]] | list[tuple[int, ...]]:
    """``--input input_ids=1x512`` (named) or ``--input 1x3x224x224`` (positional)."""
    named: dict[str, tuple[int, ...]] = {}
    positional: list[tuple[int, ...]] = []
    for it in items or ():
        name, sep, shape = it.rpartition("=")
        if sep:
            named[name.strip()] = parse_shape(shape)
        else:
            positional.append(parse_shape(it))
    if named and positional:
        raise InputError("--input: use either NAME=SHAPE for every input or plain shapes, not both")
    return named or positional


def add_hw_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hw", default=None, help="hardware profile name or alias (see `graphroof hw list`) or a "
                   ".toml/.yaml path (default: a100, or an ad-hoc device when --peak-flops and --mem-bw are given)")
    p.add_argument("--peak-flops", default=None, help="what-if: every peak FLOP/s set to this (e.g. 4.6T, 312TFLOP/s, 4608e9)")
    p.add_argument("--mem-bw", default=None, help="what-if: memory bandwidth with its unit (e.g. 96GB/s, 2.039TB/s)")
    p.add_argument("--matmul-precision", default=None, choices=("high", "highest"),
                   help="fp32 matmuls: high = TF32 matrix units where the device has them (default, as PyTorch's "
                   "cuDNN convolutions); highest = fp32 math")
    p.add_argument("--ideal", action="store_true", help="100%% efficiency and no launch overhead in the realistic time")


def add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dim", action="append", metavar="NAME=VALUE", help="bind a symbolic dim (repeatable)")
    p.add_argument("--input", action="append", metavar="[NAME=]SHAPE",
                   help="input shape, e.g. 1x3x224x224 or input_ids=1x512 (repeatable)")
    p.add_argument("--batch", default=None, help="batch size for zoo / config models (default 1); analyze also "
                   "takes a list, e.g. 1,4,16,64: one row per batch, the compute-bound batch solved")
    p.add_argument("--seq", type=int, default=None, help="sequence length for zoo / config models (default 1024)")
    p.add_argument("--dtype", default=None, help="model dtype for zoo / config models, e.g. bf16 "
                   "(default: the checkpoint's)")
    p.add_argument("--strict", action="store_true", help="fail when an op has no counting rule")
    p.add_argument("--depth", type=int, default=None,
                   help="layer depth of the rollup (default: one level below the repeated block, else automatic)")
    p.add_argument("--attention", default="flash", choices=("flash", "naive"),
                   help="attention byte model: flash = scores stay on chip (default); naive = scores written and read")
    p.add_argument("--causal", default="kernel", choices=("kernel", "full"),
                   help="causal attention: count what a causal kernel computes (~half the square, default) or the full square")
    p.add_argument("--no-fold-blocks", dest="fold_blocks", action="store_false",
                   help="PyTorch models: trace every block (default: identical blocks are traced three times, "
                   "checked op by op and replicated; same graph, faster)")


def hw_from_args(args: argparse.Namespace):
    from ..api import resolve_hardware

    peak = parse_flop_rate(args.peak_flops, "--peak-flops") if args.peak_flops else None
    bw = parse_bandwidth(args.mem_bw, "--mem-bw") if args.mem_bw else None
    for flag, v, kind in (("--peak-flops", peak, "flop_rate"), ("--mem-bw", bw, "bandwidth")):
        if v is not None and v <= 0:
            raise InputError(f"{flag} must be > 0")
        if v is not None:
            warn_implausible(v, flag, kind)
    hw = args.hw
    if hw is None and (peak is None) != (bw is None):
        hw = "a100"  # one what-if number alone: applied to the default profile, as --hw's help says
    return resolve_hardware(hw, peak_flops_per_s=peak, mem_bw_bytes_per_s=bw, ideal=args.ideal,
                            matmul_precision=getattr(args, "matmul_precision", None))


def run_options(args: argparse.Namespace) -> Options:
    """The run-wide switches of a command (:class:`graphroof.options.Options`): ``--no-fold-blocks`` and
    ``--no-cache``."""
    return Options(fold=getattr(args, "fold_blocks", True) is not False, store=getattr(args, "cache", True) is not False)


def frontend_opts(args: argparse.Namespace) -> dict:
    opts: dict = {}
    if getattr(args, "depth", None) is not None and args.depth < 1:
        raise InputError(f"--depth must be >= 1 (1 = the top-level modules), got {args.depth}")
    dims = parse_dims(args.dim)
    if dims:
        opts["dims"] = dims
    shapes = parse_inputs(args.input)
    if shapes:
        opts["input_shapes"] = shapes
    if args.batch is not None:
        batches = parse_int_list(args.batch, "--batch", "batch sizes", "8")
        if len(batches) > 1:
            raise InputError(f"--batch {args.batch}: one batch size here; `graphroof analyze MODEL --batch "
                             f"{args.batch}` or `graphroof sweep` evaluates several")
        opts["batch"] = batches[0]
    if args.seq is not None:
        if args.seq < 1:
            raise InputError("--seq must be >= 1")
        opts["seq"] = args.seq
    if getattr(args, "fold_blocks", True) is False:
        opts["fold_blocks"] = False
    if getattr(args, "dtype", None):
        from ..dtypes import canonical_dtype

        opts["dtype"] = canonical_dtype(args.dtype)
    return opts


def parse_seconds(text: str | None, flag: str) -> float | None:
    """``2s``, ``50ms``, ``200us`` -> seconds (> 0); a bare number is refused (``50`` would be 50 s); None stays
    None."""
    if text is None:
        return None
    from ..units import parse_time_s, warn_implausible

    v = parse_time_s(text, flag)
    if not v > 0:
        raise InputError(f"{flag} must be > 0, got {text!r}")
    warn_implausible(v, flag, "time")
    return v
