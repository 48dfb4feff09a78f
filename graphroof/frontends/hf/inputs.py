"""Default inputs of a transformers model built from its config: every input its forward needs, sized by the config.

* ``input_ids [batch, seq]``: ``seq`` from ``--seq`` (default 1024), capped at the learned position table of
  the text model (``text_config.max_position_embeddings`` for a two-tower model: CLIP's text tower has 77);
* ``pixel_values [batch, channels, size, size]`` from ``vision_config`` (or the config itself): ``image_size``,
  ``num_channels``;
* ``input_features [batch, num_mel_bins, 2 * max_source_positions]``: Whisper's log-mel spectrogram of 30 s
  of audio (3000 frames; two stride-1 / stride-2 convolutions make ``max_source_positions`` encoder positions);
* ``decoder_input_ids [batch, n]`` for encoder-decoders: ``n`` = the source length for text models (one teacher-
  forced pass over a target as long as the source), ``--seq`` capped at ``max_target_positions`` for speech.

A forward argument without a default value that none of these covers is an error naming it and the fix
(``--input NAME=SHAPE``).  Named ``--input`` shapes replace the default of that input; the others keep theirs.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from ...errors import InputError

__all__ = ["DEFAULT_SEQ", "learned_positions", "model_inputs", "default_input_names"]

DEFAULT_SEQ = 1024

#: inputs this module knows how to size from a config
_DEFAULTABLE = ("input_ids", "pixel_values", "input_features", "decoder_input_ids")


def learned_positions(model, cfg) -> int | None:
    """The table size when the model learns one embedding per position (BERT, GPT-2, CLIP's text tower), else
    None (RoPE, relative positions ...)."""
    import torch

    for k in ("max_position_embeddings", "n_positions"):
        v = getattr(cfg, k, None)
        if isinstance(v, int) and v > 0 and any(isinstance(m, torch.nn.Embedding) and m.num_embeddings == v
                                                 for m in model.modules()):
            return v
    return None


def _sub(cfg, name: str):
    sub = getattr(cfg, name, None)
    return sub if sub is not None and hasattr(sub, "to_dict") else None


def _forward_params(model) -> dict[str, inspect.Parameter]:
    try:
        ps = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return {}
    return {n: p for n, p in ps.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY, p.POSITIONAL_ONLY)}


def default_input_names(model, cfg) -> list[str]:
    """The inputs the model's forward needs: its main input, both towers of a text + vision model, the decoder
    tokens of an encoder-decoder, and every argument without a default value."""
    params = _forward_params(model)
    main = getattr(model, "main_input_name", "input_ids")
    names = [main]
    if _sub(cfg, "text_config") is not None and _sub(cfg, "vision_config") is not None:
        names += [n for n in ("input_ids", "pixel_values") if n in params]
    if getattr(cfg, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        names.append("decoder_input_ids")
    names += [n for n, p in params.items() if p.default is inspect.Parameter.empty and n not in ("self", "kwargs")]
    return list(dict.fromkeys(names))


def _text_tokens(model, cfg, seq: int | None, name: str, notes: list[str]) -> int:
    text = _sub(cfg, "text_config") or cfg
    limit = learned_positions(model, text)
    where = "text_config.max_position_embeddings" if text is not cfg else "its learned position embeddings"
    if seq is None:
        seq = DEFAULT_SEQ
        if limit and limit < seq:
            seq = limit
            what = "text length" if text is not cfg else "sequence length"
            notes.append(f"{what} {seq}: the most {where} allow (default {DEFAULT_SEQ})")
    elif limit and seq > limit:
        raise InputError(f"{name} handles at most {limit} tokens ({where}); use --seq {limit} or less")
    return seq


def _mel_frames(cfg) -> tuple[int, int] | None:
    mel, src = getattr(cfg, "num_mel_bins", None), getattr(cfg, "max_source_positions", None)
    if isinstance(mel, int) and isinstance(src, int):
        return mel, 2 * src
    return None


def model_inputs(model, cfg, *, batch: int, seq: int | None, name: str,
                 given: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], list[str]]:
    """``({input: (shape, dtype)}, notes)`` for every input the model needs (see the module docstring), the
    *given* ones as given, plus ``use_cache=False``."""
    given = dict(given or {})
    notes: list[str] = []
    inputs: dict[str, Any] = {}
    speech = _mel_frames(cfg)
    for n in default_input_names(model, cfg):
        if n in given:
            inputs[n] = given.pop(n)
        elif n == "input_ids":
            inputs[n] = ((batch, _text_tokens(model, cfg, seq, name, notes)), "int64")
        elif n == "pixel_values":
            vis = _sub(cfg, "vision_config") or cfg
            size = getattr(vis, "image_size", 224)
            size = tuple(size) if isinstance(size, (list, tuple)) else (size, size)
            inputs[n] = ((batch, getattr(vis, "num_channels", 3), *size), None)
            if seq is not None and "input_ids" not in inputs and "input_ids" not in default_input_names(model, cfg):
                notes.append("--seq ignored: a vision model takes images")
        elif n == "input_features" and speech:
            inputs[n] = ((batch, *speech), None)
            notes.append(f"input_features [{batch}, {speech[0]}, {speech[1]}]: the log-mel spectrogram of 30 s of "
                         f"audio ({speech[1]} frames, from num_mel_bins and 2 x max_source_positions)")
        elif n == "decoder_input_ids":
            inputs[n] = ((batch, _decoder_tokens(cfg, inputs, seq, name, notes, speech is not None)), "int64")
        else:
            raise InputError(f"{name}: no default for input {n!r}, which its forward needs and the config does not "
                             f"size; pass its shape with --input {n}=SHAPE (dims joined by x, e.g. 1x512)")
    inputs.update(given)  # named extras (attention_mask ...) as given
    if getattr(cfg, "use_cache", False) and "use_cache" in _forward_params(model):
        inputs["use_cache"] = False
    return inputs, notes


def _decoder_tokens(cfg, inputs: dict, seq: int | None, name: str, notes: list[str], speech: bool) -> int:
    limit = getattr(cfg, "max_target_positions", None)
    if speech:
        n = seq if seq is not None else (limit or DEFAULT_SEQ)
        if isinstance(limit, int) and n > limit:
            raise InputError(f"{name}'s decoder handles at most {limit} tokens (max_target_positions); use --seq "
                             f"{limit} or less")
        notes.append(f"encoder-decoder: the decoder runs one teacher-forced pass over {n} tokens")
        return n
    src = inputs.get("input_ids", ((0, seq or DEFAULT_SEQ), None))[0][1]
    notes.append(f"encoder-decoder: encoder and decoder both run on {src} tokens")
    return src
