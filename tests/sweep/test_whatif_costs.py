"""What-if costs (graphroof.sweeps.whatif_costs): the per-kernel polynomials reproduce graphroof.analyze at other
shapes, a cost that is not polynomial falls back to linear scaling (said), models without shapes stay constant."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("transformers")

import graphroof  # noqa: E402
from graphroof.sweeps.whatif_costs import BASIS, FIELDS, analyze_whatif, basis  # noqa: E402

TINY = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=1000,
            max_position_embeddings=512, torch_dtype="bfloat16")


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory):
    p = tmp_path_factory.mktemp("wi") / "config.json"
    p.write_text(json.dumps(TINY))
    return p


def roofline_s(w: dict, b: int, s: int, dev: int = 0) -> float:
    """The page's pricing (whatif.js) in Python: Σ per kernel max(compute, memory)."""
    d = w["devices"][dev]
    x = np.array(basis(b / w["traced"]["batch"], s / w["traced"]["seq"]))
    t = 0.0
    for k in w["kernels"]:
        v = np.array(k["c"]) @ x
        pm, pv = d["peaks_flops_per_s"][k["dtype"]]
        t += max(v[0] / pm + v[1] / pv, sum(v[2:7]) / d["mem_bw_bytes_per_s"])
    return t


def test_fit_reproduces_analyze_at_other_shapes(tiny_config):
    a = analyze_whatif(str(tiny_config), hw="a100", batch=1, seq=16)
    w = a.whatif
    assert w["fit"] == "exact" and w["axes"] == ["batch", "seq"] and "exactly" in w["fit_note"]
    assert w["basis"] == list(BASIS) and w["fields"] == list(FIELDS)
    assert json.loads(json.dumps(w, allow_nan=False)) == w           # plain JSON
    assert roofline_s(w, 1, 16) == pytest.approx(a.totals.t_lower_s, rel=1e-9)
    for b, s in ((3, 16), (5, 40)):                                     # off the grid: extrapolated, still exact
        want = graphroof.analyze(str(tiny_config), hw="a100", batch=b, seq=s).time_roofline_s
        assert roofline_s(w, b, s) == pytest.approx(want, rel=1e-6)
    # another device from the page's list: the same as analysing on it
    names = [d["name"] for d in w["devices"]]
    assert names[0] == "a100-80gb-sxm" and "h100-sxm" in names and "mi300x-192gb-oam" in names
    h = names.index("h100-sxm")
    want = graphroof.analyze(str(tiny_config), hw="h100", batch=2, seq=24).time_roofline_s
    assert roofline_s(w, 2, 24, h) == pytest.approx(want, rel=1e-6)


def test_not_polynomial_falls_back_to_linear_and_says_so(tiny_config, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({**TINY, "vocab_size": 40}))   # the embedding gather reads min(tokens, vocab) rows
    w = analyze_whatif(str(cfg), hw="a100", batch=1, seq=32).whatif
    assert w["fit"] == "linear"
    assert "not one polynomial" in w["fit_note"] and "linearly" in w["fit_note"]


def test_op_table_is_constant():
    a = analyze_whatif("examples/textbook_ops.csv", hw="a100")
    w = a.whatif
    assert w["fit"] == "fixed" and w["axes"] == []
    assert roofline_s({**w, "traced": {**w["traced"], "seq": 1}}, 7, 1) == pytest.approx(a.totals.t_lower_s)
