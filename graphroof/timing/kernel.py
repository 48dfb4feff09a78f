"""Realistic time of one kernel (or one op run as its own kernel) from its class, shape and counted cost.

Used by :func:`graphroof.roofline.evaluate` for profiles that carry a ``[timing]`` section:

* ``gemm`` running a convolution: :func:`~graphroof.timing.conv.conv_time` (implicit GEMM with channels padded
  for the tensor cores, or a direct convolution on the CUDA cores: depthwise, misaligned, no matrix peak);
* ``gemm``: :func:`~graphroof.timing.gemm_time` on the kernel's (M, N, K) (tile / wave quantisation,
  weight streaming at small M); a fused epilogue's extra bytes stream at the GEMM's bandwidth;
* ``gemm`` also covers weight-only quantized GEMMs (dequant fused or separate) and MoE grouped GEMMs
  (:mod:`graphroof.timing.gemm_plan`);
* ``attention``: :func:`~graphroof.timing.attention.attention_time` (per-pair matmul + exponential work with a
  per-row pipeline fill, K/V streamed once per KV head or per query head);
* ``vector``: :func:`~graphroof.timing.stream_time` of its bytes, at the sustained bandwidth of its stream kind
  (norm, rotary, act_mul, gather, softmax, reduction, copy, elementwise: read from the ops it fuses), or its
  vector FLOPs at the derated vector peak when those take longer;
* ``comm``: the alpha-beta collective model (:func:`~graphroof.timing.collective_time`) with the runtime preset's
  all-reduce implementation (``allreduce``: nccl / custom / nvls) and, under ``cuda_graphs``, the device-side latency
  only (every phase of such a runtime: a prefill's large messages are bandwidth-bound either way);
* ``opaque`` (no counting rule): the derated roofline of its bytes.

The launch cost is returned apart (``t_launch_s``): the caller adds it per kernel, or once per step when the
step runs as a CUDA graph.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..counters.cost import Cost
from ..errors import UnboundDimError
from ..fuse.classify import gemm_mnk
from ..fuse.runtimes import Runtime
from ..graph import OpNode
from .aten import aten_floor_s
from .attention import attention_dims, attention_time, context_prep_launches
from .collectives import collective_time
from .conv import conv_shape, conv_time, is_conv_key
from .gemm_plan import GemmPlan, gemm_kernel_time, gemm_plan
from .l2 import l2_bytes_of, l2_read_cost
from .profile import timing_of
from .stream import priced_kind, stream_time

__all__ = ["KernelTime", "kernel_time", "stream_kind", "attention_kernel"]

_KIND_MARKERS = (  # first match wins, checked against the op keys a kernel runs
    ("norm", ("norm", "rsqrt")),
    ("softmax", ("softmax", "logsumexp")),
    ("rotary", ("rotary",)),
    ("gather", ("embedding", "gather", "index_select", "index.tensor", "take")),
    ("reduction", ("sum", "mean", "amax", "max", "min", "argmax", "prod", "cumsum", "pool")),
)
_TRAINING_BN = ("_native_batch_norm_legit", "_batch_norm_with_update")  # batch statistics: a real reduction
_ACTS = ("silu", "gelu", "relu", "sigmoid", "swish", "tanh", "mish")


@dataclass(frozen=True)
class KernelTime:
    t_kernel_s: float   # on-device time without the launch
    t_launch_s: float   # CPU-side launch cost of this kernel (when launched on its own)
    model: str          # "gemm" | "attention" | "stream:<kind>" | "collective:<algorithm>" | "roofline"
    extra_launches: int = 0  # kernels the runtime launches beside it (an fp8 GEMM's input quantize, an attention
    #                          plugin's context-phase kernels), their device time in t_kernel_s


def stream_kind(op_keys: tuple[str, ...] | list[str]) -> str:
    """The stream kind of a memory-bound kernel from the op keys it runs."""
    # inference batch-norm is a per-channel scale and shift (running statistics): elementwise, not a row reduction
    keys = [k.lower().rsplit(".", 1)[-1] for k in op_keys]
    keys = [k if k in _TRAINING_BN else k.replace("batch_norm", "affine").replace("batchnormalization", "affine")
            for k in keys]
    if any(a in k for k in keys for a in _ACTS) and any(k in ("mul", "mul_", "mul.tensor") for k in keys):
        return "act_mul"
    neg_cat = any(k.startswith("neg") for k in keys) and any(k.startswith("cat") or k == "concat" for k in keys)
    if neg_cat:
        return "rotary"
    for kind, markers in _KIND_MARKERS:
        if any(m in k for k in keys for m in markers):
            return kind
    return "elementwise"


def attention_kernel(runtime: Runtime | None) -> str:
    """The fused-attention kernel family the runtime preset runs (``[kernels].attention_kernel``; ``auto``: the
    device's native kernel, also without a runtime)."""
    return str(getattr(runtime, "attention_kernel", None) or "auto")


def _gemm_shape(node: OpNode, cost: Cost) -> tuple[int, int, int] | None:
    mnk = node.attrs.get("gemm_mnk")
    if mnk:
        return tuple(int(v) for v in mnk)  # type: ignore[return-value]
    return gemm_mnk(node, cost)


def _fields(cost: Cost) -> dict[str, float]:
    return {f: getattr(cost, f) for f in ("matrix_flops", "vector_flops", "weight_bytes", "act_read_bytes",
                                           "act_write_bytes", "kv_read_bytes", "kv_write_bytes")}


def _is_conv(node: OpNode) -> bool:
    return any(is_conv_key(k) for k in (node.attrs.get("op_keys") or (node.op,)))


def _derated(cost: Cost, hw, tc: float, tm: float) -> float:
    return max(tc / hw.matrix_efficiency if cost.matrix_flops else tc / hw.vector_efficiency,
               tm / hw.mem_bw_efficiency)


def extra_launches(node: OpNode, kind: str | None, cost: Cost, hw, dtype: str, runtime: Runtime | None = None,
                   plan: GemmPlan | None = None) -> int:
    """Kernels the runtime launches beside kernel *node* of class *kind*, their device time in its own (an fp8
    GEMM's input quantize: :func:`graphroof.timing.gemm_plan.quantize_input_s`; an attention plugin's
    context-phase kernels: :func:`graphroof.timing.attention.context_prep_launches`); *plan*: the GEMM's, when
    the caller has it.  The one count both the graph path (:func:`kernel_time`) and the LLM pricer use."""
    if kind == "gemm" and node.attrs.get("quantize_input"):
        return int((plan or gemm_plan(node, dtype, hw, runtime)).quantize_input)
    if kind == "attention" and getattr(runtime, "attention_context_prep", False):
        return context_prep_launches(_fields(cost), attention_dims(node))
    return 0


def kernel_time(node: OpNode, kind: str, cost: Cost, hw, dtype: str, tc: float, tm: float,
                runtime: Runtime | None = None) -> KernelTime:
    """Realistic time of *node* (an op or a fused kernel of class *kind*) with counted *cost*.

    *tc* / *tm* are its ideal compute and memory times (from the roofline), reused for derated terms.
    *runtime*: the engine preset the kernel runs under (its kernel capabilities; ``None``: today's defaults).
    """
    timing = timing_of(hw)
    launch = timing.launch_overhead_s if (cost.flops or cost.bytes or cost.net_bytes) else 0.0
    if getattr(runtime, "l2_activations", False) and kind != "comm":  # back to back: reads from L2 (timing.l2)
        cost = l2_read_cost(cost, l2_bytes_of(hw)) if kind != "gemm" or _is_conv(node) else cost
    if kind == "gemm" and _is_conv(node):
        shape = conv_shape(node)
        if shape is not None:  # implicit GEMM with channel padding, or direct conv on the CUDA cores
            gd = dtype if dtype in hw.matrix_peak_flops_per_s or dtype == "fp32" else "fp16"
            cv = conv_time(shape, cost.bytes, hw, gd)
            t = max(cv.t_s, cost.vector_flops / (hw.peak("vector", dtype)[0] * hw.vector_efficiency)
                    if cost.vector_flops else 0.0)
            return KernelTime(t, launch, f"conv:{cv.path}")
    if kind == "gemm":
        mnk = _gemm_shape(node, cost)
        if mnk is not None:  # tiles / waves, weight-only dequant, MoE experts (graphroof.timing.gemm_plan)
            plan = gemm_plan(node, dtype, hw, runtime)
            return KernelTime(gemm_kernel_time(plan, mnk, cost, hw), launch, "gemm",
                              extra_launches(node, kind, cost, hw, dtype, runtime, plan))
    if kind == "attention":  # flash attention: prefill ramp, decode K/V per KV head (graphroof.timing.attention)
        shared = bool(getattr(runtime, "gqa_shared_kv", True)) if runtime is not None else True
        family = attention_kernel(runtime)
        prep = bool(getattr(runtime, "attention_context_prep", False))  # the plugin's context-phase kernels
        return KernelTime(attention_time(_fields(cost), attention_dims(node), hw, dtype, shared, family, prep), launch,
                          "attention", extra_launches(node, kind, cost, hw, dtype, runtime))
    if kind == "comm":
        n = int(node.attrs.get("world_size") or 1)
        gpn = node.attrs.get("gpus_per_node")  # set by llm/parallel.py under a --system layout (None: one node)
        if "all_to_all" in " ".join((node.attrs.get("collective") or "", node.op, *(node.attrs.get("op_keys") or ()))):
            from .p2p import all_to_all_time  # expert-parallel dispatch / combine: bytes leaving the rank

            a = all_to_all_time(cost.net_bytes, n, hw, gpus_per_node=int(gpn) if gpn else None)
            return KernelTime(a.t_s, launch, "p2p:all_to_all")
        op = "all_gather" if "gather" in (node.attrs.get("collective") or node.op) else "all_reduce"
        try:
            size = float(node.outputs[0].nbytes) if node.outputs else cost.act_write_bytes
        except UnboundDimError:
            size = cost.act_write_bytes
        impl = getattr(runtime, "allreduce", "nccl") if runtime is not None else "nccl"
        graphs = bool(getattr(runtime, "cuda_graphs", False)) if runtime is not None else False
        c = collective_time(op, size, n, hw, implementation=impl, cuda_graphs=graphs,
                            gpus_per_node=int(gpn) if gpn else None)
        return KernelTime(c.t_s, launch, f"collective:{c.algorithm}")
    if kind in ("vector", "pointwise", "reduction"):
        keys = node.attrs.get("op_keys") or (node.op,)
        sk = stream_kind(keys)
        s = stream_time(cost.bytes, hw, priced_kind(sk, runtime))
        tv = cost.vector_flops / (hw.peak("vector", dtype)[0] * hw.vector_efficiency) if cost.vector_flops else 0.0
        # PyTorch's non-vectorised elementwise path (broadcast or cast operands) and its register softmax: bound
        # by elements (timing.aten)
        floor = aten_floor_s(node, cost.act_write_bytes, hw, runtime, timing.stream_latency_s)
        return KernelTime(max(s.t_s, tv + timing.stream_latency_s, floor), launch, f"stream:{sk}")
    return KernelTime(_derated(cost, hw, tc, tm), launch, "roofline")
