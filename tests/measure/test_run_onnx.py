"""onnxruntime side of profile: fused runtime nodes mapped back to the file's nodes; profile event parsing."""

from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from graphroof.measure.run_onnx import executed_cover, parse_profile  # noqa: E402


def _model(nodes, inits=("W", "b")):
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor(n, TensorProto.FLOAT, [4, 4] if n == "W" else [4], [0.0] * (16 if n == "W" else 4))
         for n in inits])
    return helper.make_model(g)


ORIG = _model([
    helper.make_node("MatMul", ["X", "W"], ["mm"], name="mm_node"),
    helper.make_node("Add", ["mm", "b"], ["add"], name="add_node"),
    helper.make_node("Relu", ["add"], ["Y"], name="relu_node"),
])


def test_fused_group_covers_the_nodes_between_its_anchors():
    # what onnxruntime executes: Reshape -> Gemm (MatMul + Add fused) -> Reshape, then the original Relu
    opt = _model([
        helper.make_node("Reshape", ["X", "shape"], ["x2"], name="gemm_input_reshape"),
        helper.make_node("Gemm", ["x2", "W", "b"], ["g"], name="mm_node/MatMulAddFusion"),
        helper.make_node("Reshape", ["g", "shape"], ["add"], name="gemm_output_reshape"),
        helper.make_node("Relu", ["add"], ["Y"], name="relu_node"),
    ])
    cov = executed_cover(ORIG, opt)
    # the three new nodes form one group: consumes X (anchor), produces 'add' (anchor) -> Add, MatMul
    for n in ("gemm_input_reshape", "mm_node/MatMulAddFusion", "gemm_output_reshape"):
        assert sorted(cov[n]) == ["add_node", "mm_node"]
    assert cov["relu_node"] == ("relu_node",)


def test_node_that_absorbed_its_successor_covers_both():
    # Conv+BN style: the first node keeps its name but now writes the second node's output
    opt = _model([
        helper.make_node("MatMul", ["X", "W"], ["add"], name="mm_node"),
        helper.make_node("Relu", ["add"], ["Y"], name="relu_node"),
    ])
    assert sorted(executed_cover(ORIG, opt)["mm_node"]) == ["add_node", "mm_node"]


def test_parse_profile_splits_runs_and_skips_warmup():
    events = [
        {"cat": "Session", "name": "model_run", "ts": 0, "dur": 100},
        {"cat": "Node", "name": "mm_node_kernel_time", "ts": 10, "dur": 50, "args": {"op_name": "MatMul"}},
        {"cat": "Session", "name": "model_run", "ts": 200, "dur": 100},
        {"cat": "Node", "name": "mm_node_kernel_time", "ts": 210, "dur": 40, "args": {"op_name": "MatMul"}},
        {"cat": "Node", "name": "relu_node_kernel_time", "ts": 260, "dur": 5, "args": {"op_name": "Relu"}},
        {"cat": "Node", "name": "relu_node_fence_before", "ts": 259, "dur": 0, "args": {"op_name": "Relu"}},
    ]
    runs = parse_profile(events, {"mm_node": "fc"}, skip_runs=1)
    assert len(runs) == 1
    dur, evs = runs[0]
    assert dur == pytest.approx(100e-6)
    assert [(e.label, e.name, e.scope, e.t_s) for e in evs] == [("mm_node", "MatMul", "fc", pytest.approx(40e-6)),
                                                              ("relu_node", "Relu", "", pytest.approx(5e-6))]
