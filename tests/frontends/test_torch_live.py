"""Issue 27 (D4): ``with graphroof.capture(hw=...) as r: model(x)`` gives the analysis ``graphroof.analyze(model, x)``
gives: the same op rows and totals, on real and on meta tensors."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import graphroof
from graphroof.errors import InputError
from tests.frontends.test_torch_meta_cpu_agree import Attention


class Block(nn.Module):
    """A conv net head and an attention block: norms, convolutions, linears and attention kept whole."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.proj = nn.Linear(8, 64)
        self.attn = Attention()
        self.norm = nn.LayerNorm(64)

    def forward(self, img):
        x = torch.relu(self.bn(self.conv(img)))          # [2, 8, 4, 4]
        x = self.proj(x.flatten(2).transpose(1, 2))      # [2, 16, 64]
        return self.norm(x + self.attn(x))


def _rows(a):
    return [(o["op"], o["scope"], tuple(o["inputs"]), tuple(o["outputs"]), o["flops"], o["bytes"]) for o in a.ops]


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_capture_gives_the_analysis_of_analyze(device):
    torch.manual_seed(0)
    with torch.device(device):
        model = Block().eval()
        img = torch.randn(2, 3, 4, 4)
    with graphroof.capture(hw="h100") as r:
        out = model(img)
    assert out.shape == (2, 16, 64) and out.device.type == device   # the block ran as written
    a = graphroof.analyze(model, img, hw="h100", fold_blocks=False)
    assert _rows(r.analysis) == _rows(a)
    assert r.analysis.totals.cost == a.totals.cost
    assert r.analysis.totals.t_lower_s == a.totals.t_lower_s
    assert [(k["name"], k["bytes"]) for k in r.analysis.kernel_rows] == [(k["name"], k["bytes"]) for k in a.kernel_rows]
    assert r.analysis.model_name == "Block" and len(r.graph) == len(a.graph)
    # the first conv: 2 FLOPs x (2 x 8 x 4 x 4 outputs) x (3 x 3 x 3 taps) = 13,824 (+ 256 bias adds)
    conv = next(o for o in r.analysis.ops if o["op"].startswith("aten.conv"))
    assert conv["matrix_flops"] == 2 * (2 * 8 * 4 * 4) * (3 * 3 * 3)


def test_capture_keyword_inputs_are_activations():
    """A tensor passed by keyword is an input (activation bytes), as analyze names it, not a constant."""
    model = nn.Linear(64, 64).eval()
    x = torch.randn(4, 64)
    with graphroof.capture(hw="h100") as r:
        model(input=x)
    a = graphroof.analyze(model, {"input": x}, hw="h100")
    assert r.analysis.totals.cost == a.totals.cost
    # weight 64 x 64 + bias 64 in fp32: (4,096 + 64) x 4 = 16,640 B; the input 4 x 64 x 4 = 1,024 B is activation
    assert r.analysis.totals.cost.weight_bytes == 16_640


def test_capture_of_nothing_is_a_one_line_error():
    with pytest.raises(InputError, match="recorded no PyTorch op"):
        with graphroof.capture(hw="h100"):
            pass


def test_an_error_in_the_block_propagates_and_removes_the_hooks():
    model = nn.Linear(4, 4)
    with pytest.raises(RuntimeError, match="boom"):
        with graphroof.capture(hw="h100") as r:
            model(torch.randn(1, 4))
            raise RuntimeError("boom")
    assert r.analysis is None
    assert not torch.nn.modules.module._global_forward_pre_hooks   # nothing left installed
    assert "capture" in graphroof.__all__
