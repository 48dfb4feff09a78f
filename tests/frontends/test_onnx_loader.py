"""ONNX loader: roles, scopes, dims and input overrides, external data, bad inputs (one-line errors)."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper as h  # noqa: E402

import graphroof  # noqa: E402
from graphroof.cli import main  # noqa: E402
from graphroof.counters.cost import Cost  # noqa: E402
from graphroof.errors import FrontendError, GraphroofWarning, InputError, UnboundDimError  # noqa: E402
from graphroof.frontends import load  # noqa: E402
from graphroof.frontends.onnx.load import is_kv_name, load_onnx, scope_of  # noqa: E402
from graphroof.graph import Role  # noqa: E402
from tests.frontends._onnx_build import F32, I64, cost, counted, init, model, node, save, total, vi  # noqa: E402


def _mlp(batch="batch"):
    nodes = [node("MatMul", ["x", "w1"], ["h"], name="/encoder/layers.0/fc1/MatMul"),
             node("Relu", ["h"], ["r"], name="/encoder/layers.0/act/Relu"),
             node("MatMul", ["r", "w2"], ["y"], name="/encoder/layers.0/fc2/MatMul")]
    return model(nodes, [vi("x", F32, [batch, 8])], ["y"], [init("w1", (8, 16)), init("w2", (16, 4))])


# -- roles and scopes -----------------------------------------------------------------------------------

def test_roles_weights_constants_activations_kv(tmp_path):
    nodes = [node("Constant", [], ["c"], value=h.make_tensor("v", onnx.TensorProto.FLOAT, [2], [1.0, 2.0])),
             node("Concat", ["past_key_values.0.key", "k"], ["present.0.key"], axis=2),
             node("Mul", ["k", "c"], ["kc"]), node("Add", ["kc", "w"], ["y"])]
    m = model(nodes, [vi("past_key_values.0.key", F32, [1, 2, "past", 2]), vi("k", F32, [1, 2, 1, 2])],
              ["present.0.key", "y"], [init("w", (2,))])
    g = load_onnx(save(tmp_path, m))
    cat = g.node("present.0.key")
    assert [t.role for t in cat.inputs] == [Role.KV_CACHE, Role.ACTIVATION]
    assert cat.outputs[0].role is Role.KV_CACHE and cat.outputs[0].shape == (1, 2, "past + 1", 2)
    assert g.node("kc").inputs[1].role is Role.CONST and g.node("y").inputs[1].role is Role.WEIGHT
    g2 = counted(save(tmp_path, m), dims={"past": 7})
    c = cost(g2, "present.0.key")
    assert c.kv_read_bytes == 1 * 2 * 7 * 2 * 4 and c.kv_write_bytes == 1 * 2 * 8 * 2 * 4


@pytest.mark.parametrize("name,ok", [("past_key_values.3.value", True), ("present.0.key", True),
                                     ("cache_k", True), ("past_sequence_length", False), ("input_ids", False),
                                     ("attention_mask", False)])
def test_kv_names(name, ok):
    assert is_kv_name(name) is ok


def test_scope_from_names_metadata_and_weights(tmp_path):
    assert scope_of(h.make_node("MatMul", [], [], name="/model/layers.0/self_attn/q_proj/MatMul")) == \
        "model.layers.0.self_attn.q_proj"
    n = h.make_node("Gemm", [], [], name="node_linear")
    onnx.helper.set_metadata_props(n, {"pkg.torch.onnx.name_scopes": "['', 'layers.0', 'layers.0.fc1', 'linear']"})
    assert scope_of(n) == "layers.0.fc1"
    n = h.make_node("Relu", [], [], name="node_relu")
    onnx.helper.set_metadata_props(n, {"namespace": ": m.M/blocks.2: m.B/blocks.2.act: nn.ReLU/relu: aten.relu"})
    assert scope_of(n) == "blocks.2.act"
    assert scope_of(h.make_node("Add", [], [], name="Add_12")) == ""
    # no path anywhere: the module path of the weight the node reads
    m = model([node("MatMul", ["x", "encoder.layer.3.dense.weight"], ["y"], name="MatMul_7")], [vi("x", F32, [2, 4])],
              ["y"], [init("encoder.layer.3.dense.weight", (4, 4))])
    assert load_onnx(save(tmp_path, m)).node("MatMul_7").scope == "encoder.layer.3.dense"


def test_meta_and_rollup_by_scope(tmp_path):
    a = graphroof.analyze(save(tmp_path, _mlp()), hw="a100", dims={"batch": 2}, runtime="eager")
    assert a.graph.meta["capture"] == "onnx" and a.graph.meta["model"] == "m"
    assert a.graph.meta["producer"] == "graphroof-tests" and a.graph.meta["opset"] == 20
    assert [r["name"] for r in a.layers] == ["encoder.layers.0.fc1", "encoder.layers.0.act", "encoder.layers.0.fc2"]
    # 2*2*16*8 + 2*16 + 2*2*4*16 = 512 + 32 + 256
    assert a.totals.cost.flops == 800


# -- dims and input overrides ---------------------------------------------------------------------------

def test_symbolic_dims_stay_until_bound(tmp_path):
    p = save(tmp_path, _mlp())
    g = load_onnx(p)
    assert g.node("/encoder/layers.0/fc1/MatMul").outputs[0].shape == ("batch", 16)
    assert g.symbolic_dims() == {"batch"}
    with pytest.raises(UnboundDimError, match=r"'batch'.*--dim NAME=VALUE"):
        graphroof.analyze(p, hw="a100")
    for opts in ({"dims": {"batch": 3}}, {"input_shapes": {"x": (3, 8)}}, {"input_shapes": [(3, 8)]}):
        g = load_onnx(p, **opts)
        assert g.node("/encoder/layers.0/fc1/MatMul").outputs[0].shape == (3, 16)
        assert g.meta["dims"].get("batch", 3) == 3


def test_input_override_errors(tmp_path):
    p = save(tmp_path, _mlp())
    with pytest.raises(InputError, match="no input named 'y'.*x \\(batchx8\\)"):
        load_onnx(p, input_shapes={"y": (1, 8)})
    with pytest.raises(InputError, match="rank 3"):
        load_onnx(p, input_shapes={"x": (1, 8, 2)})
    with pytest.raises(InputError, match="fixed to 8"):
        load_onnx(p, input_shapes={"x": (1, 9)})
    with pytest.raises(InputError, match="already 4"):
        load_onnx(p, dims={"batch": 4}, input_shapes={"x": (2, 8)})
    with pytest.raises(InputError, match="2 shapes"):
        load_onnx(p, input_shapes=[(1, 8), (1, 8)])


def test_unused_dim_is_an_error_listing_the_models_dims(tmp_path):
    # issue 27: a misspelled --dim used to be a warning, the header still saying (bacth=2)
    with pytest.raises(InputError, match=r"--dim bacth=2: m has no symbolic dim 'bacth' \(did you mean --dim "
                                         r"batch=2\?\); its symbolic dims: batch"):
        load_onnx(save(tmp_path, _mlp()), dims={"batch": 1, "bacth": 2})


def test_cli_unbound_dim_is_one_line(tmp_path, capsys):
    assert main(["analyze", str(save(tmp_path, _mlp()))]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'batch'" in err[0] and "--dim" in err[0]


def test_cli_with_dims_and_inputs(tmp_path, capsys):
    p = str(save(tmp_path, _mlp()))
    assert main(["-q", "analyze", p, "--hw", "a100", "--dim", "batch=8", "-f", "json"]) == 0
    import json

    d = json.loads(capsys.readouterr().out)
    assert d["totals"]["flops"] == 4 * 800 and d["dims"] == {"batch": 8}
    assert main(["-q", "analyze", p, "--input", "x=8x8", "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["flops"] == 4 * 800


# -- weights never read ---------------------------------------------------------------------------------

def test_external_data_deleted_gives_same_numbers(tmp_path):
    m = model([node("MatMul", ["x", "w"], ["h"]), node("Gelu", ["h"], ["y"])], [vi("x", F32, ["n", 64])], ["y"],
              [init("w", (64, 128), value=np.random.default_rng(0).random((64, 128), dtype=np.float32))])
    p = save(tmp_path, m, save_as_external_data=True, location="m.onnx.data", size_threshold=0)
    before = total(counted(p, dims={"n": 4}))
    (tmp_path / "m.onnx.data").unlink()
    g = counted(p, dims={"n": 4})
    assert total(g) == before
    assert before.weight_bytes == 64 * 128 * 4 and before.matrix_flops == 2 * 4 * 128 * 64
    assert "external data" in g.meta["notes"][0]


def test_local_functions_are_inlined(tmp_path):
    fn = h.make_function("local", "Square", ["a"], ["b"], [h.make_node("Mul", ["a", "a"], ["b"])],
                         [h.make_opsetid("", 20)])
    m = model([node("Square", ["x"], ["y"], domain="local")], [vi("x", F32, [5])], ["y"], functions=[fn],
              domains=["local"])
    g = counted(save(tmp_path, m))
    assert [o.op for o in g.ops()] == ["onnx.Mul"] and total(g).vector_flops == 5


# -- bad inputs -----------------------------------------------------------------------------------------

def _one_line_error(capsys, path) -> str:
    assert main(["analyze", str(path), "--hw", "a100"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("graphroof: error: "), err
    return err[0]


def test_not_a_file(tmp_path, capsys):
    (tmp_path / "dir.onnx").mkdir()
    assert "is a directory" in _one_line_error(capsys, tmp_path / "dir.onnx")
    assert "not found" in _one_line_error(capsys, tmp_path / "missing.onnx")


def test_truncated_protobuf(tmp_path, capsys):
    p = save(tmp_path, _mlp())
    data = p.read_bytes()
    for cut in (len(data) // 2, len(data) - 3, 40):
        p.write_bytes(data[:cut])
        with pytest.raises(FrontendError, match="truncated"):
            load_onnx(p)
    assert "truncated" in _one_line_error(capsys, p)


def test_text_and_lfs_and_empty_files(tmp_path, capsys):
    p = tmp_path / "t.onnx"
    p.write_text("<ir_version: 8, opset_import: [\"\" : 17]>\nagraph (float[N] x) => (float[N] y) { y = Relu(x) }\n")
    assert "text file" in _one_line_error(capsys, p)
    p.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12345\n")
    assert "git lfs pull" in _one_line_error(capsys, p)
    p.write_bytes(b"")
    assert "empty" in _one_line_error(capsys, p)


def test_opset_newer_than_onnx_knows(tmp_path, capsys):
    m = _mlp()
    m.opset_import[0].version = 99
    assert "opset 99" in _one_line_error(capsys, save(tmp_path, m))


def test_unknown_domain_op_is_bytes_only_with_warning(tmp_path):
    m = model([node("Frobnicate", ["x"], ["f"], domain="acme.ops"), node("Relu", ["f"], ["y"])],
              [vi("x", F32, [2, 3])], ["y"], domains=["acme.ops"])
    p = save(tmp_path, m)
    with pytest.warns(GraphroofWarning, match="no rule for 'acme.ops.Frobnicate'"):
        a = graphroof.analyze(p, hw="a100")
    row = next(r for r in a.ops if r["op"] == "acme.ops.Frobnicate")
    assert row["estimated"] and row["flops"] == 0 and row["bytes"] == 24 + 24
    assert any("assumed its output" in n for n in a.notes())
    assert next(r for r in a.ops if r["op"] == "onnx.Relu")["flops"] == 6  # inference went on from the guess


def test_dispatch_from_frontends_load(tmp_path):
    g = load(save(tmp_path, _mlp()), dims={"batch": 1})
    assert len(g) == 3 and total(counted(save(tmp_path, _mlp()), dims={"batch": 1})) == Cost(
        matrix_flops=2 * 16 * 8 + 2 * 4 * 16, vector_flops=16,
        weight_bytes=(8 * 16 + 16 * 4) * 4, act_read_bytes=(8 + 16 + 16) * 4, act_write_bytes=(16 + 16 + 4) * 4)
    assert I64  # dtype constant used by other tests


def test_unnamed_fused_ops_take_their_neighbours_scope(tmp_path):
    nodes = [node("Relu", ["x"], ["r"], name="Relu_0"),                      # no scope info: first consumer's
             node("MatMul", ["r", "w"], ["h"], name="/enc/layer.1/fc/MatMul"),
             node("FastGelu", ["h"], ["g"], name="FastGelu_3", domain="com.microsoft"),  # latest producer's
             node("Neg", ["g"], ["y"], name="/Neg")]                          # stated: the root module
    m = model(nodes, [vi("x", F32, [2, 4])], ["y"], [init("w", (4, 4))], ms=True)
    g = load_onnx(save(tmp_path, m))
    assert [op.scope for op in g.ops()] == ["enc.layer.1.fc", "enc.layer.1.fc", "enc.layer.1.fc", ""]


def test_batch_and_seq_flags_point_to_dim(tmp_path):
    with pytest.warns(GraphroofWarning, match="--seq applies to zoo.*--dim NAME=VALUE"):
        load_onnx(save(tmp_path, _mlp()), seq=128, dims={"batch": 1})
