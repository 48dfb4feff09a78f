"""Sweeps: :func:`sweep` decides what a model is swept over.

* a language model (a zoo LLM, a decoder's ``config.json``, an ONNX file with ``past`` inputs, or any model when
  *prompt* / *gen* are given): every (device, dtypes, TP, batch, prompt, gen) point (:func:`~graphroof.sweeps.llm.
  sweep_llm`, priced by :class:`graphroof.llm.price.PricedModel`);
* any other model: the batch on several devices (:func:`~graphroof.sweeps.batch.batch_sweep`).
"""

from __future__ import annotations

from typing import Any

from .._lazy import lazy_getattr
from ..errors import InputError

#: public name -> the submodule defining it, imported on first use (``graphroof.cli`` imports ``sweep.limits``
#: at start-up: the LLM engine is not loaded for it)
_LAZY = {"BatchPoint": "batch", "BatchSweep": "batch", "batch_sweep": "batch", "sweep_llm": "llm",
         "RunningFrontier": "points", "SweepPoint": "points", "SweepResult": "points", "pareto": "points",
         "pick_slo": "points"}

__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = ["sweep", "is_language_model", "sweep_llm", "batch_sweep", "BatchPoint", "BatchSweep", "SweepPoint",
           "SweepResult", "RunningFrontier", "pareto", "pick_slo"]

#: options that only an LLM sweep takes
_LLM_ONLY = ("prompt", "gen", "weights", "activations", "kv", "tp", "max_ttft_s", "max_tpot_s", "usd_per_hour",
             "on_point", "gpu_mem_util", "kv_block", "max_batched_tokens", "spec_tokens", "spec_acceptance",
             "spec_draft", "spec_draft_cost")


def is_language_model(model: Any) -> bool:
    """A zoo language model, a decoder's ``config.json`` (``...ForCausalLM`` / ``LMHead`` / ``is_decoder``), an
    ONNX file with ``past`` (KV-cache) inputs, or an LLM source object."""
    if hasattr(model, "prefill_graph"):
        return True
    from ..frontends import classify, frontend

    ref = classify(model)
    if ref.kind == "zoo":
        return frontend("zoo").resolve(str(model)).family == "llm"
    if ref.kind == "hf_config":
        data = frontend("hf").read_config(ref.path)  # one-line errors; never reads a FIFO or /dev/zero
        names = data.get("architectures")
        archs = " ".join(str(a) for a in names) if isinstance(names, list) else ""
        return "CausalLM" in archs or "LMHead" in archs or bool(data.get("is_decoder"))
    if ref.kind == "onnx":
        return frontend("onnx").has_past_inputs(ref.path)
    return False


def sweep(model: Any, **kw: Any) -> Any:
    """Sweep *model*: an LLM over batch x prompt x gen x dtypes x TP on each device (:func:`sweep_llm`'s
    options), any other model over the batch (:func:`batch_sweep`'s).  Giving *prompt* or *gen* sweeps the model
    as an LLM."""
    from .batch import batch_sweep
    from .llm import sweep_llm

    llm = kw.get("prompt") is not None or kw.get("gen") is not None or is_language_model(model)
    if llm:
        kw = {k: v for k, v in kw.items() if v is not None or k not in ("prompt", "gen")}
        return sweep_llm(model, **kw)
    given = [k for k in _LLM_ONLY if kw.get(k) not in (None, 1, [1], (1,), {}, [None])]
    if given:
        flag = "--" + given[0].replace("_s", "").replace("_", "-")
        raise InputError(f"{flag} applies to language models; {model} is swept over --batch only (give "
                         "--prompt/--gen to sweep it as an LLM)")
    return batch_sweep(model, **{k: v for k, v in kw.items() if k not in _LLM_ONLY})
