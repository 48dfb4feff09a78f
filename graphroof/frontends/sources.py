"""Open a model given by name, path or object as an :class:`~graphroof.frontends.source.LLMSource`.

* a zoo name (``llama-2-7b``), a transformers ``config.json`` or its folder, a transformers model object, or a
  ``module:factory`` returning one: :class:`~graphroof.frontends.hf.source.HFSource` (decode traced with a KV cache);
* an ``.onnx`` file: :class:`~graphroof.frontends.onnx.source.ONNXSource` (decode binds the ``past_key_values`` inputs);
* any other ``nn.Module`` (or factory): :class:`ModuleSource`, which has no KV cache: it takes token ids
  ``[batch, seq]`` and every generated token recomputes the context.

The model is resolved by the dispatcher ``analyze`` and ``profile`` use (:func:`graphroof.frontends.resolve_model`),
and a transformers config's source goes through the store of traces (:mod:`graphroof.frontends.stored`) under the
same key schema as ``load``'s graphs.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from ..graph import OpGraph, Role
from ..options import DEFAULT, Options
from .resolve import Resolved, resolve_model
from .source import LLMSource, ModelSpec, Param

__all__ = ["open_model", "ModuleSource"]


class ModuleSource(LLMSource):
    """A plain ``nn.Module`` language model ``forward(ids [batch, seq]) -> logits``, without a KV cache."""

    def __init__(self, module: Any, *, name: str, capture: str = "auto", max_positions: int | None = None,
                 fold: bool = True):
        self.module = module
        self.capture = capture
        self.fold = fold
        self.spec = ModelSpec(name=name, max_positions=max_positions)
        self.kv_cache = False
        self.no_cache_reason = (f"{type(module).__name__} is a plain nn.Module: graphroof cannot hand it a KV "
                                "cache (a transformers model can)")
        self.notes = []

    def prefill_graph(self, batch: int, seq: int) -> OpGraph:
        from .torch.export import load_module

        return load_module(self.module, [((batch, seq), "int64")], capture=self.capture, name=self.spec.name,
                           fold_blocks=self.fold)

    def params(self) -> list[Param]:
        from .torch.common import spec_of

        return [(n.rsplit(".", 1)[0] if "." in n else "", spec_of(p, Role.WEIGHT))
                for n, p in self.module.named_parameters()]


def _is_hf_model(obj: Any) -> bool:
    cfg = getattr(obj, "config", None)
    return cfg is not None and hasattr(cfg, "model_type") and hasattr(obj, "named_parameters")


def _hf_source(data: dict | None = None, *, model: Any = None, decoder_prompt: int | None = None,
               **kw: Any) -> LLMSource:
    """An :class:`HFSource`, or an :class:`~graphroof.frontends.hf.encdec.EncDecSource` for an encoder-decoder."""
    from .hf.encdec import EncDecSource, is_encoder_decoder
    from .hf.ssm_source import hf_source

    if is_encoder_decoder(data, model):
        return EncDecSource(data, model=model, decoder_prompt=decoder_prompt, **kw)
    if decoder_prompt is not None:
        raise InputError("--decoder-prompt applies to encoder-decoder models (T5, BART, Whisper); a decoder-only "
                         "model's prompt is --prompt")
    return hf_source(data, model=model, **kw)  # an SSMSource for state-space models


def _from_module(module: Any, name: str, opts: dict, options: Options) -> LLMSource:
    if _is_hf_model(module):
        return _hf_source(name=name, model=module, capture=opts.get("capture", "dispatch"), fold=options.fold,
                          experts_touched=opts.get("experts_touched"), decoder_prompt=opts.get("decoder_prompt"))
    limit = getattr(getattr(module, "config", None), "block_size", None)
    return ModuleSource(module, name=name, capture=opts.get("capture", "auto"), fold=options.fold,
                        max_positions=limit if isinstance(limit, int) else None)


def open_model(model: Any, *, dtype: str | None = None, name: str | None = None, options: Options | None = None,
               **opts: Any) -> LLMSource:
    """See the module docstring.  *dtype* overrides a config's dtype; *opts* may carry ``dims`` (ONNX),
    ``capture`` (torch), ``experts_touched`` (transformers MoE: experts read per step and layer, overriding
    the uniform-routing expectation of :mod:`graphroof.frontends.moe`) and ``decoder_prompt`` (encoder-decoders).
    *options*: the run-wide switches (:class:`~graphroof.options.Options`: folding, the store)."""
    options = options or DEFAULT
    res = resolve_model(model)
    ref = res.ref
    if ref.kind == "module":
        return _from_module(model, name or type(model).__name__, opts, options)
    if ref.kind == "onnx":
        from .onnx.source import ONNXSource

        assert ref.path is not None  # classify gives an ONNX reference its path
        return ONNXSource(ref.path, dims=opts.get("dims"), name=name)
    if ref.kind == "factory":
        from .torch.factory import build_module

        built = build_module(ref.model if callable(ref.model) else ref.target, fallback_real=False)
        return _from_module(built.module, name or ref.target.rpartition(":")[2], opts, options)
    if ref.kind == "zoo" and (res.zoo.family not in _generative() or res.config is None):
        raise InputError(f"zoo model {res.name} is a {res.zoo.family} model, not a language model; use "
                         "`graphroof analyze`")
    if res.config is None:
        raise InputError(f"don't know how to read {ref.label!r} as an LLM; use a zoo name, a config.json (or its "
                         "folder), an .onnx file or 'module:factory'")
    return _stored_hf(res, options, name=name or res.name, dtype=dtype, source=res.source,
                      experts_touched=opts.get("experts_touched"), decoder_prompt=opts.get("decoder_prompt"))


def _generative() -> tuple[str, ...]:
    from .zoo import GENERATIVE_FAMILIES

    return GENERATIVE_FAMILIES


def _stored_hf(res: Resolved, options: Options, **kw: Any) -> LLMSource:
    """:func:`_hf_source` through the persistent store of traces (:mod:`graphroof.frontends.stored`): a later
    run with the same config and options reads the graphs back instead of importing transformers and tracing."""
    from .stored import open_stored

    data = res.config
    return open_stored(res, kw, lambda: _hf_source(data, fold=options.fold, **kw), options)
