"""``--holdout model``: each model's rows priced with kernel constants not fitted on that model.

Constants fitted on one model's rows (module :mod:`.refit` says which and how):

* ``a100-80gb-sxm``: GEMM and streaming constants on Vidur's Llama-2-7B and Llama-2-70B layer rows;
* ``h100-sxm``: the same on its Vidur rows, the GEMM constants also on our 2026 H100 GEMMs of five models' layers
  (benchmarks/data/h100_2026-11-27/measure_gemm.csv: Llama-2-13B, Llama-3-8B, Llama-3-70B at TP 8, Phi-3-mini,
  Qwen2.5-7B).

A row of one of those models on that GPU (the Vidur layers, gpt-fast, TensorRT-LLM, NIM, the torch_gpu session's
decode, prefill and GEMM rows) is priced again with the GEMM and streaming constants refit on the Vidur rows of the
*other* Llama-2 models alone (:func:`.refit.refit_profile`; for a model outside Llama-2: both Llama-2 models' rows).
An NVIDIA profile derived from a fitted one (H200 from the H100; L40S, T4, A10, V100 ... from the A100:
:func:`fitted_parent`) took those constants by copy or clock scaling: its rows of the parent's models are priced with
each constant moved by the refit's ratio to the parent's fit (:func:`_transferred`); the H100 PCIe, B200 and A30 copy
an older fit, made on the Vidur Llama-2 rows alone: their Llama-2 rows move by the refit's ratio to the same refit on
both Llama-2 models, their other rows stay.  Every other row keeps its plain figure: no constant was fitted on its
model.  Not refit, so still in-sample for their own
rows: the Triton fused-MoE rate (``triton_mma_efficiency``, two expert shapes of fused_moe_triton.csv), the
sustained rates fitted on one vision row per GPU and the engine presets' host constants (``--holdout engine`` holds
those out), the attention constants (fitted on attention shapes, not on a model), the A40's sustained bf16 rate
(fitted on Vidur's A40 Llama-2-7B rows; no dataset has A40 rows).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import replace
from functools import lru_cache
from typing import Any

from ..hardware import HardwareProfile, load_hardware, profiles_replaced
from .data import read_rows
from .refit import GPU_PROFILE, MODELS, OpsRow, ops_row, refit_profile

__all__ = ["FITTED_MODELS", "VIDUR_FILES", "model_key", "model_held_profile", "model_holdout", "model_notes"]

#: Vidur layer files per (profile, Llama-2 model): (the file's GPU, its name), as the Vidur adapter reads them
VIDUR_FILES = {(prof, model): (gpu, f"vidur_{gpu}_{src}_ops.csv")
               for gpu, prof in GPU_PROFILE.items() for src, model in MODELS.items()}
#: the models each fitted profile's kernel constants saw rows of (module doc)
FITTED_MODELS = {"a100-80gb-sxm": ("llama-2-7b", "llama-2-70b"),
                 "h100-sxm": ("llama-2-7b", "llama-2-70b", "llama-2-13b", "llama-3-8b", "llama-3-70b", "phi-3-mini",
                              "qwen2.5-7b")}
_SPELLINGS = {"llama3": "llama-3", "llama2": "llama-2"}
#: the refit fields (:func:`.refit.refit_profile`)
_FIELDS = ("gemm_matrix_efficiency", "gemm_mem_bw_efficiency", "gemm_latency_s", "stream_latency_s")


def model_key(name: str) -> str:
    """A model name as :data:`FITTED_MODELS` spells it: a ``config.json`` path's folder name, else the last path
    part; lower case; ``llama3`` -> ``llama-3``, Llama 3.1 / 3.3 -> ``llama-3`` (the same layer shapes); a
    ``-tp8`` / ``-instruct`` / ``-hf`` suffix and a GEMM name (``llama3-8b.qkv``) dropped."""
    parts = [p for p in re.split(r"[\\/]", name.strip()) if p]
    if len(parts) > 1 and parts[-1].lower().endswith(".json"):
        parts = parts[:-1]
    s = parts[-1].lower() if parts else ""
    m = re.match(r"^(.+)\.([a-z_]+)$", s)
    s = m.group(1) if m else s
    for a, b in _SPELLINGS.items():
        if s.startswith(a):
            s = b + s[len(a):]
    s = re.sub(r"^llama-3\.[13]-", "llama-3-", s)
    s = re.sub(r"-(tp\d+|instruct|hf)$", "", s)
    return re.sub(r"-\d+k$", "", s)  # phi-3-mini-4k(-instruct): the context length is not the shape


def _row_model(row: Any) -> str:
    """The model a priced row measures: its family, or for a GEMM row the model its shape came from."""
    if row.family in ("gemm", "grouped-gemm"):
        shape = str((row.inputs or {}).get("shape", ""))
        return model_key(shape) if shape else ""
    return model_key(str(row.family or ""))


def fitted_parent(hw: HardwareProfile) -> str:
    """The fitted profile whose kernel constants *hw*'s come from: itself when fitted, else, for an NVIDIA profile
    derived from one, the first fitted profile its ``sources.timing`` names (it copies their constants or scales
    them by a clock ratio); '' for none (the other vendors' profiles are derived from datasheets with a few
    constants borrowed: not transferred)."""
    if hw.name in FITTED_MODELS:
        return hw.name
    if hw.vendor != "NVIDIA":  # AMD / TPU / Gaudi / CPU: derived from datasheets, a few constants borrowed
        return ""
    text = hw.sources.get("timing", "")
    found = [(text.find(p), p) for p in FITTED_MODELS if p in text]
    return min(found)[1] if found and text.lstrip().lower().startswith("derived") else ""


@lru_cache(maxsize=None)
def _vidur_rows(profile: str, model: str) -> tuple[OpsRow, ...]:
    gpu, name = VIDUR_FILES[(profile, model)]
    return tuple(x for _, r in read_rows(name) if (x := ops_row(gpu, model, r)) is not None)


_REFITS: dict[tuple[str, str], tuple[HardwareProfile, HardwareProfile]] = {}


def _refit(parent: HardwareProfile, left_out: str) -> HardwareProfile:
    """*parent* refit on its Vidur rows of every Llama-2 model but *left_out*, memoised per (profile, model) for
    this exact *parent* (a replaced or edited profile is refit afresh)."""
    key = (parent.name, left_out)
    hit = _REFITS.get(key)
    if hit is None or hit[0] != parent:
        rows = [r for (p, m) in VIDUR_FILES if p == parent.name and m != left_out for r in _vidur_rows(p, m)]
        hit = _REFITS[key] = (parent, refit_profile(parent, rows))
    return hit[1]


def _transferred(hw: HardwareProfile, base: HardwareProfile, refit: HardwareProfile) -> HardwareProfile:
    """*hw* (derived from the fit *base*) with each refit constant moved by the refit's ratio to *base*: a copied
    constant becomes the refit's, a clock-scaled one keeps its scale; efficiencies at most 1 (a constant whose
    base is 0 is kept)."""
    t, bt, rt = hw.timing, base.timing, refit.timing
    assert t is not None and bt is not None and rt is not None

    def moved(v: float, b: float, r: float, efficiency: bool) -> float:
        out = v * r / b if b else v
        return min(1.0, out) if efficiency else out

    kw: dict[str, Any] = {f: moved(getattr(t, f), getattr(bt, f), getattr(rt, f), "efficiency" in f)
                          for f in _FIELDS}
    kw["stream_bw_efficiency"] = {k: moved(e, bt.stream_bw_efficiency[k], rt.stream_bw_efficiency[k], True)
                                  if k in bt.stream_bw_efficiency and k in rt.stream_bw_efficiency else e
                                  for k, e in t.stream_bw_efficiency.items()}
    return replace(hw, timing=replace(t, **kw))


def _current_copy(hw: HardwareProfile, parent: HardwareProfile) -> bool:
    """Whether derived *hw* took its parent's current fit: its ``gemm_mem_bw_efficiency``, which derived profiles
    copy unscaled, is the parent's.  The H100 PCIe, B200 and A30 keep an older fit of their parent's, made on the
    Vidur Llama-2 rows alone (H100 0.914, A100 0.806), before the H100's took our 2026 GEMMs in."""
    assert hw.timing is not None and parent.timing is not None
    return hw.timing.gemm_mem_bw_efficiency == parent.timing.gemm_mem_bw_efficiency


