"""What kind of kernel an op is, from plain data: its op key, its counted cost and its tensor shapes.

Classes (frontend-independent, so ATen, ONNX and op-table graphs fuse alike):

* ``view``: costs nothing (reshape, view, transpose-as-view, slice): free, never a kernel;
* ``attention``: a whole attention op (SDPA, ONNX / com.microsoft Attention): one kernel;
* ``gemm``: any other op with matrix FLOPs (matmul, linear, conv, einsum);
* ``comm``: a collective (network bytes);
* ``opaque``: an op without a counting rule (estimated), or an op-table row: never fused;
* ``pointwise``: vector work whose output is as large as its largest activation input (elementwise, casts,
  copies, gathers, concatenation);
* ``reduction``: vector work whose output is smaller than an activation input (sums, means, pooling), or
  that reduces along rows by definition (norms, softmax, scans, sorts).

And the dtype an op computes in (:func:`compute_dtype`), which picks the peak the roofline and the kernel
model price it at.
"""

from __future__ import annotations

import functools

from ..counters.cost import Cost
from ..dtypes import dtype_bits, is_float
from ..errors import UnboundDimError
from ..graph import OpNode, Role

__all__ = ["op_class", "kernel_kind", "is_batch_norm", "is_conv", "gemm_mnk", "compute_dtype", "attention_is_causal",
           "VECTOR_CLASSES"]

VECTOR_CLASSES = ("pointwise", "reduction")
_ATTENTION_MARKERS = ("scaled_dot_product", "attention", "flash_attn", "sdpa", "mla_decode")
_BATCH_NORM_MARKERS = ("batch_norm", "batchnormalization")
_CONV_MARKERS = ("conv",)
#: Ops that reduce along a row even when their output is as large as the input (a norm, a softmax, a scan):
#: they can start or join a vector chain but never be a GEMM epilogue.
_ROW_REDUCTION_MARKERS = ("norm", "softmax", "logsumexp", "cumsum", "cumprod", "cummax", "cummin", "sort", "topk",
                          "pool", "reduce", "scan", "std", "var")


def compute_dtype(node: OpNode) -> str:
    """The dtype the op computes in, which picks the peak.

    Activation / KV inputs decide (weights may be stored narrower: int8 weights with bf16 activations compute
    in bf16); a float beats an integer (index tensors do not set the peak); the widest float wins.  A node may
    state ``attrs["compute_dtype"]`` to override.
    """
    if node.attrs.get("compute_dtype"):
        return str(node.attrs["compute_dtype"])
    ins = [t for t in node.inputs if t is not None]
    cands = [t for t in ins if t.role in (Role.ACTIVATION, Role.KV_CACHE)] or ins or list(node.outputs)
    if not cands:
        return "fp32"
    floats = [t.dtype for t in cands if is_float(t.dtype)]
    pool = floats or [t.dtype for t in cands]
    return max(pool, key=dtype_bits)


def _key(node: OpNode) -> str:
    return node.op.lower()


def is_batch_norm(node: OpNode) -> bool:
    return any(m in _key(node) for m in _BATCH_NORM_MARKERS)


def is_conv(node: OpNode) -> bool:
    k = _key(node).rsplit(".", 1)[-1]
    return any(k.startswith(m) or k.startswith("_" + m) or k.startswith("q" + m) or k.startswith("qlinear" + m)
               for m in _CONV_MARKERS)


def _numel(t) -> int:
    try:
        return t.numel
    except UnboundDimError:
        return 0


@functools.lru_cache(maxsize=4096)
def _key_facts(op: str) -> tuple[bool, bool, bool]:
    """(op-table row, attention op, row reduction) from the op key alone (a few dozen distinct keys per model)."""
    key = op.lower()
    return (op.startswith("table."), any(m in key for m in _ATTENTION_MARKERS),
            any(m in key.rsplit(".", 1)[-1] for m in _ROW_REDUCTION_MARKERS))


