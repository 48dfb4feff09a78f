"""TensorRT-LLM v0.5 / v0.6 preset, round 2 (issue 23): the gate and up projections of a gated MLP stay two GEMMs
(``[fusion].gate_up = false``: the performance.md Llama engines are built without ``--use_fused_mlp``) while Q, K
and V stay one.

Shapes: T tokens x H hidden, F intermediate, fp16 (2 bytes per element); every figure derived by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from graphroof.counters import count
from graphroof.errors import InputError
from graphroof.fuse import fuse, get_runtime
from graphroof.fuse.preset_file import preset_fields
from graphroof.graph import OpGraph, OpNode, Role, TensorSpec

T, H, F = 8, 64, 128
B = 2  # bytes per fp16 element


def act(*shape):
    return TensorSpec(shape, "fp16", Role.ACTIVATION)


def wt(*shape):
    return TensorSpec(shape, "fp16", Role.WEIGHT)


def _block() -> OpGraph:
    """x -> q, k, v projections -> attention; x2 (the MLP's input) -> gate, up -> silu(gate) * up -> down."""
    g = OpGraph("t")

    def op(name, key, ins, outs, **attrs):
        g.add_op(OpNode(name, key, tuple(s for _, s in ins), tuple(s for _, s in outs), attrs),
                 [n for n, _ in ins], [n for n, _ in outs])

    nh, hd = 4, H // 4
    for p in ("q", "k", "v"):
        op(f"{p}_proj", "aten.mm", [("x", act(T, H)), (f"W{p}", wt(H, H))], [(p, act(T, H))])
        op(f"{p}_view", "aten.view", [(p, act(T, H))], [(f"{p}4", act(1, nh, T, hd))], size=[1, nh, T, hd])
    op("sdpa", "aten.scaled_dot_product_attention",
       [("q4", act(1, nh, T, hd)), ("k4", act(1, nh, T, hd)), ("v4", act(1, nh, T, hd))],
       [("o4", act(1, nh, T, hd))], is_causal=True)
    op("gate_proj", "aten.mm", [("x2", act(T, H)), ("Wg", wt(H, F))], [("g", act(T, F))])
    op("up_proj", "aten.mm", [("x2", act(T, H)), ("Wu", wt(H, F))], [("u", act(T, F))])
    op("silu", "aten.silu", [("g", act(T, F))], [("s", act(T, F))])
    op("mul", "aten.mul", [("s", act(T, F)), ("u", act(T, F))], [("h", act(T, F))])
    op("down_proj", "aten.mm", [("h", act(T, F)), ("Wd", wt(F, H))], [("y", act(T, H))])
    count(g, warn=False)
    return g


def _gemm_shapes(kg) -> list[tuple]:
    return [k.gemm_mnk for k in kg.kernels if k.kind == "gemm"]


def test_preset_keeps_gate_and_up_apart_and_cites_it():
    rt = get_runtime("tensorrt-llm-v0.5")
    assert rt.fuse_horizontal_gemms and not rt.fuse_gate_up
    assert "use_fused_mlp" in rt.sources["gate_up"]
    # every other preset keeps the default (gate + up fused wherever horizontal GEMMs fuse)
    assert get_runtime("tensorrt-llm").fuse_gate_up and get_runtime("serving").fuse_gate_up


def test_gate_up_key_is_validated():
    assert preset_fields({"name": "x", "fusion": {"gate_up": False}})["fuse_gate_up"] is False
    with pytest.raises(InputError, match="gate_up"):
        preset_fields({"name": "x", "fusion": {"gate_up": "no"}})


def test_qkv_fused_gate_up_apart():
    g = _block()
    fused = fuse(g, "serving")
    split = fuse(g, replace(get_runtime("serving"), fuse_gate_up=False))
    # serving: [T, H] x [H, 3H] (QKV), [T, H] x [H, 2F] (gate + up), [T, F] x [F, H] (down)
    assert _gemm_shapes(fused) == [(T, 3 * H, H), (T, 2 * F, H), (T, H, F)]
    # gate_up off: QKV still one GEMM (its outputs reach the attention op); gate and up two [T, H] x [H, F]
    assert _gemm_shapes(split) == [(T, 3 * H, H), (T, F, H), (T, F, H), (T, H, F)]
    # the same work: FLOPs unchanged (2 T H F each for gate and up: 2 x 8 x 64 x 128 = 131072)
    assert split.total().flops == fused.total().flops
    gate_up = [k for k in split.kernels if k.kind == "gemm" and k.gemm_mnk == (T, F, H)]
    assert all(k.cost.matrix_flops == 2 * T * F * H == 131072 for k in gate_up)
    # x / x2 read once per GEMM that reads them: 3 GEMMs (QKV, gate, up) x T x H x 2 B = 3 x 1024 B, against
    # 2 x 1024 B fused (QKV, gate + up)
    x_reads = lambda kg: sum(T * H * B for k in kg.kernels if k.kind == "gemm" and k.gemm_mnk[2] == H)  # noqa: E731
    assert x_reads(split) == 3 * 1024 and x_reads(fused) == 2 * 1024


def test_gate_up_split_moves_the_gate_output_through_memory():
    # under tensorrt-llm-v0.5 (epilogues on), fused: one [T, H] x [H, 2F] GEMM with silu(gate) * up as its
    # epilogue reads x2 (T H 2 B = 1024 B) and writes only h (T F 2 B = 2048 B);
    # split: the gate GEMM reads x2 (1024 B) and writes g (2048 B); the up GEMM reads x2 (1024 B) and, in its
    # epilogue, g (2048 B), and writes h (2048 B): 1024 + 2048 read and 2048 written more = 5120 B
    g = _block()
    rt = get_runtime("tensorrt-llm-v0.5")
    split, fused = fuse(g, rt), fuse(g, replace(rt, fuse_gate_up=True))
    mlp = lambda kg: [k for k in kg.kernels if k.kind == "gemm" and k.gemm_mnk[2] == H][1:]  # noqa: E731
    assert [(k.cost.act_read_bytes, k.cost.act_write_bytes) for k in mlp(fused)] == [(1024, 2048)]
    assert [(k.cost.act_read_bytes, k.cost.act_write_bytes) for k in mlp(split)] == [(1024, 2048), (3072, 2048)]
    bytes_of = lambda kg: sum(k.cost.act_read_bytes + k.cost.act_write_bytes for k in kg.kernels)  # noqa: E731
    assert bytes_of(split) - bytes_of(fused) == 5120
