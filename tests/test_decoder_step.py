"""decode.csv's rows price the program the source times (graphroof.frontends.torch.decoder_step): the plain-op
decoder step of tools/measure_gpu.py, not transformers' Llama.  Its kernels are counted by hand here; the validation row
equals the ``graphroof.analyze`` call it names; the measuring tool builds the same module
(tests/test_measure_gpu_tool.py)."""

from __future__ import annotations

import collections

import pytest

import graphroof
from graphroof.frontends.torch.decoder_step import decoder_step
from graphroof.validate import validate

TINY = dict(layers=2, d=64, inter=128, heads=4, kv=2, vocab=256)


def test_the_step_kernels_by_hand():
    m, x = decoder_step(2, 16, **TINY)
    ks = graphroof.analyze(m, x, hw="h200-sxm", runtime="pytorch-cuda-graph").to_dict()["kernels"]
    # per layer, no fusion under pytorch-cuda-graph (views free):
    #   RMSNorm = float cast, pow, mean, + eps, rsqrt, cast back, x * r, * w          8
    #   QKV GEMM 1, two index_copy_ into the cache 2, SDPA 1, O GEMM 1, residual add 1  6
    #   RMSNorm 8, gate+up GEMM 1, SiLU 1, SiLU x up 1, down GEMM 1, residual add 1     13   -> 27 per layer
    # plus the embedding gather 1, the final RMSNorm 8 and the LM head 1: 2 x 27 + 10 = 64
    assert len(ks) == 64
    kinds = collections.Counter(k["kind"] for k in ks)
    assert kinds["gemm"] == 2 * 4 + 1 and kinds["attention"] == 2
    # GEMM weights, bf16 (2 bytes), head dim 64 / 4 = 16:
    #   QKV (4 + 2 x 2) x 16 = 128 x 64 = 8,192; O 64 x 64 = 4,096; gate+up 256 x 64 = 16,384; down 64 x 128 = 8,192
    #   = 36,864 elements a layer; 2 layers + LM head 256 x 64 = 16,384: 90,112 elements = 180,224 bytes
    assert sum(k["weight_bytes"] for k in ks if k["kind"] == "gemm") == 180_224
    # no rotary, no separate Q / K / V or gate / up GEMMs: transformers' program would have them
    ops = collections.Counter(o for k in ks for o in k["op_keys"])
    assert ops["aten.index_copy_"] == 4 and not {"aten.cat", "aten.neg", "aten.cos", "aten.sin"} & set(ops)


def test_the_row_equals_the_call_it_names():
    row_id = "h200_unseen/decode.csv:3"   # Llama-2-13B-shaped decode, batch 16, context 2048
    r = validate("torch_gpu", only=[row_id])
    [row] = [x for x in r.rows if x.row_id == row_id]
    assert row.scored and row.figure == "tpot" and row.runtime == "pytorch-cuda-graph"
    assert row.command.startswith("graphroof.analyze(*graphroof.frontends.torch.decoder_step.decoder_step(16, 2048, "
                                  "'llama-2-13b'), hw='h200-sxm', runtime='pytorch-cuda-graph')")
    m, x = decoder_step(16, 2048, "llama-2-13b")
    a = graphroof.analyze(m, x, hw="h200-sxm", runtime="pytorch-cuda-graph")
    assert row.predicted == pytest.approx(a.totals.t_realistic_s, rel=1e-9)



def test_the_step_graph_is_read_back_from_the_trace_store(tmp_path, monkeypatch):
    import graphroof.frontends.torch.decoder_step as ds
    from graphroof.frontends import load

    monkeypatch.setenv("GRAPHROOF_CACHE", "on")
    monkeypatch.setenv("GRAPHROOF_CACHE_DIR", str(tmp_path / "store"))
    first = ds.decoder_step_graph(1, 16)
    fresh = load(*ds.decoder_step(1, 16))

    def no_capture(*a, **k):
        raise AssertionError("captured again: the trace store missed")

    monkeypatch.setattr(ds, "decoder_step", no_capture)
    again = ds.decoder_step_graph(1, 16)
    t = [graphroof.analyze(g, hw="h200-sxm", runtime="pytorch-cuda-graph").totals for g in (first, again, fresh)]
    assert t[0].t_realistic_s == t[1].t_realistic_s == t[2].t_realistic_s
    assert t[0].cost == t[1].cost == t[2].cost
    # another shape is another entry: captured (and here refused)
    with pytest.raises(AssertionError, match="captured again"):
        ds.decoder_step_graph(2, 16)
