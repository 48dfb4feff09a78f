"""Movement family: views (free), maybe-copies, copies, concatenation, padding, gathers, scatters, embedding
lookups, control flow (ATen and ONNX).

* Views alias their input and move nothing: registered free (ATen views; ONNX Shape, Reshape, Squeeze ...,
  Identity, Dropout in inference, Constant: folded into the model, its readers count its bytes).
* ATen ``reshape`` / ``flatten`` / ``contiguous`` / ``to`` / ``dropout`` (eval) return their input or a view
  when they can and copy otherwise: the frontend sets ``attrs["alias"] = True`` when the output shares the
  input's storage; then they cost nothing, else a read and a write.
* Copies (0 FLOPs): every input read and every output written once.
* Gathers (embedding lookups, ``index``, ``gather``, ``index_select``, ONNX Gather*, Slice) read the indices in
  full and, from the source, only the selected elements, never more than the whole source
  (:func:`~graphroof.counters.formulas.indexed_read_bytes`): 1,000 ids from a [100, 8] fp32 table read
  ``min(1,000 * 8 * 4, 100 * 8 * 4) = 3,200`` weight bytes in both frontends.
* Out-of-place scatters copy ``self`` and write the updates; in-place ones (``index_put_``, ``scatter_``,
  ``index_copy_`` ...) read the updates and indices and write only the updated elements, in ``self``'s role
  (a KV-cache write when ``self`` is a cache).
* ONNX If / Loop / Scan: the frontend flattens their bodies into the graph (scaled by the trip count), so the
  container adds nothing.
"""

from __future__ import annotations

from ...graph import OpNode, Role, TensorSpec
from ..common import io_cost, read_bytes, req, write_bytes
from ..cost import Cost
from ..family import Row, aten, onnx, register_family
from ..formulas import indexed_read_bytes

__all__ = ["ROWS", "gather", "partial_read"]


def partial_read(t: TensorSpec, nbytes: float) -> Cost:
    """A read of *nbytes* of *t*, in the byte bucket of *t*'s role."""
    if t.role in (Role.WEIGHT, Role.CONST):
        return Cost(weight_bytes=nbytes)
    if t.role is Role.KV_CACHE:
        return Cost(kv_read_bytes=nbytes)
    return Cost(act_read_bytes=nbytes)


def copy_all(node: OpNode) -> Cost:
    """Data movement: no FLOPs; every input read and every output written once."""
    return io_cost(node)


def maybe_copy(node: OpNode) -> Cost:
    """Free when the frontend saw the output alias its input (``attrs["alias"]``), else read + write."""
    if node.attrs.get("alias"):
        return Cost()
    return io_cost(node, inputs=node.inputs[:1])


def dropout(node: OpNode) -> Cost:
    """Eval mode (``train=False``) returns the input itself: nothing moves.  Training: draw a mask (1), compare,
    scale (2 FLOPs per element), write output and mask."""
    if not node.attrs.get("train", True) or node.attrs.get("alias") or node.attrs.get("p", 0.5) == 0:
        return Cost()
    return io_cost(node, inputs=node.inputs[:1], vector_flops=3 * req(node, 0).numel)


def gather(node: OpNode) -> Cost:
    """Source = input 0 (ATen ``embedding(weight, indices)``, ``index_select(self, index)``, ONNX
    ``Gather(data, indices)``, ``Slice(data, starts, ...)``): ``numel(output)`` of its elements, capped at the
    source; every other input in full; the output written."""
    src, out = req(node, 0), node.outputs[0]
    read = indexed_read_bytes(out.numel, src.itemsize_bits, src.nbytes)
    return io_cost(node, inputs=node.inputs[1:]) + partial_read(src, read)


def embedding_bag(node: OpNode) -> Cost:
    """Reads one row per index (capped at the table), reduces them into bags (one add per row element),
    writes the bags."""
    weight, idx = req(node, 0), req(node, 1)
    d = weight.dims[-1]
    read = indexed_read_bytes(idx.numel * d, weight.itemsize_bits, weight.nbytes)
    return (io_cost(node, inputs=node.inputs[1:], outputs=node.outputs[:1], vector_flops=idx.numel * d)
            + partial_read(weight, read))


_ACCUMULATING = ("scatter_add", "scatter_reduce", "index_add", "index_reduce")


def _updated(node: OpNode, name: str) -> TensorSpec:
    """The elements an in-place scatter writes, as a spec in ``self``'s dtype and role."""
    self_t = req(node, 0)
    rest = [t for t in node.inputs[1:] if t is not None]
    if name == "index_fill":  # index_fill_(self, dim, index, value): whole slices along dim
        dim = int(node.attrs.get("dim", 0)) % max(self_t.rank, 1)
        per_slice = self_t.numel // self_t.dims[dim] if self_t.rank and self_t.dims[dim] else 0
        shape: tuple = (rest[0].numel * per_slice,)
    elif name.startswith("scatter") and len(rest) == 1:  # scatter_(self, dim, index, value): one per index
        shape = tuple(rest[0].shape)
    else:  # the updates (src / source / values) are the last tensor input
        shape = tuple(rest[-1].shape)
    return TensorSpec(shape, self_t.dtype, self_t.role)


