"""Open a model given by name, path or object as an :class:`~graphroof.llm.source.LLMSource`.

* a zoo name (``llama-2-7b``), a transformers ``config.json`` or its folder, a transformers model object, or a
  ``module:factory`` returning one: :class:`~graphroof.llm.hf.HFSource` (decode traced with a KV cache);
* an ``.onnx`` file: :class:`~graphroof.llm.onnx.ONNXSource` (decode binds the ``past_key_values`` inputs);
* any other ``nn.Module`` (or factory): :class:`ModuleSource`, which has no KV cache: it takes token ids
  ``[batch, seq]`` and every generated token recomputes the context.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError, sanitize_terminal
from ..frontends import classify, frontend
from ..graph import OpGraph, Role
from .source import LLMSource, ModelSpec, Param

__all__ = ["open_model", "ModuleSource"]


class ModuleSource(LLMSource):
    """A plain ``nn.Module`` language model ``forward(ids [batch, seq]) -> logits``, without a KV cache."""

    def __init__(self, module: Any, *, name: str, capture: str = "auto", max_positions: int | None = None):
        self.module = module
        self.capture = capture
        self.spec = ModelSpec(name=name, max_positions=max_positions)
        self.kv_cache = False
        self.no_cache_reason = (f"{type(module).__name__} is a plain nn.Module: graphroof cannot hand it a KV "
                                "cache (a transformers model can)")
        self.notes = []

    def prefill_graph(self, batch: int, seq: int) -> OpGraph:
        from ..frontends.torch_export import load_module

        return load_module(self.module, [((batch, seq), "int64")], capture=self.capture, name=self.spec.name)

    def params(self) -> list[Param]:
        from ..frontends.torch_common import spec_of

        return [(n.rsplit(".", 1)[0] if "." in n else "", spec_of(p, Role.WEIGHT))
                for n, p in self.module.named_parameters()]


def _is_hf_model(obj: Any) -> bool:
    cfg = getattr(obj, "config", None)
    return cfg is not None and hasattr(cfg, "model_type") and hasattr(obj, "named_parameters")


def _hf_source(data: dict | None = None, *, model: Any = None, decoder_prompt: int | None = None,
               **kw: Any) -> LLMSource:
    """An :class:`HFSource`, or an :class:`~graphroof.llm.encdec.EncDecSource` for an encoder-decoder."""
    from .encdec import EncDecSource, is_encoder_decoder
    from .ssm import hf_source

    if is_encoder_decoder(data, model):
        return EncDecSource(data, model=model, decoder_prompt=decoder_prompt, **kw)
    if decoder_prompt is not None:
        raise InputError("--decoder-prompt applies to encoder-decoder models (T5, BART, Whisper); a decoder-only "
                         "model's prompt is --prompt")
    return hf_source(data, model=model, **kw)  # an SSMSource for state-space models


def _from_module(module: Any, name: str, opts: dict) -> LLMSource:
    if _is_hf_model(module):
        return _hf_source(name=name, model=module, capture=opts.get("capture", "dispatch"),
                          experts_touched=opts.get("experts_touched"), decoder_prompt=opts.get("decoder_prompt"))
    limit = getattr(getattr(module, "config", None), "block_size", None)
    return ModuleSource(module, name=name, capture=opts.get("capture", "auto"),
                        max_positions=limit if isinstance(limit, int) else None)


def open_model(model: Any, *, dtype: str | None = None, name: str | None = None, **opts: Any) -> LLMSource:
    """See the module docstring.  *dtype* overrides a config's dtype; *opts* may carry ``dims`` (ONNX),
    ``capture`` (torch) and ``experts_touched`` (transformers MoE: experts read per step and layer, overriding
    the uniform-routing expectation of :mod:`graphroof.frontends.moe`).  *model* is classified by the same resolver as ``analyze``'s
    (:func:`graphroof.frontends.classify`)."""
    ref = classify(model)
    if ref.kind == "module":
        return _from_module(model, name or type(model).__name__, opts)
    if ref.kind == "onnx":
        frontend("onnx")
        from .onnx_source import ONNXSource

        return ONNXSource(ref.path, dims=opts.get("dims"), name=name)
    if ref.kind == "hf_config":
        data = frontend("hf").read_config(ref.path)
        nm = name or sanitize_terminal(ref.repo_id or data.get("_name_or_path") or ref.path.parent.name
                                       or ref.path.stem)
        return _stored_hf(data, name=nm, dtype=dtype, source=str(ref.path), experts_touched=opts.get("experts_touched"),
                          decoder_prompt=opts.get("decoder_prompt"))
    if ref.kind == "factory":
        built = frontend("factory").build_module(ref.model if callable(ref.model) else ref.target, fallback_real=False)
        return _from_module(built.module, name or ref.target.rpartition(":")[2], opts)
    if ref.kind != "zoo":
        raise InputError(f"don't know how to read {ref.label!r} as an LLM; use a zoo name, a config.json (or its "
                         "folder), an .onnx file or 'module:factory'")
    zoo = frontend("zoo")
    m = zoo.resolve(str(model))
    if m.family not in zoo.GENERATIVE_FAMILIES or m.source != "hf":
        raise InputError(f"zoo model {m.name} is a {m.family} model, not a language model; use `graphroof analyze`")
    hf = frontend("hf")
    return _stored_hf(hf.read_config(zoo.config_path(m.name)), name=m.name, dtype=dtype, source=f"zoo:{m.name}",
                      experts_touched=opts.get("experts_touched"), decoder_prompt=opts.get("decoder_prompt"))


def _stored_hf(data: dict, **kw: Any) -> LLMSource:
    """:func:`_hf_source` through the persistent store of traced graphs (:mod:`graphroof.llm.stored`): a later
    run with the same config and options reads the graphs back instead of importing transformers and tracing."""
    from .stored import open_stored

    return open_stored({"config": data, **kw}, lambda: _hf_source(data, **kw))
