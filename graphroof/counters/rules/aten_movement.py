"""Data movement and indexing (ATen): views (free), maybe-copies, concatenation, padding, gathers, scatters,
embedding lookups.

* Views alias their input and move nothing: registered free.
* ``reshape`` / ``flatten`` / ``contiguous`` / ``to`` / ``dropout`` (eval) return their input or a view when
  they can and copy otherwise.  The frontend sets ``attrs["alias"] = True`` when the output shares the input's
  storage; then they cost nothing, else a read and a write.
* Gathers (``embedding``, ``index``, ``gather``, ``index_select``) read only the selected elements of the source
  (``numel(out)`` elements in the source's role: an embedding reads the rows it looks up, not the whole table)
  plus the indices, and write the output.
* Out-of-place scatters copy ``self`` and write the updates; in-place ones (``index_put_``, ``scatter_``,
  ``index_copy_`` ...) read the updates and indices and write only the updated elements, in ``self``'s role
  (a KV-cache write when ``self`` is a cache).
"""

from __future__ import annotations

from ...graph import OpNode, TensorSpec
from ..common import io_cost, read_bytes, write_bytes
from ..cost import Cost
from ..registry import REGISTRY, register_rule

REGISTRY.free(*(f"aten.{n}" for n in (
    "view", "_unsafe_view", "_reshape_alias", "expand", "expand_as", "broadcast_to", "permute", "transpose", "t",
    "numpy_T", "mT", "adjoint", "unsqueeze", "squeeze", "slice", "select", "narrow", "split", "split_with_sizes",
    "unsafe_split", "unsafe_split_with_sizes", "tensor_split", "hsplit", "vsplit", "dsplit", "chunk", "unsafe_chunk",
    "unbind", "as_strided", "alias", "detach", "view_as", "unflatten", "diagonal", "movedim", "moveaxis",
    "swapaxes", "swapdims", "view_as_real", "view_as_complex", "real", "imag", "unfold", "lift_fresh", "conj",
    "_neg_view", "_conj", "indices", "values", "_indices", "_values", "ravel_view", "_nested_view_from_buffer",
    "squeeze_", "unsqueeze_", "transpose_", "t_", "detach_", "as_strided_",
)))


def _spec_like(src: TensorSpec, like: TensorSpec) -> TensorSpec:
    """A tensor of *like*'s shape in *src*'s dtype and role (the elements of *src* an op touches)."""
    return TensorSpec(like.shape, src.dtype, src.role)


@register_rule("aten.reshape", "aten.flatten", "aten.contiguous", "aten.to", "aten.type_as", "aten.ravel",
               "aten.reshape_as", "aten.type", "aten.double", "aten.float", "aten.half", "aten.bfloat16",
               "aten.int", "aten.long", "aten.bool", "aten.cpu", "aten.cuda")
def maybe_copy_cost(node: OpNode) -> Cost:
    """Free when the frontend saw the output alias its input (``attrs["alias"]``), else read + write."""
    if node.attrs.get("alias"):
        return Cost()
    return io_cost(node, inputs=node.inputs[:1])


@register_rule("aten.dropout", "aten.feature_dropout", "aten.alpha_dropout", "aten.feature_alpha_dropout",
               "aten.native_dropout", "aten.dropout_")
def dropout_cost(node: OpNode) -> Cost:
    """Eval mode (``train=False``) returns the input itself: nothing moves.  Training: draw a mask (1), compare,
    scale (2 FLOPs per element), write output and mask."""
    train = node.attrs.get("train", True)
    if not train or node.attrs.get("alias") or node.attrs.get("p", 0.5) == 0:
        return Cost()
    return io_cost(node, inputs=node.inputs[:1], vector_flops=3 * node.inputs[0].numel)


@register_rule("aten.cat", "aten.concat", "aten.concatenate", "aten.stack", "aten.hstack", "aten.vstack",
               "aten.dstack", "aten.column_stack", "aten.row_stack", "aten._cat")
def concat_cost(node: OpNode) -> Cost:
    """Read every piece, write the result."""
    return io_cost(node)


