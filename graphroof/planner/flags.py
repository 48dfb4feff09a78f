"""A configuration written as the command line of a serving engine, ready to paste: vLLM, SGLang, TensorRT-LLM.

Flag names, checked against each engine's documentation (2026-11):

* vLLM ``vllm serve MODEL``: ``--tensor-parallel-size``, ``--pipeline-parallel-size``, ``--data-parallel-size``,
  ``--enable-expert-parallel``, ``--max-num-seqs``, ``--max-num-batched-tokens``, ``--kv-cache-dtype {auto,fp8}``,
  ``--quantization fp8``, ``--dtype``, ``--gpu-memory-utilization``, ``--block-size``
  (https://docs.vllm.ai/en/latest/models/engine_args.html, "Engine Arguments");
* SGLang ``python -m sglang.launch_server --model-path MODEL``: ``--tp``, ``--dp``, ``--ep-size``, ``--pp-size``,
  ``--max-running-requests``, ``--chunked-prefill-size``, ``--kv-cache-dtype fp8_e4m3``, ``--quantization fp8``,
  ``--mem-fraction-static``, ``--disaggregation-mode prefill|decode``
  (https://docs.sglang.io/advanced_features/server_arguments.html, "Server Arguments");
* TensorRT-LLM ``trtllm-serve MODEL``: ``--tp_size``, ``--pp_size``, ``--ep_size``, ``--max_batch_size``,
  ``--max_num_tokens``, ``--kv_cache_free_gpu_memory_fraction`` (the share of the memory left after the weights
  and buffers that the KV cache takes); the KV dtype and attention-DP go in ``--extra_llm_api_options FILE``
  (``kv_cache_config: {dtype: fp8}``, ``enable_attention_dp: true``)
  (https://nvidia.github.io/TensorRT-LLM/commands/trtllm-serve.html, "trtllm-serve").

Weights in int4 / int8 are served from a pre-quantized checkpoint (AWQ / GPTQ ...): no flag names them, the
engine reads the checkpoint's quantization config; a flag set says so in its ``notes``.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from .space import ENGINES, Config

__all__ = ["flags_for", "check_engines", "ENGINES"]

_FLOAT = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def check_engines(engines: Any) -> list[str]:
    """The engine names, each one of :data:`ENGINES` (``trt-llm`` / ``tensorrt-llm`` spell ``trtllm``)."""
    vals = [engines] if isinstance(engines, str) else list(engines or ())
    out = []
    for e in vals:
        name = str(e).strip().lower().replace("tensorrt-llm", "trtllm").replace("trt-llm", "trtllm")
        if name not in ENGINES:
            raise InputError(f"unknown engine {e!r} for flags; use one of: {', '.join(ENGINES)}")
        if name not in out:
            out.append(name)
    if not out:
        raise InputError(f"engines needs at least one of: {', '.join(ENGINES)}")
    return out


def _kv_free_fraction(mem: dict[str, float] | None, gpu_mem_util: float) -> float:
    """TensorRT-LLM's KV share of the memory left after weights and activations: (usable - weights - act) /
    (capacity - weights - act), from the configuration's memory figures (None: *gpu_mem_util*)."""
    if not mem or not mem.get("capacity_bytes"):
        return gpu_mem_util
    rest = mem["capacity_bytes"] - mem["weight_bytes"] - mem["activation_bytes"]
    kv = mem["usable_bytes"] - mem["weight_bytes"] - mem["activation_bytes"]
    return round(max(0.01, min(0.99, kv / rest)), 2) if rest > 0 else gpu_mem_util


def flags_for(c: Config, model: str, engines: list[str], *, gpu_mem_util: float = 0.9, kv_block: int = 16,
              memory: dict[str, float] | None = None) -> dict[str, Any]:
    """``{engine: command line}`` of *c* for each engine, and ``notes`` on what a flag cannot say."""
    out: dict[str, Any] = {}
    notes: list[str] = []
    w, kv = (c.weights or "").lower(), (c.kv or "").lower()
    if w in ("int4", "int8", "uint4", "nf4"):
        notes.append(f"weights {w}: serve a pre-quantized checkpoint (AWQ / GPTQ ...); the engine reads its "
                     "quantization from the checkpoint")
    if kv and kv not in ("fp8", *(_FLOAT)):
        notes.append(f"KV cache {kv}: not an engine option (vLLM / SGLang / TensorRT-LLM cache in fp8 or the model "
                     "dtype)")
    if c.disagg:
        notes.append(f"disaggregated {c.disagg[0]}p{c.disagg[1]}d: start {c.disagg[0]} prefill and {c.disagg[1]} "
                     "decode servers with these flags and connect them with the engine's KV-transfer setup")
    for e in engines:
        if e == "vllm":
            a = [f"vllm serve {model}", f"--tensor-parallel-size {c.tp}"]
            if c.pp > 1:
                a.append(f"--pipeline-parallel-size {c.pp}")
            if c.dp > 1:
                a.append(f"--data-parallel-size {c.dp}")
            if c.ep > 1:
                a.append("--enable-expert-parallel")
            a += [f"--max-num-seqs {c.max_num_seqs}", f"--max-num-batched-tokens {c.max_batched_tokens}"]
            if w == "fp8":
                a.append("--quantization fp8")
            elif w in _FLOAT:
                a.append(f"--dtype {_FLOAT[w]}")
            if kv == "fp8":
                a.append("--kv-cache-dtype fp8")
            a += [f"--gpu-memory-utilization {gpu_mem_util:g}", f"--block-size {kv_block}"]
        elif e == "sglang":
            a = [f"python -m sglang.launch_server --model-path {model}", f"--tp {c.tp}"]
            if c.pp > 1:
                a.append(f"--pp-size {c.pp}")
            if c.dp > 1:
                a.append(f"--dp {c.dp}")
            if c.ep > 1:
                a.append(f"--ep-size {c.ep}")
            a += [f"--max-running-requests {c.max_num_seqs}", f"--chunked-prefill-size {c.max_batched_tokens}"]
            if w == "fp8":
                a.append("--quantization fp8")
            elif w in _FLOAT:
                a.append(f"--dtype {_FLOAT[w]}")
            if kv == "fp8":
                a.append("--kv-cache-dtype fp8_e4m3")
            a.append(f"--mem-fraction-static {gpu_mem_util:g}")
            if c.disagg:
                a.append("--disaggregation-mode prefill|decode")
        else:
            a = [f"trtllm-serve {model}", f"--tp_size {c.tp}"]
            if c.pp > 1:
                a.append(f"--pp_size {c.pp}")
            if c.ep > 1:
                a.append(f"--ep_size {c.ep}")
            a += [f"--max_batch_size {c.max_num_seqs}", f"--max_num_tokens {c.max_batched_tokens}",
                  f"--kv_cache_free_gpu_memory_fraction {_kv_free_fraction(memory, gpu_mem_util):g}"]
            extra = []
            if kv == "fp8":
                extra.append("kv_cache_config: {dtype: fp8}")
            if c.dp > 1:
                extra.append("enable_attention_dp: true")
            if extra:
                a.append("--extra_llm_api_options extra.yaml")
                notes.append("TensorRT-LLM extra.yaml: " + "; ".join(extra))
            if w == "fp8":
                notes.append("TensorRT-LLM fp8 weights: serve an fp8 checkpoint (e.g. quantized with ModelOpt)")
        out[e] = " ".join(a)
    out["notes"] = notes
    return out
