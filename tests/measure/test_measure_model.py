"""profile end to end on small models, for real, on the CPU: every node with work gets a measured time or is
listed as unmatched."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from graphroof.cli import main  # noqa: E402
from graphroof.hardware import adhoc_profile  # noqa: E402

HW = adhoc_profile(100e9, 10e9, "test-cpu")


class TinyNet(nn.Module):
    """conv -> bn -> relu -> pool -> layer norm -> linear -> gelu -> linear -> softmax, with a residual add."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.act = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.norm = nn.LayerNorm(8)
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 8)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        x = self.pool(self.act(self.bn(self.conv(x)))).flatten(1)
        x = self.norm(x)
        x = x + self.fc2(nn.functional.gelu(self.fc1(x)))
        return torch.softmax(self.head(x), dim=-1)


def tiny_net():
    torch.manual_seed(0)
    return TinyNet().eval()


def _work_nodes(c):
    return [r["name"] for r in c.ops]


def test_torch_mapping_covers_every_node_with_work():
    pytest.importorskip("graphroof.frontends.torch.export")
    from graphroof.measure import measure_model

    c = measure_model(tiny_net(), (torch.randn(2, 3, 16, 16),), hw=HW, runs=3, warmup=1)
    work = _work_nodes(c)
    assert len(work) >= 9  # conv, bn, relu, pool, layer norm, 3 linears, gelu, add, softmax (+ flatten?)
    timed = {r["name"] for r in c.ops if r["measured_s"] is not None}
    assert timed | set(c.unmatched) == set(work)     # every node with work: a time or listed
    assert not timed & set(c.unmatched)
    assert c.unmatched == []                          # and on this model the mapping finds them all
    assert all(r["measured_s"] > 0 for r in c.ops)
    # layer rows add up the op rows
    assert sum(r["measured_s"] for r in c.layers) == pytest.approx(sum(r["measured_s"] for r in c.ops))
    s = c.summary
    assert s["n_matched"] == len(work) and s["measured_wall_s"] > 0 and s["layer_ratio_median"] > 0


def test_onnx_mapping_covers_every_node_with_work(tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("graphroof.frontends.onnx.load")
    from onnx import TensorProto, helper, save

    from graphroof.measure import measure_model

    w = helper.make_tensor("W", TensorProto.FLOAT, [8, 3, 3, 3], [0.01] * 216)
    fw = helper.make_tensor("FW", TensorProto.FLOAT, [8, 4], [0.1] * 32)
    fb = helper.make_tensor("FB", TensorProto.FLOAT, [4], [0.0] * 4)
    g = helper.make_graph([
        helper.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("MatMul", ["f", "FW"], ["m"], name="fc_matmul"),
        helper.make_node("Add", ["m", "FB"], ["a"], name="fc_add"),
        helper.make_node("Softmax", ["a"], ["y"], name="softmax", axis=-1),
    ], "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w, fw, fb])
    path = tmp_path / "tiny.onnx"
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    c = measure_model(str(path), hw=HW, runs=3, warmup=1)
    work = _work_nodes(c)
    timed = {r["name"] for r in c.ops if r["measured_s"] is not None}
    assert timed | set(c.unmatched) == set(work)
    assert c.unmatched == []
    how = {r["name"]: r["matched_by"] for r in c.ops}
    assert how["conv"] == "node-name" and how["softmax"] == "node-name"
    # onnxruntime fuses MatMul + Add into one Gemm even at the 'basic' level: both share its time
    assert how["fc_matmul"] in ("fused", "node-name") and how["fc_add"] in ("fused", "node-name")


def test_cli_profile_factory_json(tmp_path, capsys):
    pytest.importorskip("graphroof.frontends.torch.export")
    out = tmp_path / "p.json"
    rc = main(["-q", "profile", "tests.measure.test_measure_model:tiny_net", "--input", "2x3x16x16", "--peak-flops", "100G",
               "--mem-bw", "10GB/s", "--runs", "2", "--warmup", "1", "-f", "json", "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    d = json.loads(out.read_text())
    assert d["kind"] == "profile" and d["unmatched_nodes"] == []
    assert d["summary"]["measured_wall_s"] > 0 and len(d["layers"]) >= 5


def test_cli_profile_needs_hw(capsys):
    assert main(["profile", "tests.measure.test_measure_model:tiny_net", "--input", "2x3x16x16"]) == 1
    assert "profile needs --hw" in capsys.readouterr().err


def test_cli_profile_cuda_without_cuda(capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["profile", "x.onnx", "--hw", "a100", "--device", "cuda"]) == 1
    assert "no CUDA device" in capsys.readouterr().err


def test_cli_profile_op_table_is_a_clear_error(capsys):
    assert main(["profile", "examples/textbook_ops.csv", "--hw", "a100"]) == 1
    assert "an op table has nothing to run" in capsys.readouterr().err
