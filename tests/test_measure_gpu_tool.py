"""tools/measure_gpu.py (run on a lent GPU): its blind set measures nothing an earlier session did, and the BERT
forward it captures into a CUDA graph is the eager program, and its decoder step is the module graphroof prices for
decode.csv (graphroof.frontends.torch.decoder_step; tested on the CPU)."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

from graphroof.validate.data import DATA_DIR

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("measure_gpu", ROOT / "tools" / "measure_gpu.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_blind_set_shapes_were_not_measured_before():
    tool = _tool()
    nk_before = set(tool.GEMM_NK.values())
    assert not nk_before & set(tool.UNSEEN["gemm_nk"].values())
    # every (N, K, M) of the blind set's gemm.csv is new against the two earlier sessions' gemm.csv
    def shapes(folder):
        with open(DATA_DIR / folder / "gemm.csv", newline="") as f:
            return {(int(r["N"]), int(r["K"]), int(r["M"])) for r in csv.DictReader(f)}
    blind = shapes("h200_unseen") | shapes("h100_unseen")
    assert blind and not blind & (shapes("h100_session") | shapes("h200_session"))
    # attention: head dims 64 / 256 and 25 / 40 / 16 heads, where the sessions ran 32 heads of 128
    with open(DATA_DIR / "h200_unseen" / "attention.csv", newline="") as f:
        att = {(int(r["heads"]), int(r["head_dim"])) for r in csv.DictReader(f)}
    assert (32, 128) not in att and {(16, 256), (25, 64), (40, 128)} <= att


def test_unmasked_bert_is_the_eager_forward():
    transformers = pytest.importorskip("transformers")
    import torch

    tool = _tool()
    cfg = transformers.BertConfig(attn_implementation="sdpa", num_hidden_layers=2, hidden_size=64,
                                  num_attention_heads=4, intermediate_size=128)
    bert = transformers.BertModel(cfg).eval()
    ids = torch.randint(0, 1000, (2, 16))
    with torch.no_grad():
        ref = bert(input_ids=ids).pooler_output
        out = tool.unmasked_bert(bert, ids)
    assert torch.equal(ref, out)


def test_decoder_dims_are_the_measured_models():
    # tools/measure_gpu.py: Llama-3-8B (the sessions) and the blind set's Llama-2-13B (UNSEEN["decoder"])
    from graphroof.frontends.torch.decoder_step import DIMS

    tool = _tool()
    assert DIMS["llama-2-13b"] == tool.UNSEEN["decoder"][0]
    assert DIMS["llama-3-8b"] == dict(layers=32, d=4096, inter=14336, heads=32, kv=8, vocab=128256)


def test_the_decoder_step_is_graphroofs_module():
    torch = pytest.importorskip("torch")
    tool = _tool()
    tiny = dict(layers=2, d=64, inter=128, heads=4, kv=2, vocab=256)
    d = tool.Decoder("cpu", 2, 16, **tiny)
    assert d.module.__class__.__name__ == "Step"
    with torch.no_grad():
        y = d.step()
    assert tuple(y.shape) == (2, tiny["vocab"]) and y.dtype == torch.bfloat16 and bool(torch.isfinite(y).all())
    # the step wrote its K / V at the last cache position
    assert d.inputs[1].tolist() == [15]
