"""PyTorch's elementwise kernels off their vectorised path: bound by elements, not bytes.

PyTorch runs a pointwise ATen op (add, mul, a cast, an activation, ``masked_fill``) through TensorIterator
(``aten/src/ATen/native/cuda/CUDALoops.cuh``, ``gpu_kernel_impl``).  Only when every operand is contiguous in the
output's shape and none needs a dtype cast does it launch ``vectorized_elementwise_kernel`` (16-byte loads: the
streaming rates of :mod:`graphroof.timing.stream`).  An operand broadcast along a dim (a norm's ``[S, 1]``
statistics, a ``[H]`` weight, rotary's cos / sin over the heads) sends it to ``elementwise_kernel`` with an offset
calculator, and a dtype cast to ``unrolled_elementwise_kernel`` with a dynamic cast (not the narrowing fp32 -> bf16 /
fp16 copy, a vectorised kernel of its own: ``Copy.cu`` ``bfloat16_copy_kernel_cuda``): both load one element at a
time and compute each operand's offset (an integer divide and modulo per dim), so their time follows the elements,
not the bytes::

    t >= stream_latency_s + output elements / (r x SMs x clock)

``r``, elements per SM per clock, is a property of PyTorch's kernel: the runtime preset's
``[kernels] aten_strided_elements_per_sm_clock`` (0: no such bound).  ``SMs x clock`` is the profile's
exponential rate over 16 (:func:`graphroof.timing.attention.exp_rate`: 16 SFU results per SM per clock).

Which kernels (:func:`off_vector_path`): one ATen pointwise op (an allowlist, :data:`POINTWISE`; concatenation,
gathers, same-dtype copies and reductions run other kernels) that has an input broadcast against its output
(right-aligned, an input dim of 1 or missing where the output's is not 1; a one-element input is a scalar PyTorch
lifts out), a floating-point input of another dtype than its output, or an input read through a view that
leaves it strided (``x[..., :64]``, a chunk of the last dim, a transpose: the kernel's ``strided_input`` attr, set
by graphroof.fuse.layout); a concatenation with such an input likewise (``CatArrayBatchedCopy``), and a clone of it
(``.contiguous()`` after a transpose).  Not
included: an inference batch norm, whose scale and shift on a contiguous input is a kernel of its own
(``batch_norm_transform_input_kernel``, aten/src/ATen/native/cuda/Normalization.cuh), not TensorIterator's: with
it, ResNet-50 / 101 eager and CUDA-graph rows of graphroof/validate/data/h100_session and h200_session went from
-15..+14% to +10..+28% (measured, not kept).

PyTorch's softmax over the last dim (``aten/src/ATen/native/cuda/SoftMax.cu`` ``host_softmax``, PyTorch >= 2.7:
pytorch/pytorch#144679) picks its kernel by the row length ``L`` (:func:`softmax_kernel`): ``softmax_warp_forward``
(a warp per row) up to 2,048 elements, then ``cunn_SoftMaxForwardReg<k>`` (a block of 1,024 threads per row, each
holding ``k = ceil(L / 1024)`` elements in registers, loaded one at a time) while ``k < 10``, then the shared-memory
or plain block kernel.  The register kernel is bound by elements like the kernels above, at its own rate
``aten_softmax_reg_elements_per_sm_clock`` (a row's two block reductions between its loads and its stores leave the
SM's memory pipe idle)::

    t >= stream_latency_s + rows x L / (r_reg x SMs x clock)        2,048 < L <= 9,216

The warp and shared-memory kernels keep the byte model.  Measured on an H200 (h200_probe/naive_attention_kernels.csv,
fp16): the register kernel ran 318 G elements/s at 4,096 and 262 G at 8,192 (1.26 and 1.04 per SM per clock, 1.27
and 1.05 TB/s of the 4.8), the warp kernel 2.7 TB/s at <= 1,024, the shared-memory kernel 2.25 TB/s at 16,384.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import OpNode

__all__ = ["off_vector_path", "strided_elements_per_s", "aten_floor_s", "softmax_kernel", "softmax_reg_s",
           "eager_attention_device_s", "POINTWISE", "SOFTMAX_KEYS"]

#: ATen pointwise ops that run as one TensorIterator kernel (the op name, overload and in-place ``_`` dropped)
POINTWISE = frozenset((
    "add", "sub", "rsub", "mul", "div", "pow", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "reciprocal",
    "sin", "cos", "tanh", "sigmoid", "silu", "gelu", "relu", "mish", "hardswish", "hardtanh", "leaky_relu",
    "elu", "clamp", "clamp_min", "clamp_max", "maximum", "minimum", "where", "masked_fill", "_to_copy", "to",
    "copy", "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or", "bitwise_not",
    "fill", "lerp", "addcmul", "addcdiv", "erf", "square", "floor", "ceil", "round", "sign", "softplus",
))


#: ops off the vectorised path only when an input is strided: concatenation (``CatArrayBatchedCopy``, the general
#: kernel, one element per load) and a copy out of a strided view (``.contiguous()`` after a transpose: clone's
#: ``direct_copy_kernel_cuda`` through ``elementwise_kernel``)
STRIDED_ONLY = frozenset(("cat", "concat", "concatenate", "_cat", "stack", "clone", "contiguous"))
#: copy ops: a contiguous fp32 -> bf16 / fp16 copy has kernels of its own on the vectorised path
#: (aten/src/ATen/native/cuda/Copy.cu: bfloat16_copy_kernel_cuda, float16_copy_kernel_cuda, gpu_kernel_nocast)
_COPIES = frozenset(("_to_copy", "to", "copy"))
#: ATen softmax ops (the op name, overload dropped)
SOFTMAX_KEYS = frozenset(("softmax", "_softmax", "_safe_softmax", "log_softmax", "_log_softmax"))
#: softmax_warp_forward's largest row (elements; and at most 8 KB of it): dispatch_softmax_forward, PyTorch >= 2.7
SOFTMAX_WARP_MAX = 2048
SOFTMAX_WARP_MAX_BYTES = 8192
#: threads of the block softmax kernels at rows over 1,024 elements (SoftMaxForward_getBlockSize: max_threads)
SOFTMAX_BLOCK = 1024
#: cunn_SoftMaxForwardReg while its registers per thread, ceil(L / 1024), are below 10
SOFTMAX_REG_MAX = 9


def _op_name(key: str) -> str:
    parts = key.lower().split(".")
    name = parts[1] if parts[0] == "aten" and len(parts) > 1 else parts[-1]
    return name[:-1] if name.endswith("_") and not name.startswith("_") else name


def _broadcast(shape: tuple, out: tuple) -> bool:
    """*shape* (an input's) broadcast against *out* (the output's), right-aligned: an input dim of 1, or a
    missing one, where the output's is not 1 (a symbolic output dim counts as more than 1).  A one-element
    input is a scalar (PyTorch lifts it out of the loop): not broadcast."""
    if all(d == 1 for d in shape):
        return False
    pad = (1,) * (len(out) - len(shape)) + tuple(shape)
    return any(i == 1 and o != 1 for i, o in zip(pad, out))


def _aten_op(node: OpNode) -> str | None:
    """The op name of kernel *node* when it runs one ATen op (:func:`_op_name`), else None."""
    keys = tuple(node.attrs.get("op_keys") or (node.op,))
    if len(keys) != 1 or not keys[0].lower().startswith("aten."):
        return None
    return _op_name(keys[0])


def off_vector_path(node: OpNode | None) -> bool:
    """Whether PyTorch runs kernel *node* (one ATen op) on TensorIterator's non-vectorised path (module doc)."""
    if node is None or not node.outputs or node.outputs[0] is None:
        return False
    name, out = _aten_op(node), node.outputs[0]
    if name is None:
        return False
    if node.attrs.get("strided_input") and (name in POINTWISE or name in STRIDED_ONLY):
        return True  # an input read through a strided view (graphroof.fuse.layout)
    if name not in POINTWISE:
        return False
    ins = [t for t in node.inputs if t is not None]
    narrowing = name in _COPIES and len(ins) == 1 and ins[0].dtype == "fp32" and out.dtype in ("bf16", "fp16")
    if not narrowing and any(t.dtype != out.dtype and t.dtype.startswith(("fp", "bf")) for t in ins):
        return True
    return any(_broadcast(tuple(t.shape), tuple(out.shape)) for t in ins if t.rank)


