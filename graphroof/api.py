"""``analyze`` and ``compare``: the calls behind the CLI and the notebook API."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .analysis import Analysis
from .comparison import DeviceComparison, compare_devices
from .counters import count
from .counters.registry import Rule
from .counters.settings import CountSettings
from .errors import GraphroofWarning, InputError
from .frontends import load
from .fuse import Runtime, fuse, get_runtime
from .graph import OpGraph, bind
from .hardware import HardwareProfile, adhoc_profile, load_hardware
from .options import DEFAULT, Options
from .roofline import evaluate_graph
from .units import check_dims

__all__ = ["analyze", "capture", "compare", "analyze_on_profiles", "resolve_hardware", "count_graph"]


def resolve_hardware(hw: str | HardwareProfile | None = None, *, peak_flops_per_s: float | None = None,
                     mem_bw_bytes_per_s: float | None = None, ideal: bool = False,
                     matmul_precision: str | None = None) -> HardwareProfile:
    """A profile by name / path / object, with what-if overrides; no name plus both numbers = ad-hoc device."""
    if hw is None:
        if peak_flops_per_s is None or mem_bw_bytes_per_s is None:
            if peak_flops_per_s is None and mem_bw_bytes_per_s is None:
                hw = "a100"
            else:
                raise InputError("an ad-hoc device needs both --peak-flops and --mem-bw (or name a profile with --hw)")
        else:
            return adhoc_profile(peak_flops_per_s, mem_bw_bytes_per_s).with_overrides(
                ideal=ideal, matmul_precision=matmul_precision)
    prof = load_hardware(hw)
    return prof.with_overrides(peak_flops_per_s=peak_flops_per_s, mem_bw_bytes_per_s=mem_bw_bytes_per_s, ideal=ideal,
                               matmul_precision=matmul_precision)


def count_graph(graph: OpGraph, hw: HardwareProfile, *, rules: Mapping[str, Rule | None] | None = None,
                strict: bool = False, dims: Mapping[str, int] | None = None, depth: int | None = None,
                meta: Mapping[str, Any] | None = None, settings: CountSettings | None = None,
                runtime: str | Runtime | None = None) -> Analysis:
    """Bind dims, count, fuse into kernels under *runtime*, evaluate the roofline, and wrap the result (the
    pipeline after the frontend).  *runtime* ``None`` picks :func:`default_runtime`.

    Works on a copy: *graph* itself is never annotated, so one graph can be counted on several devices.
    """
    all_dims = {**graph.meta.get("default_dims", {}), **dict(dims or {})}
    if graph.symbolic_dims():
        graph = bind(graph, all_dims)
    else:
        graph = graph.map_ops(lambda op: op)
        if dims:
            graph.meta["dims"] = {**graph.meta.get("dims", {}), **dict(dims)}
    summary = count(graph, rules=rules, strict=strict, settings=settings)
    evaluate_graph(graph, hw)
    rt = get_runtime(runtime or default_runtime(graph))
    kernels = fuse(graph, rt).as_opgraph(graph)
    evaluate_graph(kernels, hw, rt)
    a = Analysis(graph, hw, summary, depth=depth, meta=dict(meta or {}), kernels=kernels, runtime=rt.name)
    from .advice import analysis_advice  # the next steps: computed once, here, and stored on the analysis

    a.next_steps = analysis_advice(a)
    return a


def default_runtime(graph: OpGraph) -> str:
    """``eager`` for op tables (their rows are already kernels), ``compiled`` for traced / ONNX models."""
    return "eager" if all(not op.inputs and not op.outputs for op in graph.ops()) else "compiled"


def load_verb(model: Any) -> str:
    """"loading" for files that are read, "tracing" for models that are run (for progress messages)."""
    if isinstance(model, OpGraph):
        return "using"
    if isinstance(model, (str, Path)) and Path(str(model)).suffix.lower() in (".onnx", ".csv", ".yaml", ".yml"):
        return "loading"
    return "tracing"


def analyze(
    model: Any,
    inputs: Any = None,
    *,
    hw: str | HardwareProfile | None = "a100",
    rules: Mapping[str, Rule | None] | None = None,
    strict: bool = False,
    dims: Mapping[str, int] | None = None,
    depth: int | None = None,
    peak_flops_per_s: float | None = None,
    mem_bw_bytes_per_s: float | None = None,
    ideal: bool = False,
    attention: str = "flash",
    causal: str = "kernel",
    runtime: str | None = None,
    matmul_precision: str | None = None,
    progress: Callable[[str], None] | None = None,
    options: Options | None = None,
    **frontend_opts: Any,
) -> Analysis:
    """Roofline analysis of *model* on *hw*.

    Parameters
    ----------
    model : nn.Module, path, ``"pkg.mod:factory"``, zoo name, or OpGraph
        What to analyse (see :func:`graphroof.frontends.load`).
    inputs : example inputs for an ``nn.Module`` (tensors, or shapes+dtypes); ignored otherwise.
    hw : profile name, alias, file path or :class:`HardwareProfile`; ``None`` with both
        *peak_flops_per_s* and *mem_bw_bytes_per_s* defines an ad-hoc device.
    rules : per-call rule overrides, op key -> rule (``None`` = explicitly free).
    strict : raise :class:`UnsupportedOpError` when some op has no rule.
    dims : values for symbolic dims (``{"batch": 8, "seq": 512}``).
    depth : layer depth for the rollup (``None`` = automatic).
    attention : ``"flash"`` (scores stay on chip) or ``"naive"`` (scores written and read), see
        :mod:`graphroof.counters.settings`.
    causal : ``"kernel"`` (count what a causal kernel computes, ~half the square) or ``"full"``.
    runtime : engine preset name or alias (``"eager"``, ``"pytorch-eager"``, ``"compiled"``, ``"tensorrt"``,
        ``"onnxruntime"``, ``"serving"`` ...: ``graphroof runtimes``) or a preset TOML path (:mod:`graphroof.fuse.runtimes`);
        default ``compiled`` for models, ``eager`` for op tables.  Totals and layers are per kernel; the op
        rows and ``eager_totals`` keep the unfused view.
    matmul_precision : ``"high"`` (default: fp32 matmuls on TF32 units where the device has them, as PyTorch's
        cuDNN convolutions) or ``"highest"`` (fp32 math).
    progress : called with a short stage message ("tracing ...", "counting N ops") before each long step
        (the CLI's :class:`graphroof.cli.progress.Progress`).
    options : the run-wide switches (:class:`graphroof.options.Options`: folding of identical blocks, the store
        of traces), passed to the frontend; default ``Options()``.

    Examples
    --------
    >>> import graphroof
    >>> a = graphroof.analyze("examples/textbook_ops.csv", hw="a100")
    >>> a.totals.bound in ("memory", "compute")
    True
    """
    settings = CountSettings(attention=attention, causal=causal)
    prof = resolve_hardware(hw, peak_flops_per_s=peak_flops_per_s, mem_bw_bytes_per_s=mem_bw_bytes_per_s,
                            ideal=ideal, matmul_precision=matmul_precision)
    opts = dict(frontend_opts)
    if dims:
        check_dims(dims)
        opts.setdefault("dims", dict(dims))
    if progress:
        progress(f"{load_verb(model)} {model if isinstance(model, (str, Path)) else type(model).__name__}")
    graph = load(model, inputs, options=options or DEFAULT, **opts)
    check_dim_names(model, graph, opts.get("dims"))
    meta = {"model": graph.meta.get("model", graph.name), "capture": graph.meta.get("capture", "")}
    if progress:
        progress(f"counting {len(graph)} ops on {prof.name}")
    a = count_graph(graph, prof, rules=rules, strict=strict, dims=dims, depth=depth, meta=meta,
                    settings=settings, runtime=runtime)
    warn_memory_fit(a)
    return a


def capture(hw: str | HardwareProfile | None = "a100", *, name: str | None = None,
            rules: Mapping[str, Rule | None] | None = None, strict: bool = False, depth: int | None = None,
            peak_flops_per_s: float | None = None, mem_bw_bytes_per_s: float | None = None, ideal: bool = False,
            attention: str = "flash", causal: str = "kernel", runtime: str | None = None,
            matmul_precision: str | None = None) -> Any:
    """A context manager analysing the PyTorch ops that the code in its block runs, as torch's
    ``FlopCounterMode`` counts them; after the block ``r.analysis`` is the :class:`Analysis` that
    :func:`analyze` gives for the same module and inputs (``r.graph`` the OpGraph).  The block runs for real, on
    real or meta tensors; put the model in ``eval()`` as :func:`analyze` does.  Options as :func:`analyze`.

    >>> with graphroof.capture(hw="h100") as r:         # doctest: +SKIP
    ...     model(x)
    >>> r.analysis.totals.t_lower_s                      # doctest: +SKIP
    """
    settings = CountSettings(attention=attention, causal=causal)
    prof = resolve_hardware(hw, peak_flops_per_s=peak_flops_per_s, mem_bw_bytes_per_s=mem_bw_bytes_per_s,
                            ideal=ideal, matmul_precision=matmul_precision)
    from .frontends.torch.live import LiveCapture

    def finish(graph: OpGraph) -> Analysis:
        meta = {"model": graph.meta.get("model", graph.name), "capture": graph.meta.get("capture", "")}
        a = count_graph(graph, prof, rules=rules, strict=strict, depth=depth, meta=meta, settings=settings,
                        runtime=runtime)
        warn_memory_fit(a)
        return a

    return LiveCapture(finish, name=name)


def check_dim_names(model: Any, graph: OpGraph, dims: Mapping[str, int] | None) -> None:
    """``--dim`` names a zoo, config.json or op-table model does not have are an error (``--dim batch=8`` on a
    zoo model used to be ignored, the header still saying ``(batch=8)``); the ONNX frontend checks its own."""
    if not dims:
        return
    from .frontends import classify

    kind = classify(model).kind
    if kind not in ("zoo", "hf_config", "table"):
        return
    names = set(graph.symbolic_dims()) | set(graph.meta.get("default_dims", {}))
    unknown = [k for k in dims if k not in names]
    if not unknown:
        return
    k = unknown[0]
    label = graph.meta.get("model", graph.name)
    has = f"its symbolic dims: {', '.join(sorted(names))}" if names else "it has none"
    fix = ("an op table's numbers are fixed: edit the table" if kind == "table" else
           "size a zoo or config.json model with --batch and --seq (or --input NAME=SHAPE)")
    raise InputError(f"--dim {k}={dims[k]}: {label} has no symbolic dim {k!r} ({has}); {fix}")


def warn_memory_fit(a: Analysis) -> None:
    """A warning when the model's weights and activation peak exceed the device's memory capacity."""
    m = a.memory_fit()
    if m["fits"] is False:
        from .errors import warn
        from .units import fmt_bytes

        warn(f"{a.model_name} does not fit on {a.hw.name}: weights {fmt_bytes(m['weight_bytes'])} + peak "
             f"activations {fmt_bytes(m['activation_peak_bytes'])} = {fmt_bytes(m['total_bytes'])} > "
             f"{fmt_bytes(m['capacity_bytes'])} of device memory; the times assume it does (split it "
             "with graphroof llm --tp N, or pick a larger device)")


def analyze_on_profiles(model: Any, profiles: Sequence[HardwareProfile], inputs: Any = None, *,
                        rules: Mapping[str, Rule | None] | None = None, strict: bool = False,
                        depth: int | None = None, attention: str = "flash", causal: str = "kernel",
                        runtime: str | None = None, progress: Callable[[str], None] | None = None,
                        options: Options | None = None, **opts: Any) -> list[Analysis]:
    """One Analysis per hardware profile, loading (tracing) the model once (:func:`count_graph` works on a copy)."""
    settings = CountSettings(attention=attention, causal=causal)
    if opts.get("dims"):
        check_dims(opts["dims"])
    if progress:
        progress(f"{load_verb(model)} {model if isinstance(model, (str, Path)) else type(model).__name__}")
    graph = load(model, inputs, options=options or DEFAULT, **opts)
    check_dim_names(model, graph, opts.get("dims"))
    meta = {"model": graph.meta.get("model", graph.name), "capture": graph.meta.get("capture", "")}
    out = []
    for i, hw in enumerate(profiles):
        if progress:
            progress(f"counting {len(graph)} ops on {hw.name}")
        with warnings.catch_warnings():
            if i:  # unknown-op warnings are the same for every device: say them once
                warnings.simplefilter("ignore", GraphroofWarning)
            out.append(count_graph(graph, hw, rules=rules, strict=strict, dims=opts.get("dims"),
                                   depth=depth, meta=meta, settings=settings, runtime=runtime))
    return out


def compare(
    model: Any,
    inputs: Any = None,
    *,
    hw: str | Sequence[str | HardwareProfile],
    rules: Mapping[str, Rule | None] | None = None,
    strict: bool = False,
    dims: Mapping[str, int] | None = None,
    depth: int | None = None,
    peak_flops_per_s: float | None = None,
    mem_bw_bytes_per_s: float | None = None,
    ideal: bool = False,
    attention: str = "flash",
    causal: str = "kernel",
    runtime: str | None = None,
    matmul_precision: str | None = None,
    progress: Callable[[str], None] | None = None,
    options: Options | None = None,
    **frontend_opts: Any,
) -> DeviceComparison:
    """*model* on several devices side by side: time, bound and speed-up vs the first of *hw*.

    Takes what :func:`analyze` takes (a module with its example *inputs*, a path, a zoo name ..., and the same
    keyword options; the what-if *peak_flops_per_s* / *mem_bw_bytes_per_s* apply to every device) with *hw*
    a list: profile names, aliases, paths or :class:`HardwareProfile` objects (or one comma-separated string);
    the model is loaded once.  Render the result with ``graphroof.render(result, fmt)``.

    >>> import graphroof
    >>> c = graphroof.compare("examples/textbook_ops.csv", hw=["a100", "h100"])
    >>> [r["profile"] for r in c.rows]
    ['a100-80gb-sxm', 'h100-sxm']
    """
    names = [h.strip() for h in hw.split(",") if h.strip()] if isinstance(hw, str) else list(hw)
    if not names:
        raise InputError("compare needs at least one hardware profile, e.g. hw=['a100', 'h100']")
    profiles = [resolve_hardware(h, peak_flops_per_s=peak_flops_per_s, mem_bw_bytes_per_s=mem_bw_bytes_per_s,
                                 ideal=ideal, matmul_precision=matmul_precision) for h in names]
    if dims:
        frontend_opts.setdefault("dims", dict(dims))
    analyses = analyze_on_profiles(model, profiles, inputs, rules=rules, strict=strict, depth=depth,
                                   attention=attention, causal=causal, runtime=runtime, progress=progress,
                                   options=options, **frontend_opts)
    from .memory import add_device_fit

    return add_device_fit(compare_devices(analyses))
