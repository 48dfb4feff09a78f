"""Encoder-decoder models (T5, BART, Whisper) as LLM sources: the encoder once, then a cached decoder.

Serving an encoder-decoder, as ``generate`` does it:

* **prefill** (its time is the TTFT): the encoder runs once over the source, then the decoder runs over its
  prompt (``--decoder-prompt`` tokens, default 1: the ``decoder_start_token``); this pass computes every decoder
  layer's cross-attention keys / values of the encoder output and writes them to the cross-attention cache, and
  writes the decoder prompt's self-attention keys / values;
* **decode**: each step feeds one token per sequence to the decoder alone; it reads the self-attention cache
  (growing: ``decoder_prompt + j - 1`` tokens at step ``j``) and the cross-attention cache (fixed: the encoder
  length), appends one self-attention entry per layer, and never reads the encoder's weights.

Sources: text models (T5, BART) take ``--prompt`` source tokens as the encoder input; speech models (Whisper)
take the log-mel features of 30 s of audio, ``[batch, num_mel_bins, 2 * max_source_positions]`` (3000 frames,
1500 encoder positions), from the config, and ``--prompt`` does not apply.

The traced module fills a transformers ``EncoderDecoderCache`` with graph inputs (``Role.KV_CACHE``): in the
prefill both caches are empty (``[batch, heads, 0, head_dim]``), so each attention's cache update becomes a
``kv_cache.append`` of the new entries (:mod:`graphroof.llm.kvcache`); in a decode step the self-attention cache
holds ``past`` tokens and the cross-attention cache the encoder's, marked computed, so the model reuses it as
``generate`` does.  KV bytes per sequence: ``self KV per token * (decoder_prompt + gen) + cross KV per encoder
token * encoder length``, both read from the traced graphs' appends.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...errors import FrontendError, InputError
from ...graph import OpGraph, Role, TensorSpec
from .source import HFSource

__all__ = ["EncDecSource", "is_encoder_decoder", "mark_decoder_causal"]

_KINDS = ("self", "cross")


def _int(cfg, *names: str) -> int | None:
    for n in names:
        v = getattr(cfg, n, None)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def is_encoder_decoder(data: dict[str, Any] | None = None, model: Any = None) -> bool:
    """Whether a transformers config dict (or model) is an encoder-decoder (the config class's default when the
    dict does not say)."""
    if model is not None:
        return bool(getattr(getattr(model, "config", None), "is_encoder_decoder", False))
    if not isinstance(data, dict):
        return False
    if "is_encoder_decoder" in data:
        return bool(data["is_encoder_decoder"])
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING

        return bool(CONFIG_MAPPING[str(data.get("model_type"))]().is_encoder_decoder)
    except Exception:  # noqa: BLE001 - an unknown type: the loader reports it
        return False


def _recorder(cache, probe: dict):
    update = cache.update

    def record(key_states, value_states, layer_idx, *args, **kwargs):
        probe[layer_idx] = (tuple(key_states.shape), tuple(value_states.shape))
        return update(key_states, value_states, layer_idx, *args, **kwargs)

    return record


def _step_module(model):
    import torch

    class EncDecStep(torch.nn.Module):
        """One forward of *model* over an encoder-decoder KV cache given as tensors (graph inputs)."""

        #: when a dict: record, per cache kind and layer, the shapes of the keys / values handed to the cache
        probe: dict | None = None

        def __init__(self, lm):
            from .compat import cache_argument

            super().__init__()
            self.lm = lm
            #: the forward's cache argument (transformers 5.24: ``cache``; before: ``past_key_values``)
            self.cache_arg = cache_argument(lm.forward, type(lm).__name__)

        def forward(self, decoder_input_ids, input_ids=None, input_features=None, encoder_hidden_states=None,
                    **past):
            from transformers.modeling_outputs import BaseModelOutput

            from .compat import cache_class, require_attrs

            DynamicCache, DynamicLayer = cache_class("DynamicCache"), cache_class("DynamicLayer")
            EncoderDecoderCache = cache_class("EncoderDecoderCache")

            caches = []
            for kind in _KINDS:
                cache = DynamicCache()
                i = 0
                while f"past_{kind}_key_{i}" in past:
                    layer = DynamicLayer()
                    require_attrs(layer, ("keys", "values", "is_initialized"), "a KV cache layer")
                    k, v = past[f"past_{kind}_key_{i}"], past[f"past_{kind}_value_{i}"]
                    layer.dtype, layer.device = k.dtype, k.device
                    layer.keys, layer.values = k, v
                    layer.is_initialized = True
                    cache.layers.append(layer)
                    i += 1
                if self.probe is not None:
                    cache.update = _recorder(cache, self.probe.setdefault(kind, {}))
                caches.append(cache)
            # is_updated (cross K/V already computed) follows from the cross cache's length: True in decode
            kw: dict[str, Any] = {self.cache_arg: EncoderDecoderCache(*caches), "use_cache": True}
            if encoder_hidden_states is not None:
                kw["encoder_outputs"] = BaseModelOutput(last_hidden_state=encoder_hidden_states)
            elif input_features is not None:
                kw["input_features"] = input_features
            else:
                kw["input_ids"] = input_ids
            return self.lm(decoder_input_ids=decoder_input_ids, **kw).logits

    return EncDecStep(model)


class EncDecSource(HFSource):
    """A transformers encoder-decoder (``is_encoder_decoder``): see the module docstring."""

    encoder_decoder = True

    def __init__(self, data: dict[str, Any] | None = None, *, decoder_prompt: int | None = None, **kw: Any):
        super().__init__(data, **kw)
        cfg = self.cfg
        if decoder_prompt is not None and (isinstance(decoder_prompt, bool) or not isinstance(decoder_prompt, int)
                                           or decoder_prompt < 1):
            raise InputError(f"--decoder-prompt must be an integer >= 1, got {decoder_prompt!r}")
        self.decoder_prompt = decoder_prompt or 1
        d = _int(cfg, "d_model", "hidden_size")
        heads = _int(cfg, "decoder_attention_heads", "num_heads", "num_attention_heads")
        mel, src = _int(cfg, "num_mel_bins"), _int(cfg, "max_source_positions")
        #: (mel bins, frames) of a speech encoder's input features, None for a text encoder
        self.features = (mel, 2 * src) if mel and src else None
        self.encoder_limit = src if self.features else _int(cfg, "max_position_embeddings")
        self.spec = replace(self.spec, layers=_int(cfg, "num_decoder_layers", "decoder_layers", "num_layers"),
                            hidden=d, heads=heads, kv_heads=heads,
                            head_dim=_int(cfg, "d_kv") or (d // heads if d and heads else None),
                            intermediate=_int(cfg, "decoder_ffn_dim", "d_ff", "ffn_dim"),
                            max_positions=_int(cfg, "max_target_positions", "max_position_embeddings"),
                            windows=None)
        self.kv_cache = True
        self._step = _step_module(self.model)
        self._layouts: dict[str, dict] | None = None
        self.encoder_len = self.encoder_limit if self.features else None
        self.notes[0] = self.notes[0].split(";")[0] + (
            "; the decoder computes logits for every decoder-prompt position, as the model's forward does")
        source = (f"the log-mel features of 30 s of audio ([batch, {self.features[0]}, {self.features[1]}], "
                  f"{src} encoder positions; --prompt does not apply)" if self.features else
                  "--prompt source tokens")
        self.notes.append(
            f"encoder-decoder: prefill (TTFT) = the encoder once over {source} + the decoder over its first "
            f"{self.decoder_prompt} token(s) (--decoder-prompt; decoder_start_token by default), which computes "
            "every layer's cross-attention K/V of the encoder output once; each decode step runs the decoder alone "
            "on one token, reading the self-attention cache (decoder prompt + tokens so far) and the fixed "
            "cross-attention cache (the encoder length); KV per sequence = self KV x (decoder prompt + gen) + "
            "cross KV x encoder length")

    # -- the request's lengths ------------------------------------------------------------------------------------
    def decode_start(self, prompt: int) -> int:
        return self.decoder_prompt

    def cross_tokens(self, prompt: int) -> int:
        return self.encoder_limit if self.features and self.encoder_limit else prompt

    def check_context(self, prompt: int, gen: int) -> None:
        if not self.features:
            if self.encoder_limit and prompt > self.encoder_limit:
                raise InputError(f"--prompt {prompt} (the encoder input) is longer than {self.name}'s maximum of "
                                 f"{self.encoder_limit} positions; use --prompt <= {self.encoder_limit}")
            self.encoder_len = prompt
        limit, dp = self.spec.max_positions, self.decoder_prompt
        if limit and dp + gen > limit:
            fix = f"lower --gen to <= {limit - dp}" if limit > dp else f"use --decoder-prompt <= {limit - gen}"
            raise InputError(f"--decoder-prompt {dp} + --gen {gen} = {dp + gen} decoder tokens exceeds "
                             f"{self.name}'s decoder maximum of {limit} positions; {fix}")

    # -- the cache layout -----------------------------------------------------------------------------------------
    def layouts(self) -> dict[str, dict[int, tuple[tuple[int, ...], tuple[int, ...]]]]:
        """Per cache kind (``self``, ``cross``) and layer, the (key, value) entry shapes without batch and sequence,
        as the model hands them to its caches in a traced one-token decoder step."""
        if self._layouts is None:
            d = self.spec.hidden or 1
            probe: dict = {}
            step = self._step
            assert step is not None
            step.probe = probe
            try:
                self._trace({"decoder_input_ids": ((1, 1), "int64"),
                             "encoder_hidden_states": ((1, 2, d), self._dtype)}, (), step, False,
                            "cache-layout probe")
            finally:
                step.probe = None
            self._layouts = {kind: {i: (k[1:-2] + k[-1:], v[1:-2] + v[-1:]) for i, (k, v) in probe.get(kind, {}).items()}
                             for kind in _KINDS}
            if not self._layouts["self"] or not self._layouts["cross"]:
                raise FrontendError(f"{self.name}: the decoder wrote no self- and cross-attention cache in a traced "
                                    "step; this encoder-decoder is not supported by `graphroof llm`")
            elems = sum(_prod(k) + _prod(v) for k, v in self._layouts["self"].values())
            self.spec = replace(self.spec, kv_elems_per_token=elems)
        return self._layouts

    def kv_layout(self) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
        return self.layouts()["self"]

    def _inputs(self, batch: int, q: int, past: int, enc: int) -> tuple[dict[str, Any], tuple[str, ...]]:
        inputs: dict[str, Any] = {"decoder_input_ids": ((batch, q), "int64")}
        names = []
        for kind, held in (("self", past), ("cross", enc)):
            for i, (k, v) in sorted(self.layouts()[kind].items()):
                for part, shape in (("key", k), ("value", v)):
                    n = f"past_{kind}_{part}_{i}"
                    inputs[n] = TensorSpec((batch, *shape[:-1], held, shape[-1]), self._dtype, Role.KV_CACHE)
                    names.append(n)
        return inputs, tuple(names)

    def prefill_graph(self, batch: int, seq: int) -> OpGraph:
        """The encoder over the source + the decoder over its prompt, both caches empty (written by the pass)."""
        inputs, names = self._inputs(batch, self.decoder_prompt, 0, 0)
        if self.features:
            inputs["input_features"] = ((batch, *self.features), self._dtype)
            what = f"prefill (batch {batch}, {self.features[1]} audio frames)"
        else:
            inputs["input_ids"] = ((batch, seq), "int64")
            what = f"prefill (batch {batch}, encoder {seq} tokens)"
        return mark_decoder_causal(self._trace(inputs, names, self._step, False, what))

    def decode_graph(self, batch: int, past: int) -> OpGraph:
        """One decoder token over *past* self-attention entries and the encoder's cross-attention entries."""
        enc = self.encoder_len
        if enc is None:
            raise InputError(f"{self.name}: the encoder length is set by the request: call check_context(prompt, gen) "
                             "first (estimate() does)")
        inputs, names = self._inputs(batch, 1, past, enc)
        inputs["encoder_hidden_states"] = ((batch, enc, self.spec.hidden), self._dtype)
        what = f"decode step (batch {batch}, past {past}, encoder {enc})"
        return mark_decoder_causal(self._trace(inputs, names, self._step, False, what))

_SELF_ATTENTION = ("SelfAttention", "self_attn", "self_attention")


def mark_decoder_causal(g: OpGraph) -> OpGraph:
    """Mark the decoder self-attention's explicit ``[q, k]`` masks causal (T5 folds its causal mask into the
    position bias it passes as ``attn_mask``); the encoder's and the cross-attention's stay bidirectional
    (the capture's global ``causal_masks`` would mark every square mask causal, the encoder's too)."""

    def one(op):
        parts = op.scope.split(".")
        if op.op != "aten.scaled_dot_product_attention" or "decoder" not in parts or parts[-1] not in _SELF_ATTENTION:
            return op
        m, q, k = op.input(3), op.input(0), op.input(1)
        if m is None or q is None or k is None or m.rank < 2 or tuple(m.shape[-2:]) != (q.shape[-2], k.shape[-2]):
            return op
        return replace(op, attrs={**op.attrs, "mask_causal": True, "mask_align": "bottom_right"})

    return g.map_ops(one)


def _prod(shape) -> int:
    n = 1
    for x in shape:
        n *= int(x)
    return n
