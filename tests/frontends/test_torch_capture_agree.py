"""Issue 15: every PyTorch model captured the same whichever path.  Export and dispatch give identical totals;
nested high-level calls (MHA, LSTM) stay whole; data-dependent sizes are named dims; real scalar buffers keep
their values; broadcast views of weights count the weight once; trace errors point into torchvision."""

from __future__ import annotations

import dataclasses
import functools
import traceback

import pytest
import torch
from torch import nn

import graphroof
from graphroof.frontends.torch import export as torch_export
from graphroof.frontends.torch.export import load_factory, load_module
from tests.frontends.torch_models import SmallCNN

CAPTURES = ["export", "dispatch"]


def cost(g, **kw):
    return graphroof.analyze(g, hw="a100", runtime="eager", **kw).totals.cost  # op-level counts


def ops(g):
    return [n.op for n in g.ops()]


class MHA(nn.Module):
    def __init__(self, need_weights=False, batch_first=True):
        super().__init__()
        self.m = nn.MultiheadAttention(16, 2, batch_first=batch_first)
        self.need_weights = need_weights

    def forward(self, x, y):
        return self.m(x, y, y, need_weights=self.need_weights)[0]


class NonZero(nn.Module):
    def forward(self, x):
        return x[torch.nonzero(x > 0)[:, 0]]


class Expanded(nn.Module):
    def __init__(self):
        super().__init__()
        self.cls = nn.Parameter(torch.zeros(1, 1, 8))
        self.pos = nn.Parameter(torch.zeros(5, 8))

    def forward(self, x):                                   # x [4, 5, 8]
        c = self.cls.expand(x.shape[0], -1, -1)            # [4, 1, 8], a view of 8 weights
        y = x + self.pos.expand(4, 5, 8)                    # 40 weights read once
        return torch.cat([c, y], dim=1)


