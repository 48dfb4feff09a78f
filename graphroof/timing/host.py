"""Host dispatch cost of one kernel under an eager runtime (a preset with ``[launch] overlap``).

The host of an eager framework issues each op from Python: it pays the framework's dispatch (Python binding,
ATen dispatcher, TensorIterator set-up, caching allocator) and one ``cudaLaunchKernel`` per kernel the op's
implementation launches, and a call into a vendor library (a cuBLAS / cuBLASLt GEMM, a cuDNN convolution, a
fused attention kernel behind ``F.scaled_dot_product_attention``) costs more host time than a pointwise op: the
library builds its descriptors and picks an algorithm on every call (PyTorch asks cuBLASLt for a heuristic on
each ``addmm``, cuDNN's frontend looks its plan up by the convolution's parameters).  Per graphroof kernel::

    host_s = n_launch * (launch_overhead_s + host_overhead_per_kernel_s)
             + n_library * host_overhead_per_library_call_s

``launch_overhead_s`` comes from the hardware profile, the other two from the runtime preset.  ``n_launch`` and
``n_library`` (:func:`eager_dispatches`) are 1 and 0 for a pointwise, reduction or norm kernel, 1 and 1 for a
GEMM, convolution or fused attention kernel.  Where the preset says its ops run PyTorch's own ATen CUDA
implementations (``[launch] aten_ops = true``), two ops launch more than one kernel:

* an inference batch norm on the native path (bf16 input, or fp16 input with fp16 weights: cuDNN takes only fp32
  weights for an fp16 input) copies the running mean, computes 1 / sqrt(var + eps) and normalises: 3 launches
  (``batch_norm_cuda_out``, aten/src/ATen/native/cuda/Normalization.cu, unchanged from PyTorch 1.x to 2.x);
* an attention that writes its scores (``--attention naive``: a hand-written attention such as transformers'
  eager ``BertSelfAttention``, or the math path of ``scaled_dot_product_attention``) runs ``Q K^T`` and ``P V`` as
  two batched GEMMs with the scaling and the softmax (and a mask add when the op has a mask) between them, and
  copies Q, K and V into batched-GEMM order (``torch.matmul`` on ``[batch, heads, tokens, dim]`` views of the
  projections folds batch and heads with a ``reshape``, a copy: ``_matmul_impl``, aten/src/ATen/native/
  LinearAlgebra.cpp) and O back to token order (``permute(0, 2, 1, 3).contiguous()``): 8 (9) launches, 2 of
  them library calls.

Each launch beyond the first is a kernel of its own on the device too, eager or replayed from a CUDA graph: it
adds the profile's ``stream_latency_s`` (a kernel's fixed time) to the device time (:func:`extra_kernels_device_s`),
and its own bytes.  The batch norm's extra kernels move a few bytes per channel (none counted).  The naive
attention's byte model holds the two batched GEMMs and the softmax (``S`` written, read, ``P`` written, read); its
other kernels each stream a tensor once more (:func:`eager_attention_bytes`, from :func:`eager_attention_terms`,
which reads what grows with the context from the step's costs; priced by
:func:`graphroof.timing.aten.eager_attention_device_s` for ``analyze`` and the LLM evaluator alike)::

    extra_bytes = 2 (q + k + v + o)      the four layout copies (read + write each)
                + 2 S                    the scaling of the scores (``scores / sqrt(d)``: read + write)
                + 2 S                    the mask add, when the op has a mask (read + write; the mask read is in
                                         the attention's own bytes)

with ``S = B H L S_kv`` score elements in the query's dtype (the whole square: the unfused path materialises it).
The layout copies read a permuted view: PyTorch runs them on TensorIterator's non-vectorised path, so under a
preset with an element rate (:mod:`graphroof.timing.aten`) each takes at least its elements at that rate.

A linear marked ``bias_add = "separate"`` (:data:`BIAS_ADD`; set by whoever knows the PyTorch that ran it, e.g.
graphroof.validate.vision for PyTorch 1.8) is a GEMM without its bias and ``output.add_(bias)`` after it: older
``at::linear`` takes ``addmm`` only for a 2-D input, else ``matmul`` then ``add_``.  The add is one more kernel on
the device (``stream_latency_s`` and its bytes, :func:`eager_bias_bytes`)::

    bias_bytes = 2 out + bias                the GEMM's output read and written once more, the bias read

On the host it is issued inside the one linear op, not dispatched as an op of its own: its host time is part of
that op's (no launch counted; the pytorch-eager host level was fitted on rows that ran it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..dtypes import dtype_bits
from ..fuse.classify import kernel_kind
from ..graph import OpNode, Role

__all__ = ["BIAS_ADD", "eager_attention_bytes", "eager_attention_terms", "eager_bias_bytes", "eager_dispatches",
           "extra_kernels_device_s", "host_dispatch_s", "LIBRARY_KINDS", "separate_bias"]

#: kernel kinds whose kernel comes from a vendor library call (cuBLAS / cuDNN / fused attention)
LIBRARY_KINDS = ("gemm", "attention")
#: node attribute: ``"separate"`` where the linear's bias is added by a kernel of its own (module doc)
BIAS_ADD = "bias_add"
_TRAINING_BATCH_NORM = ("aten._native_batch_norm_legit", "aten._batch_norm_with_update")


def _keys(node: OpNode) -> tuple[str, ...]:
    return tuple(node.attrs.get("op_keys") or (node.op,))


def _native_batch_norm(node: OpNode, fp32_weights: bool = False) -> bool:
    """An inference ATen batch norm that PyTorch runs on its native CUDA path (not cuDNN): the input is bf16, or
    fp16 with fp16 / bf16 weights (``_batch_norm_impl_index`` takes cuDNN only for an fp16 input with fp32
    weights; *fp32_weights*: the weights are fp32 whatever the graph says, as under ``torch.autocast``)."""
    keys = _keys(node)
    if len(keys) != 1 or not keys[0].startswith("aten.") or "batch_norm" not in keys[0] \
            or keys[0] in _TRAINING_BATCH_NORM:
        return False
    ins = [t for t in node.inputs if t is not None]
    acts = [t.dtype for t in ins if t.role in (Role.ACTIVATION, Role.KV_CACHE)]
    weights = [t.dtype for t in ins if t.role is Role.WEIGHT]
    if not acts:
        return False
    if acts[0] == "bf16":
        return True
    return acts[0] == "fp16" and bool(weights) and not fp32_weights and all(dtype_bits(w) <= 16 for w in weights)


def _writes_scores(node: OpNode, cost: Any) -> bool:
    """An attention kernel whose counted writes hold its score matrix: >= 2 elements per (query, key) pair (the
    ``naive`` byte model: :func:`graphroof.timing.attention.writes_scores`, as attention_time tests it), not only O."""
    from .attention import attention_dims, writes_scores

    return bool(writes_scores({"matrix_flops": cost.matrix_flops, "act_write_bytes": cost.act_write_bytes},
                              attention_dims(node)))


def eager_dispatches(node: OpNode | None, cost: Any, aten_ops: bool = False,
                     fp32_weights: bool = False) -> tuple[int, int]:
    """(kernel launches, of which vendor-library calls) the host issues for one graphroof kernel (module doc);
    *fp32_weights*: fp32 master weights under ``torch.autocast`` (a batch norm then runs in cuDNN: one kernel)."""
    if node is None:
        return 1, 0
    kind = kernel_kind(node, cost)
    if aten_ops and kind == "attention" and _writes_scores(node, cost):
        mask = len(node.inputs) > 3 and node.inputs[3] is not None
        return 8 + int(mask), 2  # 4 layout copies, 2 batched GEMMs, scale, softmax (+ mask add)
    if aten_ops and _native_batch_norm(node, fp32_weights):
        return 3, 0
    return 1, int(kind in LIBRARY_KINDS)


def host_dispatch_s(runtime: Any, launch_overhead_s: float, node: OpNode | None, cost: Any,
                    extra_launches: int = 0) -> float:
    """Host time to issue one kernel under *runtime* (module doc); *extra_launches*: more plain launches the
    runtime adds to it (the weight cast before an autocast GEMM).  Under a CUDA-graph replay (``cuda_graphs``) the
    kernels an ATen op adds beyond its first are replayed by the device with no host work: one issue per kernel."""
    aten = bool(getattr(runtime, "aten_ops", False)) and not bool(getattr(runtime, "cuda_graphs", False))
    n, lib = eager_dispatches(node, cost, aten, bool(getattr(runtime, "autocast", False)))
    n += extra_launches
    return (n * (launch_overhead_s + runtime.host_overhead_per_kernel_s)
            + lib * getattr(runtime, "host_overhead_per_library_call_s", 0.0))


def separate_bias(node: OpNode) -> bool:
    """A linear whose bias PyTorch adds in a kernel of its own (module doc): marked ``bias_add = "separate"``."""
    return node.attrs.get(BIAS_ADD) == "separate"


def eager_bias_bytes(node: OpNode, cost: Any) -> float:
    """Bytes of the separate bias add of a linear (:func:`separate_bias`): the GEMM's output read and written
    once more, and the bias read; 0 for any other kernel."""
    if kernel_kind(node, cost) != "gemm" or not separate_bias(node):
        return 0.0
    out = float(cost.act_write_bytes)                 # the GEMM's output, M x N
    mnk = node.attrs.get("gemm_mnk")
    return 2.0 * out + (out / mnk[0] if mnk and mnk[0] else 0.0)  # the bias: N elements of the output's dtype


def _field(cost: Any, name: str) -> Any:
    return cost[name] if isinstance(cost, Mapping) else getattr(cost, name)


def eager_attention_terms(node: OpNode | None, cost: Any) -> tuple[Any, Any, Any, Any]:
    """(layout-copy bytes, layout-copy elements, scaling / mask-add bytes, score elements) of an eager naive
    attention (module doc), zeros unless *node* is an attention kernel that writes its scores.  *cost*: a
    :class:`~graphroof.counters.cost.Cost`, or a mapping of cost fields to arrays (one column per step: the LLM
    evaluator's), the terms then arrays.  What grows with the context comes from *cost*: the score bytes, its writes
    less O's, halved (the naive byte model writes S and P), and K and V, its KV-cache reads (else the node's own
    K and V); Q, O and the mask come from *node*."""
    zero = (0.0, 0.0, 0.0, 0.0)
    if node is None:
        return zero
    kind = node.attrs.get("kernel_kind")
    if kind is None:  # an op node: its class from its cost (one column of a mapping)
        from ..counters.cost import Cost

        one = cost if not isinstance(cost, Mapping) else Cost(
            **{f: float(np.ravel(v)[0]) for f, v in cost.items()})  # type: ignore[arg-type]
        kind = kernel_kind(node, one)
    if kind != "attention":
        return zero
    from .attention import attention_dims, writes_scores

    q, k, v = (list(node.inputs) + [None, None, None])[:3]
    if q is None or k is None or v is None or q.rank < 2 or k.rank < 2:
        return zero
    aw = np.asarray(_field(cost, "act_write_bytes"), dtype=float)
    writes = writes_scores({"matrix_flops": _field(cost, "matrix_flops"), "act_write_bytes": aw},
                           attention_dims(node))
    if not np.any(writes):
        return zero
    o = node.outputs[0] if node.outputs and node.outputs[0] is not None else q
    item = q.itemsize_bits / 8.0
    score_bytes = np.where(writes, np.maximum(aw - o.nbytes, 0.0) / 2.0, 0.0)
    kv = np.asarray(_field(cost, "kv_read_bytes"), dtype=float)
    kv_bytes = np.where(kv > 0, kv, float(k.nbytes + v.nbytes))
    copy_bytes = np.where(writes, 2.0 * (q.nbytes + o.nbytes + kv_bytes), 0.0)
    copy_elements = np.where(writes, q.numel + o.numel + kv_bytes * 8.0 / k.itemsize_bits, 0.0)
    mask = len(node.inputs) > 3 and node.inputs[3] is not None
    scale_bytes = 2.0 * score_bytes * (1 + int(mask))
    terms = (copy_bytes, copy_elements, scale_bytes, score_bytes / item)
    return tuple(float(t) for t in terms) if np.ndim(aw) == 0 else terms  # type: ignore[return-value]


def eager_attention_bytes(node: OpNode, cost: Any) -> Any:
    """Bytes the kernels of an eager naive attention move beyond its byte model (module doc): 0 unless *node* is
    an attention kernel that writes its scores (:func:`eager_attention_terms`)."""
    copy_bytes, _, scale_bytes, _ = eager_attention_terms(node, cost)
    return copy_bytes + scale_bytes


def extra_kernels_device_s(runtime: Any, node: OpNode | None, cost: Any, stream_latency_s: float,
                           elementwise_bw_bytes_per_s: float = 0.0) -> float:
    """Device time of the kernels beyond the first that *runtime*'s implementation of one graphroof kernel
    launches (``aten_ops``: module doc): ``(n_launch - 1) * stream_latency_s``, plus a separate bias add's bytes
    (:func:`eager_bias_bytes`) at *elementwise_bw_bytes_per_s* (the profile's sustained elementwise bandwidth) when
    given.  An eager naive attention's extra kernels' bytes and element bounds are
    :func:`graphroof.timing.aten.eager_attention_device_s` (costs of one step or of many)."""
    if node is None or not getattr(runtime, "aten_ops", False):
        return 0.0
    bias = eager_bias_bytes(node, cost) > 0  # a linear's bias added by a kernel of its own
    t_s = (eager_dispatches(node, cost, True, bool(getattr(runtime, "autocast", False)))[0] - 1 + int(bias)) \
        * stream_latency_s
    if elementwise_bw_bytes_per_s > 0:
        t_s += eager_bias_bytes(node, cost) / elementwise_bw_bytes_per_s
    return t_s