def _warp(dim: Any, itemsize_bytes: float) -> Any:
    return (dim <= SOFTMAX_WARP_MAX) & (dim * itemsize_bytes <= SOFTMAX_WARP_MAX_BYTES)


def _reg(dim: Any, itemsize_bytes: float) -> Any:
    """Rows of *dim* elements (an int or an array) run the register kernel (module doc)."""
    return ~_warp(dim, itemsize_bytes) & (np.ceil(np.asarray(dim) / SOFTMAX_BLOCK) <= SOFTMAX_REG_MAX)


def softmax_kernel(dim: int, itemsize_bytes: float) -> str:
    """The kernel PyTorch (>= 2.7) runs a softmax over rows of *dim* elements of *itemsize_bytes* with (module doc):
    ``warp`` | ``reg`` | ``block`` (shared-memory or plain)."""
    if _warp(dim, itemsize_bytes):
        return "warp"
    return "reg" if _reg(dim, itemsize_bytes) else "block"


def softmax_reg_s(rows: Any, dim: Any, itemsize_bytes: float, hw: Any, runtime: Any) -> Any:
    """Element time (no latency) of a softmax over *rows* rows of *dim* elements (floats, or arrays: one per step)
    where PyTorch runs its register kernel (module doc), else 0; 0 without the preset's rate."""
    from .attention import exp_rate

    r = float(getattr(runtime, "aten_softmax_reg_elements_per_sm_clock", 0.0) or 0.0)
    if r <= 0 or not getattr(runtime, "aten_ops", False):
        return 0.0
    t = np.where(_reg(dim, itemsize_bytes), rows * np.asarray(dim, dtype=float) / (r * exp_rate(hw) / 16.0), 0.0)
    return float(t) if np.ndim(t) == 0 else t


