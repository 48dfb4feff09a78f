"""Issue 27 (C1): ``--dim`` names checked against an ONNX model's dims; ``--batch N`` re-batches an ONNX model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")

import numpy as np  # noqa: E402

import graphroof  # noqa: E402
from graphroof.cli import main  # noqa: E402
from graphroof.errors import InputError  # noqa: E402
from graphroof.frontends.onnx.load import load_onnx  # noqa: E402
from tests.frontends._onnx_build import F32, I64, init, model, node, save, vi  # noqa: E402

RESNET = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_resnet50.onnx"


def _fixed(batch: int = 1, reshape: bool = False):
    """x[batch, 8] @ w[8, 4] -> relu -> y; with *reshape*, y is reshaped to a constant [1, 4] (batch fixed inside)."""
    nodes = [node("MatMul", ["x", "w"], ["h"]), node("Relu", ["h"], ["y" if not reshape else "r"])]
    inits = [init("w", (8, 4))]
    if reshape:
        nodes.append(node("Reshape", ["r", "shape"], ["y"], name="flatten"))
        inits.append(init("shape", (2,), np.int64, np.array([1, 4])))
    return model(nodes, [vi("x", F32, [batch, 8])], [vi("y", F32, [batch, 4])], inits)


def _flops(p, **opts) -> float:
    return graphroof.analyze(p, hw="a100", **opts).totals.cost.flops


def test_batch_overrides_a_fixed_leading_dim(tmp_path):
    p = save(tmp_path, _fixed())
    g = load_onnx(p, batch=8)
    assert g.node("h").outputs[0].shape == (8, 4) and g.node("y").outputs[0].shape == (8, 4)
    assert g.meta["dims"] == {"batch": 8} and any("re-batched with --batch 8" in n for n in g.meta["notes"])
    # MatMul 2*M*K*N = 2*8*8*4 = 512 FLOPs, Relu 8*4 = 32: 544 (batch 1: 2*1*8*4 + 4 = 68 = 544 / 8)
    assert _flops(p, batch=8) == 544 and _flops(p) == 68


def test_batch_binds_a_symbolic_leading_dim(tmp_path):
    p = save(tmp_path, _fixed(batch="N"))
    assert load_onnx(p, batch=8).node("h").outputs[0].shape == (8, 4)
    with pytest.raises(InputError, match="--batch 8 and --dim N=2 disagree"):
        load_onnx(p, batch=8, dims={"N": 2})


def test_batch_fixed_inside_the_graph_is_refused(tmp_path):
    p = save(tmp_path, _fixed(reshape=True))
    with pytest.raises(InputError, match=r"--batch 8: m cannot be re-batched: its graph fixes the batch at 1 inside "
                                         r"\(node 'flatten' \(Reshape\) gives 1x4 at batch 8\), so output 'y' "
                                         r"stays 1x4; export it with a dynamic batch dim"):
        load_onnx(p, batch=8)


def test_dim_on_a_fixed_model_says_it_has_none_and_points_at_batch(tmp_path):
    with pytest.raises(InputError, match=r"--dim batch=8: m has no symbolic dims \(every input shape is fixed: x "
                                         r"1x8\); to run it at another batch size use --batch N"):
        load_onnx(save(tmp_path, _fixed()), dims={"batch": 8})


@pytest.mark.skipif(not RESNET.exists(), reason="the onnx wheel's light_resnet50.onnx is absent")
@pytest.mark.parametrize("args, msg", [
    (["--dim", "batch=8"], "--dim batch=8: light_resnet50 has no symbolic dims"),
    (["--dim", "bacth=8"], "--dim bacth=8: light_resnet50 has no symbolic dims"),
    (["--batch", "8"], "--batch 8: light_resnet50 cannot be re-batched: its graph fixes the batch at 1 inside (node "),
])
def test_cli_resnet50_batch_is_never_silently_one(capsys, tmp_path, args, msg):
    out = tmp_path / "r.json"
    assert main(["analyze", str(RESNET), *args, "-f", "json", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"graphroof: error: {msg}") and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_cli_batch_on_onnx_and_errors_in_flags(tmp_path, capsys):
    p = str(save(tmp_path, _fixed()))
    assert main(["-q", "analyze", p, "--batch", "8", "-f", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["dims"] == {"batch": 8} and d["totals"]["flops"] == 544
    assert main(["analyze", p, "--seq", "8"]) == 1  # a flag that does not apply: named as a flag
    err = capsys.readouterr().err
    assert err.startswith("graphroof: error: --seq does not apply to an ONNX model") and "dims" not in err
    assert main(["analyze", p, "--batch", "8", "--input", "x=2x8"]) == 1
    assert "--batch and --input both size the inputs" in capsys.readouterr().err


def test_int_input_model_rebatches_too(tmp_path):
    m = model([node("Gather", ["emb", "ids"], ["y"])], [vi("ids", I64, [1, 5])], [vi("y", F32, [1, 5, 4])],
              [init("emb", (10, 4))])
    g = load_onnx(save(tmp_path, m), batch=3)
    assert g.node("y").outputs[0].shape == (3, 5, 4)
