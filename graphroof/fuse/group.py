"""The fusion pass: group a counted op graph into the kernels a runtime runs.

A kernel's FLOPs are its ops' FLOPs.  Its bytes are only the tensors that cross its boundary: an input read
from outside the kernel is read once (however many of its ops read it), an output is written only when
something outside the kernel (or nobody: a model output) consumes it.  Views cost nothing and are looked
through, so ``linear -> view -> transpose -> mul`` has the GEMM as the multiply's producer.

Byte bookkeeping works on the counted op costs, so every rule's byte model (a gather reading only the rows
it fetches, a flash-attention kernel, a KV-cache update) is kept: an internal edge subtracts the tensor's
bytes from the consumer's reads and, when every consumer is inside, from the producer's writes, each
clamped at zero.

Under a runtime whose MoE experts run as the Triton fused-MoE kernel (``moe_grouped_gemm = "triton"``: vLLM,
SGLang), the gather that puts the tokens in expert order (an ``aten.index`` read only by a grouped GEMM, as
transformers writes it) is part of that GEMM's kernel: the kernel loads the rows of its A tile through the token
index (vLLM fused_moe.py ``fused_moe_kernel``: ``a_ptrs`` from ``offs_token // top_k``), so the gathered copy is
never written and the kernel's counted bytes read the hidden states once, not ``top_k`` copies of them
(:meth:`_Grouper._moe_gather`); its time still streams the ``T top_k`` rows it gathers (the GEMM model's A: an upper
bound, the L2 serving the repeats it can).

Kernels never span two blocks at the graph's layer depth (a residual add of layer i stays out of layer
i+1's norm), so per-layer rows stay whole and identical blocks stay identical.  Merges keep the kernel graph
acyclic: an op joins a kernel only if none of its other producers can be
reached from the kernel (a bounded search forward in topological order).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..counters.cost import Cost
from ..counters.rules.matmul import GROUPED_OPS
from ..graph import COST, OP, REPEAT, OpGraph, OpNode, Role
from ..scopes import auto_depth, scope_at
from .classify import (
    ATTENTION_BYTES,
    VECTOR_CLASSES,
    attention_is_causal,
    compute_dtype,
    gemm_mnk,
    is_batch_norm,
    is_conv,
)
from .dataflow import Dataflow, boundary, kernel_cost
from .kernel import Kernel
from .passes import extra_kernels
from .runtimes import Runtime, get_runtime

__all__ = ["Kernel", "KernelGraph", "fuse"]

#: a repeated block's scope ends in its index (``layer1.0``, ``model.layers.3``: :func:`graphroof.scopes.block_level`)
_REPEATED = re.compile(r"\.\d+$")


@dataclass
class KernelGraph:
    """The kernels of one graph under one runtime preset, in topological order."""

    runtime: Runtime
    kernels: list[Kernel]
    op_kernel: dict[str, int]          # op name -> index into kernels (views: absent)
    n_views: int = 0

    def __len__(self) -> int:
        return len(self.kernels)

    def total(self) -> Cost:
        return sum((k.cost for k in self.kernels), Cost())

    def as_opgraph(self, graph: OpGraph) -> OpGraph:
        """The kernels as an :class:`OpGraph` (one node per kernel, op key ``kernel.<kind>``, the kernel's
        cost already set), so the roofline, the layer rollup and the reports run on kernels unchanged.
        Node attrs: ``kernel_kind``, ``gemm_mnk``, ``ops`` (op names), ``n_ops``, ``folded``,
        ``compute_dtype``."""
        kg = OpGraph(graph.name, {**graph.meta, "runtime": self.runtime.name, "op_graph_size": len(graph)})
        kg.add_ops(self._kernel_nodes(graph))
        return kg

    def _kernel_nodes(self, graph: OpGraph):
        op_of = {n: d[OP] for n, d in graph.nx.nodes(data=True)}
        for k in self.kernels:
            real = [] if k.synthetic else [op_of[n].op for n in k.ops]
            keys = list(k.op_keys) or real  # what it runs (priced by), and the ops it counts (reports)
            # every op of a kernel is repeated alike (the grouper keeps repeats apart): the kernel runs r times
            r = op_of[k.ops[0]].attrs.get(REPEAT, 1)
            times = r if isinstance(r, int) and not isinstance(r, bool) and r >= 0 else 1
            attrs: dict[str, Any] = {"kernel_kind": k.kind, "gemm_mnk": k.gemm_mnk,
                                     "ops": () if k.synthetic else tuple(k.ops), "n_ops": k.n_ops * times,
                                     "folded": tuple(k.folded), "compute_dtype": k.dtype,
                                     "op_keys": tuple(sorted(set(keys)))}
            if r != 1:
                attrs[REPEAT] = r
            counts: dict[str, int] = {}
            for key in real or keys:
                counts[key] = counts.get(key, 0) + times
            attrs["op_key_counts"] = counts
            if k.kind == "comm":
                first = op_of[k.ops[0]]
                attrs.update(world_size=first.attrs.get("world_size"), collective=first.op)
                if first.attrs.get("gpus_per_node"):  # placed on a system's nodes (llm/parallel.py)
                    attrs["gpus_per_node"] = first.attrs["gpus_per_node"]
            if k.quantize_input:  # its fp8 input quantize runs as a kernel of its own (timing.gemm_plan)
                attrs["quantize_input"] = True
            if k.strided_input:  # an input read through a strided view (fuse.layout; timing.aten)
                attrs["strided_input"] = True
            if k.kind == "gemm" and op_of[k.ops[0]].attrs.get("gemm_library"):  # the GEMM's kernel family
                attrs["gemm_library"] = op_of[k.ops[0]].attrs["gemm_library"]  # (timing.gemm_plan)
            if k.kind == "gemm" and op_of[k.ops[0]].attrs.get("moe_balanced"):  # rows split evenly (timing.moe)
                attrs["moe_balanced"] = True
            if k.kind == "gemm" and op_of[k.ops[0]].attrs.get("bias_add"):  # its bias added apart (timing.host)
                attrs["bias_add"] = op_of[k.ops[0]].attrs["bias_add"]
            if k.kind == "attention" and any(attention_is_causal(op_of[n]) for n in k.ops):
                attrs["is_causal"] = True  # a causal mask (timing.attention: diagonal tiles, causal tail)
            model = getattr(graph.meta.get("count_settings"), "attention", None)
            if k.kind == "attention" and model:  # the byte model it was counted under (classify.counted_flash)
                attrs[ATTENTION_BYTES] = model
            node = OpNode(k.name, f"kernel.{k.kind}", tuple(s for _, s in k.inputs), tuple(s for _, s in k.outputs),
                          attrs, k.scope)
            yield node, [t for t, _ in k.inputs], [t for t, _ in k.outputs], {COST: k.cost}


class _Grouper:
    def __init__(self, df: Dataflow, rt: Runtime):
        self.df, self.rt = df, rt
        depth = auto_depth(df.graph)
        #: kernels never span two blocks (``model.layers.3`` vs ``model.layers.4``): per-layer rows stay whole
        at: dict[str, str] = {}
        self.block = {}
        for n in df.order:
            scope = df.nodes[n].scope
            b = at.get(scope)
            if b is None:
                b = at[scope] = scope_at(scope, depth)
            # an op run several times fuses only with ops repeated alike (the ops of one ONNX loop body); an
            # op-table row with a count is one op run `count` times in a row: a kernel of its own
            r = df.nodes[n].attrs.get(REPEAT, 1)
            if r != 1:
                b = f"{b}\x00repeat={r}" + (f"\x00{n}" if df.nodes[n].op == "table.op" else "")
            self.block[n] = b
        self.kblock: list[str] = []
        self.members: list[set[str]] = []
        self.last: list[int] = []          # topological index of each kernel's latest op
        self.kinds: list[str] = []
        self.reduces: list[bool] = []      # a kernel holding a reduction cannot take GEMM epilogues
        self.kernel_of: dict[str, int] = {}
        self.folded: set[str] = set()
        self.by_input: dict[tuple, int] = {}  # horizontal GEMM key -> kernel

    def _new(self, n: str, kind: str) -> None:
        self.kernel_of[n] = len(self.members)
        self.members.append({n})
        self.last.append(self.df.topo[n])
        self.kinds.append(kind)
        self.kblock.append(self.block[n])
        self.reduces.append(self.df.cls[n] == "reduction")

    def _join(self, n: str, k: int) -> None:
        self.kernel_of[n] = k
        self.members[k].add(n)
        self.last[k] = max(self.last[k], self.df.topo[n])
        if self.df.cls[n] == "reduction" and n not in self.folded:  # a folded batch-norm is no reduction at run time
            self.reduces[k] = True

    def _can_join(self, n: str, k: int) -> bool:
        if self.kblock[k] != self.block[n]:
            return False
        group = self.members[k]
        return not self.df.reachable_any(group, {p for p in self.df.preds[n] if p not in group})

    def _can_merge(self, n: str | None, ks: list[int], stem: bool = False) -> bool:
        """Whether kernels *ks* (and op *n*) can become one kernel with the kernel graph still acyclic: no
        producer outside the union may be reachable from it.  *stem*: kernels of different blocks may merge when
        none of them is a repeated block (a CNN's stem ``conv1`` / ``bn1`` / ``relu`` modules, each a block of
        its own at the graph's layer depth: no per-layer row is split by fusing them)."""
        blocks = {self.kblock[k] for k in ks} | ({self.block[n]} if n else set())
        if len(blocks) > 1 and not (stem and not any("\x00" in b or _REPEATED.search(b) for b in blocks)):
            return False
        union = set().union(*(self.members[k] for k in ks)) | ({n} if n else set())
        outside = {p for m in union for p in self.df.preds[m] if p not in union}
        return not self.df.reachable_any(union, outside)

    def _merge_into(self, n: str | None, ks: list[int]) -> None:
        keep = ks[0]
        for k in ks[1:]:
            for m in self.members[k]:
                self.kernel_of[m] = keep
            self.members[keep] |= self.members[k]
            self.last[keep] = max(self.last[keep], self.last[k])
            self.reduces[keep] = self.reduces[keep] or self.reduces[k]
            self.members[k] = set()
            self.kinds[k] = "merged"
        if n:
            self._join(n, keep)

    def _epilogues(self) -> None:
        """A vector kernel made only of pointwise ops that reads a GEMM's output joins that GEMM's kernel
        (the latest such GEMM); kernels holding a reduction (a norm, a softmax) stay on their own."""
        df = self.df
        for k in range(len(self.members)):
            if self.kinds[k] != "vector" or self.reduces[k] or not self.members[k]:
                continue
            group = self.members[k]
            gemms = {self.kernel_of[p] for m in group for p in df.preds[m] if p not in group
                     and self.kinds[self.kernel_of[p]] == "gemm" and not self.reduces[self.kernel_of[p]]}
            for g in sorted(gemms, key=lambda j: -self.last[j]):
                if self._can_merge(None, [g, k], stem=True):
                    self._merge_into(None, [g, k])
                    break

    def _pred_kernels(self, n: str) -> list[int]:
        ks = {self.kernel_of[p] for p in self.df.preds[n] if p in self.kernel_of}
        return sorted(ks, key=lambda k: -self.last[k])

    def _moe_gather(self, n: str) -> bool:
        """Whether op *n* is the token gather a Triton fused-MoE kernel does itself (module doc): an
        ``aten.index`` whose outputs are read only, as the activation (input 0), by grouped GEMMs over a 3-D expert
        weight, under a runtime with ``moe_grouped_gemm = "triton"``."""
        df = self.df
        if self.rt.moe_grouped_gemm != "triton" or df.nodes[n].op != "aten.index":
            return False
        readers = [(c, t) for t in df.out_names[n] if t for c in df.consumers.get((n, t), ())]
        if not readers:
            return False
        for c, t in readers:
            node = df.nodes[c]
            if node.op not in GROUPED_OPS or len(node.inputs) < 2 or node.inputs[1] is None or node.inputs[1].rank != 3:
                return False
            if df.src.get((c, 0)) != (n, t) or any(df.src.get((c, i)) == (n, t) for i in range(1, len(node.inputs))):
                return False
        return True

    def _try_vector(self, n: str) -> bool:
        df, rt = self.df, self.rt
        cls = df.cls[n]
        if self._moe_gather(n):
            return False  # its own kernel for now: the grouped GEMM reading it takes it in (run)
        if rt.fold_batch_norm and is_batch_norm(df.nodes[n]):
            src = df.src.get((n, 0), (None, None))
            p = src[0]
            if p is not None and df.cls[p] == "gemm" and is_conv(df.nodes[p]) \
                    and df.consumers.get((p, src[1] or ""), set()) == {n}:
                self.folded.add(n)
                self._join(n, self.kernel_of[p])
                return True
        preds = self._pred_kernels(n)
        if rt.fuse_vector_chains:
            vec = [k for k in preds if self.kinds[k] == "vector"]
            if len(vec) > 1 and self._can_merge(n, vec):  # converging chains (rotary: x*cos + rot(x)*sin)
                self._merge_into(n, vec)
                return True
            for k in preds:
                if self.kinds[k] == "vector" and self._can_join(n, k):
                    self._join(n, k)
                    return True
        if rt.attention_writes_layout and cls == "pointwise" and not df.costs[n].flops:
            att = [k for k in preds if self.kinds[k] == "attention"]
            if len(att) == 1 and len(df.preds[n]) == 1:
                self._join(n, att[0])
                return True
        return False

    def _feeds_attention(self, n: str, depth: int = 6) -> bool:
        """Whether GEMM *n*'s output reaches an attention op through at most *depth* non-GEMM ops (Q, K, V
        through rotary and casts; a gated MLP's gate and up reach another GEMM, never an attention op)."""
        df = self.df
        seen, front = {n}, [n]
        for _ in range(depth):
            nxt = []
            for m in front:
                for t in df.out_names[m]:
                    for c in df.consumers.get((m, t), ()):
                        if c in seen:
                            continue
                        if df.cls[c] == "attention":
                            return True
                        seen.add(c)
                        if df.cls[c] not in ("gemm", "comm", "opaque"):
                            nxt.append(c)
            front = nxt
        return False

    def _try_horizontal(self, n: str) -> bool:
        df = self.df
        node = df.nodes[n]
        if not self.rt.fuse_gate_up and not self._feeds_attention(n):
            return False
        acts = [(pos, t) for pos, t in enumerate(node.inputs) if t is not None and t.role == Role.ACTIVATION]
        if len(acts) != 1 or (n, acts[0][0]) not in df.src:
            return False
        mnk = gemm_mnk(node, df.costs[n])
        if mnk is None:
            return False
        key = (df.src[(n, acts[0][0])], mnk[0], mnk[2], acts[0][1].dtype, is_conv(node))
        k = self.by_input.get(key)
        if k is not None and self._can_join(n, k):
            self._join(n, k)
            return True
        self.by_input[key] = len(self.members)
        return False

    def run(self) -> None:
        df = self.df
        for n in df.order:
            cls = df.cls[n]
            if cls == "view":
                continue
            if cls in VECTOR_CLASSES and self._try_vector(n):
                continue
            if cls == "gemm" and self.rt.fuse_horizontal_gemms and self._try_horizontal(n):
                continue
            self._new(n, "vector" if cls in VECTOR_CLASSES else cls)
            if cls == "gemm" and self.rt.moe_grouped_gemm == "triton":
                src = df.src.get((n, 0), (None, None))[0]
                k = self.kernel_of.get(src) if src is not None else None
                if src is not None and k is not None and self.members[k] == {src} and self._moe_gather(src) \
                        and self._can_merge(None, [self.kernel_of[n], k]):
                    self._merge_into(None, [self.kernel_of[n], k])  # the gather in the GEMM's A loads
        if self.rt.fuse_epilogues:
            self._epilogues()


def _after_attention(df: Dataflow, grouper: _Grouper, gemm: str) -> bool:
    """Whether GEMM op *gemm* reads its activation input straight from an attention kernel (views looked
    through): nothing the engine could fuse a quantize of that input into (an attention plugin's output)."""
    acts = [pos for pos, t in enumerate(df.nodes[gemm].inputs) if t is not None and t.role == Role.ACTIVATION]
    src = df.src.get((gemm, acts[0])) if len(acts) == 1 else None
    p = src[0] if src else None
    return p is not None and p in grouper.kernel_of and grouper.kinds[grouper.kernel_of[p]] == "attention"


def _anchor(df: Dataflow, ops: list[str], kind: str) -> str:
    if kind in ("gemm", "attention", "comm", "opaque"):
        return next((n for n in ops if df.cls[n] == kind), ops[0])
    return ops[-1]


def fuse(graph: OpGraph, runtime: str | Runtime | None = "eager") -> KernelGraph:
    """Group the counted *graph* (``counters.count`` first) into kernels under *runtime* (a preset name or a
    :class:`Runtime`).  The op graph is not modified."""
    rt = get_runtime(runtime)
    df = Dataflow(graph)
    grouper = _Grouper(df, rt)
    grouper.run()
    kernels: list[Kernel] = []
    op_kernel: dict[str, int] = {}
    live = [k for k in range(len(grouper.members)) if grouper.members[k]]
    order = sorted(live, key=lambda k: min(df.topo[n] for n in grouper.members[k]))
    for k in order:
        ops = sorted(grouper.members[k], key=df.topo.__getitem__)
        kind = grouper.kinds[k]
        anchor = _anchor(df, ops, kind)
        mnk = None
        quant = False
        if kind == "gemm":
            gemms = [n for n in ops if df.cls[n] == "gemm"]
            shapes = [sh for n in gemms if (sh := gemm_mnk(df.nodes[n], df.costs[n])) is not None]
            if shapes and len(shapes) == len(gemms):
                mnk = (shapes[0][0], sum(sh[1] for sh in shapes), shapes[0][2])
            quant = bool(rt.fp8_quantize_after_attention and gemms and _after_attention(df, grouper, gemms[0]))
        for n in ops:
            op_kernel[n] = len(kernels)
        ins, outs = boundary(df, ops)
        strided = any((n, pos) in df.strided_in for n in ops for pos in range(len(df.in_names[n])))
        kernels.append(Kernel(name=anchor if len(ops) == 1 else f"{anchor}+{len(ops) - 1}", kind=kind, ops=ops,
                              cost=kernel_cost(df, ops, grouper.folded), scope=df.nodes[anchor].scope,
                              dtype=compute_dtype(df.nodes[anchor]), gemm_mnk=mnk,
                              folded=[n for n in ops if n in grouper.folded], inputs=ins, outputs=outs,
                              quantize_input=quant, strided_input=strided))
    if rt.layout_copies or rt.reduction_passes or rt.split_unfused_attention:  # kernels around them (fuse.passes)
        kernels = extra_kernels(df, kernels, rt)
        op_kernel = {n: i for i, k in enumerate(kernels) if not k.synthetic for n in k.ops}
    n_views = sum(1 for n in df.order if df.cls[n] == "view")
    return KernelGraph(rt, kernels, op_kernel, n_views)
