"""tools/measure_gpu.py (run on a lent GPU): its blind set measures nothing an earlier session did, and the BERT
forward it captures into a CUDA graph is the eager program (tested on the CPU)."""

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
