"""Encoder-decoder KV bytes, from traced figures: the formula :mod:`graphroof.llm.estimate` applies to the
prefill of an encoder-decoder source (:mod:`graphroof.frontends.hf.encdec` traces it).

The prefill of an encoder-decoder appends two kinds of cache entries per sequence: the decoder prompt's
self-attention keys / values (``decoder_prompt`` tokens) and every decoder layer's cross-attention keys / values
of the encoder output (``encoder_tokens`` positions).  The traced prefill gives their sum; the self-attention
share per token is known from a decode step, so the cross-attention bytes per encoder token are what is left.
"""

from __future__ import annotations

__all__ = ["cross_kv_per_token"]


def cross_kv_per_token(prefill_appended: float, self_per_token: float, decoder_prompt: int, encoder_tokens: int,
                       ) -> float:
    """Cross-attention KV bytes per encoder token and sequence: the prefill appends the decoder prompt's
    self-attention entries and the encoder's cross-attention entries (*prefill_appended*, per sequence)."""
    if encoder_tokens <= 0:
        return 0.0
    return max(prefill_appended - decoder_prompt * self_per_token, 0.0) / encoder_tokens
