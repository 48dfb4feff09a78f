"""Kernels a compiler adds around the fused ones: layout copies before and after an unfused attention, and one
kernel per row statistic of a norm or softmax (:func:`extra_kernels`), for runtimes whose preset says so.

* ``layout_copies`` (XLA on GPU): an attention that is not one fused kernel runs ``Q K^T`` and ``P V`` as batched
  cuBLAS GEMMs, which take one uniform stride per operand over the batch (``cublasGemmStridedBatchedEx``); the
  (batch, head) batch of a ``[batch, tokens, heads, dim]`` projection has none, so each of Q, K, V is copied into
  ``[batch, heads, tokens, dim]`` by a kernel of its own, and the context back by one more (O)::

      copy bytes = 2 x tensor bytes           (read once, written once; the projection's bias add rides along)

* ``reduction_passes`` (XLA on GPU): a reduction is only ever the root of a fused kernel, so a norm whose row
  statistics depend on each other runs one kernel per statistic before the kernel that normalises:
  LayerNorm / GroupNorm / InstanceNorm 2 (the mean, then the variance about it), RMSNorm 1 (the mean square),
  softmax 2 (the row max, then the sum of exponentials).  Each such kernel re-reads the norm's activation inputs
  (the elementwise ops in front of it, a residual add, are recomputed in every kernel that reads them) and
  writes one fp32 value per row::

      pass bytes = activation bytes the norm kernel reads + 4 x rows

  Each pass is two kernels: the reduction accumulates row tiles atomically, so its output is first initialised by
  a memset (``4 x rows`` bytes written); the normalising kernel left after them is one elementwise pass.

  An attention that writes its score matrix (the ``naive`` byte model: >= 2 elements per (query, key) pair)
  holds its softmax: its 2 statistics passes each read the scores, ``B H L S`` elements of the query's dtype
  (and the mask, when it has one), and write ``4 B H L`` bytes.

* ``split_unfused_attention`` (TensorRT's unfused MHA runner): an attention that writes its score matrix runs as
  three kernels, the batched GEMM ``S = Q K^T``, the softmax ``P = softmax(S / sqrt(d))`` and the batched GEMM
  ``O = P V``, not one.  The attention kernel's naive byte model holds the three kernels' traffic (``S`` written,
  read, ``P`` written, read, ``O`` written) and its counted vector FLOPs are the softmax's; two of those move to
  kernels of their own, nothing is counted twice::

      softmax kernel  = the attention's vector FLOPs (at the vector rate) + stream_latency_s
      P V kernel      = O's bytes, written (at the elementwise rate) + stream_latency_s
      attention       = the rest (its writes S + P: still the naive model's >= 2 score matrices)

The added kernels are :class:`~graphroof.fuse.group.Kernel` rows of kind ``vector`` whose ``op_keys`` name what
they run (:data:`STAT_KEY` etc.: the stream kind the timing prices them at) and which count no op of the graph
(``synthetic``): the host dispatches and the device runs each of them like any kernel.  The sources of each claim
for XLA are the ``[sources]`` of ``presets/tf-xla.toml``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..counters.cost import Cost
from ..errors import UnboundDimError
from ..graph import TensorSpec
from .classify import is_batch_norm
from .kernel import Kernel

if TYPE_CHECKING:
    from .dataflow import Dataflow
    from .runtimes import Runtime

__all__ = ["extra_kernels", "split_attention", "stat_passes", "scores_bytes", "STAT_PASSES"]

#: dependent row statistics per normalising op (the last part of its op key, lower case): kernels before the
#: one that normalises (module doc)
STAT_PASSES = (("rms_norm", 1), ("rmsnorm", 1), ("simplifiedlayernormalization", 1), ("layer_norm", 2),
               ("layernormalization", 2), ("group_norm", 2), ("groupnormalization", 2), ("instance_norm", 2),
               ("instancenormalization", 2), ("log_softmax", 2), ("softmax", 2))
_STAT_BYTES = 4  # one fp32 statistic per row
#: op keys of the added kernels (graphroof.timing.kernel.stream_kind prices them by these): a row statistic at the
#: profile's ``norm`` rate (a row-reduction kernel), the copies, initializers and the normalising pass at the
#: ``elementwise`` rate (one pass over their bytes)
STAT_KEY, COPY_KEY, INIT_KEY, SCALE_KEY = "xla.row_norm_statistic", "xla.copy", "xla.memset", "xla.scale_shift"
#: op keys of the kernels an unfused attention is split into (``split_unfused_attention``): streaming kernels
SOFTMAX_KEY, BMM_KEY = "unfused_mha.softmax", "unfused_mha.batched_gemm"


def stat_passes(op: str) -> int:
    """Row statistics the op needs before it can normalise (0: not a normalising op)."""
    key = op.lower().rsplit(".", 1)[-1]
    if "batch_norm" in key or "batchnormalization" in key:
        return 0  # inference batch norm: running statistics, a per-channel scale and shift
    return next((n for m, n in STAT_PASSES if m in key), 0)


def _nbytes(t: TensorSpec | None) -> float:
    if t is None:
        return 0.0
    try:
        return float(t.nbytes)
    except UnboundDimError:
        return 0.0


def _rows(t: TensorSpec | None) -> float:
    if t is None or not t.shape:
        return 0.0
    try:
        return float(t.numel) / float(t.shape[-1])
    except (UnboundDimError, ZeroDivisionError):
        return 0.0


def scores_bytes(q: TensorSpec, k: TensorSpec) -> float:
    """Bytes of the score matrix of an attention with query *q* ``[..., L, d]`` and key *k* ``[..., S, d]``:
    ``B H L S`` elements of the query's dtype."""
    try:
        return float(q.nbytes) / float(q.shape[-1]) * float(k.shape[-2])
    except (UnboundDimError, ZeroDivisionError, IndexError):
        return 0.0


