"""Memory fit per device: resident weights + KV cache at the full context + the activation peak.

* Weights: every parameter once, in the weights dtype of the what-if, divided by the TP degree when its module
  is split (:class:`~graphroof.llm.tp.TPPlan`; norms and other replicated parameters stay whole; K / V
  projections by the KV heads when the TP degree exceeds them: each device holds its KV head's columns).
* KV cache: what a server must reserve for ``batch`` sequences of ``prompt + gen`` tokens; the bytes per token
  are the KV-role bytes one decode step writes per sequence (so they follow the KV dtype and the TP split).
* Activation peak: a liveness sweep over the prefill graph in op order.  Each op's activation outputs are live
  from the op until their last consumer; views (ops with a free rule) alias their input and extend its life;
  sharded outputs count ``1/N``.  Framework workspace and allocator fragmentation are not modelled.

``fits`` compares the sum with the usable memory: the profile's ``memory.capacity_bytes`` times the share a
serving engine may use (:class:`ServingMemory`).  The maximum number of concurrent sequences is one figure per
configuration: ``floor((usable - weights - activations of one prefill chunk) / KV bytes of one sequence)``, the KV
of a sequence rounded up to whole paged-KV blocks, the prefill chunk capped by the token budget (chunked
prefill), its activations scaled from the traced prefill per token.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ..dtypes import is_float
from ..memory import Param, activation_live_bytes, activation_peak_bytes, params_from_graph
from .quant import Quant
from .tp import DEFAULT_PLAN, TPPlan

__all__ = ["MemoryFit", "ServingMemory", "resident_weight_bytes", "params_from_graph", "activation_peak_bytes",
           "activation_live_bytes", "max_batch", "max_concurrent"]


def resident_weight_bytes(params: Iterable[Param], quant: Quant, tp: int = 1, plan: TPPlan = DEFAULT_PLAN) -> float:
    """Per-device bytes of *params* after the weights what-if and the TP split."""
    total = 0.0
    kvs = plan.kv_split(tp)
    for scope, t in params:
        if quant.weights and is_float(t.dtype):
            t = t.with_dtype(quant.weights)
        kind, mscope = plan.kind(scope)
        split = tp > 1 and kind is not None and not (kind == "row" and t.rank == 1)
        # a K / V projection above the KV heads: each device holds its KV head's columns (replicated r times)
        ways = kvs if plan.projects_kv(kind, mscope) else tp
        total += t.nbytes / ways if split else t.nbytes
    return total


def max_batch(capacity: float, fixed: float, per_seq: float) -> int:
    """Largest batch with ``fixed + batch * per_seq <= capacity`` (0 when even the weights do not fit)."""
    if fixed > capacity:
        return 0
    if per_seq <= 0:
        return 10**9
    return int(math.floor((capacity - fixed) / per_seq + 1e-9))


@dataclass(frozen=True)
class ServingMemory:
    """How a serving engine uses memory (vLLM's knobs, same defaults where vLLM has one).

    * ``gpu_mem_util``: share of the device memory the engine may use (vLLM ``--gpu-memory-utilization``, 0.9);
    * ``kv_block``: paged-KV block size in tokens (vLLM ``--block-size``, 16): a sequence holds whole blocks;
    * ``max_batched_tokens``: tokens one prefill chunk may hold (chunked prefill, vLLM
      ``--max-num-batched-tokens``); ``None``: the whole batch's prompt in one pass.
    """

    gpu_mem_util: float = 0.9
    kv_block: int = 16
    max_batched_tokens: int | None = None

    def __post_init__(self) -> None:
        from ..errors import InputError

        if not 0 < self.gpu_mem_util <= 1:
            raise InputError(f"--gpu-mem-util must be in (0, 1], got {self.gpu_mem_util}")
        if self.kv_block < 1:
            raise InputError(f"--kv-block must be >= 1 token, got {self.kv_block}")
        if self.max_batched_tokens is not None and self.max_batched_tokens < 1:
            raise InputError(f"--max-batched-tokens must be >= 1, got {self.max_batched_tokens}")

    def kv_tokens(self, ctx: int) -> int:
        """Tokens a sequence of *ctx* tokens holds in paged KV blocks."""
        return math.ceil(ctx / self.kv_block) * self.kv_block

    def chunk_tokens(self, batch_tokens: int) -> int:
        """Tokens in the largest prefill chunk for a batch prompt of *batch_tokens* tokens."""
        return min(batch_tokens, self.max_batched_tokens) if self.max_batched_tokens else batch_tokens


def max_concurrent(usable: float, weights: float, act_chunk: float, kv_seq: float) -> int:
    """``floor((usable - weights - act_chunk) / kv_seq)``: sequences whose KV fits beside the weights and one
    prefill chunk's activations (0 when those alone do not fit)."""
    return max_batch(usable - act_chunk, weights, kv_seq)


@dataclass(frozen=True)
class MemoryFit:
    """Per-device memory of one configuration."""

    weight_bytes: float
    kv_cache_bytes: float
    activation_peak_bytes: float
    capacity_bytes: float | None
    max_batch: int | None          # max concurrent sequences at this context and TP (None: capacity unknown)
    min_tp: int | None             # smallest TP degree that fits (None: unknown or none up to 64)
    usable_bytes: float | None = None  # capacity x gpu_mem_util
    serving: ServingMemory = ServingMemory()
    kv_reserved_bytes: float | None = None  # the KV cache in whole paged-KV blocks (what the engine reserves)
    state_bytes: float = 0.0  # of kv_cache_bytes: state-space layers' fixed recurrent state (graphroof.llm.ssm)

    @property
    def total_bytes(self) -> float:
        kv = self.kv_reserved_bytes if self.kv_reserved_bytes is not None else self.kv_cache_bytes
        return self.weight_bytes + kv + self.activation_peak_bytes

    @property
    def fits(self) -> bool | None:
        if self.capacity_bytes is None:
            return None
        usable = self.usable_bytes if self.usable_bytes is not None else self.capacity_bytes
        return self.total_bytes <= usable

    def as_dict(self) -> dict:
        return {"weight_bytes": self.weight_bytes, "kv_cache_bytes": self.kv_cache_bytes,
                "kv_reserved_bytes": self.kv_reserved_bytes, "state_bytes": self.state_bytes,
                "activation_peak_bytes": self.activation_peak_bytes, "total_bytes": self.total_bytes,
                "capacity_bytes": self.capacity_bytes, "usable_bytes": self.usable_bytes, "fits": self.fits,
                "max_batch_that_fits": self.max_batch, "max_concurrent_sequences": self.max_batch,
                "min_tp_that_fits": self.min_tp, "gpu_mem_util": self.serving.gpu_mem_util,
                "kv_block_tokens": self.serving.kv_block, "max_batched_tokens": self.serving.max_batched_tokens}
