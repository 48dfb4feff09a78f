"""Mutations of valid ONNX models for fuzzing (used by the hypothesis test and ``benchmarks/fuzz_onnx.py``).

Each seed model is small and valid; a mutation changes bytes, an attribute, a dim, a dtype, a name or the
nesting (wraps the graph in an If / Loop), then :func:`check` analyses the result and classifies it.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import graphroof
from graphroof.errors import GraphroofError

_VI = h.make_tensor_value_info


def seeds() -> list[onnx.ModelProto]:
    """Small valid models covering matmul, conv, attention-ish, norms, shape arithmetic and control flow."""
    def mk(nodes, inputs, outputs, inits=(), opset=20):
        g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
        return h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=9)

    w = nh.from_array(np.zeros((8, 8), np.float32), "w")
    cw = nh.from_array(np.zeros((4, 3, 3, 3), np.float32), "cw")
    out = [
        mk([h.make_node("MatMul", ["x", "w"], ["h"]), h.make_node("Relu", ["h"], ["y"])],
           [_VI("x", TP.FLOAT, ["batch", 8])], [_VI("y", TP.FLOAT, None)], [w]),
        mk([h.make_node("Conv", ["x", "cw"], ["c"], pads=[1, 1, 1, 1]), h.make_node("MaxPool", ["c"], ["y"],
                                                                                       kernel_shape=[2, 2])],
           [_VI("x", TP.FLOAT, [1, 3, 8, 8])], [_VI("y", TP.FLOAT, None)], [cw]),
        mk([h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "i"], ["n"], axis=0),
            h.make_node("Range", ["z", "n", "o"], ["r"]), h.make_node("Slice", ["x", "st", "en"], ["y"])],
           [_VI("x", TP.FLOAT, [6, 4])], [_VI("y", TP.FLOAT, None), _VI("r", TP.INT64, None)],
           [nh.from_array(np.array(0, np.int64), "i"), nh.from_array(np.array(0, np.int64), "z"),
            nh.from_array(np.array(1, np.int64), "o"), nh.from_array(np.array([1], np.int64), "st"),
            nh.from_array(np.array([4], np.int64), "en")]),
        mk([h.make_node("LayerNormalization", ["x", "s"], ["n"], axis=-1),
            h.make_node("Softmax", ["n"], ["y"], axis=-1), h.make_node("Einsum", ["y", "y"], ["e"],
                                                                      equation="ij,kj->ik")],
           [_VI("x", TP.FLOAT, [4, 8])], [_VI("e", TP.FLOAT, None)], [nh.from_array(np.ones(8, np.float32), "s")]),
    ]
    body = h.make_graph([h.make_node("Add", ["a_in", "x"], ["a_out"]), h.make_node("Identity", ["c_in"], ["c_out"])],
                        "body", [_VI("i", TP.INT64, []), _VI("c_in", TP.BOOL, []), _VI("a_in", TP.FLOAT, [4])],
                        [_VI("c_out", TP.BOOL, []), _VI("a_out", TP.FLOAT, [4])])
    out.append(mk([h.make_node("Loop", ["M", "", "a0"], ["a"], body=body)],
                  [_VI("x", TP.FLOAT, [4]), _VI("a0", TP.FLOAT, [4])], [_VI("a", TP.FLOAT, None)],
                  [nh.from_array(np.array(5, np.int64), "M")]))
    sbody = h.make_graph([h.make_node("Add", ["s_in", "xi"], ["s_out"])], "sb",
                         [_VI("s_in", TP.FLOAT, [4]), _VI("xi", TP.FLOAT, [4])], [_VI("s_out", TP.FLOAT, [4])])
    out.append(mk([h.make_node("Scan", ["s0", "xs"], ["s"], body=sbody, num_scan_inputs=1)],
                  [_VI("s0", TP.FLOAT, [4]), _VI("xs", TP.FLOAT, [3, 4])], [_VI("s", TP.FLOAT, None)]))
    return out


_INTS = [0, 1, -1, 2, 3, 7, 2**31 - 1, 2**62, -(2**40), 10**18]
_DTYPES = [0, 1, 2, 3, 6, 7, 9, 10, 11, 16, 17, 23, 99]
_NAMES = ["", "x", "w", "\x1b[31mred", "a/b/c", "=cmd()", "unk__0", "graphroof.repeat", "repeat", "é" * 3]


def mutate(m: onnx.ModelProto, draw) -> bytes:
    """One mutation of *m*, chosen by *draw(kind, n)* -> int in ``range(n)``; returns the serialised file."""
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    g = m2.graph
    kind = draw("kind", 8)
    nodes = list(g.node)
    if kind == 0:  # raw bytes
        raw = bytearray(m2.SerializeToString())
        for _ in range(1 + draw("nbytes", 8)):
            i = draw("pos", len(raw))
            raw[i] = draw("byte", 256)
        if draw("cut", 4) == 0:
            raw = raw[: draw("len", len(raw))]
        return bytes(raw)
    if kind == 1 and nodes:  # an attribute: value changed or a new one
        n = nodes[draw("node", len(nodes))]
        names = ["axis", "axes", "kernel_shape", "pads", "strides", "num_scan_inputs", "repeat", "equation",
                 "to", "keepdims", "group", "perm", "graphroof.repeat"]
        name = names[draw("attr", len(names))]
        v = _INTS[draw("int", len(_INTS))]
        for a in list(n.attribute):
            if a.name == name:
                n.attribute.remove(a)
        if name == "equation":
            n.attribute.append(h.make_attribute(name, ["ij.,jk->ik", "", "->", "ii", "i,j,k,l->"][draw("eq", 5)]))
        elif name in ("kernel_shape", "pads", "strides", "perm", "axes"):
            n.attribute.append(h.make_attribute(name, [v] * (1 + draw("len", 4))))
        else:
            n.attribute.append(h.make_attribute(name, v))
    elif kind == 2:  # a dim of an input / output / value_info
        vis = [vi for vi in (*g.input, *g.output) if vi.type.HasField("tensor_type")]
        if vis:
            tt = vis[draw("vi", len(vis))].type.tensor_type
            if tt.HasField("shape") and tt.shape.dim:
                d = tt.shape.dim[draw("dim", len(tt.shape.dim))]
                c = draw("dimkind", 4)
                if c == 0:
                    d.dim_value = abs(_INTS[draw("int", len(_INTS))])
                elif c == 1:
                    d.dim_param = ["batch%0", "min(batch)", "a" * 3000, "(" * 500, "unk__7", "b+", "1e9"][draw("p", 7)]
                elif c == 2:
                    d.Clear()
                else:
                    tt.ClearField("shape")
    elif kind == 3:  # a dtype
        vis = [vi for vi in (*g.input, *g.output) if vi.type.HasField("tensor_type")]
        if vis:
            vis[draw("vi", len(vis))].type.tensor_type.elem_type = _DTYPES[draw("dt", len(_DTYPES))]
        elif g.initializer:
            g.initializer[0].data_type = _DTYPES[draw("dt", len(_DTYPES))]
    elif kind == 4 and nodes:  # a name
        n = nodes[draw("node", len(nodes))]
        new = _NAMES[draw("name", len(_NAMES))]
        c = draw("which", 3)
        if c == 0:
            n.name = new
        elif c == 1 and n.input:
            n.input[draw("in", len(n.input))] = new
        elif n.output:
            n.output[draw("out", len(n.output))] = new
    elif kind == 5:  # nesting: the whole graph inside an If with a constant condition
        then_g = h.make_graph(list(g.node), "then", [], list(g.output))
        else_g = h.make_graph([], "else", [], [])
        cond = nh.from_array(np.array(bool(draw("cond", 2))), "cond__")
        del g.node[:]
        g.node.append(h.make_node("If", ["cond__"], [o.name for o in g.output], then_branch=then_g,
                                  else_branch=else_g))
        g.initializer.append(cond)
    elif kind == 6 and nodes:  # an op type swapped for another
        ops = ["MatMul", "Conv", "Attention", "LSTM", "GRU", "RNN", "Einsum", "MaxPool", "Gather", "Slice",
               "RotaryEmbedding", "TopK", "NonZero", "Unique", "Loop", "Scan", "If", "Foo"]
        nodes[draw("node", len(nodes))].op_type = ops[draw("op", len(ops))]
    elif kind == 7 and g.initializer:  # an initializer's dims
        t = g.initializer[draw("init", len(g.initializer))]
        t.dims[:] = [abs(_INTS[draw("int", len(_INTS))]) for _ in range(draw("rank", 4))]
    return m2.SerializeToString()


def check(data: bytes, tmp: Path) -> str:
    """Analyse *data*; ``"ok"`` or the graphroof error class.  Any other exception propagates (a bug)."""
    p = tmp / "fuzz.onnx"
    p.write_bytes(data)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graphroof.analyze(str(p), hw="a100", infer_time_s=20, infer_mem_gb=2)
        return "ok"
    except GraphroofError as e:
        msg = str(e)
        assert "\n" not in msg, f"multi-line error: {msg!r}"
        return type(e).__name__