def _writes_scores(df: Dataflow, cost: Cost, q: TensorSpec, k: TensorSpec) -> bool:
    """The attention's counted writes hold its score matrix (the naive byte model), not only its output: never
    under the ``flash`` byte model, whose O alone can outweigh a short score matrix (``dv >= 2 L``)."""
    if getattr(df.graph.meta.get("count_settings"), "attention", None) == "flash":
        return False
    s = scores_bytes(q, k)
    return s > 0 and cost.act_write_bytes >= 2.0 * s


def _kernel(k: Kernel, suffix: str, key: str, reads: list[tuple[str, TensorSpec]], read_bytes: float,
            out: TensorSpec, write_bytes: float) -> Kernel:
    return replace(k, name=f"{k.name}.{suffix}", kind="vector", ops=list(k.ops[:1]),
                   cost=Cost(act_read_bytes=read_bytes, act_write_bytes=write_bytes), gemm_mnk=None, folded=[],
                   inputs=list(reads), outputs=[(f"{k.name}.{suffix}:out", out)], quantize_input=False,
                   op_keys=(key,), synthetic=True)


def _attention_extras(df: Dataflow, k: Kernel, rt: Runtime) -> tuple[list[Kernel], list[Kernel]]:
    """(kernels before, kernels after) attention kernel *k* (module doc)."""
    node = df.nodes[k.ops[0]]
    names = df.in_names[k.ops[0]]
    ins = list(node.inputs)
    q, kk, v = (ins + [None, None, None])[:3]
    if q is None or kk is None or v is None:
        return [], []
    before: list[Kernel] = []
    after: list[Kernel] = []
    if rt.layout_copies:
        for i, (tag, t) in enumerate((("q", q), ("k", kk), ("v", v))):
            name = str(names[i]) if i < len(names) and names[i] else f"{k.name}:{tag}"
            before.append(_kernel(k, f"copy_{tag}", COPY_KEY, [(name, t)], _nbytes(t), t, _nbytes(t)))
        o = node.outputs[0] if node.outputs else None
        if o is not None and not rt.attention_writes_layout:
            o_name = k.outputs[0][0] if k.outputs else f"{k.name}:o"
            after.append(_kernel(k, "copy_o", COPY_KEY, [(o_name, o)], _nbytes(o), o, _nbytes(o)))
    if rt.reduction_passes and _writes_scores(df, k.cost, q, kk):
        mask = ins[3] if len(ins) > 3 else None
        s = scores_bytes(q, kk)
        stats = TensorSpec((*q.shape[:-1], 1), "fp32")
        rows = _rows(q)
        for what in ("max", "sum")[:stat_passes("softmax")]:
            before += _stat_pass(k, f"softmax_{what}", [(f"{k.name}:scores", q)], s + _nbytes(mask), stats, rows)
    return before, after


