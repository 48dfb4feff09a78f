"""``graphroof.profile_model``: predict, run for real on this machine, and compare (the API behind
``graphroof profile``).  See :mod:`graphroof.profile` for the definitions of every figure."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .api import count_graph, resolve_hardware
from .counters.settings import CountSettings
from .errors import GraphroofError, InputError
from .frontends import is_torch_module, load
from .hardware import HardwareProfile
from .profile import Comparison

__all__ = ["profile_model", "check_profile_device"]


def check_profile_device(device: str) -> None:
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


def _random_inputs(shapes) -> tuple:
    import torch

    g = torch.Generator().manual_seed(0)
    if isinstance(shapes, Mapping):
        raise InputError("--input NAME=SHAPE is for ONNX models; for 'module:factory' give plain shapes (--input 1x3x224x224)")
    return tuple(torch.randn(tuple(s), generator=g) for s in shapes)


def _real_module(model: str, inputs: Any, opts: dict[str, Any]):
    """(module with random real weights on the CPU, example inputs) for a factory / zoo / config spec."""
    if ":" in model and not Path(model).suffix:
        from .frontends.torch_export import _import_factory  # noqa: PLC2701 - shared with the frontend

        module = _import_factory(model)()
        if inputs is None:
            if not opts.get("input_shapes"):
                raise InputError(f"{model}: give the input shape(s) with --input, e.g. --input 1x3x224x224")
            inputs = _random_inputs(opts["input_shapes"])
        return module, inputs
    from .frontends import real_module as rm  # provided by the torch frontend when merged

    return rm(model, **opts)


def profile_model(model: Any, inputs: Any = None, *, hw: str | HardwareProfile, runs: int | None = None,
                  warmup: int = 2, depth: int | None = None, dims: Mapping[str, int] | None = None,
                  ort_opt: str = "basic", threads: int | None = None, device: str = "cpu",
                  attention: str = "flash", causal: str = "kernel", overhead_factor: float = 2.0,
                  strict: bool = False, **frontend_opts: Any) -> Comparison:
    """Predict *model* on *hw*, measure it on this machine, and return the :class:`Comparison`.

    *model*: an ``nn.Module`` (with real weights; *inputs* = example tensors), an ``.onnx`` path (random
    inputs from *dims* / ``input_shapes``), or a ``"pkg.module:factory"`` spec.  ``runs=None`` picks about
    2 s of passes (5 to 50).
    """
    check_profile_device(device)
    prof = resolve_hardware(hw)
    settings = CountSettings(attention=attention, causal=causal)
    opts = dict(frontend_opts)
    if dims:
        opts.setdefault("dims", dict(dims))
    onnx_path = isinstance(model, (str, Path)) and str(model).lower().endswith(".onnx")
    if onnx_path:
        if not Path(model).exists():
            raise InputError(f"model file {str(model)!r} not found; check the path")
        graph = load(model, **opts)
    else:
        if not is_torch_module(model):
            if not isinstance(model, str):
                raise InputError(f"cannot profile a {type(model).__name__}; pass an nn.Module, an .onnx path or "
                                 "'module:factory'")
            model, inputs = _real_module(model, inputs, opts)
        if inputs is None:
            raise InputError("profiling an nn.Module needs example inputs (real tensors)")
        graph = load(model, inputs, **{k: v for k, v in opts.items() if k not in ("input_shapes",)})
    meta = {"model": graph.meta.get("model", graph.name), "capture": graph.meta.get("capture", "")}
    a = count_graph(graph, prof, strict=strict, dims=dims, depth=depth, meta=meta, settings=settings)
    if onnx_path:
        from .profile_onnx import run_onnx

        measured = run_onnx(model, a.graph, dims=dims, shapes=opts.get("input_shapes"), runs=runs, warmup=warmup,
                            opt=ort_opt, threads=threads)
    else:
        from .profile_torch import run_torch

        measured = run_torch(model, inputs, a.graph, runs=runs, warmup=warmup, threads=threads)
    return Comparison(a, measured, overhead_factor=overhead_factor)
