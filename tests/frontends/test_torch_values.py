"""Values read from computed tensors (``int(box[2] - box[0])``, ``if x.any()``) under the dispatch capture:
named per line of model code, assumed 1 / False, stated in the notes, bindable; a data-dependent size bound
to 0 leaves 0 candidates downstream; ``for row in boxes`` over a data-dependent number of rows."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import graphroof
from graphroof.frontends.torch.export import load_module


def cost(g, **kw):
    return graphroof.analyze(g, hw="a100", runtime="eager", **kw).totals.cost


class PasteMasks(nn.Module):
    """torchvision's paste_mask_in_image in miniature: per box, resize a 4x4 mask to the box's width read from
    the box tensor, and write a full 16x16 image mask."""

    def forward(self, masks, boxes):                   # masks [3, 4, 4], boxes [3, 4] (computed: int64)
        boxes = (boxes * 10).to(torch.int64)
        out = []
        for m, b in zip(masks, boxes):
            w = int(b[2] - b[0] + 1)                   # a value read: value_0
            small = F.interpolate(m[None, None], size=(w, w), mode="bilinear", align_corners=False)
            im = torch.zeros((16, 16))
            if small.sum() > 100:                      # a truth read: value_1 (default False: skipped)
                im = im + 1
            out.append(im + small.mean())
        return torch.stack(out)


def _interp(g):
    return [n for n in g.ops() if "upsample" in n.op]


def test_value_reads_are_named_per_line_assumed_and_noted():
    g = load_module(PasteMasks(), [(3, 4, 4), (3, 4)], capture="dispatch")
    assert g.meta["assumed_values"] == {"value_0": 1, "value_1": False}
    up = _interp(g)
    assert len(up) == 3 and all(n.outputs[0].shape == (1, 1, 1, 1) for n in up)   # w = 1 by default
    assert not [n for n in g.ops() if n.op == "aten.add" and n.outputs[0].shape == (16, 16)
                and n.inputs[1] is None]                                        # the `im + 1` branch skipped
    note = next(n for n in g.meta["notes"] if "read from computed tensors" in n)
    assert "6 value(s)" in note and "2 line(s)" in note                         # 3 boxes x 2 lines
    assert "value_0 (a number read at test_torch_values.py:" in note and "int(b[2] - b[0] + 1)" in note
    assert "3 reads) = 1" in note


def test_value_reads_bind_every_read_at_the_line():
    g1 = load_module(PasteMasks(), [(3, 4, 4), (3, 4)], capture="dispatch")
    g5 = load_module(PasteMasks(), [(3, 4, 4), (3, 4)], capture="dispatch", dims={"value_0": 5, "value_1": 1})
    assert all(n.outputs[0].shape == (1, 1, 5, 5) for n in _interp(g5))
    assert any("traced with the values given: value_0=5, value_1=1" in n for n in g5.meta["notes"])
    # the bilinear resize writes its output: 3 boxes x (25 - 1) more fp32 elements = 288 more bytes written
    # at least, plus the `im + 1` branch taken (3 x 256 elements read and written)
    c1, c5 = cost(g1), cost(g5)
    assert c5.act_bytes - c1.act_bytes >= 3 * 24 * 4 + 3 * 256 * 4 * 2


def test_constant_tensor_values_are_real_not_assumed():
    class Const(nn.Module):
        def forward(self, x):
            s = float(torch.tensor(4.0).log2())       # a constant: 2.0, not an assumption
            return F.interpolate(x, scale_factor=s)

    g = load_module(Const(), [(1, 1, 3, 3)], capture="dispatch")
    assert "assumed_values" not in g.meta
    assert list(g.ops())[-1].outputs[0].shape == (1, 1, 6, 6)


class Cascade(nn.Module):
    def forward(self, x):                              # x [24]
        keep = x[torch.nonzero(x > 0)[:, 0]]          # nonzero_0: at most 24 rows
        return keep[torch.nonzero(keep > 1)[:, 0]]    # nonzero_1: at most nonzero_0 rows


def test_a_size_bound_to_zero_leaves_no_candidates_downstream():
    g = load_module(Cascade(), [(24,)], capture="dispatch")
    # half of the static 24 each, the second capped at the 12 rows traced for nonzero_0: min(12, 12)
    assert g.meta["default_dims"] == {"nonzero_0": 12, "nonzero_1": 12}
    g0 = load_module(Cascade(), [(24,)], capture="dispatch", dims={"nonzero_0": 0})
    assert g0.meta["default_dims"]["nonzero_1"] == 0                        # not half the static 24


class Rows(nn.Module):
    def forward(self, x):                              # x [10, 4]
        boxes = x[torch.nonzero(x[:, 0] > 0)[:, 0]]    # nonzero_0 rows, bound to 3 below
        return torch.stack([b[2] - b[0] for b in boxes])


def test_iterating_rows_of_a_data_dependent_size():
    g = load_module(Rows(), [(10, 4)], capture="dispatch", dims={"nonzero_0": 3})
    sub = [n for n in g.ops() if n.op == "aten.sub"]
    assert len(sub) == 3 and all(n.outputs[0].shape == () for n in sub)      # one [4] row per traced row


_FACTORY = '''
import torch
import torch.nn.functional as F
from torch import nn


class Paste(nn.Module):
    def forward(self, boxes):                          # boxes [2, 4]
        out = []
        for b in (boxes * 10).to(torch.int64):
            w = int(b[2] - b[0] + 1)
            out.append(F.interpolate(torch.ones(1, 1, 4, 4), size=(w, w), mode="bilinear").sum())
        return torch.stack(out)


def build():
    return Paste(), [(2, 4)]
'''


def test_cli_dim_sets_a_value_read(tmp_path):
    import json

    from graphroof.cli import main
    (tmp_path / "paste_mod.py").write_text(_FACTORY)
    out = tmp_path / "r.json"
    rc = main(["analyze", f"{tmp_path / 'paste_mod.py'}:build", "--dim", "value_0=5", "-f", "json",
               "-o", str(out)])
    assert rc == 0
    notes = " ".join(json.loads(out.read_text())["notes"])
    assert "traced with the values given: value_0=5" in notes and "int(b[2] - b[0] + 1)" in notes
