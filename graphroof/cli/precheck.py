"""Checks that need only argv and the model's config.json, run before anything is built or traced.

A zoo language model or a transformers ``config.json`` carries its head counts, MLP size and position limit, so
``--tp 3`` on 32 heads, ``--prompt 9000`` on a 4096-position model or ``--seq 2048`` on GPT-2 fail in well under a
second instead of after the model is built (the same checks run again later, on the built model, for every other
kind of input).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from ..errors import InputError, sanitize_terminal
from ..frontends.source import ModelSpec

__all__ = ["config_of", "check_llm_args", "check_seq"]

def config_of(model: Any) -> dict | None:
    """The config dict of a zoo transformers model or a config.json, its ``text_config`` merged over it (None for
    anything else or an unknown zoo name: the loader reports those).  Resolved by the dispatcher every command
    uses (:func:`graphroof.frontends.resolve_model`), which also refuses implausible sizes before torch is
    imported."""
    if not isinstance(model, str):
        return None
    from ..frontends import classify, resolve_model

    ref = classify(model)
    if ref.kind not in ("hf_config", "zoo"):
        return None
    try:
        res = resolve_model(ref)
    except InputError:
        if ref.kind == "zoo":
            return None  # the loader reports unknown names with its suggestions
        raise
    if res.config is None:
        return None
    from ..frontends.hf.config import text_config

    return text_config(res.config)


def _spec(model: str, cfg: dict) -> ModelSpec:
    """The config's facts, parsed by the one config parser (:func:`graphroof.frontends.hf.config.spec_from_config`)."""
    from ..frontends.hf.config import spec_from_config

    return spec_from_config(cfg, model.rsplit("/", 1)[-1] if "/" in model else model)


def check_llm_args(model: Any, prompts: Sequence[int], gens: Sequence[int], tps: Sequence[int]) -> None:
    """``--prompt`` / ``--gen`` against the positions and ``--tp`` against heads and MLP size, from the config."""
    from ..frontends.source import LLMSource
    from ..llm.tp import check_tp

    for t in tps:
        check_tp(t)
    cfg = config_of(model)
    if cfg is None:
        return
    spec = _spec(model, cfg)
    limit = None if cfg.get("is_encoder_decoder") else spec.max_positions  # encoder and decoder limits differ:
    # the encoder-decoder source checks them once built
    src = SimpleNamespace(spec=replace(spec, max_positions=limit),
                          name=sanitize_terminal(cfg.get("_name_or_path") or spec.name))
    for p in prompts:
        for g in gens:
            LLMSource.check_context(src, p, g)  # type: ignore[arg-type]  # the loader's own message, on the facts
    for t in tps:
        check_tp(t, spec.heads, spec.kv_heads, spec.intermediate)


def check_seq(model: Any, seq: int | None) -> None:
    """``analyze --seq`` past the model's positions (``max_position_embeddings``, as ``llm --prompt`` is checked) is
    an error known from the config of a zoo or config.json model, with ``llm``'s message."""
    if seq is None:
        return
    cfg = config_of(model)
    if not cfg or cfg.get("is_encoder_decoder"):
        return  # encoder and decoder limits differ: the built model's inputs are capped by the frontend
    limit = _spec(model, cfg).max_positions
    if limit and seq > limit:
        name = sanitize_terminal(cfg.get("_name_or_path") or (model.rsplit("/", 1)[-1] if "/" in model else model))
        raise InputError(f"--seq {seq} is longer than {name}'s maximum of {limit} positions "
                         f"(max_position_embeddings); use --seq <= {limit}")
