"""The serving memory fit of priced LLM points, vectorised: per device, the weights, the KV cache at the full context
(sliding layers hold at most their window; whole paged-KV blocks reserved), the recurrent state, the activation peak
of one prefill chunk, and the most concurrent sequences that fit beside them (the model of
:class:`~graphroof.llm.memory.ServingMemory` with every option).  *pm* / *priced* is a
:class:`~graphroof.llm.price.PricedModel`."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..hardware import HardwareProfile
from .memory import MemoryFit, ServingMemory

__all__ = ["memory_fit", "memory_of"]


def memory_of(priced: Any, mem: dict[str, np.ndarray], b: int, prompt: int, i: int, serving: ServingMemory,
              *, min_tp: bool = True) -> MemoryFit:
    """Point *i* of :func:`memory_fit`'s arrays *mem* (batch *b*, *prompt*) as a :class:`MemoryFit` (*min_tp*:
    search the smallest TP degree that fits)."""
    m = {k: float(v[i]) for k, v in mem.items()}
    usable = None if np.isnan(m["usable_bytes"]) else m["usable_bytes"]
    cap = None if np.isnan(m["capacity_bytes"]) else m["capacity_bytes"]
    mb = None if np.isnan(m["max_concurrent"]) else int(m["max_concurrent"])
    tp_min = None
    if usable and min_tp and priced is not None:
        tp_min = priced.min_tp(b, prompt, usable, m["kv_reserved_bytes"] / b, m["activation_peak_bytes"], serving)
    return MemoryFit(m["weight_bytes"], m["kv_cache_bytes"], m["activation_peak_bytes"], cap, mb, tp_min, usable,
                     serving, m["kv_reserved_bytes"], m["state_bytes"])


def memory_fit(pm: Any, hw: HardwareProfile, b: np.ndarray, prompt: np.ndarray, gen: np.ndarray,
               sm: ServingMemory) -> dict[str, np.ndarray]:
    """Per-device memory of each point (see :mod:`graphroof.llm.memory`): weights, KV cache at the full context
    (sliding layers hold at most their window; whole paged-KV blocks reserved), the recurrent state, the
    activation peak of one prefill chunk, and the most concurrent sequences that fit beside them."""
    n = len(b)
    keys, inv = np.unique(np.stack([b, prompt]), axis=1, return_inverse=True)
    ins = np.array([pm.memory_inputs(int(bv), int(pv)) for bv, pv in keys.T]).reshape(-1, 5)[inv.reshape(-1)]
    act_full, kv_tok, cross, state, enc = (ins[:, i] for i in range(5))
    src = pm.src
    start = pm.decode_start(prompt)
    ctx = start + gen
    cvals, cinv = np.unique(ctx, return_inverse=True)
    held = np.array([src.spec.kv_cache_tokens(int(c)) for c in cvals], dtype=float)[cinv.reshape(-1)]
    kv_tok = kv_tok * held / ctx
    blocks = np.ceil(ctx / sm.kv_block) * sm.kv_block
    enc_blocks = np.ceil(enc / sm.kv_block) * sm.kv_block
    kv_seq = kv_tok * blocks + cross * enc_blocks + state
    batch_tokens = b * prompt
    chunk = np.minimum(batch_tokens, sm.max_batched_tokens) if sm.max_batched_tokens else batch_tokens
    act = act_full * chunk / batch_tokens
    weights = np.full(n, pm.weight_bytes())
    reserved = kv_seq * b
    cap = hw.mem_capacity_bytes
    usable = np.full(n, cap * sm.gpu_mem_util if cap else np.nan)
    act_chunk = act_full / batch_tokens * (sm.max_batched_tokens or prompt)
    free = usable - act_chunk - weights
    with np.errstate(divide="ignore", invalid="ignore"):
        most = np.where(kv_seq > 0, np.floor(free / np.where(kv_seq > 0, kv_seq, 1.0) + 1e-9), 1e9)
    most = np.where(free < 0, 0, most)
    return {"weight_bytes": weights, "kv_cache_bytes": (kv_tok * ctx + cross * enc + state) * b,
            "kv_reserved_bytes": reserved, "state_bytes": state * b, "activation_peak_bytes": act,
            "total_bytes": weights + reserved + act, "capacity_bytes": np.full(n, float(cap) if cap else np.nan),
            "usable_bytes": usable, "max_concurrent": np.where(np.isnan(usable), np.nan, most)}
