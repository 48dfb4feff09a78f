"""The measured-op -> graph-node mapping on literal events (no runtime needed)."""

from __future__ import annotations

from collections import Counter

import pytest

from graphroof.measure.match import Event, match, norm_name


def ev(name, scope, t_us, *called, label="", index=0):
    names = Counter([norm_name(name), *(norm_name(c) for c in called)])
    return Event(name, scope, t_us * 1e-6, names, index, label)


@pytest.mark.parametrize("raw,want", [
    ("aten._native_batch_norm_legit_no_training", "batch_norm"),
    ("aten::native_layer_norm", "layer_norm"),
    ("aten.addmm", "addmm"),
    ("onnx.Gemm", "gemm"),
    ("com.microsoft.SkipLayerNormalization", "skiplayernormalization"),
    ("_scaled_dot_product_flash_attention_for_cpu", "scaled_dot_product_flash_attention"),
])
def test_norm_name(raw, want):
    assert norm_name(raw) == want


def test_decomposed_linear_matches_inside_the_eager_call():
    # graph (core ATen): addmm in fc, relu in act; eager: linear -> t -> transpose, addmm; relu -> clamp_min
    nodes = [("addmm_1", "aten.addmm", "fc", 1e-6), ("relu_1", "aten.relu", "act", 1e-6)]
    events = [ev("linear", "fc", 10, "t", "transpose", "addmm", index=0), ev("relu", "act", 2, "clamp_min", index=1)]
    r = match(nodes, events)
    assert r.node_time_s == pytest.approx({"addmm_1": 10e-6, "relu_1": 2e-6})
    assert r.how == {"addmm_1": "descendant", "relu_1": "name"}
    assert r.unmatched_nodes == [] and r.unmatched_events == []


def test_shared_event_is_split_by_predicted_time():
    # one eager call covers two graph nodes predicted 3 us and 1 us: 8 us splits 6 / 2
    nodes = [("mm", "aten.mm", "s", 3e-6), ("add", "aten.add", "s", 1e-6)]
    r = match(nodes, [ev("linear", "s", 8, "mm", "add")])
    assert r.node_time_s == pytest.approx({"mm": 6e-6, "add": 2e-6})
    assert r.node_events == {"mm": [0], "add": [0]}


def test_each_called_name_is_used_once():
    # two graph adds but the one eager call made only one add: the second add takes the next event
    nodes = [("a1", "aten.add", "s", 1e-6), ("a2", "aten.add", "s", 1e-6)]
    events = [ev("foo", "s", 4, "add", index=0), ev("add", "s", 1, index=1)]
    r = match(nodes, events)
    assert r.node_time_s == pytest.approx({"a1": 4e-6, "a2": 1e-6})


def test_overhead_events_are_skipped_and_listed():
    nodes = [("conv", "aten.conv2d", "c", 1e-6)]
    events = [ev("empty", "c", 1, index=0), ev("view", "c", 0.5, index=1),
              ev("conv2d", "c", 30, "convolution", "mkldnn_convolution", index=2)]
    r = match(nodes, events)
    assert r.node_time_s == pytest.approx({"conv": 30e-6})
    assert sorted(e.name for e in r.unmatched_events) == ["empty", "view"]


def test_cross_scope_then_position_then_unmatched():
    nodes = [
        ("mean", "aten.mean", "a", 1e-6),        # the runtime ran it in scope "b": cross-scope by name
        ("bn", "aten.weird_bn_variant", "n", 1e-6),  # no name in common: paired by position in its scope
        ("gelu", "aten.gelu", "g", 1e-6),         # nothing ran: unmatched
    ]
    events = [ev("mean", "b", 3, "sum", index=0),
              ev("empty", "n", 1, index=1), ev("batch_norm", "n", 7, "native_batch_norm", index=2)]
    r = match(nodes, events)
    assert r.how == {"mean": "cross-scope", "bn": "position"}
    assert r.node_time_s == pytest.approx({"mean": 3e-6, "bn": 7e-6})  # not the 'empty' view event
    assert r.unmatched_nodes == ["gelu"]
    assert [e.name for e in r.unmatched_events] == ["empty"]


def test_window_limits_how_far_a_node_looks_ahead():
    nodes = [("r", "aten.relu", "s", 1e-6)]
    events = [ev("empty", "s", 1, index=i) for i in range(5)] + [ev("relu", "s", 2, index=5)]
    assert match(nodes, events, window=8).node_time_s == pytest.approx({"r": 2e-6})
    r = match(nodes, events, window=2)
    # pass 1 gives up after 2 events; pass 2 (8x the window) finds it across the stream
    assert r.how == {"r": "cross-scope"}


def test_node_names_match_first_for_onnx_events():
    nodes = [("node_Conv_0", "onnx.Conv", "conv", 1e-6), ("node_Relu_1", "onnx.Relu", "relu", 1e-6),
             ("node_Gemm_2", "onnx.Gemm", "fc", 1e-6)]
    events = [Event("Conv", "", 5e-6, index=0, label="fused_conv_relu"),   # renamed by a fusion
              Event("Gemm", "fc", 2e-6, index=1, label="node_Gemm_2")]
    r = match(nodes, events)
    assert r.how == {"node_Gemm_2": "node-name", "node_Conv_0": "cross-scope"}
    assert r.node_time_s == pytest.approx({"node_Gemm_2": 2e-6, "node_Conv_0": 5e-6})
    assert r.unmatched_nodes == ["node_Relu_1"]


def test_scope_map_rewrites_graph_scopes():
    nodes = [("r", "aten.relu", "model.act", 1e-6)]
    r = match(nodes, [ev("relu", "act", 2)], scope_map={"model.act": "act"})
    assert r.how == {"r": "name"}
