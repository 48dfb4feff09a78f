"""Recurrent family (ATen and ONNX keys): LSTM / GRU / RNN on literals."""

from __future__ import annotations

import pytest

from graphroof.counters.cost import Cost
from tests.conftest import T, W, node
from tests.counters.rules._family import assert_frontends_agree, paired_members, run


def cost(n):
    return run(n)



def test_lstm_two_layers_bidirectional():
    # T=5, B=2, I=16, H=32, 2 layers, bidirectional: layer 0 w_ih [128, 16], layer 1 w_ih [128, 64]
    x, h0, c0 = T("fp32", 5, 2, 16), T("fp32", 4, 2, 32), T("fp32", 4, 2, 32)
    params = []
    for i in (16, 16, 64, 64):
        params += [W("fp32", 128, i), W("fp32", 128, 32), W("fp32", 128), W("fp32", 128)]
    n = node("aten.lstm", [x, h0, c0, *params], [T("fp32", 5, 2, 64), h0, c0], n_hx=2, n_params=16,
             has_biases=True, num_layers=2, bidirectional=True, batch_first=False)
    c = cost(n)
    steps = 5 * 2
    # layer 0 (per direction): 2 * 128 * (16 + 32) per step; layer 1: 2 * 128 * (64 + 32)
    assert c.matrix_flops == 2 * steps * (2 * 128 * 48 + 2 * 128 * 96)
    # per step and direction: bias adds 2 * 128, cell math 18 * 32
    assert c.vector_flops == 4 * steps * (256 + 18 * 32)
    assert c.weight_bytes == sum(p.nbytes for p in params)


def test_gru_batch_first_and_mkldnn_layer():
    x, h0 = T("fp32", 2, 5, 16), T("fp32", 1, 2, 32)
    w_ih, w_hh = W("fp32", 96, 16), W("fp32", 96, 32)
    n = node("aten.gru", [x, h0, w_ih, w_hh], [T("fp32", 2, 5, 32), h0], n_params=2, has_biases=False,
             num_layers=1, bidirectional=False, batch_first=True)
    c = cost(n)
    assert c.matrix_flops == 10 * 2 * 96 * 48 and c.vector_flops == 10 * 13 * 32
    n = node("aten.mkldnn_rnn_layer", [x, W("fp32", 128, 16), W("fp32", 128, 32), W("fp32", 128), W("fp32", 128),
                                       h0, h0], [T("fp32", 2, 5, 32)], hidden_size=32, batch_first=True,
             has_biases=True)
    c = cost(n)
    assert c.matrix_flops == 10 * 2 * 128 * 48 and c.vector_flops == 10 * (256 + 18 * 32)


def test_onnx_lstm():
    # X [S=5, B=2, I=3], hidden 4, one direction: W [1, 16, 3], R [1, 16, 4], B [1, 32]
    n = node("onnx.LSTM", [T("fp32", 5, 2, 3), W("fp32", 1, 16, 3), W("fp32", 1, 16, 4), W("fp32", 1, 32)],
             [T("fp32", 5, 1, 2, 4), T("fp32", 1, 2, 4)], hidden_size=4)
    c = cost(n)
    # 10 (step, batch) pairs: gate products 2 * 16 * (3 + 4) = 224 each; bias 32 + cell 18 * 4 = 104 each
    assert (c.matrix_flops, c.vector_flops) == (10 * 224, 10 * 104)
    assert c.weight_bytes == (48 + 64 + 32) * 4 and c.act_write_bytes == (5 * 1 * 2 * 4 + 2 * 4) * 4


# -- ATen and ONNX keys of one row give the same Cost -------------------------------------------------------
# One layer, one direction, T=5 steps, B=2, I=3, H=4, with biases.  ATen: (input, hx..., params...) with the
# parameters (w_ih [G*H, I], w_hh [G*H, H], b_ih, b_hh) last; ONNX: (X, W [1, G*H, I], R [1, G*H, H], B [1, 2*G*H]).

def _pair(aten_op: str, onnx_op: str, gates: int):
    gh = gates * 4
    x, h0 = T("fp32", 5, 2, 3), T("fp32", 1, 2, 4)
    aten_n = node(aten_op, [x, h0, W("fp32", gh, 3), W("fp32", gh, 4), W("fp32", gh), W("fp32", gh)],
                  [T("fp32", 5, 2, 4), h0], n_params=4, num_layers=1, has_biases=True, bidirectional=False,
                  batch_first=False)
    onnx_n = node(onnx_op, [x, W("fp32", 1, gh, 3), W("fp32", 1, gh, 4), W("fp32", 1, 2 * gh), None, h0],
                  [T("fp32", 5, 1, 2, 4), h0], hidden_size=4)
    return aten_n, onnx_n


_CASES = {"lstm": _pair("aten.lstm", "onnx.LSTM", 4), "gru": _pair("aten.gru", "onnx.GRU", 3),
          "rnn": _pair("aten.rnn_tanh", "onnx.RNN", 1)}


@pytest.mark.parametrize("member", paired_members("recurrent"))
def test_aten_and_onnx_keys_agree(member):
    c = assert_frontends_agree("recurrent", member, _CASES)
    assert c.matrix_flops > 0 and c != Cost()
