"""Quantized PyTorch modules under the dispatch capture (torch.ao eager and FX-converted models).

Fake tensors cannot hold quantized dtypes and ``quantized::*`` kernels have no fake implementation, so the
capture handles them itself, never running a kernel:

* a quantized activation is a float fake tensor standing in for it; the capture remembers its real dtype
  (``quint8`` -> ``uint8``, ``qint8`` -> ``int8``, ``qint32`` -> ``int32``) and records that dtype, so bytes
  and the compute peak are int8 ones.  Ordinary ATen ops on a quantized tensor (``relu``, ``max_pool2d``,
  ``flatten`` ...) run on the stand-in and their outputs stay quantized.
* ``quantize_per_tensor`` / ``quantize_per_channel`` / ``dequantize`` change the recorded dtype.
* ``quantized::linear`` / ``conv{1,2,3}d`` (``_relu``, ``_dynamic``, transposed) take their weight from the
  packed params: its shape and dtype are read once per packed object (``unpack()`` on the CPU, a transient
  copy of that one weight) and the node gets the weight and bias as ordinary inputs, attrs for stride /
  padding / dilation / groups, so rules see plain shapes.
* other ``quantized::`` ops (``add``, ``add_relu``, ``mul``, ``cat``, ``hardswish`` ...) output the shape of
  their first input (``cat``: concatenated along ``dim``).

A real scalar the model reads (``float(self.scale)``, ``int(self.zero_point)`` of a real buffer) keeps its
value: :func:`real_scalar` reads it from the real tensor.  Only one-element tensors are ever read.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

from ...graph import Role, TensorSpec
from .common import Ref, dtype_name

__all__ = ["QDTYPES", "real_scalar", "is_quant_op", "QuantHandler"]

_A = torch.ops.aten
QDTYPES = {torch.quint8: "uint8", torch.qint8: "int8", torch.qint32: "int32"}
if hasattr(torch, "quint4x2"):
    QDTYPES[torch.quint4x2] = "uint4"
_QUANTIZE = {"quantize_per_tensor", "quantize_per_channel", "quantize_per_tensor_dynamic"}


def real_scalar(func: Any, args: tuple) -> Any:
    """The value of ``.item()`` / ``float()`` of a real one-element CPU tensor (a buffer the model holds),
    or ``None`` when *func* is not that."""
    if func is not _A._local_scalar_dense.default or not args:
        return None
    t = args[0]
    if isinstance(t, FakeTensor) or not isinstance(t, torch.Tensor) or t.device.type == "meta" or t.numel() != 1:
        return None
    with unset_fake_temporarily():
        return t.item()


def is_quant_op(func: Any) -> bool:
    ns = getattr(func, "namespace", "")
    return ns == "quantized" or (ns == "aten" and (func._opname in _QUANTIZE or func._opname == "dequantize"))


def _script_obj(v: Any) -> bool:
    return isinstance(v, torch.ScriptObject) or type(v).__name__ == "ScriptObject"


def _ints(v: Any, n: int) -> tuple[int, ...]:
    v = tuple(int(x) for x in v) if isinstance(v, (list, tuple)) else (int(v),)
    return v if len(v) == n else (v * n)[:n]


class QuantHandler:
    """Per capture: which stand-ins are quantized, and the packed weights already read."""

    def __init__(self) -> None:
        from torch.utils.weak import WeakIdKeyDictionary
        self.dtypes = WeakIdKeyDictionary()        # stand-in tensor -> "uint8" / "int8"
        self._packed: dict[int, tuple[Any, ...]] = {}

    def dtype_of(self, t: torch.Tensor) -> str | None:
        return self.dtypes.get(t)

    # -- packed params ------------------------------------------------------------------------------------
    def unpack(self, packed: Any) -> tuple[Any, ...]:
        """(weight shape, weight dtype, bias shape or None, conv params or None) of a packed object."""
        key = id(packed)
        if key not in self._packed:
            with unset_fake_temporarily():
                w, b = packed.unpack()
                conv = None
                if hasattr(packed, "stride"):
                    conv = (tuple(packed.stride()), tuple(packed.padding()), tuple(packed.dilation()),
                            int(packed.groups()), bool(packed.transpose()),
                            tuple(packed.output_padding()) if hasattr(packed, "output_padding") else ())
                wd = QDTYPES.get(w.dtype) or dtype_name(w.dtype)
                self._packed[key] = (tuple(w.shape), wd, tuple(b.shape) if b is not None else None, conv, packed)
        return self._packed[key][:4]

    # -- one op ---------------------------------------------------------------------------------------------
    def run(self, func: Any, args: tuple, kwargs: dict, scope: str) -> tuple[Any, list, dict, str | None]:
        """-> (fake output, bound inputs for the node, attrs, output dtype name or None for float)."""
        name = func._opname
        x: Any = args[0] if args else None  # the op's first input: a tensor (or a list of them) for every op here
        if name in _QUANTIZE:
            qd = args[3] if len(args) > 3 else kwargs.get("dtype", torch.quint8)
            if name == "quantize_per_channel":
                qd = args[4] if len(args) > 4 else kwargs.get("dtype", torch.quint8)
            out = torch.empty_like(x, dtype=torch.float32)
            return out, [("self", "tensor", x)], {}, QDTYPES.get(qd, "uint8")
        if name == "dequantize":
            if isinstance(x, (list, tuple)):
                outs = [torch.empty_like(t, dtype=torch.float32) for t in x]
                return outs, [("tensors", "tensors", list(x))], {}, None
            return torch.empty_like(x, dtype=torch.float32), [("self", "tensor", x)], {}, None
        packed = next((a for a in args if _script_obj(a)), None)
        if packed is not None and ("linear" in name or "conv" in name):
            return self._weighted(name, x, packed, args, scope)
        if name in ("cat", "cat_relu"):  # cat(Tensor[] qx, int dim, float? scale, int? zero_point)
            xs, dim = list(args[0]), int(args[1] if len(args) > 1 else kwargs.get("dim", 0))
            out = torch.cat([torch.empty_like(t, dtype=torch.float32) for t in xs], dim=dim)
            return out, [("tensors", "tensors", xs)], {"dim": dim}, self.dtypes.get(xs[0], "uint8")
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if len(tensors) >= 2:
            shape = torch.broadcast_shapes(*(t.shape for t in tensors))
        else:
            shape = x.shape
        out = torch.empty(shape, dtype=torch.float32, device=x.device)
        bound = [(f"in{i}", "tensor", t) for i, t in enumerate(tensors)]
        attrs = {f"arg{i}": a for i, a in enumerate(args) if isinstance(a, (int, float, bool))}
        return out, bound, attrs, self.dtypes.get(x, "uint8")

    def _weighted(self, name: str, x: torch.Tensor, packed: Any, args: tuple, scope: str):
        w_shape, w_dtype, b_shape, conv = self.unpack(packed)
        wname = f"{scope}.weight" if scope else f"{name}.weight"
        w = Ref(TensorSpec(w_shape, w_dtype, Role.WEIGHT), wname)
        b = Ref(TensorSpec(b_shape, "fp32", Role.WEIGHT), wname[:-len("weight")] + "bias") if b_shape else None
        dynamic = "dynamic" in name
        out_dtype = None if dynamic else "uint8"
        attrs: dict[str, Any] = {}
        if "linear" in name:
            shape = (*x.shape[:-1], w_shape[0])
        else:
            stride, pad, dil, groups, transposed, out_pad = conv
            rank = x.dim() - 2
            k = w_shape[-rank:] if rank else ()
            stride, pad, dil = _ints(stride, rank)[-rank:], _ints(pad, rank)[-rank:], _ints(dil, rank)[-rank:]
            out_pad = _ints(out_pad or 0, rank)[-rank:]
            spatial = []
            for i in range(rank):
                n = int(x.shape[2 + i])
                if transposed:
                    spatial.append((n - 1) * stride[i] - 2 * pad[i] + dil[i] * (k[i] - 1) + out_pad[i] + 1)
                else:
                    spatial.append((n + 2 * pad[i] - dil[i] * (k[i] - 1) - 1) // stride[i] + 1)
            cout = w_shape[1] * groups if transposed else w_shape[0]
            shape = (x.shape[0], cout, *spatial)
            if len(w_shape) - 2 != rank:  # conv1d packs a [Cout, Cin/g, 1, k] weight: record it as 1-d
                w = Ref(TensorSpec((*w_shape[:2], *k), w_dtype, Role.WEIGHT), wname)
            attrs = {"stride": tuple(stride), "padding": tuple(pad), "dilation": tuple(dil), "groups": groups,
                     "transposed": transposed}
        out = torch.empty(shape, dtype=torch.float32, device=x.device)
        return out, [("input", "tensor", x), ("weight", "tensor", w), ("bias", "tensor", b)], attrs, out_dtype
