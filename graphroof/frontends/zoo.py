"""The bundled model zoo: well-known architectures built without any download, at full size on the meta device.

Language models are transformers configs kept in ``graphroof/frontends/zoo_configs/<name>.json`` (architecture facts
only: sizes, head counts, vocabulary, dtype) and go through :mod:`graphroof.frontends.hf.build`; the vision models are
written as plain modules in :mod:`graphroof.frontends.torch.zoo_models`.  Importing this module needs neither torch
nor transformers (``graphroof zoo list`` works without them).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..graph import OpGraph

__all__ = ["ZooModel", "ZOO", "GENERATIVE_FAMILIES", "zoo_names", "load_zoo", "config_path", "build_zoo_module", "VISION_INPUT"]

#: the bundled transformers configs (package data beside this module)
_CONFIGS = Path(__file__).resolve().parent / "zoo_configs"

#: Image size of the vision models (channels, height, width).
VISION_INPUT = (3, 224, 224)


@dataclass(frozen=True)
class ZooModel:
    name: str
    family: str          # "llm" | "seq2seq" | "speech" | "encoder" | "multimodal" | "vision"
    params: str          # nominal parameter count, for the listing
    source: str          # "hf" (a config in zoo_configs) or "torch" (a module in zoo_models)
    description: str
    dtype: str = ""      # the checkpoint's dtype (HF: from the config)


ZOO: dict[str, ZooModel] = {m.name: m for m in (
    ZooModel("llama-2-7b", "llm", "6.7B", "hf", "Llama 2 7B: 32 layers, d=4096, MHA 32 heads", "fp16"),
    ZooModel("llama-2-13b", "llm", "13B", "hf", "Llama 2 13B: 40 layers, d=5120, MHA 40 heads", "fp16"),
    ZooModel("llama-2-70b", "llm", "69B", "hf", "Llama 2 70B: 80 layers, d=8192, GQA 64/8 heads", "fp16"),
    ZooModel("llama-3-8b", "llm", "8.0B", "hf", "Llama 3 8B: 32 layers, d=4096, GQA 32/8, 128k vocabulary", "bf16"),
    ZooModel("llama-3-70b", "llm", "71B", "hf", "Llama 3 70B: 80 layers, d=8192, GQA 64/8, 128k vocabulary", "bf16"),
    ZooModel("mistral-7b", "llm", "7.2B", "hf", "Mistral 7B v0.1: 32 layers, d=4096, GQA 32/8, 4k sliding window",
             "bf16"),
    ZooModel("mixtral-8x7b", "llm", "47B", "hf", "Mixtral 8x7B: 32 layers, 8 experts, top-2 routing", "bf16"),
    ZooModel("qwen3-30b-a3b", "llm", "30B", "hf", "Qwen3-30B-A3B: 48 layers, 128 experts, top-8 routing, GQA 32/4",
             "bf16"),
    ZooModel("deepseek-v2-lite", "llm", "16B", "hf", "DeepSeek-V2-Lite: 27 layers, MLA (512 latent), 64 experts top-6 "
             "+ 2 shared", "bf16"),
    ZooModel("deepseek-v3", "llm", "671B", "hf", "DeepSeek-V3: 61 layers, MLA (512 latent), 256 experts top-8 + 1 "
             "shared", "bf16"),
    ZooModel("gemma-2-9b", "llm", "9.2B", "hf", "Gemma 2 9B: 42 layers, sliding (4k) and full layers alternating, "
             "GQA 16/8", "bf16"),
    ZooModel("gemma-3-1b", "llm", "1.0B", "hf", "Gemma 3 1B: 26 layers, 5 sliding (512) per full layer, MQA", "bf16"),
    ZooModel("mamba-2.8b", "llm", "2.8B", "hf", "Mamba 2.8B (state-spaces/mamba-2.8b-hf): 64 Mamba-1 layers, d=2560, "
             "d_state 16, no attention", "fp32"),
    ZooModel("mamba2-2.7b", "llm", "2.7B", "hf", "Mamba-2 2.7B (state-spaces/mamba2-2.7b): 64 SSD layers, d=2560, 80 "
             "heads of 64, d_state 128, chunked scan (256)", "fp16"),
    ZooModel("jamba-v0.1", "llm", "52B", "hf", "Jamba v0.1: 32 layers, attention every 8th (4 of 32) else Mamba, "
             "16 experts top-2 every 2nd layer, GQA 32/8", "bf16"),
    ZooModel("gpt2", "llm", "124M", "hf", "GPT-2 small: 12 layers, d=768, learned positions (max 1024)", "fp32"),
    ZooModel("gpt2-medium", "llm", "355M", "hf", "GPT-2 medium: 24 layers, d=1024", "fp32"),
    ZooModel("gpt2-large", "llm", "774M", "hf", "GPT-2 large: 36 layers, d=1280", "fp32"),
    ZooModel("gpt2-xl", "llm", "1.6B", "hf", "GPT-2 XL: 48 layers, d=1600", "fp32"),
    ZooModel("bert-base", "encoder", "110M", "hf", "BERT base uncased (masked-LM head): 12 layers, max 512 tokens",
             "fp32"),
    ZooModel("bert-large", "encoder", "335M", "hf", "BERT large uncased (masked-LM head): 24 layers, max 512 tokens",
             "fp32"),
    ZooModel("t5-base", "seq2seq", "223M", "hf", "T5 base (original): 12+12 layers, d=768, 12 heads, relative "
             "positions, encoder-decoder", "fp32"),
    ZooModel("bart-large", "seq2seq", "406M", "hf", "BART large: 12+12 layers, d=1024, 16 heads, max 1024 tokens, "
             "encoder-decoder", "fp32"),
    ZooModel("whisper-large-v3", "speech", "1.55B", "hf", "Whisper large-v3: 32+32 layers, d=1280, 128 mel bins, "
             "30 s audio (1500 encoder positions), max 448 decoder tokens", "fp16"),
    ZooModel("clip-vit-b-32", "multimodal", "151M", "hf", "CLIP ViT-B/32: image tower (224x224, 12 layers, d=768) + "
             "text tower (77 tokens, 12 layers, d=512)", "fp32"),
    ZooModel("siglip-base", "multimodal", "203M", "hf", "SigLIP base patch16-224: image tower (196 patches) + text "
             "tower (64 tokens), 12 layers each, d=768", "fp32"),
    ZooModel("resnet-18", "vision", "11.7M", "torch", "ResNet-18, 224x224 images", "fp32"),
    ZooModel("resnet-50", "vision", "25.6M", "torch", "ResNet-50 (v1.5), 224x224 images", "fp32"),
    ZooModel("resnet-101", "vision", "44.5M", "torch", "ResNet-101 (v1.5), 224x224 images", "fp32"),
    ZooModel("vit-b-16", "vision", "86.6M", "torch", "ViT-B/16, 224x224 images (197 tokens)", "fp32"),
    ZooModel("vit-l-16", "vision", "304M", "torch", "ViT-L/16, 224x224 images (197 tokens)", "fp32"),
)}

_ALIASES = {"llama2-7b": "llama-2-7b", "llama2-13b": "llama-2-13b", "llama2-70b": "llama-2-70b",
            "llama3-8b": "llama-3-8b", "llama3-70b": "llama-3-70b", "mistral": "mistral-7b", "mixtral": "mixtral-8x7b",
            "qwen3-moe": "qwen3-30b-a3b", "deepseek-v2": "deepseek-v2-lite", "deepseek": "deepseek-v3",
            "gemma-2": "gemma-2-9b", "gemma2-9b": "gemma-2-9b", "gemma-3": "gemma-3-1b", "gemma3-1b": "gemma-3-1b",
            "mamba": "mamba-2.8b", "mamba2": "mamba2-2.7b", "jamba": "jamba-v0.1",
            "gpt-2": "gpt2", "bert": "bert-base", "bert-base-uncased": "bert-base", "resnet50": "resnet-50",
            "resnet18": "resnet-18", "resnet101": "resnet-101", "vit-b/16": "vit-b-16", "vit_b_16": "vit-b-16",
            "vit-base": "vit-b-16", "vit-l/16": "vit-l-16", "t5": "t5-base", "bart": "bart-large",
            "whisper": "whisper-large-v3", "whisper-large": "whisper-large-v3", "clip": "clip-vit-b-32",
            "clip-vit-base-patch32": "clip-vit-b-32", "siglip": "siglip-base",
            "siglip-base-patch16-224": "siglip-base"}

#: Zoo families that generate text token by token (``graphroof llm`` takes them).
GENERATIVE_FAMILIES = ("llm", "seq2seq", "speech")


def zoo_names() -> list[str]:
    return list(ZOO)


def resolve(name: str) -> ZooModel:
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key in ZOO:
        return ZOO[key]
    close = difflib.get_close_matches(key, list(ZOO) + list(_ALIASES), n=4, cutoff=0.5)
    close = list(dict.fromkeys(_ALIASES.get(c, c) for c in close))
    hint = f"; close: {', '.join(close)}" if close else ""
    raise InputError(f"{name!r} is not a file, 'module:factory' or a zoo model{hint} (see `graphroof zoo list`)")


def config_path(name: str) -> Path:
    """The transformers config.json of an HF zoo entry."""
    m = resolve(name)
    if m.source != "hf":
        raise InputError(f"{m.name} is not built from a transformers config")
    return _CONFIGS / f"{m.name}.json"


def _need_torch() -> None:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        from ..errors import FrontendError

        raise FrontendError("zoo models are built with torch: pip install 'graphroof[torch]' (CPU torch: see the "
                            "README's setup)")


def build_zoo_module(name: str, dtype: str | None = None):
    """``(module on the meta device, default inputs for batch 1)`` of a torch-source (vision) entry."""
    _need_torch()
    import torch

    from .torch.inputs import TORCH_DTYPES
    from .torch.zoo_models import resnet, vit

    m = resolve(name)
    if m.source != "torch":
        raise InputError(f"{m.name} is built from a transformers config; use load_zoo")
    builders = {"resnet-18": lambda: resnet(18), "resnet-50": lambda: resnet(50), "resnet-101": lambda: resnet(101),
                "vit-b-16": lambda: vit("b"), "vit-l-16": lambda: vit("l")}
    from ..dtypes import canonical_dtype

    cd = canonical_dtype(dtype or m.dtype)
    tdtype = TORCH_DTYPES["fp32" if cd == "tf32" else cd]  # tf32: fp32 storage, TF32 matmuls (matmul_precision)
    with torch.device("meta"):
        module = builders[m.name]().to(tdtype)
    return module, [(1, *VISION_INPUT)]


def load_zoo(name: str, *, batch: int = 1, seq: int | None = None, dtype: str | None = None,
             **opts: Any) -> OpGraph:
    """Analyse-ready graph of zoo model *name* (``llama-2-7b``, ``resnet-50`` ... see :data:`ZOO`).

    *batch* (default 1) and *seq* (default 1024; BERT: 512, its maximum) size the input; *seq* does not apply
    to vision models (224x224 images).  *dtype* overrides the checkpoint dtype.
    """
    m = resolve(name)
    if batch < 1 or (seq is not None and seq < 1):
        raise InputError("--batch and --seq must be >= 1")
    _need_torch()
    if m.source == "hf":
        from .hf import build as hf

        path = config_path(m.name)
        return hf.load_config_data(hf.read_config(path), batch=batch, seq=seq, dtype=dtype, name=m.name,
                                   source=f"zoo:{m.name}", **opts)
    from .torch.export import load_module

    module, _ = build_zoo_module(m.name, dtype)
    notes = [f"zoo model {m.name}: {m.description}; built on the meta device"]
    if seq is not None:
        notes.append("--seq ignored: a vision model takes 224x224 images")
    inputs = opts.pop("input_shapes", None) or [(batch, *VISION_INPUT)]
    return load_module(module, inputs, name=m.name, notes=notes, **opts)
