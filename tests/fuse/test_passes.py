"""Kernels a compiler adds around the fused ones (graphroof.fuse.passes): XLA's attention layout copies and its
norm / softmax statistics passes; bytes derived by hand in the comments (fp16: 2 bytes per element, statistics
fp32: 4 bytes per row)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from graphroof.counters import count
from graphroof.counters.settings import CountSettings
from graphroof.errors import InputError
from graphroof.fuse import fuse, get_runtime
from graphroof.fuse.passes import COPY_KEY, INIT_KEY, SCALE_KEY, STAT_KEY, scores_bytes, stat_passes
from graphroof.fuse.preset_file import preset_fields
from graphroof.graph import OpGraph, OpNode, Role, TensorSpec

T, H = 8, 64


def act(*shape):
    return TensorSpec(shape, "fp16", Role.ACTIVATION)


def wt(*shape):
    return TensorSpec(shape, "fp16", Role.WEIGHT)


def xla_like(**kw):
    """The compiled preset with the passes switched on (what tf-xla.toml says of XLA)."""
    return replace(get_runtime("compiled"), **{"layout_copies": True, "reduction_passes": True, **kw})


def residual_layer_norm() -> OpGraph:
    """add(x, r) -> layer_norm(., gamma, beta), [T, H] fp16."""
    g = OpGraph("ln")
    g.add_op(OpNode("add", "aten.add", (act(T, H), act(T, H)), (act(T, H),), scope="ln"), ["x", "r"], ["s"])
    g.add_op(OpNode("ln", "aten.layer_norm", (act(T, H), wt(H), wt(H)), (act(T, H),), scope="ln"),
             ["s", "gamma", "beta"], ["y"])
    count(g, warn=False)
    return g


def test_stat_passes_per_op():
    # LayerNorm: mean, then variance about it; RMSNorm: the mean square; softmax: max, then sum of exponentials;
    # an inference batch norm uses running statistics; an add is no norm
    assert [stat_passes(k) for k in ("aten.layer_norm", "aten.rms_norm", "aten._softmax", "aten.softmax",
                                     "onnx.LayerNormalization", "aten.batch_norm", "aten.add", "aten.mean")] \
        == [2, 1, 2, 2, 2, 0, 0, 0]


def test_layer_norm_runs_two_statistics_passes_each_after_a_memset():
    kg = fuse(residual_layer_norm(), xla_like())
    names = [k.name for k in kg.kernels]
    assert names == ["ln+1.stat0_init", "ln+1.stat0", "ln+1.stat1_init", "ln+1.stat1", "ln+1"]
    init, stat, norm = kg.kernels[0], kg.kernels[1], kg.kernels[-1]
    # each statistics pass re-reads x and r (the residual add is recomputed): 2 x T x H x 2 B = 2 x 8 x 64 x 2
    # = 2048 B, and writes one fp32 value per row: T x 4 = 32 B; its memset writes the same 32 B
    assert stat.cost.act_read_bytes == 2 * T * H * 2 == 2048
    assert stat.cost.act_write_bytes == T * 4 == 32
    assert (init.cost.act_read_bytes, init.cost.act_write_bytes) == (0, 32)
    assert (stat.op_keys, init.op_keys, norm.op_keys) == ((STAT_KEY,), (INIT_KEY,), (SCALE_KEY,))
    # the normalising kernel is the fused one as counted (reads x, r: 2048 B, gamma + beta: 256 B, writes y)
    plain = fuse(residual_layer_norm(), "compiled").kernels[0]
    assert norm.cost == plain.cost
    # the added kernels run no op of the graph: 0 ops, and the op graph's op count is unchanged
    assert [k.n_ops for k in kg.kernels] == [0, 0, 0, 0, 2]
    g = residual_layer_norm()
    ks = fuse(g, xla_like()).as_opgraph(g)
    assert sum(int(n.attrs["n_ops"]) for n in ks.ops()) == 2
    assert ks.node("ln+1").attrs["op_keys"] == (SCALE_KEY,)
    assert ks.node("ln+1").attrs["op_key_counts"] == {"aten.add": 1, "aten.layer_norm": 1}


def sdpa(naive: bool = True) -> OpGraph:
    """One attention op, q / k / v / o [1, 2, 16, 8] fp16 (batch 1, 2 heads, 16 tokens, head dim 8)."""
    q = act(1, 2, 16, 8)
    g = OpGraph("att")
    g.add_op(OpNode("sdpa", "aten.scaled_dot_product_attention", (q, q, q), (q,), scope="att"), ["q", "k", "v"],
             ["o"])
    count(g, warn=False, settings=CountSettings(attention="naive" if naive else "flash"))
    return g


def test_unfused_attention_gets_four_layout_copies_and_two_softmax_passes():
    q = act(1, 2, 16, 8)
    # the score matrix: B H L S = 1 x 2 x 16 x 16 = 512 elements x 2 B = 1024 B
    assert scores_bytes(q, q) == 1024
    kg = fuse(sdpa(), xla_like())
    assert [k.name for k in kg.kernels] == [
        "sdpa.copy_q", "sdpa.copy_k", "sdpa.copy_v", "sdpa.softmax_max_init", "sdpa.softmax_max",
        "sdpa.softmax_sum_init", "sdpa.softmax_sum", "sdpa", "sdpa.copy_o"]
    by = {k.name: k for k in kg.kernels}
    # a copy reads and writes its tensor once: 1 x 2 x 16 x 8 x 2 B = 512 B each way
    assert (by["sdpa.copy_q"].cost.act_read_bytes, by["sdpa.copy_q"].cost.act_write_bytes) == (512, 512)
    assert by["sdpa.copy_o"].op_keys == (COPY_KEY,)
    # a softmax statistic reads the scores (1024 B) and writes one fp32 per row: 1 x 2 x 16 rows x 4 B = 128 B
    assert (by["sdpa.softmax_max"].cost.act_read_bytes, by["sdpa.softmax_max"].cost.act_write_bytes) == (1024, 128)
    assert by["sdpa"].cost == fuse(sdpa(), "compiled").kernels[0].cost  # the attention kernel as counted


def test_flash_attention_has_no_softmax_passes_and_layout_kernels_can_be_off():
    # a flash byte model keeps the scores on chip: no statistics pass re-reads them, only the copies remain
    assert [k.name for k in fuse(sdpa(naive=False), xla_like()).kernels] == [
        "sdpa.copy_q", "sdpa.copy_k", "sdpa.copy_v", "sdpa", "sdpa.copy_o"]
    # an attention kernel that writes [tokens, hidden] itself has no O copy
    names = [k.name for k in fuse(sdpa(), xla_like(attention_writes_layout=True, reduction_passes=False)).kernels]
    assert names == ["sdpa.copy_q", "sdpa.copy_k", "sdpa.copy_v", "sdpa"]


def test_passes_are_off_unless_the_preset_says_so():
    assert len(fuse(residual_layer_norm(), "compiled")) == 1
    assert len(fuse(sdpa(), "compiled")) == 1
    rt = get_runtime("tf-xla")
    assert rt.layout_copies and rt.reduction_passes and not rt.fuse_epilogues
    # the host fit of the preset's [sources]: 2.84 ms / 324 kernels = 8.765 us, less the V100's 5 us launch
    assert rt.host_overhead_per_kernel_s == pytest.approx(2.84e-3 / 324 - 5e-6, abs=0.01e-6)
    with pytest.raises(InputError, match="layout_copies"):
        preset_fields({"name": "x", "fusion": {"layout_copies": 1}})