def scatter(node: OpNode) -> Cost:
    """ATen: ``self`` is input 0, then indices and the updates (src / source / values, or a scalar value).

    Out-of-place: read self and the indices / updates, write the output (a copy of self).  In-place: read the
    indices / updates, write only the updated elements in ``self``'s role.  Accumulating variants
    (``scatter_add``, ``index_add``, ``index_put(accumulate=True)``) add one FLOP per update and, in place, also
    read the elements they add to.
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


def nothing(node: OpNode) -> Cost:
    """0: the frontend flattens the body ops (scaled by the trip count) into the graph; they carry the cost."""
    return Cost()


_ATEN_VIEWS = (
    "view", "_unsafe_view", "_reshape_alias", "expand", "expand_as", "broadcast_to", "permute", "transpose", "t",
    "numpy_T", "mT", "adjoint", "unsqueeze", "squeeze", "slice", "select", "narrow", "split", "split_with_sizes",
    "unsafe_split", "unsafe_split_with_sizes", "tensor_split", "hsplit", "vsplit", "dsplit", "chunk", "unsafe_chunk",
    "unbind", "as_strided", "alias", "detach", "view_as", "unflatten", "diagonal", "movedim", "moveaxis",
    "swapaxes", "swapdims", "view_as_real", "view_as_complex", "real", "imag", "unfold", "lift_fresh", "conj",
    "_neg_view", "_conj", "indices", "values", "_indices", "_values", "ravel_view", "_nested_view_from_buffer",
    "squeeze_", "unsqueeze_", "transpose_", "t_", "detach_", "as_strided_",
)
_ATEN_COPIES = (
    "rot90", "repeat_interleave", "channel_shuffle", "im2col", "nonzero_static", "_unique2", "unique_consecutive",
    "diag", "diag_embed", "block_diag", "cartesian_prod", "meshgrid", "bucketize", "searchsorted", "unfold_copy",
    "as_strided_copy", "slice_scatter", "select_scatter", "diagonal_scatter", "as_strided_scatter", "flip", "roll",
)

ROWS = (
    #   member         ATen keys                                          ONNX keys                   rule
    Row("view",        aten(*_ATEN_VIEWS),
        onnx("Shape", "Size", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Dropout", "Constant"), None),
    Row("maybe_copy",  aten("reshape", "flatten", "contiguous", "to", "type_as", "ravel", "reshape_as", "type",
                            "double", "float", "half", "bfloat16", "int", "long", "bool", "cpu", "cuda"), (), maybe_copy),
    Row("dropout",     aten("dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout", "native_dropout",
                            "dropout_"), (), dropout),
    Row("concat",      aten("cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack",
                            "row_stack", "_cat"), onnx("Concat"), copy_all),
    Row("pad",         aten("constant_pad_nd", "pad", "reflection_pad1d", "reflection_pad2d", "reflection_pad3d",
                            "replication_pad1d", "replication_pad2d", "replication_pad3d", "circular_pad1d",
                            "circular_pad2d"), onnx("Pad"), copy_all),
    Row("tile",        aten("repeat", "tile"),                            onnx("Tile"),               copy_all),
    Row("trilu",       aten("tril", "triu", inplace=True),                onnx("Trilu"),              copy_all),
    Row("one_hot",     aten("one_hot"),                                   onnx("OneHot"),             copy_all),
    Row("nonzero",     aten("nonzero"),                                   onnx("NonZero"),            copy_all),
    Row("unique",      aten("unique"),                                    onnx("Unique"),             copy_all),
    Row("masked_select", aten("masked_select"),                           onnx("Compress"),           copy_all),
    Row("pixel_shuffle", aten("pixel_shuffle"),                           onnx("DepthToSpace"),       copy_all),
    Row("pixel_unshuffle", aten("pixel_unshuffle"),                       onnx("SpaceToDepth"),       copy_all),
    Row("col2im",      aten("col2im"),                                    onnx("Col2Im"),             copy_all),
    Row("copy",        aten(*_ATEN_COPIES),                               (),                         copy_all),
    # ATen's split / permute / expand are views (free); ONNX materialises them
    Row("onnx_copy",   (), onnx("Split", "Transpose", "Expand", "ScatterND", "ScatterElements", "Scatter",
                                "ReverseSequence", "ConstantOfShape", "EyeLike", "CenterCropPad"), copy_all),
    Row("embedding",   aten("embedding"),                                 onnx("Gather"),             gather),
    Row("gather",      aten("gather", "take_along_dim"),                  onnx("GatherElements"),     gather),
    Row("index",       aten("index", "_unsafe_index", "index_select", "take", "masked_gather"),
        onnx("GatherND", "Slice"), gather),
    Row("embedding_bag", aten("embedding_bag", "_embedding_bag", "_embedding_bag_forward_only"), (), embedding_bag),
    Row("scatter",     tuple(f"aten.{n}{s}" for n in ("scatter", "scatter_add", "scatter_reduce", "index_add",
                                                       "index_copy", "index_reduce", "index_put", "_index_put_impl",
                                                       "index_fill", "masked_scatter", "put") for s in ("", "_")),
        (), scatter),
    Row("control_flow", (),                                               onnx("If", "Loop", "Scan"), nothing),
)

register_family("movement", ROWS)
