"""The vision / encoder rows' graphs at many batches from three traces, and the LLM rows' graphs at other batches
derived from two (graphroof/validate/traces.py): a graph linear in the batch is interpolated exactly (the same
graph a trace gives), anything else is traced at every batch.  And the datasets priced by parallel workers give
the same rows as in one process (graphroof/validate/run.py).

Hand-built graphs stand in for the traces (no torch): a linear layer ``y[b, 64] = x[b, 32] @ w[32, 64]`` then a
ReLU, whose dims are ``b`` or constants; and a graph with a ``b * b`` dim (not linear) that must not be
interpolated."""

from __future__ import annotations

from graphroof.frontends.source import LLMSource, ModelSpec
from graphroof.graph import OpGraph, OpNode, Role, TensorSpec
from graphroof.validate.traces import BatchDerived, graphs_at, graphs_by_batch, same_graph


def _mlp(b: int) -> OpGraph:
    g = OpGraph("mlp", {"model": "mlp", "inputs": f"x=fp16[{b},32]"})
    w = TensorSpec((32, 64), "fp16", Role.WEIGHT)
    g.add_op(OpNode("fc", "aten.mm", (TensorSpec((b, 32), "fp16"), w), (TensorSpec((b, 64), "fp16"),),
                    scope="fc"), ["x", "w"], ["h"])
    g.add_op(OpNode("relu", "aten.relu", (TensorSpec((b, 64), "fp16"),), (TensorSpec((b, 64), "fp16"),),
                    scope="act"), ["h"], ["y"])
    return g


def _square(b: int) -> OpGraph:
    g = OpGraph("sq", {"model": "sq"})
    g.add_op(OpNode("outer", "aten.mm", (TensorSpec((b, 1), "fp16"), TensorSpec((1, b), "fp16")),
                    (TensorSpec((b * b,), "fp16"),)), ["a", "b"], ["c"])
    return g


class _Counting:
    def __init__(self, build):
        self.build, self.calls = build, []

    def __call__(self, b: int) -> OpGraph:
        self.calls.append(b)
        return self.build(b)


def test_linear_graph_is_traced_three_times_and_interpolated_exactly():
    batches = [1, 2, 4, 8, 16, 32]
    trace = _Counting(_mlp)
    graphs, traced = graphs_by_batch(trace, batches)
    # the ends (1, 32) and the middle of the six sorted batches (index 3: batch 8)
    assert sorted(trace.calls) == [1, 8, 32] and traced == [1, 8, 32]
    for b in batches:
        assert same_graph(graphs[b], _mlp(b)), b
    # batch 4 from the traces at 1 and 32: weights (32 - 4) / 31 and (4 - 1) / 31 -> 28/31 * 1 + 3/31 * 32 = 4
    assert graphs[4].node("fc").inputs[0].shape == (4, 32)
    assert graphs[4].meta["inputs"] == "x=fp16[4,32]"


def test_a_dim_not_linear_in_the_batch_traces_every_batch():
    batches = [1, 2, 3, 4, 5]
    trace = _Counting(_square)
    graphs, traced = graphs_by_batch(trace, batches)
    # 3 interpolated from (1, 5): weights 1/2, 1/2 on 1 and 25 -> 13, not the traced 9: every batch is traced
    assert sorted(trace.calls) == batches and traced == batches
    assert graphs[3].node("outer").outputs[0].shape == (9,)


def test_few_batches_are_traced_directly():
    trace = _Counting(_mlp)
    graphs, traced = graphs_by_batch(trace, [4, 1, 4, 2])
    assert sorted(trace.calls) == [1, 2, 4] and traced == [1, 2, 4] and set(graphs) == {1, 2, 4}


def test_same_graph_sees_every_difference():
    a = _mlp(2)
    assert same_graph(a, _mlp(2)) and not same_graph(a, _mlp(3))
    b = _mlp(2)
    b.meta["inputs"] = "x"
    assert not same_graph(a, b)
    c = _mlp(2)
    c.name = "other"
    assert not same_graph(a, c)


class _Src(LLMSource):
    """A hand-built LLM source: the prefill graph at (batch, seq) is ``_mlp(batch * seq)`` (rows = tokens), the
    decode graph ``build(batch)`` at any past; it counts its traces."""

    def __init__(self, decode=_mlp):
        self.spec = ModelSpec(name="toy")
        self.notes: list[str] = []
        self.calls: list[tuple] = []
        self._decode = decode

    def prefill_graph(self, batch: int, seq: int) -> OpGraph:
        self.calls.append(("prefill", batch, seq))
        return _mlp(batch * seq)

    def decode_graph(self, batch: int, past: int) -> OpGraph:
        self.calls.append(("decode", batch, past))
        return self._decode(batch)