def op_class(node: OpNode, cost: Cost) -> str:
    """The kernel class of *node* with counted *cost* (see the module docstring)."""
    table, attention, row_reduction = _key_facts(node.op)
    if table:
        return "opaque"  # an op-table row is already a kernel with its own numbers
    flops = cost.flops
    if cost.estimated and not flops:
        return "opaque"
    if cost.net_bytes:
        return "comm"
    if not flops and not cost.bytes:
        return "view"
    if cost.matrix_flops:
        return "attention" if attention else "gemm"
    if row_reduction:
        return "reduction"
    acts = [_numel(t) for t in node.inputs if t is not None and t.role in (Role.ACTIVATION, Role.KV_CACHE)]
    outs = [_numel(t) for t in node.outputs]
    if acts and outs and max(outs) < max(acts):
        return "reduction"
    return "pointwise"


def gemm_mnk(node: OpNode, cost: Cost) -> tuple[int, int, int] | None:
    """(M, N, K) of a GEMM-like op from its output shape and matrix FLOPs (conv: implicit GEMM over NCHW)."""
    if not node.outputs:
        return None
    out = node.outputs[0]
    try:
        numel = out.numel
    except UnboundDimError:
        return None
    if not out.shape or numel == 0:
        return None
    n = int(out.shape[1]) if is_conv(node) and len(out.shape) > 2 else int(out.shape[-1])
    w = node.inputs[0] if node.op == "aten.matmul" and node.inputs else None
    if w is not None and w.role is Role.WEIGHT and w.rank == 2 and len(out.shape) > 2:
        # ``W @ x`` with a 2-D weight on the left of a batch (Mamba's dt_proj): one GEMM [rows, K] x [K, batch*N]
        # sharing the weight, as the linear it is runs, not batch x rows rows of an N-wide GEMM
        n = max(numel // int(w.shape[0]), 1)
    m = max(numel // max(n, 1), 1)
    tp = node.attrs.get("tp_shard")
    if tp and not tp.get("replicated_outputs") and any(
            t is not None and t.role is Role.WEIGHT and t.rank == 2 and i not in tp.get("replicated_inputs", ())
            for i, t in enumerate(node.inputs)):
        # a column-parallel linear under tensor parallelism (graphroof.llm.tp): shapes stay unsharded, the device
        # computes ceil(N / world) of the output features over the full K
        n = -(-n // int(tp["world_size"]))
    k = max(round(cost.matrix_flops / (2 * m * max(n, 1))), 1)
    return (m, n, k)


def kernel_kind(node: OpNode, cost: Cost) -> str:
    """``gemm`` / ``attention`` / ``vector`` / ``comm`` / ``opaque`` / ``view`` of an op or a kernel node."""
    kind = node.attrs.get("kernel_kind")
    if kind:
        return str(kind)
    cls = op_class(node, cost)
    return "vector" if cls in ("pointwise", "reduction") else cls


#: node attr of a fused attention kernel: the attention byte model it was counted under (``CountSettings.attention``,
#: ``flash`` | ``naive``): ``flash`` kernels never hold a score matrix in their counted bytes, whatever their shape
ATTENTION_BYTES = "attention_bytes"


def counted_flash(node: object) -> bool:
    """Whether attention kernel *node* was counted under the ``flash`` byte model (:data:`ATTENTION_BYTES`): its
    writes are O alone, even where O outweighs a score matrix (few keys per row: ``dv >= 2 L``), so the byte tests
    that find a materialised score matrix must not fire."""
    a = getattr(node, "attrs", None) or {}
    return a.get(ATTENTION_BYTES) == "flash"


def attention_is_causal(node: object) -> bool:
    """Whether an attention node (or a fused attention kernel's node) applies a causal mask: torch ``is_causal``,
    a causal mask input (``mask_causal``), ONNX ``unidirectional``, ONNX Runtime's GroupQueryAttention."""
    a = getattr(node, "attrs", None) or {}
    return bool(a.get("is_causal") or a.get("mask_causal") or a.get("unidirectional")
                or str(getattr(node, "op", "")).endswith("GroupQueryAttention"))
