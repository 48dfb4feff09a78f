"""Which ATen views leave their output strided in memory: the layout fact PyTorch's elementwise kernels dispatch on.

A view shares its input's storage; some views keep a contiguous tensor contiguous (``view``, ``reshape`` as a view,
``unsqueeze``, ``squeeze``, a slice of the outermost dim that holds more than one element), others do not: a partial
slice / split / chunk / narrow / select of a dim with more than one element before it (``x[..., :64]``,
``gate_up.chunk(2, dim=-1)``), a transpose or permute that reorders dims of more than one element, an ``expand``
(stride 0), ``as_strided``, ``diagonal``, ``unfold``.  An op that reads such a tensor through TensorIterator cannot use
its vectorised kernel (``aten/src/ATen/native/cuda/CUDALoops.cuh``: ``iter.is_contiguous()``), and ``cat`` runs its
general ``CatArrayBatchedCopy`` instead of the contiguous one (graphroof.timing.aten prices both by their elements).

:func:`strided_view` sees plain data: the view's op key, its attrs (``dim``, ``dims``, ``dim0`` / ``dim1``) and the
shapes of its first input and its output.  A dim that is symbolic counts as more than one element.  The rule is
ATen's: ONNX views (``Reshape``, ``Squeeze``, ...) keep their input's layout.
"""

from __future__ import annotations

from ..graph import OpNode

__all__ = ["strided_view", "LAYOUT_KEEPING", "PARTIAL", "REORDERING", "ALWAYS_STRIDED"]

#: views whose output keeps the input's layout (a contiguous input stays contiguous)
LAYOUT_KEEPING = frozenset(("view", "_unsafe_view", "_reshape_alias", "unsqueeze", "squeeze", "alias", "detach",
                            "view_as", "unflatten", "lift_fresh", "squeeze_", "unsqueeze_", "detach_", "reshape",
                            "flatten", "ravel_view"))
#: views that take part of one dim (``dim`` attr; split / chunk default 0, the others as ATen's defaults)
PARTIAL = frozenset(("slice", "narrow", "split", "split_with_sizes", "unsafe_split", "unsafe_split_with_sizes",
                     "tensor_split", "chunk", "unsafe_chunk", "select", "unbind", "hsplit", "vsplit", "dsplit"))
#: views that reorder dims
REORDERING = frozenset(("permute", "transpose", "t", "numpy_T", "mT", "adjoint", "movedim", "moveaxis", "swapaxes",
                        "swapdims", "transpose_", "t_"))
#: views whose output is strided whatever the shapes (an expand is checked by shape: size-1 dims grown)
ALWAYS_STRIDED = frozenset(("as_strided", "diagonal", "unfold", "as_strided_"))


def _name(op: str) -> str:
    parts = op.lower().split(".")
    return parts[1] if parts[0] == "aten" and len(parts) > 1 else parts[-1]


def _big(d) -> bool:
    return not isinstance(d, int) or d > 1


def _prod_big(dims) -> bool:
    """Whether the dims hold more than one element together."""
    n = 1
    for d in dims:
        if not isinstance(d, int):
            return True
        n *= d
    return n > 1


def strided_view(node: OpNode) -> bool:
    """Whether ATen view *node* leaves its output strided when its input is contiguous (module doc)."""
    if not node.op.lower().startswith("aten."):
        return False
    name = _name(node.op)
    x = node.inputs[0] if node.inputs else None
    out = node.outputs[0] if node.outputs else None
    if x is None or out is None or name in LAYOUT_KEEPING:
        return False
    shape, rank = tuple(x.shape), len(x.shape)
    if name in ALWAYS_STRIDED:
        return True
    if name in ("expand", "expand_as", "broadcast_to"):
        o = tuple(out.shape)
        pad = (1,) * (len(o) - rank) + shape
        return any(i == 1 and _big(j) for i, j in zip(pad, o))
    if name in PARTIAL:
        if not rank:
            return False
        d = int(node.attrs.get("dim", 0)) % rank
        if name == "select" or name == "unbind":
            return _prod_big(shape[:d]) and _big(shape[d])
        o = tuple(out.shape)
        partial = len(o) == rank and o[d] != shape[d]
        return partial and _prod_big(shape[:d])
    if name in REORDERING:
        if rank < 2:
            return False
        order = list(range(rank))
        if name in ("permute",) and node.attrs.get("dims") is not None:
            order = [int(p) % rank for p in node.attrs["dims"]]
        elif name in ("transpose", "swapaxes", "swapdims", "transpose_"):
            d0, d1 = int(node.attrs.get("dim0", 0)) % rank, int(node.attrs.get("dim1", 1)) % rank
            order[d0], order[d1] = order[d1], order[d0]
        elif name in ("t", "t_", "mT", "adjoint", "numpy_T"):
            order[-2], order[-1] = order[-1], order[-2]
        else:
            return False  # movedim / moveaxis: attrs not read
        big = [p for p in order if _big(shape[p])]
        return big != sorted(big)  # two dims of more than one element change order
    return False
