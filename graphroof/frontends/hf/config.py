"""The one parser of transformers config facts, without importing transformers.

A transformers ``config.json`` names its architecture facts under several spellings (GPT-2's ``n_embd`` /
``n_head`` / ``n_positions``, Falcon's ``n_head_kv``, T5's ``d_model``); a transformers config *object* maps
them to the canonical names through its ``attribute_map``.  :func:`spec_from_config` reads the same list of
spellings from either (a dict as read from the file, or a built config object), so the CLI's checks before
anything is built (:mod:`graphroof.cli.precheck`) and the built LLM source (:mod:`.source`) agree by
construction.  :func:`read_config` reads the file (bounded, :mod:`graphroof.safe_read`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import InputError
from ..source import ModelSpec

__all__ = ["read_config", "first_positive", "spec_from_config", "text_config", "HIDDEN", "HEADS", "KV_HEADS",
           "LAYERS", "INTERMEDIATE", "POSITIONS"]

#: the spellings of each fact, first found wins
HIDDEN = ("hidden_size", "n_embd", "d_model")
HEADS = ("num_attention_heads", "n_head")
KV_HEADS = ("num_key_value_heads", "n_head_kv", "num_kv_heads")
LAYERS = ("num_hidden_layers", "n_layer", "num_layers")
INTERMEDIATE = ("intermediate_size", "n_inner", "ffn_dim")
POSITIONS = ("max_position_embeddings", "n_positions", "max_sequence_length")


def read_config(path: str | Path) -> dict[str, Any]:
    """The JSON object of a transformers ``config.json``: a regular UTF-8 file of at most 64 MB, nesting at most
    64 levels (:mod:`graphroof.safe_read`); anything else is a one-line :class:`InputError`."""
    from ...safe_read import parse_json, read_text, shown_path

    p = Path(path)
    data = parse_json(read_text(p, "transformers config"), shown_path(p))
    if not isinstance(data, dict):
        raise InputError(f"{shown_path(p)}: a transformers config.json holds an object, not a {type(data).__name__}")
    return data


def _get(cfg: Any, name: str) -> Any:
    return cfg.get(name) if isinstance(cfg, Mapping) else getattr(cfg, name, None)


def first_positive(cfg: Any, *names: str, default: int | None = None) -> int | None:
    """The first of *names* that *cfg* (a dict or a config object) sets to a positive integer, else *default*."""
    for n in names:
        v = _get(cfg, n)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return default


def text_config(data: dict[str, Any]) -> dict[str, Any]:
    """A config dict with its ``text_config`` (multimodal models: the language model's facts) merged over it."""
    text = data.get("text_config")
    return {**data, **text} if isinstance(text, dict) else data


def spec_from_config(cfg: Any, name: str, dtype: str | None = None) -> ModelSpec:
    """Architecture facts of a transformers config, a dict (``config.json``) or a config object."""
    hidden = first_positive(cfg, *HIDDEN)
    heads = first_positive(cfg, *HEADS)
    kv = first_positive(cfg, *KV_HEADS, default=heads)
    if _get(cfg, "multi_query"):
        kv = 1
    head_dim = first_positive(cfg, "head_dim", default=(hidden // heads) if hidden and heads else None)
    return ModelSpec(name=name, layers=first_positive(cfg, *LAYERS), hidden=hidden, heads=heads, kv_heads=kv,
                     head_dim=head_dim, intermediate=first_positive(cfg, *INTERMEDIATE),
                     vocab=first_positive(cfg, "vocab_size"), max_positions=first_positive(cfg, *POSITIONS),
                     dtype=dtype)
