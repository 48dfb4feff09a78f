"""Plausible ranges of a transformers ``config.json``'s size fields, checked before transformers sees them.

A config is a few hundred bytes that decides how much work a trace is: every layer is built and traced (about
0.7 MB and 9 ms each), so ``num_hidden_layers: 100000`` grows without limit, and ``-3`` or ``0`` layers were
analysed as an empty model.  Each size field below must be an integer (or a list of them, or null: the
architecture's default) within its range, else one :class:`~graphroof.errors.FrontendError` names the field, its
value and the range.  The ranges are generous (several times the largest published models):

* layers (``num_hidden_layers``, ``n_layer``, ``encoder_layers`` ...): 1 .. 1000, or up to
  ``GRAPHROOF_MAX_LAYERS`` when that is set (the documented override for a deeper model);
* widths: hidden 1 .. 2^20, MLP 1 .. 2^22 (MoE expert MLPs may be 0), heads 1 .. 2^14, head dim 1 .. 2^16,
  vocabulary 1 .. 2^24, positions 1 .. 2^28, experts 0 .. 2^14, image size 1 .. 2^16, state size 1 .. 2^16.

The same check runs on every dict of the config whose key ends in ``_config`` (``text_config``,
``vision_config`` ...), a few levels deep.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import FrontendError, InputError, sanitize_terminal
from ...options import env

__all__ = ["MAX_LAYERS", "check_config_values", "max_layers"]

#: The most layers a config may have unless ``GRAPHROOF_MAX_LAYERS`` says otherwise.
MAX_LAYERS = 1000

_LAYERS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "num_decoder_layers", "num_encoder_layers",
           "encoder_layers", "decoder_layers")
#: field -> (lowest, highest); the layer fields are added by :func:`_ranges` (their ceiling can be overridden).
_RANGES: dict[str, tuple[int, int]] = {
    **dict.fromkeys(("hidden_size", "n_embd", "d_model"), (1, 1 << 20)),
    **dict.fromkeys(("intermediate_size", "n_inner", "ffn_dim", "d_ff", "encoder_ffn_dim", "decoder_ffn_dim"),
                    (1, 1 << 22)),
    **dict.fromkeys(("moe_intermediate_size", "shared_expert_intermediate_size"), (0, 1 << 22)),
    **dict.fromkeys(("num_attention_heads", "n_head", "num_key_value_heads", "n_head_kv", "num_kv_heads",
                     "encoder_attention_heads", "decoder_attention_heads", "num_heads"), (1, 1 << 14)),
    **dict.fromkeys(("head_dim", "v_head_dim", "qk_nope_head_dim", "qk_rope_head_dim"), (1, 1 << 16)),
    "vocab_size": (1, 1 << 24),
    **dict.fromkeys(("max_position_embeddings", "n_positions", "max_source_positions", "max_target_positions"),
                    (1, 1 << 28)),
    **dict.fromkeys(("num_experts", "num_local_experts", "n_routed_experts", "n_shared_experts",
                     "num_experts_per_tok"), (0, 1 << 14)),
    "image_size": (1, 1 << 16),
    "state_size": (1, 1 << 16),
}
_NESTED_DEPTH = 3


def max_layers() -> int:
    """The layer ceiling: ``GRAPHROOF_MAX_LAYERS`` when set, else :data:`MAX_LAYERS`."""
    text = (env("GRAPHROOF_MAX_LAYERS", "") or "").strip()
    if not text:
        return MAX_LAYERS
    try:
        v = int(text)
    except ValueError:
        raise InputError(f"GRAPHROOF_MAX_LAYERS={text!r}: expected a whole number of layers, e.g. 2000") from None
    if v < 1:
        raise InputError(f"GRAPHROOF_MAX_LAYERS={text!r}: must be >= 1")
    return v


def _check(field: str, value: Any, lo: int, hi: int, source: str, hint: str) -> None:
    items = value if isinstance(value, list) else [value]
    for v in items:
        if v is None and not isinstance(value, list):
            return  # null: the architecture's default
        shown = sanitize_terminal(repr(value))[:60]
        if isinstance(v, bool) or not isinstance(v, int):
            raise FrontendError(f"{source}: {field} = {shown} is not a whole number; give an integer in "
                                f"{lo}..{hi:,}")
        if not lo <= v <= hi:
            raise FrontendError(f"{source}: {field} = {shown} is outside the plausible range {lo}..{hi:,}{hint}; "
                                "fix the config")


def check_config_values(data: Mapping[str, Any], source: str = "config") -> None:
    """A :class:`FrontendError` naming the first size field of *data* (and its ``*_config`` dicts) outside its
    range (see the module docstring)."""
    layers = max_layers()
    hint = "" if env("GRAPHROOF_MAX_LAYERS") else " (set GRAPHROOF_MAX_LAYERS for a deeper model)"
    stack: list[tuple[str, Mapping[str, Any], int]] = [("", data, 0)]
    while stack:
        prefix, d, depth = stack.pop()
        for k, v in d.items():
            key = str(k)
            if key in _LAYERS:
                _check(prefix + key, v, 1, layers, source, hint)
            elif key in _RANGES:
                _check(prefix + key, v, *_RANGES[key], source, "")
            elif key.endswith("_config") and isinstance(v, Mapping) and depth < _NESTED_DEPTH:
                stack.append((f"{prefix}{key}.", v, depth + 1))
