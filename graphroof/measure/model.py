"""``graphroof.measure.measure_model``: predict, run for real on this machine, and compare (the API behind
``graphroof profile``).  See :mod:`graphroof.measure.run` for the definitions of every figure."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..api import count_graph, resolve_hardware
from ..counters.settings import CountSettings
from ..errors import GraphroofError, InputError
from ..frontends import is_torch_module, load, resolve_model
from ..frontends.torch.factory import build_module
from ..hardware import HardwareProfile
from ..options import DEFAULT, Options
from .run import MeasuredComparison

__all__ = ["measure_model", "check_measure_device"]


def check_measure_device(device: str) -> None:
    """Only the CPU is measured; ``cuda`` is probed only when asked for, to give the right message."""
    if device == "cpu":
        return
    if device != "cuda":
        raise InputError(f"--device {device!r}: use cpu (or cuda)")
    import torch

    if not torch.cuda.is_available():
        raise GraphroofError(f"no CUDA device is available to this torch ({torch.__version__}); run with --device cpu")
    raise GraphroofError("profile measures on the CPU only for now; run with --device cpu "
                         "(graphroof calibrate --device cuda does measure a GPU)")


#: Refuse to build models whose fp32 weights exceed this (real random weights are allocated here).
MAX_PARAM_BYTES = 8e9


def _random_inputs(shapes) -> tuple:
    import torch

    g = torch.Generator().manual_seed(0)
    if isinstance(shapes, Mapping):
        raise InputError("--input NAME=SHAPE is for ONNX and transformers models; for 'module:factory' give "
                         "plain shapes (--input 1x3x224x224)")
    return tuple(torch.randn(tuple(s), generator=g) for s in shapes)


def _real_tensors(spec: Any, vocab: int = 100) -> Any:
    """``{"input_ids": ((1, 128), "int64"), "use_cache": False}`` -> real tensors (ids uniform in [0, vocab))."""
    import torch

    g = torch.Generator().manual_seed(0)

    def one(v):
        if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], (tuple, list)):
            shape, dt = tuple(v[0]), v[1]
            if dt in ("int64", "int32"):
                return torch.randint(0, vocab, shape, generator=g, dtype=torch.int64 if dt == "int64" else torch.int32)
            return torch.randn(shape, generator=g)
        if isinstance(v, (tuple, list)) and v and all(isinstance(d, int) for d in v):
            return torch.randn(tuple(v), generator=g)
        return v
    if isinstance(spec, Mapping):
        return {k: one(v) for k, v in spec.items()}
    return tuple(one(v) for v in spec)


def _check_size(module, name: str) -> None:
    n = sum(p.numel() for p in module.parameters())
    if n * 4 > MAX_PARAM_BYTES:
        raise GraphroofError(f"{name} has {n / 1e9:.1f}B parameters ({n * 4 / 1e9:.0f} GB in fp32); profile builds "
                             "the model with real random weights on this machine; use a smaller model")


def _materialize(meta_module):
    """A meta-device module with real random weights on the CPU: every parameter N(0, 0.02) and buffer zero,
    then each submodule's own ``reset_parameters`` (convolutions, linears, norms) where it has one."""
    import torch

    m = meta_module.to_empty(device="cpu")
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0.0, 0.02)
        for b in m.buffers():
            b.zero_()
        for sub in m.modules():
            if hasattr(sub, "reset_parameters"):
                sub.reset_parameters()
    return m.float()


def _file_name(path: Any) -> str:
    """A config file's name in the report: its folder's for a ``config.json``, else the file's stem."""
    return path.parent.name if path.name == "config.json" and path.parent.name else path.stem


