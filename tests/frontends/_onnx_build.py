"""Tiny ONNX model builders for the ONNX frontend tests (built at test time, no binary fixtures)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

from graphroof.counters import count
from graphroof.counters.cost import Cost
from graphroof.counters.settings import CountSettings
from graphroof.frontends.onnx.load import load_onnx
from graphroof.graph import COST, OpGraph, bind

F32, F16, I64, I32, U8, I8, BOOL = TP.FLOAT, TP.FLOAT16, TP.INT64, TP.INT32, TP.UINT8, TP.INT8, TP.BOOL


def vi(name: str, elem: int = F32, shape=None) -> onnx.ValueInfoProto:
    return h.make_tensor_value_info(name, elem, shape)


def init(name: str, shape, dtype=np.float32, value=None) -> onnx.TensorProto:
    arr = np.full(shape, 0 if value is None else value, dtype=dtype) if not isinstance(value, np.ndarray) else value
    return nh.from_array(arr.astype(dtype), name)


def model(nodes, inputs, outputs, inits=(), *, opset: int = 20, ms: bool = False, value_info=(),
          functions=(), domains=()) -> onnx.ModelProto:
    """*inputs* / *outputs*: ValueInfoProtos or bare names (outputs only: type left to inference)."""
    outs = [o if isinstance(o, onnx.ValueInfoProto) else onnx.ValueInfoProto(name=o) for o in outputs]
    g = h.make_graph(list(nodes), "g", list(inputs), outs, list(inits), value_info=list(value_info))
    ops = [h.make_opsetid("", opset)] + ([h.make_opsetid("com.microsoft", 1)] if ms else [])
    ops += [h.make_opsetid(d, 1) for d in domains]
    m = h.make_model(g, opset_imports=ops, producer_name="graphroof-tests", functions=list(functions))
    m.ir_version = min(m.ir_version, onnx.IR_VERSION)
    return m


def save(tmp_path: Path, m: onnx.ModelProto, name: str = "m.onnx", **kw) -> Path:
    p = tmp_path / name
    onnx.save(m, str(p), **kw)
    return p


def counted(path: Path, dims=None, input_shapes=None, settings: CountSettings | None = None) -> OpGraph:
    """Load, bind what is still symbolic, count (no warnings checked here)."""
    g = load_onnx(path, dims=dims, input_shapes=input_shapes)
    if g.symbolic_dims():
        g = bind(g, dict(dims or {}))
    count(g, settings=settings, warn=False)
    return g


def cost(g: OpGraph, name: str) -> Cost:
    return g.get(name, COST)


def total(g: OpGraph) -> Cost:
    return sum((g.get(n.name, COST) for n in g.ops()), Cost())


def node(op: str, ins, outs, name: str | None = None, domain: str = "", **attrs) -> onnx.NodeProto:
    return h.make_node(op, list(ins), list(outs), name=name or outs[0], domain=domain, **attrs)
