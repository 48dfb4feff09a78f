"""transformers frontend: a ``config.json`` -> the model built on the meta device -> :class:`OpGraph`.

No download and no weights: the config alone defines every shape.  The model class is the config's first
``architectures`` entry when transformers has it, else ``AutoModelForCausalLM`` for causal-LM types, else
``AutoModel``.  Every input the forward needs gets a default from the config (:mod:`.inputs`: token ids,
images from ``vision_config``, Whisper's log-mel features, decoder tokens) unless ``--input`` gives its shape.

The forward pass is captured as transformers runs it in eager inference on one unpadded prompt: the
packed-sequence check (which would read tensor values) is skipped, so causal LMs call SDPA with
``is_causal=True`` and no materialised mask, and grouped-query attention reads K / V at their own size.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import FrontendError, InputError, sanitize_terminal
from ...graph import OpGraph
from .compat import eager_prompt
from .config import read_config
from .inputs import DEFAULT_SEQ, learned_positions, model_inputs
from .limits import check_config_values

__all__ = ["load_config", "build_model", "DEFAULT_SEQ", "eager_prompt", "learned_positions", "model_inputs"]


def _transformers():
    try:
        import torch  # noqa: F401
    except ModuleNotFoundError:
        raise FrontendError("transformers models need torch: pip install 'graphroof[torch,hf]' "
                            "(CPU torch: see the README's setup)") from None
    try:
        import transformers
    except ModuleNotFoundError:
        raise FrontendError("a transformers config.json needs the transformers package: "
                            "pip install 'graphroof[hf]'") from None
    return transformers


def _config(data: dict[str, Any], source: str):
    tf = _transformers()
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING, CONFIG_MAPPING_NAMES

    data = dict(data)
    model_type = data.get("model_type")
    if model_type is None:
        raise FrontendError(f"{source}: no 'model_type'; a transformers config.json names its architecture "
                            "(e.g. \"model_type\": \"llama\")")
    if model_type not in CONFIG_MAPPING_NAMES:
        close = difflib.get_close_matches(str(model_type), list(CONFIG_MAPPING_NAMES), n=3, cutoff=0.6)
        hint = f" (close: {', '.join(close)})" if close else ""
        raise FrontendError(f"{source}: model_type {model_type!r} is not a transformers architecture known to "
                            f"transformers {tf.__version__}{hint}; build the model in Python and call "
                            "graphroof.analyze(module, inputs) instead")
    check_config_values(data, source)  # before transformers: some configs build per-layer lists at once
    dtype = data.pop("torch_dtype", None) or data.pop("dtype", None)
    data.pop("transformers_version", None)
    try:
        cfg = CONFIG_MAPPING[model_type](**{k: v for k, v in data.items() if k != "model_type"})
    except Exception as e:  # noqa: BLE001 - an invalid field value
        raise FrontendError(f"{source}: transformers rejected the {model_type} config: {e}") from None
    return cfg, dtype


def _model_class(cfg, data: dict[str, Any], source: str = "config"):
    """The class to build: the first ``architectures`` entry transformers has (it must be a model class: a
    :class:`FrontendError` names the field otherwise), else the Auto class of the config's kind."""
    tf = _transformers()
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    archs = data.get("architectures") or ()
    if not isinstance(archs, (list, tuple)):
        raise FrontendError(f"{source}: 'architectures' must be a list of model class names, e.g. "
                            "[\"LlamaForCausalLM\"]")
    for i, arch in enumerate(archs):
        cls = getattr(tf, str(arch), None)
        if cls is None:
            continue
        if not (isinstance(cls, type) and (hasattr(cls, "from_config") or hasattr(cls, "_from_config"))):
            from ...errors import sanitize_terminal

            raise FrontendError(f"{source}: architectures[{i}] = {sanitize_terminal(repr(arch))[:60]} is not a "
                                "transformers model class (e.g. \"LlamaForCausalLM\"); fix the field or remove it")
        return cls
    if cfg.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return tf.AutoModelForCausalLM
    return tf.AutoModel


