"""TensorRT's unfused MHA runner (graphroof.fuse.passes, ``split_unfused_attention``): an attention that writes its
scores runs as Q K^T, softmax, P V; bytes and FLOPs derived by hand in the comments (fp16: 2 bytes per element)."""

from __future__ import annotations

from dataclasses import replace

from graphroof.fuse import fuse, get_runtime
from graphroof.fuse.passes import BMM_KEY, SOFTMAX_KEY
from tests.fuse.test_passes import sdpa  # one attention op, q / k / v / o [1, 2, 16, 8] fp16


def split_rt():
    return replace(get_runtime("compiled"), split_unfused_attention=True)


def test_presets_that_split_an_unfused_attention():
    # TensorRT's bertQKVToContextPlugin runs UnfusedMHARunner where it has no fused kernel for the GPU (Volta)
    assert get_runtime("tensorrt").split_unfused_attention
    assert not any(get_runtime(n).split_unfused_attention for n in ("compiled", "tf-xla", "fastertransformer"))


def test_unfused_attention_runs_as_three_kernels_and_nothing_is_counted_twice():
    plain = fuse(sdpa(), "compiled").kernels[0].cost
    # the naive byte model writes S and P (1 x 2 x 16 x 16 = 512 scores x 2 B = 1024 B each) and O
    # (1 x 2 x 16 x 8 x 2 B = 512 B): 1024 + 1024 + 512 = 2560 B; its vector FLOPs are the softmax's
    assert plain.act_write_bytes == 2560 and plain.vector_flops > 0
    kg = fuse(sdpa(), split_rt())
    assert [k.name for k in kg.kernels] == ["sdpa", "sdpa.softmax", "sdpa.bmm_pv"]
    att, sm, pv = kg.kernels
    assert (sm.op_keys, pv.op_keys) == ((SOFTMAX_KEY,), (BMM_KEY,))
    # Q K^T keeps the FLOPs of both GEMMs and the score traffic: writes 2560 - 512 (O) = 2048 B = 2 x S (still a
    # naive attention), reads as counted, no vector FLOPs
    assert att.cost.act_write_bytes == 2048 and att.cost.vector_flops == 0
    assert att.cost.matrix_flops == plain.matrix_flops and att.cost.act_read_bytes == plain.act_read_bytes
    # the softmax: the attention's vector FLOPs, no bytes of its own (S and P are in the first kernel's model)
    assert sm.cost.vector_flops == plain.vector_flops and sm.cost.bytes == 0
    # P V writes O: 512 B
    assert (pv.cost.act_read_bytes, pv.cost.act_write_bytes, pv.cost.flops) == (0, 512, 0)
    # conserved: 2048 + 512 = 2560 B written, vector FLOPs moved not copied
    assert att.cost.act_write_bytes + pv.cost.act_write_bytes == plain.act_write_bytes
    assert att.cost.vector_flops + sm.cost.vector_flops == plain.vector_flops
    assert [k.n_ops for k in kg.kernels] == [1, 0, 0]  # the added kernels run no op of the graph


def test_flash_attention_is_not_split():
    assert [k.name for k in fuse(sdpa(naive=False), split_rt()).kernels] == ["sdpa"]


def test_a_short_flash_attention_is_not_split():
    # 16 tokens, 2 heads, head dim 64, fp16, counted flash: O = 2 x 16 x 64 x 2 B = 4,096 B written, twice the
    # 1,024 B score matrix (2 x 16 x 16 x 2 B) it never writes; the bytes alone would pass for S and P, the counted
    # byte model (graph.meta["count_settings"]) says they are O: one kernel, as the fused MHA it is
    from graphroof.counters import count
    from graphroof.counters.settings import CountSettings
    from graphroof.graph import COST, OpGraph, OpNode, Role, TensorSpec

    q = TensorSpec((1, 2, 16, 64), "fp16", Role.ACTIVATION)
    g = OpGraph("att")
    g.add_op(OpNode("sdpa", "aten.scaled_dot_product_attention", (q, q, q), (q,), scope="att"), ["q", "k", "v"],
             ["o"])
    count(g, warn=False, settings=CountSettings(attention="flash"))
    assert g.get("sdpa", COST).act_write_bytes == 4096
    assert [k.name for k in fuse(g, split_rt()).kernels] == ["sdpa"]