def model_held_profile(hw: HardwareProfile, model: str) -> HardwareProfile:
    """*hw* without the kernel constants fitted on *model*'s rows (module doc); *hw* itself when none was: a
    fitted profile refit without the model; a profile derived from one moved by the refit's ratios to the fit it
    copies -- the parent's current one (the parent's models), or, for an older copy (:func:`_current_copy`), the
    same refit on every Llama-2 model (the Llama-2 models only)."""
    key, parent_name = model_key(model), fitted_parent(hw)
    if not parent_name or hw.timing is None:
        return hw
    if parent_name == hw.name:
        return _refit(hw, key) if key in FITTED_MODELS[parent_name] else hw
    parent = load_hardware(parent_name)
    if _current_copy(hw, parent):
        if key not in FITTED_MODELS[parent_name]:
            return hw
        return _transferred(hw, parent, _refit(parent, key))
    if (parent_name, key) not in VIDUR_FILES:
        return hw
    return _transferred(hw, _refit(parent, ""), _refit(parent, key))


def model_holdout(rows: list[Any], adapter: Callable[[Any], list[Any]],
                  context: Callable[[Collection[str]], Any]) -> None:
    """Set ``row.holdout["model"]`` of the priced rows the adapter left without one (an adapter that prices by
    profile name: torch_gpu) whose model's rows the profile was fitted on: priced again by *adapter* in a fresh
    ``context(only=row ids)`` where the profile's name loads :func:`model_held_profile`, one (device, model) at a
    time."""
    groups: dict[tuple[str, str], list[Any]] = {}
    parents = {g: fitted_parent(load_hardware(g)) for g in {r.gpu for r in rows if r.gpu}}
    for r in rows:
        if r.gpu and r.predicted is not None and "model" not in r.holdout:
            m = _row_model(r)
            if m in FITTED_MODELS.get(parents[r.gpu], ()):
                groups.setdefault((r.gpu, m), []).append(r)
    for (gpu, m), mine in sorted(groups.items()):
        held = model_held_profile(load_hardware(gpu), m)
        with profiles_replaced([held]):
            again = {r.row_id: r.predicted for r in adapter(context({r.row_id for r in mine}))}
        for r in mine:
            if again.get(r.row_id) is not None:
                r.holdout["model"] = again[r.row_id]


