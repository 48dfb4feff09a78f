"""Recurrent family: LSTM / GRU / plain RNN layers (ATen and ONNX), one formula per cell step.

Per time step, batch row, layer and direction (:func:`cell_step_flops`): the gate products
``2 * G*H * (I + H)`` matrix FLOPs (G gates of H units over the input I and the hidden state H), the two bias
adds ``2 * G*H`` when the layer has biases, and the cell's per-unit math, vector FLOPs per hidden unit:

* LSTM: 3 sigmoid gates (4 each) + 2 tanh (1 each) + ``c = f*c + i*g`` (3) + ``h = o*tanh(c)`` (1) = 18;
* GRU: 2 sigmoid gates (8) + tanh (1) + ``r * (R h)`` (1) + ``h = (1-z)*n + z*h`` (3) = 13;
* RNN: the activation (1).
"""

from __future__ import annotations

from ...errors import RuleError
from ...graph import OpNode, TensorSpec
from ..common import io_cost, req
from ..cost import FLOPS_PER_MAC, Cost
from ..family import Row, aten, onnx, register_family

__all__ = ["CELL_FLOPS_PER_UNIT", "ROWS", "cell_step_flops"]

#: Vector FLOPs per hidden unit of one cell step, by gate count (LSTM 4 gates, GRU 3, RNN 1).
CELL_FLOPS_PER_UNIT = {4: 18, 3: 13, 1: 1}


def cell_step_flops(gates_x_hidden: int, input_size: int, hidden: int, biases: bool) -> tuple[int, int]:
    """(matrix, vector) FLOPs of one cell step for one batch row, layer and direction."""
    gates = max(1, gates_x_hidden // hidden) if hidden else 1
    matrix = FLOPS_PER_MAC * gates_x_hidden * (input_size + hidden)
    vector = (2 * gates_x_hidden if biases else 0) + CELL_FLOPS_PER_UNIT.get(gates, 1) * hidden
    return matrix, vector


def _aten_steps(node: OpNode) -> int:
    """Time steps x batch rows: ``input [T, B, I]`` (``[B, T, I]`` when batch_first), or packed ``[sum T_b, I]``."""
    x = req(node, 0).dims
    if "batch_first" not in node.attrs:  # the packed-sequence overload: one row per (step, sequence)
        return x[0]
    return x[0] * x[1] if len(x) == 3 else x[0]


def _layer(w_ih: TensorSpec, w_hh: TensorSpec, steps: int, biases: bool) -> tuple[int, int]:
    m, v = cell_step_flops(w_ih.dims[0], w_ih.dims[1], w_hh.dims[1], biases)
    return steps * m, steps * v


def aten_recurrent(node: OpNode) -> Cost:
    """Parameters are the trailing ``n_params`` inputs, ``(w_ih [G*H, I], w_hh [G*H, H][, b_ih, b_hh])`` per
    layer and direction."""
    a = node.attrs
    n_params = int(a.get("n_params", 0))
    params = list(node.inputs[len(node.inputs) - n_params:]) if n_params else []
    groups = int(a.get("num_layers", 1)) * (2 if a.get("bidirectional") else 1)
    per = n_params // groups if groups else 0
    steps = _aten_steps(node)
    matrix = vector = 0
    for g in range(groups):
        w_ih, w_hh = params[g * per], params[g * per + 1]
        if w_ih is None or w_hh is None:
            raise RuleError(f"{node.op}: the weights of layer / direction {g} are missing")
        m, v = _layer(w_ih, w_hh, steps, bool(a.get("has_biases", True)))
        matrix, vector = matrix + m, vector + v
    return io_cost(node, matrix_flops=matrix, vector_flops=vector)


def mkldnn_rnn_layer(node: OpNode) -> Cost:
    """One layer, one direction of the CPU (oneDNN) RNN: ``(input, w_ih, w_hh, b_ih, b_hh, hx, cx)``."""
    m, v = _layer(req(node, 1), req(node, 2), _aten_steps(node), bool(node.attrs.get("has_biases", True)))
    return io_cost(node, matrix_flops=m, vector_flops=v)


def onnx_recurrent(node: OpNode) -> Cost:
    """(X [T, B, I] or [B, T, I] with ``layout=1``, W [D, G*H, I], R [D, G*H, H], B, ...): every direction D."""
    x, w, r = req(node, 0), req(node, 1), req(node, 2)
    seq, batch = (x.dims[1], x.dims[0]) if node.attrs.get("layout", 0) else (x.dims[0], x.dims[1])
    d, gh, i = w.dims
    m, v = cell_step_flops(gh, i, r.dims[2], node.input(3) is not None)
    steps = seq * batch * d
    return io_cost(node, matrix_flops=steps * m, vector_flops=steps * v)


ROWS = (
    #   member   ATen keys                          ONNX keys       rule
    Row("lstm",  aten("lstm"),                      onnx("LSTM"),   aten_recurrent, onnx_rule=onnx_recurrent),
    Row("gru",   aten("gru"),                       onnx("GRU"),    aten_recurrent, onnx_rule=onnx_recurrent),
    Row("rnn",   aten("rnn_tanh", "rnn_relu"),      onnx("RNN"),    aten_recurrent, onnx_rule=onnx_recurrent),
    Row("mkldnn_rnn_layer", aten("mkldnn_rnn_layer"), (),           mkldnn_rnn_layer),
)

register_family("recurrent", ROWS)
