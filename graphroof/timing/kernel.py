"""Realistic time of one kernel (or one op run as its own kernel) from its class, shape and counted cost.

Used by :func:`graphroof.roofline.evaluate` for profiles that carry a ``[timing]`` section:

* ``gemm``: :func:`~graphroof.timing.gemm_time` on the kernel's (M, N, K) (tile / wave quantisation,
  weight streaming at small M); a fused epilogue's extra bytes stream at the GEMM's bandwidth;
* ``attention``: the roofline derated by the profile's matrix and bandwidth efficiencies plus the GEMM latency
  (a flash-attention kernel is a pair of tiled GEMMs that keep scores on chip);
* ``vector``: :func:`~graphroof.timing.stream_time` of its bytes, at the sustained bandwidth of its stream kind
  (norm, rotary, act_mul, gather, softmax, reduction, copy, elementwise: read from the ops it fuses), or its
  vector FLOPs at the derated vector peak when those take longer;
* ``comm``: the alpha-beta collective model (:func:`~graphroof.timing.collective_time`);
* ``opaque`` (no counting rule): the derated roofline of its bytes.

The launch cost is returned apart (``t_launch_s``): the caller adds it per kernel, or once per step when the
step runs as a CUDA graph.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..counters.cost import Cost
from ..errors import UnboundDimError
from ..fuse.classify import gemm_mnk
from ..graph import OpNode
from .collectives import collective_time
from .gemm import gemm_time
from .profile import timing_of
from .stream import stream_time

__all__ = ["KernelTime", "kernel_time", "stream_kind"]

_KIND_MARKERS = (  # first match wins, checked against the op keys a kernel runs
    ("norm", ("norm", "rsqrt")),
    ("softmax", ("softmax", "logsumexp")),
    ("rotary", ("rotary",)),
    ("gather", ("embedding", "gather", "index_select", "index.tensor", "take")),
    ("reduction", ("sum", "mean", "amax", "max", "min", "argmax", "prod", "cumsum", "pool")),
)
_ACTS = ("silu", "gelu", "relu", "sigmoid", "swish", "tanh", "mish")


@dataclass(frozen=True)
class KernelTime:
    t_kernel_s: float   # on-device time without the launch
    t_launch_s: float   # CPU-side launch cost of this kernel (when launched on its own)
    model: str          # "gemm" | "attention" | "stream:<kind>" | "collective:<algorithm>" | "roofline"


def stream_kind(op_keys: tuple[str, ...] | list[str]) -> str:
    """The stream kind of a memory-bound kernel from the op keys it runs."""
    keys = [k.lower().rsplit(".", 1)[-1] for k in op_keys]
    if any(a in k for k in keys for a in _ACTS) and any(k in ("mul", "mul_", "mul.tensor") for k in keys):
        return "act_mul"
    neg_cat = any(k.startswith("neg") for k in keys) and any(k.startswith("cat") or k == "concat" for k in keys)
    if neg_cat:
        return "rotary"
    for kind, markers in _KIND_MARKERS:
        if any(m in k for k in keys for m in markers):
            return kind
    return "elementwise"


def _gemm_shape(node: OpNode, cost: Cost) -> tuple[int, int, int] | None:
    mnk = node.attrs.get("gemm_mnk")
    if mnk:
        return tuple(int(v) for v in mnk)  # type: ignore[return-value]
    return gemm_mnk(node, cost)


def _derated(cost: Cost, hw, tc: float, tm: float) -> float:
    return max(tc / hw.matrix_efficiency if cost.matrix_flops else tc / hw.vector_efficiency,
               tm / hw.mem_bw_efficiency)


def kernel_time(node: OpNode, kind: str, cost: Cost, hw, dtype: str, tc: float, tm: float) -> KernelTime:
    """Realistic time of *node* (an op or a fused kernel of class *kind*) with counted *cost*.

    *tc* / *tm* are its ideal compute and memory times (from the roofline), reused for derated terms.
    """
    timing = timing_of(hw)
    launch = timing.launch_overhead_s if (cost.flops or cost.bytes or cost.net_bytes) else 0.0
    if kind == "gemm":
        mnk = _gemm_shape(node, cost)
        if mnk is not None:
            g = gemm_time(*mnk, hw, dtype if dtype in hw.matrix_peak_flops_per_s or dtype == "fp32" else "fp16",
                          weight_bytes=cost.weight_bytes or None)
            extra = max(0.0, cost.bytes - g.bytes)  # epilogue operands (bias, residual) stream alongside
            t = g.t_s + extra / (hw.mem_bw_bytes_per_s * timing.gemm_mem_bw_efficiency)
            t = max(t, cost.vector_flops / (hw.peak("vector", dtype)[0] * hw.vector_efficiency) if cost.vector_flops
                    else 0.0)
            return KernelTime(t, launch, "gemm")
    if kind == "attention":
        return KernelTime(_derated(cost, hw, tc, tm) + timing.gemm_latency_s, launch, "attention")
    if kind == "comm":
        n = int(node.attrs.get("world_size") or 1)
        op = "all_gather" if "gather" in (node.attrs.get("collective") or node.op) else "all_reduce"
        try:
            size = float(node.outputs[0].nbytes) if node.outputs else cost.act_write_bytes
        except UnboundDimError:
            size = cost.act_write_bytes
        c = collective_time(op, size, n, hw)
        return KernelTime(c.t_s, launch, f"collective:{c.algorithm}")
    if kind in ("vector", "pointwise", "reduction"):
        keys = node.attrs.get("op_keys") or (node.op,)
        sk = stream_kind(keys)
        s = stream_time(cost.bytes, hw, sk)
        tv = cost.vector_flops / (hw.peak("vector", dtype)[0] * hw.vector_efficiency) if cost.vector_flops else 0.0
        return KernelTime(max(s.t_s, tv + timing.stream_latency_s), launch, f"stream:{sk}")
    return KernelTime(_derated(cost, hw, tc, tm), launch, "roofline")