def test_llm_graphs_at_other_batches_are_derived_after_one_check():
    src = _Src()
    shared = BatchDerived(src)
    for b in (1, 8, 4, 16, 2):
        g = shared.prefill_graph(b, 3)
        assert same_graph(g, _mlp(b * 3)), b
    # 1 and 8 traced; 4 could be derived: traced as the check (equal); 16 and 2 derived from the traces at 1 and 8
    # (16: weights -8/7 and 15/7 on 3 and 24 rows -> -24/7 + 360/7 = 48 = 16 * 3)
    assert src.calls == [("prefill", 1, 3), ("prefill", 8, 3), ("prefill", 4, 3)]
    assert (shared.traces, shared.derived) == (3, 2)
    assert shared.prefill_graph(16, 3) is shared.prefill_graph(16, 3)  # kept
    shared.prefill_graph(2, 5)  # another context: no two traced batches there yet
    assert src.calls[-1] == ("prefill", 2, 5)


def test_llm_graphs_not_linear_in_the_batch_are_all_traced():
    src = _Src(decode=_square)
    shared = BatchDerived(src)
    for b in (1, 2, 3, 4):
        assert same_graph(shared.decode_graph(b, 7), _square(b))
    # 3 from (1, 2): 2 * 4 - 1 = 7 rows, not 9: the check fails and every later point is traced too
    assert [c[1] for c in src.calls] == [1, 2, 3, 4] and shared.derived == 0


def test_parallel_workers_give_the_same_rows(tmp_path):
    """``validate(jobs=2)`` forks one worker per dataset (in a fresh interpreter: no torch imported yet)."""
    import subprocess
    import sys

    code = ("import graphroof.validate as v, json\n"
            "a = v.validate('vidur_allreduce,kernels', jobs=2)\n"
            "b = v.validate('vidur_allreduce,kernels', jobs=1)\n"
            # compared as JSON: a row with no measured figure carries NaN, which never equals itself
            "print(json.dumps([json.dumps(a.row_dicts()) == json.dumps(b.row_dicts()), len(a.rows)]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600,
                         env={**__import__("os").environ, "GRAPHROOF_CACHE": "off"})
    same, n = __import__("json").loads(out.stdout.strip().splitlines()[-1])
    assert same and n > 9900


def _enc(b: int, s: int, flat_scores: bool = False) -> OpGraph:
    """An encoder-like graph: a projection of the ``b * s`` tokens and attention scores ``[b, 4, s, s]`` (every dim
    of degree <= 1 in b and in s), or the scores flattened to ``b * 4 * s * s`` (degree 2 in s)."""
    g = OpGraph("enc", {"model": "enc", "inputs": f"ids=int64[{b},{s}]"})
    w = TensorSpec((32, 32), "fp16", Role.WEIGHT)
    g.add_op(OpNode("proj", "aten.mm", (TensorSpec((b * s, 32), "fp16"), w), (TensorSpec((b * s, 32), "fp16"),)),
             ["x", "w"], ["h"])
    scores = (b * 4 * s * s,) if flat_scores else (b, 4, s, s)
    g.add_op(OpNode("scores", "aten.bmm", (TensorSpec((b * 4, s, 8), "fp16"), TensorSpec((b * 4, 8, s), "fp16")),
                    (TensorSpec(scores, "fp16"),)), ["h", "h"], ["sc"])
    return g


def test_encoder_graphs_over_batch_and_sequence_from_five_traces():
    pts = [(b, s) for b in (1, 8, 32) for s in (32, 128, 384)]
    calls: list[tuple] = []

    def trace(b, s):
        calls.append((b, s))
        return _enc(b, s)

    graphs, n = graphs_at(trace, pts)
    # the corners (1 | 32) x (32 | 384) and one inner point as the check: 5 traces for 9 graphs
    assert n == 5 and len(calls) == 5 and {(1, 32), (1, 384), (32, 32), (32, 384)} <= set(calls)
    for p in pts:
        assert same_graph(graphs[p], _enc(*p)), p
    # (8, 128) from the corners: weights (24/31, 7/31) in b and (256/352, 96/352) in s on b * s at the corners
    # 32, 384, 1024, 12288 -> 8 * 128 = 1024 rows
    assert graphs[8, 128].node("proj").inputs[0].shape == (1024, 32)


def test_encoder_graphs_with_a_square_dim_fall_back_per_sequence():
    pts = [(b, s) for b in (1, 8, 32) for s in (32, 128, 384)]
    calls: list[tuple] = []

    def trace(b, s):
        calls.append((b, s))
        return _enc(b, s, flat_scores=True)

    graphs, n = graphs_at(trace, pts)
    # the 2 x 2 grid misses s^2 at the check: every sequence on its own, 3 batches each (the corners reused)
    assert n == 9 and len(calls) == 9
    for p in pts:
        assert same_graph(graphs[p], _enc(*p, flat_scores=True)), p
