"""Checks that need only argv and the model's config.json, run before anything is built or traced.

A zoo language model or a transformers ``config.json`` carries its head counts, MLP size and position limit, so
``--tp 3`` on 32 heads, ``--prompt 9000`` on a 4096-position model or ``--seq 2048`` on GPT-2 fail in well under a
second instead of after the model is built (the same checks run again later, on the built model, for every other
kind of input).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from ..errors import InputError, sanitize_terminal

__all__ = ["config_of", "check_llm_args", "check_seq"]

def config_of(model: Any) -> dict | None:
    """The config dict of a zoo transformers model or a config.json (None for anything else or unreadable)."""
    if not isinstance(model, str):
        return None
    from ..frontends import classify

    ref = classify(model)
    if ref.kind == "hf_config":
        from ..frontends.hf import read_config
        from ..frontends.hf_limits import check_config_values

        data = read_config(ref.path)
        check_config_values(data, str(ref.path))  # layers / widths out of range: fail before torch is imported
    elif ref.kind == "zoo":
        from ..frontends import zoo

        try:
            m = zoo.resolve(model)
        except InputError:
            return None  # the loader reports unknown names with its suggestions
        if m.source != "hf":
            return None
        from ..frontends.hf import read_config

        data = read_config(zoo.config_path(m.name))
    else:
        return None
    text = data.get("text_config")
    return {**data, **text} if isinstance(text, dict) else data


def _first(cfg: dict, *keys: str) -> Any:
    for k in keys:
        v = cfg.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def check_llm_args(model: Any, prompts: Sequence[int], gens: Sequence[int], tps: Sequence[int]) -> None:
    """``--prompt`` / ``--gen`` against the positions and ``--tp`` against heads and MLP size, from the config."""
    from ..llm.source import LLMSource, ModelSpec
    from ..llm.tp import check_tp

    for t in tps:
        check_tp(t)
    cfg = config_of(model)
    if cfg is None:
        return
    name = model.rsplit("/", 1)[-1] if "/" in model else model
    limit = _first(cfg, "max_position_embeddings", "n_positions", "max_sequence_length")
    if cfg.get("is_encoder_decoder"):
        limit = None  # encoder and decoder limits differ: the encoder-decoder source checks them once built
    src = SimpleNamespace(spec=ModelSpec(name=name, max_positions=limit), name=sanitize_terminal(cfg.get("_name_or_path") or name))
    for p in prompts:
        for g in gens:
            LLMSource.check_context(src, p, g)  # the loader's own message
    heads = _first(cfg, "num_attention_heads", "n_head")
    kv = 1 if cfg.get("multi_query") else _first(cfg, "num_key_value_heads", "n_head_kv", "num_kv_heads") or heads
    for t in tps:
        check_tp(t, heads, kv, _first(cfg, "intermediate_size", "n_inner", "ffn_dim"))


def check_seq(model: Any, seq: int | None) -> None:
    """``analyze --seq`` past the model's positions (``max_position_embeddings``, as ``llm --prompt`` is checked) is
    an error known from the config of a zoo or config.json model, with ``llm``'s message."""
    if seq is None:
        return
    cfg = config_of(model)
    if not cfg or cfg.get("is_encoder_decoder"):
        return  # encoder and decoder limits differ: the built model's inputs are capped by the frontend
    limit = _first(cfg, "max_position_embeddings", "n_positions", "max_sequence_length")
    if limit and seq > limit:
        name = sanitize_terminal(cfg.get("_name_or_path") or (model.rsplit("/", 1)[-1] if "/" in model else model))
        raise InputError(f"--seq {seq} is longer than {name}'s maximum of {limit} positions "
                         f"(max_position_embeddings); use --seq <= {limit}")
