"""ONNX decoders as LLM sources.

A decoder exported with its KV cache (inputs named like ``past_key_values.0.key``, shape
``[batch, kv_heads, past, head_dim]``; outputs ``present.*``) runs both phases from the one file:

* prefill: ``input_ids [batch, prompt]`` with ``past = 0`` cached tokens;
* decode: ``input_ids [batch, 1]`` with ``past`` cached tokens (the past dim bound to the step's context);

``attention_mask`` (if any) is ``[batch, past + new]`` and ``position_ids`` ``[batch, new]``.  The concatenation
of the new keys / values onto the past ones becomes a cache append (:mod:`graphroof.llm.kvcache`).
A model without KV inputs has no cache: decode recomputes the context (see :mod:`graphroof.llm.phases`).
Other symbolic dims can be bound with ``dims``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import cast

from ...errors import FrontendError, InputError
from ...graph import OpGraph
from ..source import LLMSource, ModelSpec

__all__ = ["ONNXSource", "input_names", "has_past_inputs"]


def input_names(path: str | Path) -> list[str] | None:
    """The graph input names of the ONNX file at *path* (weights' external data not read), or None when the file
    cannot be read (or onnx is missing): plain data for callers outside the frontends."""
    try:
        import onnx

        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 - an unreadable file is reported by the loader with its own message
        return None
    return [i.name for i in model.graph.input]


def has_past_inputs(path: str | Path) -> bool:
    """Whether the ONNX file at *path* takes past (KV-cache) inputs: an input named ``past...`` (False when it
    cannot be read)."""
    return any("past" in n for n in input_names(path) or ())


def _shape(vi) -> list[int | str | None]:
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return []
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]


class ONNXSource(LLMSource):
    def __init__(self, path: str | Path, *, dims: Mapping[str, int] | None = None, name: str | None = None):
        try:
            import onnx
        except ModuleNotFoundError:
            raise FrontendError("an .onnx model needs the onnx package: pip install 'graphroof[onnx]'") from None
        from .load import is_kv_name

        self.path = Path(path)
        self.dims = dict(dims or {})
        try:
            model = onnx.load(str(self.path), load_external_data=False)
        except Exception as e:  # noqa: BLE001 - a broken file
            raise InputError(f"{self.path}: not a readable ONNX model ({type(e).__name__}: {e})") from None
        inits = {t.name for t in model.graph.initializer}
        self.inputs = {vi.name: _shape(vi) for vi in model.graph.input if vi.name not in inits}
        self.kv_names = [n for n in self.inputs if is_kv_name(n)]
        ids = next((n for n in self.inputs if n in ("input_ids", "ids", "tokens")), None)
        if ids is None:
            raise InputError(f"{self.path.name}: no input_ids input; an LLM estimate needs a decoder taking token ids "
                             f"(inputs: {', '.join(self.inputs)})")
        self.ids: str = ids
        layers = len(self.kv_names) // 2  # a key and a value input per layer
        kv_shape = self.inputs[self.kv_names[0]] if self.kv_names else []
        kv_heads = kv_shape[1] if len(kv_shape) == 4 and isinstance(kv_shape[1], int) else None
        head_dim = kv_shape[3] if len(kv_shape) == 4 and isinstance(kv_shape[3], int) else None
        self.kv_cache = bool(self.kv_names) and kv_heads is not None and head_dim is not None
        if self.kv_names and not self.kv_cache:
            raise InputError(f"{self.path.name}: KV-cache input {self.kv_names[0]} has shape {kv_shape}; expected "
                             "[batch, kv_heads, past, head_dim] with fixed kv_heads and head_dim")
        self.no_cache_reason = "the ONNX graph has no past_key_values inputs"
        self.spec = ModelSpec(name=name or self.path.stem, layers=layers or None, kv_heads=kv_heads,
                              head_dim=head_dim)
        how = (f"{len(self.kv_names)} KV-cache inputs; prefill runs it with an empty cache, decode with the past dim "
               "bound" if self.kv_cache else "no KV-cache inputs")
        self.notes = [f"ONNX decoder {self.path.name}: {how}"]

    def _shapes(self, batch: int, q: int, past: int) -> dict[str, tuple[int, ...]]:
        out: dict[str, tuple[int, ...]] = {self.ids: (batch, q)}
        for n, shape in self.inputs.items():
            low = n.lower()
            if n in self.kv_names:
                out[n] = (batch, cast(int, shape[1]), past, cast(int, shape[3]))  # ints: checked in __init__
            elif "attention_mask" in low and len(shape) == 2:
                out[n] = (batch, past + q)
            elif "position_ids" in low and len(shape) == 2:
                out[n] = (batch, q)
        return out

    def _load(self, batch: int, q: int, past: int) -> OpGraph:
        from .load import load_onnx

        return load_onnx(self.path, dims=self.dims or None, input_shapes=self._shapes(batch, q, past))

    def prefill_graph(self, batch: int, seq: int) -> OpGraph:
        return self._load(batch, seq, 0)

    def decode_graph(self, batch: int, past: int) -> OpGraph:
        if not self.kv_cache:
            raise FrontendError(f"{self.name}: {self.no_cache_reason}")
        return self._load(batch, 1, past)