@register_rule("aten.constant_pad_nd", "aten.pad", "aten.reflection_pad1d", "aten.reflection_pad2d",
               "aten.reflection_pad3d", "aten.replication_pad1d", "aten.replication_pad2d",
               "aten.replication_pad3d", "aten.circular_pad1d", "aten.circular_pad2d", "aten.flip", "aten.roll",
               "aten.rot90", "aten.repeat", "aten.tile", "aten.repeat_interleave", "aten.pixel_shuffle",
               "aten.pixel_unshuffle", "aten.channel_shuffle", "aten.im2col", "aten.col2im", "aten.tril",
               "aten.triu", "aten.tril_", "aten.triu_", "aten.one_hot", "aten.masked_select", "aten.nonzero",
               "aten.nonzero_static", "aten.unique", "aten._unique2", "aten.unique_consecutive",
               "aten.diag", "aten.diag_embed", "aten.block_diag", "aten.cartesian_prod", "aten.meshgrid",
               "aten.bucketize", "aten.searchsorted", "aten.unfold_copy", "aten.as_strided_copy",
               "aten.slice_scatter", "aten.select_scatter", "aten.diagonal_scatter", "aten.as_strided_scatter")
def movement_cost(node: OpNode) -> Cost:
    """Pure data movement (or a select / compare per element, left uncounted): read inputs, write outputs."""
    return io_cost(node)


@register_rule("aten.embedding")
def embedding_cost(node: OpNode) -> Cost:
    """``embedding(weight [V, D], indices)``: reads ``numel(indices)`` rows of D (not the table) + the indices."""
    weight, idx = node.inputs[0], node.inputs[1]
    return io_cost(node, inputs=[_spec_like(weight, node.outputs[0]), idx])


@register_rule("aten.embedding_bag", "aten._embedding_bag", "aten._embedding_bag_forward_only")
def embedding_bag_cost(node: OpNode) -> Cost:
    """Reads one row per index, reduces them into bags (one add per row element), writes the bags."""
    weight, idx = node.inputs[0], node.inputs[1]
    d = weight.shape[-1]
    rows = TensorSpec((idx.numel, d), weight.dtype, weight.role)
    return io_cost(node, inputs=[rows, *node.inputs[1:]], outputs=node.outputs[:1], vector_flops=idx.numel * d)


@register_rule("aten.index", "aten._unsafe_index", "aten.gather", "aten.index_select", "aten.take",
               "aten.take_along_dim", "aten.masked_gather")
def gather_cost(node: OpNode) -> Cost:
    """Source (input 0) read only where selected: ``numel(out)`` elements; indices read in full."""
    src = node.inputs[0]
    return io_cost(node, inputs=[_spec_like(src, node.outputs[0]), *node.inputs[1:]])


_ACCUMULATING = ("scatter_add", "scatter_reduce", "index_add", "index_reduce")


def _updated(node: OpNode, name: str) -> TensorSpec:
    """The elements an in-place scatter writes, as a spec in ``self``'s dtype and role."""
    self_t = node.inputs[0]
    rest = [t for t in node.inputs[1:] if t is not None]
    if name == "index_fill":  # index_fill_(self, dim, index, value): whole slices along dim
        dim = int(node.attrs.get("dim", 0)) % max(self_t.rank, 1)
        per_slice = self_t.numel // self_t.shape[dim] if self_t.rank and self_t.shape[dim] else 0
        shape: tuple = (rest[0].numel * per_slice,)
    elif name.startswith("scatter") and len(rest) == 1:  # scatter_(self, dim, index, value): one per index
        shape = tuple(rest[0].shape)
    else:  # the updates (src / source / values) are the last tensor input
        shape = tuple(rest[-1].shape)
    return TensorSpec(shape, self_t.dtype, self_t.role)


@register_rule(*(f"aten.{n}{s}" for n in ("scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy",
                                          "index_reduce", "index_put", "_index_put_impl", "index_fill",
                                          "masked_scatter", "put") for s in ("", "_")))
def scatter_cost(node: OpNode) -> Cost:
    """``self`` is input 0, then indices and the updates (src / source / values, or a scalar value).

    Out-of-place: read self and the indices / updates, write the output (a copy of self).  In-place: read the
    indices / updates, write only the updated elements in ``self``'s role (a KV-cache write when ``self`` is a
    cache).  Accumulating variants (``scatter_add``, ``index_add``, ``index_put(accumulate=True)``) add one
    FLOP per update and, in place, also read the elements they add to.
    """
    base = node.op.split(".", 1)[1]
    inplace = base.endswith("_")
    name = base.strip("_").replace("index_put_impl", "index_put")
    written = _updated(node, name)
    accumulate = name in _ACCUMULATING or (name in ("index_put", "put") and bool(node.attrs.get("accumulate")))
    vector = written.numel if accumulate else 0
    if not inplace:
        return io_cost(node, vector_flops=vector)
    reads = [t for t in node.inputs[1:] if t is not None] + ([written] if accumulate else [])
    return Cost(vector_flops=vector, **read_bytes(reads), **write_bytes([written]))