def split_attention(df: Dataflow, k: Kernel) -> list[Kernel]:
    """Attention kernel *k* as the unfused MHA runner's three kernels (module doc: ``split_unfused_attention``):
    ``[Q K^T (the rest of k), softmax, P V]``; ``[k]`` when *k* does not write its scores."""
    node = df.nodes[k.ops[0]]
    ins = list(node.inputs)
    q, kk = (ins + [None, None])[:2]
    out_t = node.outputs[0] if node.outputs else None
    if q is None or kk is None or out_t is None or not _writes_scores(df, k.cost, q, kk):
        return [k]
    o_bytes = min(_nbytes(out_t), k.cost.act_write_bytes - 2.0 * scores_bytes(q, kk))
    softmax = replace(_kernel(k, "softmax", SOFTMAX_KEY, [], 0.0, q, 0.0),
                      cost=Cost(vector_flops=k.cost.vector_flops))
    pv = _kernel(k, "bmm_pv", BMM_KEY, [], 0.0, out_t, o_bytes)
    rest = replace(k, cost=replace(k.cost, vector_flops=0.0, act_write_bytes=k.cost.act_write_bytes - o_bytes))
    return [rest, softmax, pv]


def _stat_pass(k: Kernel, suffix: str, reads: list[tuple[str, TensorSpec]], read_bytes: float,
               stats: TensorSpec, rows: float) -> list[Kernel]:
    """One statistics pass: the initializer of its output (a memset: the reduction accumulates into it
    atomically) and the row-reduction kernel."""
    init = _kernel(k, f"{suffix}_init", INIT_KEY, [], 0.0, stats, _STAT_BYTES * rows)
    return [init, _kernel(k, suffix, STAT_KEY, reads, read_bytes, stats, _STAT_BYTES * rows)]


def _norm_extras(df: Dataflow, k: Kernel) -> list[Kernel]:
    """The statistics kernels before vector kernel *k* for each normalising op it holds (module doc)."""
    out: list[Kernel] = []
    for n in k.ops:
        node = df.nodes[n]
        passes = stat_passes(node.op) if not is_batch_norm(node) else 0
        x = node.inputs[0] if node.inputs else None
        if not passes or x is None:
            continue
        rows = _rows(x)
        stats = TensorSpec((*x.shape[:-1], 1), "fp32")
        reads = [(name, spec) for name, spec in k.inputs if spec.role == x.role]
        for j in range(passes):
            out += _stat_pass(k, f"stat{j}", reads, k.cost.act_read_bytes, stats, rows)
    return out


def extra_kernels(df: Dataflow, kernels: list[Kernel], rt: Runtime) -> list[Kernel]:
    """*kernels* (topological order) with the kernels *rt* adds around them (module doc), each next to the
    kernel it serves; *kernels* unchanged when the runtime adds none."""
    if not (rt.layout_copies or rt.reduction_passes or rt.split_unfused_attention):
        return kernels
    out: list[Kernel] = []
    for k in kernels:
        before: list[Kernel] = []
        after: list[Kernel] = []
        if k.kind == "attention":
            before, after = _attention_extras(df, k, rt)
        elif k.kind == "vector" and rt.reduction_passes:
            before = _norm_extras(df, k)
            if before:  # its statistics come in: what is left is one elementwise pass
                k = replace(k, op_keys=(SCALE_KEY,))
        out.extend(before)
        out.extend(split_attention(df, k) if k.kind == "attention" and rt.split_unfused_attention else [k])
        out.extend(after)
    return out