def build_model(data: dict[str, Any], *, dtype: str | None = None, source: str = "config"):
    """The model of config *data* on the meta device: ``(model, config, dtype_name)``."""
    import torch

    from ...dtypes import canonical_dtype
    from ..torch.inputs import TORCH_DTYPES

    cfg, cfg_dtype = _config(data, source)
    name = canonical_dtype(dtype or cfg_dtype or "fp32")
    tdtype = TORCH_DTYPES.get(name)
    if tdtype is None or not tdtype.is_floating_point:
        raise InputError(f"dtype {name!r}: the model's parameters need a floating dtype (fp32, bf16, fp16)")
    cls = _model_class(cfg, data, source)
    build = cls.from_config if hasattr(cls, "from_config") else cls._from_config
    try:
        with torch.device("meta"):
            try:
                model = build(cfg, dtype=tdtype, attn_implementation="sdpa")
            except ValueError as e:  # no SDPA path for this architecture: its own (eager) attention
                if "attention implementation" not in str(e):
                    raise
                model = build(cfg, dtype=tdtype, attn_implementation="eager")
    except Exception as e:  # noqa: BLE001
        from ..torch.common import one_line

        raise FrontendError(f"{source}: transformers could not build {getattr(cls, '__name__', cls)} from this "
                            f"config: {one_line(e)}") from None
    return model, cfg, name


def eager_attention_note(model) -> str | None:
    """A note when *model* runs transformers' eager attention (its architecture has no SDPA path), else None."""
    cfg = getattr(model, "config", None)
    if getattr(cfg, "_attn_implementation", None) != "eager":
        return None
    why = " (attention logit soft-capping)" if getattr(cfg, "attn_logit_softcapping", None) else ""
    return (f"{type(model).__name__} has no SDPA path in transformers{why}: attention is counted as its eager "
            "math, the whole (query, key) square computed with the scores and probabilities written to memory; a "
            "fused kernel that supports it (e.g. FlashInfer's soft-capping attention) would skip the masked "
            "half and keep the scores on chip")


def is_causal_lm(model) -> bool:
    return type(model).__name__.endswith("ForCausalLM") or bool(getattr(model.config, "is_decoder", False))


def load_config(path: str | Path, *, batch: int = 1, seq: int | None = None, dtype: str | None = None,
                input_shapes: Any = None, capture: str = "dispatch", name: str | None = None,
                **opts: Any) -> OpGraph:
    """Build the model of a transformers ``config.json`` on the meta device and capture one forward pass.

    *seq* defaults to 1024 (capped at the maximum of models with learned positions, e.g. BERT's 512);
    *dtype* defaults to the config's ``torch_dtype`` (fp32 when absent).  The capture defaults to
    ``dispatch``: under ``torch.export`` transformers materialises masks and repeats K / V heads, which its
    eager inference path does not do.
    """
    if batch < 1 or (seq is not None and seq < 1):
        raise InputError("--batch and --seq must be >= 1")
    path = Path(path)
    data = read_config(path)
    stem = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    name = name or sanitize_terminal(data.get("_name_or_path") or stem)  # printable: it titles every report
    return load_config_data(data, batch=batch, seq=seq, dtype=dtype, input_shapes=input_shapes, capture=capture,
                            name=name, source=str(path), **opts)


def load_config_data(data: dict[str, Any], *, batch: int = 1, seq: int | None = None, dtype: str | None = None,
                     input_shapes: Any = None, capture: str = "dispatch", name: str = "model",
                     source: str = "config", notes: list[str] | None = None, **opts: Any) -> OpGraph:
    from ..torch.export import load_module

    model, cfg, dtype_name = build_model(data, dtype=dtype, source=source)
    notes = list(notes or [])
    if input_shapes is not None and not isinstance(input_shapes, Mapping):  # --input: positional, forward's order
        names = [p for p in inspect.signature(model.forward).parameters if p != "self"]
        inputs = dict(zip(names, input_shapes))
        if getattr(cfg, "use_cache", False) and "use_cache" in inspect.signature(model.forward).parameters:
            inputs.setdefault("use_cache", False)
    else:
        inputs, more = model_inputs(model, cfg, batch=batch, seq=seq, name=name, given=input_shapes)
        notes += more
    notes.append(f"built from its transformers config on the meta device ({type(model).__name__}, {dtype_name})")
    eager = eager_attention_note(model)
    if eager:
        notes.append(eager)
    opts.pop("kv_inputs", None)
    from ..moe import mark_moe_routing

    with eager_prompt():
        g = load_module(model, inputs, capture=capture, name=name, notes=notes,
                        causal_masks=is_causal_lm(model), **opts)
    return mark_moe_routing(g)