def _softmax_dim(node: OpNode) -> int | None:
    """The row length of a one-op ATen softmax over its last dim (None: another op, another dim, unbound)."""
    if _aten_op(node) not in SOFTMAX_KEYS:
        return None
    x = node.inputs[0] if node.inputs else None
    if x is None or not x.rank or int(node.attrs.get("dim", -1)) % x.rank != x.rank - 1:
        return None
    last = x.shape[-1]
    return last if isinstance(last, int) else None


def strided_elements_per_s(hw: Any, runtime: Any) -> float:
    """Elements per second of the non-vectorised path on *hw* under *runtime* (module doc); 0: no bound."""
    from .attention import exp_rate

    r = float(getattr(runtime, "aten_strided_elements_per_sm_clock", 0.0) or 0.0)
    if r <= 0 or not getattr(runtime, "aten_ops", False):
        return 0.0
    return r * exp_rate(hw) / 16.0


def aten_floor_s(node: OpNode | None, act_write_bytes: Any, hw: Any, runtime: Any, stream_latency_s: float) -> Any:
    """The element bound of one-op kernel *node* (floats or arrays of its written bytes), else 0 (module doc):
    ``stream_latency_s + elements / rate`` on TensorIterator's non-vectorised path, or for a softmax that runs
    PyTorch's register kernel.  Its elements are the written bytes over the output's element size."""
    if node is None or not node.outputs or node.outputs[0] is None:
        return 0.0
    bits = node.outputs[0].itemsize_bits
    dim = _softmax_dim(node)
    if dim is not None:
        x = node.inputs[0]
        assert x is not None
        if x.dtype != node.outputs[0].dtype:
            return 0.0  # half_to_float: the warp limit stays at 1,024 there, and no register kernel
        t = softmax_reg_s(act_write_bytes * 8.0 / bits / dim, dim, bits / 8.0, hw, runtime)
        return stream_latency_s + t if np.any(np.asarray(t) > 0) else 0.0
    rate = strided_elements_per_s(hw, runtime)
    if not rate or not off_vector_path(node):
        return 0.0
    return stream_latency_s + act_write_bytes * 8.0 / bits / rate


def eager_attention_device_s(node: OpNode | None, cost: Any, hw: Any, runtime: Any) -> Any:
    """Device time an eager naive attention's other kernels add to its own model (floats, or arrays for a
    mapping of cost columns: :func:`graphroof.timing.host.eager_attention_terms`), 0 unless *runtime* runs ATen's
    kernels and *node* is an attention that writes its scores:

    * the four layout copies and the scaling (and mask add) stream their bytes at the elementwise rate; the copies
      read a permuted view, so each takes at least its elements at the non-vectorised rate
      (:func:`strided_elements_per_s`);
    * the attention's byte model streams the softmax's score read and probability write (``2 S`` bytes) at the
      GEMM's bandwidth; where PyTorch runs its register softmax (rows of ``S_kv`` keys: :func:`softmax_kernel`)
      the kernel takes at least its elements at that kernel's rate (module doc): the difference is added."""
    if node is None or not getattr(runtime, "aten_ops", False):
        return 0.0
    from .host import eager_attention_terms
    from .profile import timing_of

    copy_bytes, copy_elements, scale_bytes, score_elements = eager_attention_terms(node, cost)
    if not np.any(np.asarray(copy_bytes) > 0):
        return 0.0
    t = timing_of(hw)
    bw = hw.mem_bw_bytes_per_s * t.stream_efficiency("elementwise")
    out = (copy_bytes + scale_bytes) / bw
    rate = strided_elements_per_s(hw, runtime)
    if rate:
        out = out + np.maximum(0.0, copy_elements / rate - copy_bytes / bw)
    q, k = node.inputs[0], node.inputs[1]
    assert q is not None and k is not None
    rows = q.numel / int(q.shape[-1])
    item = q.itemsize_bits / 8.0
    dim = np.rint(np.asarray(score_elements, dtype=float) / rows)
    t_reg = softmax_reg_s(rows, dim, item, hw, runtime)
    if np.any(np.asarray(t_reg) > 0):
        t_bytes = 2.0 * np.asarray(score_elements) * item / (hw.mem_bw_bytes_per_s * t.gemm_mem_bw_efficiency)
        out = out + np.maximum(0.0, t_reg - t_bytes)
    return float(out) if np.ndim(out) == 0 else out
