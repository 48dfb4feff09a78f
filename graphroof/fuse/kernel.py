"""One kernel of a fused graph (:class:`Kernel`): the ops it runs, its boundary cost and what it is.  Made by
:func:`graphroof.fuse.group.fuse`, and by :mod:`graphroof.fuse.passes` for the kernels a compiler adds around them."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..counters.cost import Cost
from ..graph import TensorSpec

__all__ = ["Kernel"]


@dataclass
class Kernel:
    """One kernel: the ops it runs (op names, topological order), its boundary cost and what it is.

    ``kind``: ``gemm`` | ``attention`` | ``vector`` | ``comm`` | ``opaque``.  ``gemm_mnk``: the GEMM's
    (M, N, K) for GEMM kernels (N summed over horizontally fused GEMMs), else ``None``.  ``folded``: ops
    folded away (batch-norm into a conv).  ``scope``: the layer the kernel is reported under.
    ``quantize_input``: a GEMM kernel whose activation input comes straight from an attention kernel under a
    runtime with ``fp8_quantize_after_attention``: an fp8 GEMM quantizes that input in a kernel of its own
    (priced by :func:`graphroof.timing.gemm_plan.quantize_input_s`).
    """

    name: str
    kind: str
    ops: list[str]
    cost: Cost = field(default_factory=Cost)
    scope: str = ""
    dtype: str = ""
    gemm_mnk: tuple[int, int, int] | None = None
    folded: list[str] = field(default_factory=list)
    inputs: list[tuple[str, TensorSpec]] = field(default_factory=list)    # (tensor name, spec) read from outside
    outputs: list[tuple[str, TensorSpec]] = field(default_factory=list)   # (tensor name, spec) used outside
    quantize_input: bool = False
    #: what the kernel runs, where no op of the graph says it (a kernel added by graphroof.fuse.passes)
    op_keys: tuple[str, ...] = ()
    #: added around the fused kernels (graphroof.fuse.passes): it runs no op of its own (``ops``: the op it serves)
    synthetic: bool = False
    #: an input reaches it through a view that leaves it strided in memory (graphroof.fuse.layout)
    strided_input: bool = False

    @property
    def n_ops(self) -> int:
        return 0 if self.synthetic else len(self.ops)