def _real_module(model: str, inputs: Any, opts: dict[str, Any]):
    """(module with random real weights on the CPU, example inputs, frontend options, context for tracing and
    running) for a ``module:factory`` / zoo / transformers-config spec."""
    import contextlib

    ctx = contextlib.nullcontext
    batch, seq = opts.pop("batch", 1), opts.pop("seq", None)
    res = resolve_model(model)  # the dispatcher analyze and llm use
    ref = res.ref
    if ref.kind == "factory":
        built = build_module(ref.model if callable(ref.model) else ref.target, device="cpu")
        module, example = built.module, built.example
        if inputs is None:
            shapes = opts.get("input_shapes")
            if shapes:
                inputs = _random_inputs(shapes)
            elif example is not None:
                inputs = example
            else:
                raise InputError(f"{model}: give the input shape(s) with --input, e.g. --input 1x3x224x224")
        _check_size(module, model)
        return module, inputs, {"name": model}, ctx
    if ref.kind not in ("hf_config", "zoo"):
        raise InputError(f"{model}: an op table has nothing to run; profile takes an .onnx file, "
                         "'module:factory', a zoo name or a transformers config.json")
    from ..frontends import zoo
    from ..frontends.hf import build as hf

    name = res.name if ref.kind == "zoo" or ref.repo_id else _file_name(ref.path)
    if res.config is None:  # vision zoo entries are torch modules built on the meta device
        meta, default = zoo.build_zoo_module(res.zoo.name, "fp32")
        _check_size(meta, name)
        shapes = opts.get("input_shapes") or [(batch, *default[0][1:])]
        return _materialize(meta), _random_inputs(shapes), {"name": name}, ctx
    data = res.config
    meta, cfg, _ = hf.build_model(data, dtype="fp32", source=name)
    _check_size(meta, name)
    import torch

    torch.manual_seed(0)
    module = type(meta)._from_config(cfg, dtype=torch.float32, attn_implementation="sdpa")
    spec, _notes = hf.model_inputs(module, cfg, batch=batch, seq=seq, name=name)
    vocab = min(100, int(getattr(cfg, "vocab_size", 100) or 100))
    return module, _real_tensors(spec, vocab), {"name": name, "capture": "dispatch",
                                                 "causal_masks": hf.is_causal_lm(module)}, hf.eager_prompt


def measure_model(model: Any, inputs: Any = None, *, hw: str | HardwareProfile, runs: int | None = None,
                  warmup: int = 2, depth: int | None = None, dims: Mapping[str, int] | None = None,
                  ort_opt: str = "basic", threads: int | None = None, device: str = "cpu",
                  attention: str = "flash", causal: str = "kernel", overhead_factor: float = 2.0,
                  strict: bool = False, options: Options | None = None, **frontend_opts: Any) -> MeasuredComparison:
    """Predict *model* on *hw*, measure it on this machine, and return the :class:`MeasuredComparison`.

    *model*: an ``nn.Module`` (with real weights; *inputs* = example tensors), an ``.onnx`` path (random
    inputs from *dims* / ``input_shapes``), or a ``"pkg.module:factory"`` spec.  ``runs=None`` picks about
    2 s of passes (5 to 50).
    """
    check_measure_device(device)
    import os

    from .hygiene import load_1min

    load_avg = load_1min()  # before we load the machine ourselves (building, tracing, running)
    prof = resolve_hardware(hw)
    settings = CountSettings(attention=attention, causal=causal)
    opts = dict(frontend_opts)
    if dims:
        opts.setdefault("dims", dict(dims))
    import contextlib

    ctx = contextlib.nullcontext
    onnx_path = isinstance(model, (str, Path)) and str(model).lower().endswith(".onnx")
    if onnx_path:
        if not Path(model).exists():
            raise InputError(f"model file {str(model)!r} not found; check the path")
        graph = load(model, options=options or DEFAULT, **{k: v for k, v in opts.items() if k not in ("batch", "seq")})
    else:
        if not is_torch_module(model):
            if not isinstance(model, str):
                raise InputError(f"cannot profile a {type(model).__name__}; pass an nn.Module, an .onnx path, "
                                 "'module:factory', a zoo name or a config.json")
            model, inputs, extra, ctx = _real_module(model, inputs, opts)
            opts.update(extra)
        if inputs is None:
            raise InputError("profiling an nn.Module needs example inputs (real tensors)")
        with ctx():
            graph = load(model, inputs, options=options or DEFAULT,
                         **{k: v for k, v in opts.items() if k not in ("input_shapes", "batch", "seq")})
    meta = {"model": graph.meta.get("model", graph.name), "capture": graph.meta.get("capture", "")}
    a = count_graph(graph, prof, strict=strict, dims=dims, depth=depth, meta=meta, settings=settings)
    if onnx_path:
        from .run_onnx import run_onnx

        measured = run_onnx(model, a.graph, dims=dims, shapes=opts.get("input_shapes"), runs=runs, warmup=warmup,
                            opt=ort_opt, threads=threads)
    else:
        from .run_torch import run_torch

        with ctx():
            measured = run_torch(model, inputs, a.graph, runs=runs, warmup=warmup, threads=threads)
    measured.load_1min, measured.cpus = load_avg, os.cpu_count()
    c = MeasuredComparison(a, measured, overhead_factor=overhead_factor)
    from ..errors import warn

    for msg in c.summary["warnings"]:
        warn(msg)
    return c
