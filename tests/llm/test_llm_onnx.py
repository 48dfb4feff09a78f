"""An ONNX decoder with past_key_values inputs: prefill with an empty cache, decode with the past dim bound."""

from __future__ import annotations

import pytest

pytest.importorskip("graphroof.frontends.onnx.load", reason="needs the ONNX frontend")
onnx = pytest.importorskip("onnx")

import numpy as np  # noqa: E402
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from graphroof.graph import Role  # noqa: E402
from graphroof.llm import estimate  # noqa: E402

H, KVH, D, V = 32, 2, 16, 50


def _decoder(tmp_path, with_past=True):
    """One attention layer: embed -> q/k/v projections -> (concat onto the past) -> attention -> o_proj -> lm_head."""
    inits = [nh.from_array(np.zeros(s, np.float32), n) for n, s in
             (("embed", (V, H)), ("wq", (H, H)), ("wk", (H, H)), ("wv", (H, H)), ("wo", (H, H)), ("lm", (H, V)))]
    inits.append(nh.from_array(np.array([0, 0, KVH, D], np.int64), "split_heads"))
    inits.append(nh.from_array(np.array([0, 0, H], np.int64), "merge_heads"))
    s = "/model/layers.0/self_attn"
    n = [h.make_node("Gather", ["embed", "input_ids"], ["x"], name="/model/embed_tokens/Gather")]
    for p in "qkv":
        n += [h.make_node("MatMul", ["x", f"w{p}"], [f"{p}2"], name=f"{s}/{p}_proj/MatMul"),
              h.make_node("Reshape", [f"{p}2", "split_heads"], [f"{p}4"], name=f"{s}/Reshape_{p}"),
              h.make_node("Transpose", [f"{p}4"], [f"{p}t"], perm=[0, 2, 1, 3], name=f"{s}/Transpose_{p}")]
    k, v = "kt", "vt"
    if with_past:
        n += [h.make_node("Concat", ["past_key_values.0.key", "kt"], ["present.0.key"], axis=2, name=f"{s}/Concat_k"),
              h.make_node("Concat", ["past_key_values.0.value", "vt"], ["present.0.value"], axis=2,
                          name=f"{s}/Concat_v")]
        k, v = "present.0.key", "present.0.value"
    n += [h.make_node("Transpose", [k], ["kT"], perm=[0, 1, 3, 2], name=f"{s}/Transpose_kT"),
          h.make_node("MatMul", ["qt", "kT"], ["scores"], name=f"{s}/MatMul_qk"),
          h.make_node("Softmax", ["scores"], ["probs"], axis=-1, name=f"{s}/Softmax"),
          h.make_node("MatMul", ["probs", v], ["ctx"], name=f"{s}/MatMul_pv"),
          h.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3], name=f"{s}/Transpose_ctx"),
          h.make_node("Reshape", ["ctx_t", "merge_heads"], ["ctx3"], name=f"{s}/Reshape_ctx"),
          h.make_node("MatMul", ["ctx3", "wo"], ["attn_out"], name=f"{s}/o_proj/MatMul"),
          h.make_node("Add", ["x", "attn_out"], ["res"], name="/model/layers.0/Add"),
          h.make_node("MatMul", ["res", "lm"], ["logits"], name="/lm_head/MatMul")]
    ins = [h.make_tensor_value_info("input_ids", TP.INT64, ["batch_size", "sequence_length"])]
    outs = [h.make_tensor_value_info("logits", TP.FLOAT, None)]
    if with_past:
        for kind in ("key", "value"):
            ins.append(h.make_tensor_value_info(f"past_key_values.0.{kind}", TP.FLOAT,
                                                ["batch_size", KVH, "past_sequence_length", D]))
            outs.append(h.make_tensor_value_info(f"present.0.{kind}", TP.FLOAT, None))
    g = h.make_graph(n, "decoder", ins, outs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], producer_name="graphroof-tests")
    m.ir_version = min(m.ir_version, onnx.IR_VERSION)
    p = tmp_path / ("decoder_with_past.onnx" if with_past else "decoder.onnx")
    onnx.save(m, str(p))
    return p


def test_onnx_decoder_with_past(tmp_path):
    r = estimate(str(_decoder(tmp_path)), hw="a100", prompt=8, gen=5, batch=[1, 3], ideal=True)
    assert r.kv_cache and r.spec.layers == 1 and r.spec.kv_heads == KVH and r.spec.head_dim == D
    c = r[3]
    g = c.decode.analysis.graph
    assert sum(op.op == "kv_cache.append" for op in g.ops()) == 2
    t = c.decode.analysis.eager_totals.cost  # op-level counts (the kernel view fuses the K^T copy)
    B = 3
    # mean past over the 4 steps (8..11) = 9.5 -> 10.5 keys: one cache-sized tensor is 3 * 2 * 10.5 * 16 * 4 = 4032
    # bytes.  Reads: the K transpose reads K, QK^T reads the K^T copy, PV reads V: 3 * 4032.  Writes: the appends,
    # K and V of one token per sequence (2 * 3 * 2 * 16 * 4 = 768), and the K^T copy this graph makes (4032).
    cache = B * KVH * 10.5 * D * 4
    assert t.kv_read_bytes == pytest.approx(3 * cache)
    assert t.kv_write_bytes == pytest.approx(2 * B * KVH * D * 4 + cache)
    # the cache a server reserves: batch 3 x (8 + 5) tokens x K and V x 2 heads x 16 x fp32 (the K^T copy is not
    # cache)
    assert c.kv_cache_bytes == B * 13 * 2 * KVH * D * 4
    moved = [op for op in g.ops() if op.op == "onnx.Transpose" and op.outputs[0].role is Role.KV_CACHE]
    assert len(moved) == 1
    # prefill: the empty past concatenated with 8 new tokens: 8 tokens written per sequence
    # prefill: the empty past concatenated with 8 new tokens (2 * 3 * 8 * 2 * 16 * 4 = 6144 bytes written), plus the
    # K^T copy of the 8-token cache (3 * 2 * 8 * 16 * 4 = 3072)
    assert c.prefill.analysis.eager_totals.cost.kv_write_bytes == 2 * B * 8 * KVH * D * 4 + B * KVH * 8 * D * 4


def test_onnx_decoder_without_past_recomputes(tmp_path):
    from graphroof.errors import GraphroofWarning

    with pytest.warns(GraphroofWarning, match="no past_key_values inputs"):
        r = estimate(str(_decoder(tmp_path, with_past=False)), hw="a100", prompt=8, gen=3, batch=[2], ideal=True)
    assert not r.kv_cache and any("no past_key_values inputs" in n for n in r.notes)


def test_onnx_decoder_tensor_parallel(tmp_path):
    path = str(_decoder(tmp_path))
    one = estimate(path, hw="a100", prompt=8, gen=5, batch=[2], ideal=True).configs[0]
    two = estimate(path, hw="a100", prompt=8, gen=5, batch=[2], ideal=True, tp=2).configs[0]
    names = {r["name"] for r in two.layer_rows("decode")}
    assert {"model.layers.*.self_attn_all_reduce", "model.embed_tokens_all_reduce", "lm_head_all_gather"} <= names
    # every weight here is split (no norms): half per device; KV heads split: half the cache
    assert two.weight_bytes == one.weight_bytes / 2
    assert two.kv_cache_bytes == one.kv_cache_bytes / 2
