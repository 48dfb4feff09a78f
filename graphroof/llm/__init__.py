"""LLM serving estimates: prefill vs decode, KV cache, quantization, tensor parallelism, memory fit, sweeps.

>>> import graphroof.llm as llm                                            # doctest: +SKIP
>>> r = llm.estimate("llama-2-7b", hw="a100", prompt=1024, gen=256, batch=[1, 8, 32])  # doctest: +SKIP
>>> print(graphroof.render(r))                                              # doctest: +SKIP
"""

from ..frontends.source import GraphSource, LLMSource, ModelSpec
from .engine import Engine, Pricing, estimate
from .estimate import open_source
from .quant import Quant, requantize
from .result import LLMConfig, LLMEstimate
from .tp import TPPlan, shard

__all__ = ["estimate", "Engine", "Pricing", "open_source", "LLMEstimate", "LLMConfig", "LLMSource", "GraphSource", "ModelSpec",
           "Quant", "requantize", "TPPlan", "shard"]