def model_notes() -> list[str]:
    """What the model hold-out refits, in words."""
    fitted = "; ".join(f"{p}: {', '.join(ms)}" for p, ms in FITTED_MODELS.items())
    return ["model hold-out: the GEMM and streaming kernel constants of the fitted GPUs (gemm_matrix_efficiency, "
            "gemm_mem_bw_efficiency, gemm_latency_s, stream_latency_s, stream_bw_efficiency) are refit, for each "
            "model whose rows they were fitted on, on the Vidur layer rows of the other Llama-2 models alone "
            "(graphroof.validate.refit: the fitter's shapes and loss, the profile's tiles, split-K floor, tile policy "
            "and overlap exponent kept, Nelder-Mead from the fitter's starting point), and that model's rows priced "
            "with them; NVIDIA profiles derived from a fitted one (H200, L40S, T4, ...) move each of those constants "
            "by the refit's ratio to the fit they copy (H100 PCIe, B200, A30: an older Vidur-only fit, so their "
            f"Llama-2 rows only); models fitted on per GPU: {fitted}; every other row keeps its plain figure "
            "(nothing was fitted on its model)",
            "not refit (in-sample for their own rows): the Triton fused-MoE rate (two expert shapes), the sustained "
            "rates fitted on one vision row per GPU and the presets' host constants (--holdout engine holds those "
            "out); the H100's refit leaves out its 2026 GEMM rows of all five models, a stricter check than one "
            "model"]