class ScaledLinear(nn.Module):
    """A Linear followed by ``* float(self.scale)``, ``scale`` a real registered buffer."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.register_buffer("scale", torch.tensor(0.25))

    def forward(self, x):
        return self.fc(x) * float(self.scale)


# (model factory, inputs): every small model both captures take
AGREE = {
    "small_cnn": (SmallCNN, [(2, 3, 16, 16)]),
    "mha_self_flash": (MHA, [(2, 8, 16), (2, 8, 16)]),
    "mha_cross_weights": (functools.partial(MHA, True, False), [(8, 2, 16), (5, 2, 16)]),
    "lstm_2_layers": (lambda: nn.LSTM(8, 16, 2), [(10, 3, 8)]),
    "gru_bidirectional": (lambda: nn.GRU(8, 16, batch_first=True, bidirectional=True), [(3, 10, 8)]),
    "rnn_relu": (lambda: nn.RNN(8, 16, nonlinearity="relu"), [(10, 3, 8)]),
    "nonzero": (NonZero, [(4, 6)]),
    "expanded_weight": (Expanded, [(4, 5, 8)]),
    "transformer_layer": (lambda: nn.TransformerEncoderLayer(16, 2, 32, batch_first=True), [(2, 6, 16)]),
}


@pytest.mark.parametrize("name", list(AGREE))
def test_export_and_dispatch_give_identical_totals(name):
    make, inputs = AGREE[name]
    torch.manual_seed(0)
    m = make()
    a, b = (cost(load_module(m, inputs, capture=c)) for c in CAPTURES)
    assert dataclasses.asdict(a) == dataclasses.asdict(b)


def test_mha_under_dispatch_keeps_flash_attention():
    g = load_module(MHA(), [(2, 8, 16), (2, 8, 16)], capture="dispatch")
    assert ops(g).count("aten.scaled_dot_product_attention") == 1 and ops(g).count("aten.linear") == 3
    assert not {"aten.bmm", "aten.softmax", "aten._softmax", "aten.baddbmm"} & set(ops(g))
    c = cost(g)
    # q / k / v projections (query and key are different tensors): 3 * 2*16*16*16 = 24,576; attention q.k and p.v: 2 * 2 heads * 2 batch *
    # 8*8 pairs * (8 + 8) = 8,192; out-projection 2*16*16*16 = 8,192: 40,960
    assert c.matrix_flops == 24576 + 8192 + 8192
    # flash: the [2, 2, 8, 8] score matrix is never written: naive attention writes and reads it
    naive = cost(g, attention="naive")
    assert naive.act_write_bytes > c.act_write_bytes


def test_lstm_is_one_node_whichever_capture():
    for cap in CAPTURES:
        g = load_module(nn.LSTM(8, 16, 2), [(10, 3, 8)], capture=cap)
        assert ops(g).count("aten.lstm") == 1, ops(g)
        c = cost(g)
        # weights read once: layer 0 w_ih 64x8 + w_hh 64x16 + 2 biases 64 = 1,664; layer 1 64x16 * 2 + 128 =
        # 2,176; 3,840 parameters * 4 bytes
        assert c.weight_bytes == 3840 * 4
        # gates: 30 steps*rows x 2 * 64 * (8 + 16) = 92,160 (layer 0) + 2 * 64 * 32 * 30 = 122,880 (layer 1)
        assert c.matrix_flops == 92160 + 122880


@pytest.mark.parametrize("capture", CAPTURES)
def test_nonzero_becomes_a_named_bindable_dim(capture):
    g = load_module(NonZero(), [(4, 6)], capture=capture)
    idx = [n for n in g.ops() if n.op == "aten.index"][0]
    assert idx.outputs[0].shape == ("nonzero_0", 6)
    assert g.meta["default_dims"] == {"nonzero_0": 12}      # half of the 24 candidates
    assert any("nonzero_0" in n and "half the candidates" in n for n in g.meta["notes"])
    c12, c3 = cost(g), cost(g, dims={"nonzero_0": 3})
    # the index op writes rows x 6 fp32: 12 rows -> 288 bytes, 3 rows -> 72; nonzero writes rows x 2 int64
    # (192 / 48) and gt writes 24 bools: 24 + 192 + 288 = 504 and 24 + 48 + 72 = 144
    assert (c12.act_write_bytes, c3.act_write_bytes) == (504, 144)


def test_data_dependent_size_steers_the_trace_and_the_rest_is_analysed():
    class Filter(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 8)

        def forward(self, x):                  # x [10, 6]
            y = x[x.sum(-1) > 0]               # index_0 rows of 10 (assumed 5)
            if y.numel() == 0:                 # decided with the assumed value
                return x
            return self.fc(y)[:3].sum() + self.fc(x).sum()

    g = load_module(Filter(), [(10, 6)])
    assert g.meta["capture"] == "dispatch (fake tensors)" and g.meta["default_dims"] == {"index_0": 5}
    sl = [n for n in g.ops() if n.op == "aten.slice"][0]
    assert sl.outputs[0].shape == ("min(3, index_0)", 8)
    # the two linears: 2*5*8*6 = 480 and 2*10*8*6 = 960
    assert cost(g).matrix_flops == 480 + 960
    assert cost(g, dims={"index_0": 2}).matrix_flops == 192 + 960
    # a bound value is also used while tracing: 0 rows takes the early return
    assert [n.op for n in load_module(Filter(), [(10, 6)], dims={"index_0": 0}).ops()][-1] != "aten.add"


def test_real_scalar_buffer_keeps_its_value():
    g = load_module(ScaledLinear(), [(2, 8)], capture="dispatch")
    mul = [n for n in g.ops() if n.op == "aten.mul"][0]
    assert mul.attrs["other"] == 0.25
    c = cost(g)
    # linear 2*2*4*8 = 128 matrix, bias 8 + the scale multiply 8 vector
    assert (c.matrix_flops, c.vector_flops) == (128, 16)


@pytest.mark.parametrize("capture", CAPTURES)
def test_broadcast_view_of_a_weight_counts_the_weight(capture):
    g = load_module(Expanded(), [(4, 5, 8)], capture=capture)
    add = [n for n in g.ops() if n.op == "aten.add"][0]
    assert add.inputs[1].shape == (1, 5, 8)
    # 8 + 40 weights read once (not the broadcast 32 + 160): 48 * 4 bytes
    assert cost(g).weight_bytes == 48 * 4


def test_trace_errors_point_into_torchvision_frames(tmp_path):
    fake = torch_export._TORCH_DIR.rstrip("/\\") + "vision/ops/boxes.py"   # site-packages/torchvision/...
    code = compile("def boom():\n    raise ValueError('inside torchvision')\n", fake, "exec")
    ns: dict = {}
    exec(code, ns)
    try:
        ns["boom"]()
    except ValueError as e:
        assert torch_export._user_frame(e) == "boxes.py:2"
        tb = traceback.extract_tb(e.__traceback__)
        assert tb[-1].filename.startswith(torch_export._TORCH_DIR[:-1])   # the old prefix test matched it


def _tolist_factory():
    """Like torchvision's RegNet builder: reads values while building (fails on the meta device)."""
    widths = torch.tensor([4, 8]).tolist()
    return nn.Sequential(nn.Linear(4, widths[0]), nn.Linear(widths[0], widths[1]))


def test_api_factory_falls_back_to_cpu():
    g = load_factory(_tolist_factory, [(2, 4)])
    assert any("built with real weights" in n for n in g.meta["notes"])
    assert g.meta["model"] == "_tolist_factory" and g.meta["module_params"] == 20 + 40
    assert cost(g).matrix_flops == 2 * 2 * 4 * 4 + 2 * 2 * 8 * 4
