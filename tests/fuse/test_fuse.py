"""The fusion pass on hand-built graphs; kernel bytes derived by hand in the comments.

Shapes: T tokens x H hidden, fp16 (2 bytes per element) unless said otherwise.
"""

from __future__ import annotations

import networkx as nx
import pytest

from graphroof.counters import count
from graphroof.errors import InputError
from graphroof.fuse import fuse, get_runtime
from graphroof.graph import OpGraph, OpNode, Role, TensorSpec

T, H, F = 8, 64, 128
B = 2  # bytes per fp16 element


def act(*shape, dtype="fp16"):
    return TensorSpec(shape, dtype, Role.ACTIVATION)


def wt(*shape, dtype="fp16"):
    return TensorSpec(shape, dtype, Role.WEIGHT)


class G:
    """A tiny graph builder: ``g.op(name, key, [(tensor name, spec)], [(tensor name, spec)])``."""

    def __init__(self):
        self.g = OpGraph("t")

    def op(self, name, key, ins, outs, **attrs):
        self.g.add_op(OpNode(name, key, tuple(s for _, s in ins), tuple(s for _, s in outs), attrs),
                      [n for n, _ in ins], [n for n, _ in outs])

    def counted(self):
        count(self.g, warn=False)
        return self.g


def rmsnorm(b: G, x: str, out: str, w: str = "gamma"):
    """HF's eager RMSNorm: pow, mean, add eps, rsqrt, mul, mul by gamma (6 ops)."""
    b.op(f"{out}.pow", "aten.pow", [(x, act(T, H))], [(f"{out}.sq", act(T, H))], exponent=2)
    b.op(f"{out}.mean", "aten.mean", [(f"{out}.sq", act(T, H))], [(f"{out}.ms", act(T, 1))], dim=[-1])
    b.op(f"{out}.eps", "aten.add", [(f"{out}.ms", act(T, 1))], [(f"{out}.mse", act(T, 1))], other=1e-6)
    b.op(f"{out}.rsqrt", "aten.rsqrt", [(f"{out}.mse", act(T, 1))], [(f"{out}.r", act(T, 1))])
    b.op(f"{out}.mul", "aten.mul", [(x, act(T, H)), (f"{out}.r", act(T, 1))], [(f"{out}.n", act(T, H))])
    b.op(f"{out}.gamma", "aten.mul", [(w, wt(H)), (f"{out}.n", act(T, H))], [(out, act(T, H))])


def test_norm_chain_is_one_kernel_that_reads_x_and_gamma_once():
    b = G()
    rmsnorm(b, "x", "y")
    g = b.counted()
    eager, comp = fuse(g, "eager"), fuse(g, "compiled")
    assert len(eager) == 6 and len(comp) == 1
    k = comp.kernels[0]
    # reads x once (T*H*2 = 1024 B) and gamma (H*2 = 128 B), writes y (1024 B); the [T,1] statistics and
    # the normalised x stay on chip.  The unfused ops move 6 tensors' worth more.
    assert k.cost.act_read_bytes == T * H * B == 1024
    assert k.cost.weight_bytes == H * B == 128
    assert k.cost.act_write_bytes == T * H * B
    assert k.cost.flops == eager.total().flops  # fusion never changes FLOPs
    assert eager.total().bytes > 3 * k.cost.bytes


def test_gemm_with_bias_activation_residual_epilogue():
    b = G()
    b.op("mm", "aten.mm", [("x", act(T, H)), ("W", wt(H, F))], [("h", act(T, F))])
    b.op("bias", "aten.add", [("h", act(T, F)), ("bvec", wt(F))], [("hb", act(T, F))])
    b.op("gelu", "aten.gelu", [("hb", act(T, F))], [("a", act(T, F))])
    b.op("res", "aten.add", [("a", act(T, F)), ("r", act(T, F))], [("y", act(T, F))])
    g = b.counted()
    comp = fuse(g, "compiled")
    assert len(comp) == 1 and comp.kernels[0].kind == "gemm"
    k = comp.kernels[0]
    # reads x (T*H*2 = 1024), W (H*F*2 = 16384), bias (F*2 = 256), residual r (T*F*2 = 2048);
    # writes y (T*F*2 = 2048) only
    assert k.cost.weight_bytes == H * F * B + F * B == 16640
    assert k.cost.act_read_bytes == T * H * B + T * F * B == 3072
    assert k.cost.act_write_bytes == T * F * B == 2048
    assert k.cost.matrix_flops == 2 * T * H * F  # 131072
    assert k.gemm_mnk == (T, F, H)
    # serving engines run cuBLAS GEMMs without epilogues: the three pointwise ops are one vector kernel
    serv = fuse(g, "serving")
    assert [k.kind for k in serv.kernels] == ["gemm", "vector"]


def test_epilogue_stops_at_a_reduction():
    b = G()
    b.op("mm", "aten.mm", [("x", act(T, H)), ("W", wt(H, H))], [("h", act(T, H))])
    b.op("res", "aten.add", [("h", act(T, H)), ("r", act(T, H))], [("s", act(T, H))])
    rmsnorm(b, "s", "y")
    comp = fuse(b.counted(), "compiled")
    # the residual add chains into the norm (a row reduction), which cannot be a GEMM epilogue: one
    # add + RMSNorm kernel (7 ops) after the GEMM, as vLLM's fused_add_rms_norm
    assert [k.kind for k in comp.kernels] == ["gemm", "vector"]
    norm = comp.kernels[1]
    assert norm.n_ops == 7
    # reads h and r (2 * T*H*2 = 2048 B) and gamma (128 B); writes y (1024 B); s is consumed only inside
    assert norm.cost.act_read_bytes == 2 * T * H * B and norm.cost.weight_bytes == H * B
    assert norm.cost.act_write_bytes == T * H * B


def rotary(b: G, q: str, out: str):
    """HF's rotary: q*cos + cat(-q[..., D/2:], q[..., :D/2]) * sin."""
    half = H // 2
    b.op(f"{out}.c", "aten.mul", [(q, act(T, H)), ("cos", act(T, H))], [(f"{out}.qc", act(T, H))])
    b.op(f"{out}.s1", "aten.slice", [(q, act(T, H))], [(f"{out}.q1", act(T, half))], dim=-1, start=0, end=half)
    b.op(f"{out}.s2", "aten.slice", [(q, act(T, H))], [(f"{out}.q2", act(T, half))], dim=-1, start=half)
    b.op(f"{out}.neg", "aten.neg", [(f"{out}.q2", act(T, half))], [(f"{out}.nq2", act(T, half))])
    b.op(f"{out}.cat", "aten.cat", [(f"{out}.nq2", act(T, half)), (f"{out}.q1", act(T, half))],
         [(f"{out}.rot", act(T, H))], dim=-1)
    b.op(f"{out}.s", "aten.mul", [(f"{out}.rot", act(T, H)), ("sin", act(T, H))], [(f"{out}.rs", act(T, H))])
    b.op(f"{out}.add", "aten.add", [(f"{out}.qc", act(T, H)), (f"{out}.rs", act(T, H))], [(out, act(T, H))])


def test_rotary_is_one_kernel():
    b = G()
    rotary(b, "q", "qr")
    g = b.counted()
    serv = fuse(g, "serving")
    assert len(serv) == 1
    k = serv.kernels[0]
    # reads q, cos, sin once each (3 * T*H*2 = 3072 B), writes the rotated q (1024 B)
    assert k.cost.act_read_bytes == 3 * T * H * B
    assert k.cost.act_write_bytes == T * H * B
    assert fuse(g, "eager").total().bytes > 2 * k.cost.bytes


def attention_block(b: G, x: str = "x"):
    nh, hd = 4, H // 4
    for p in ("q", "k", "v"):
        b.op(f"{p}_proj", "aten.mm", [(x, act(T, H)), (f"W{p}", wt(H, H))], [(p, act(T, H))])
        b.op(f"{p}_view", "aten.view", [(p, act(T, H))], [(f"{p}4", act(1, nh, T, hd))], size=[1, nh, T, hd])
    b.op("sdpa", "aten.scaled_dot_product_attention",
         [("q4", act(1, nh, T, hd)), ("k4", act(1, nh, T, hd)), ("v4", act(1, nh, T, hd))],
         [("o4", act(1, nh, T, hd))], is_causal=True)
    b.op("o_view", "aten.view", [("o4", act(1, nh, T, hd))], [("o", act(T, H))], size=[T, H])
    b.op("o_proj", "aten.mm", [("o", act(T, H)), ("Wo", wt(H, H))], [("y", act(T, H))])


def test_attention_block_qkv_fused_in_serving():
    b = G()
    attention_block(b)
    g = b.counted()
    eager, serv = fuse(g, "eager"), fuse(g, "serving")
    assert [k.kind for k in eager.kernels] == ["gemm", "gemm", "gemm", "attention", "gemm"]
    assert eager.n_views == 4
    assert [k.kind for k in serv.kernels] == ["gemm", "attention", "gemm"]
    qkv = serv.kernels[0]
    # one GEMM [T, H] x [H, 3H]: x read once (T*H*2 = 1024 B) instead of three times; 3 weights
    # (3 * H*H*2 = 24576 B); writes q, k, v (3 * 1024 B)
    assert qkv.gemm_mnk == (T, 3 * H, H)
    assert qkv.cost.act_read_bytes == T * H * B
    assert qkv.cost.weight_bytes == 3 * H * H * B
    assert qkv.cost.act_write_bytes == 3 * T * H * B
    assert serv.total().flops == eager.total().flops


def test_gemm_chain_cannot_fuse_and_gives_the_eager_figure():
    b = G()
    b.op("mm1", "aten.mm", [("x", act(T, H)), ("W1", wt(H, H))], [("h1", act(T, H))])
    b.op("mm2", "aten.mm", [("h1", act(T, H)), ("W2", wt(H, H))], [("h2", act(T, H))])
    b.op("mm3", "aten.mm", [("h2", act(T, H)), ("W3", wt(H, H))], [("h3", act(T, H))])
    g = b.counted()
    for rt in ("compiled", "serving"):
        k = fuse(g, rt)
        assert len(k) == 3 and k.total() == fuse(g, "eager").total()


def test_no_merge_creates_a_cycle():
    # a -> mm -> c and a -> c: c may not join a's kernel (mm depends on a and feeds c)
    b = G()
    b.op("a", "aten.relu", [("x", act(T, H))], [("xa", act(T, H))])
    b.op("mm", "aten.mm", [("xa", act(T, H)), ("W", wt(H, H))], [("h", act(T, H))])
    b.op("c", "aten.sub", [("xa", act(T, H)), ("h", act(T, H))], [("y", act(T, H))])
    g = b.counted()
    for rt in ("compiled", "serving"):
        kg = fuse(g, rt)
        assert kg.op_kernel["a"] != kg.op_kernel["c"] or kg.op_kernel["mm"] == kg.op_kernel["c"]
        q = nx.quotient_graph(g.nx, [set(k.ops) for k in kg.kernels])
        assert nx.is_directed_acyclic_graph(q)


def test_batch_norm_folds_into_conv_when_compiled():
    b = G()
    b.op("conv", "aten.convolution", [("x", act(1, 3, 8, 8)), ("Wc", wt(4, 3, 3, 3))], [("c", act(1, 4, 8, 8))],
         stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1)
    b.op("bn", "aten._native_batch_norm_legit_no_training",
         [("c", act(1, 4, 8, 8)), ("g", wt(4)), ("bb", wt(4)), ("rm", wt(4)), ("rv", wt(4))],
         [("y", act(1, 4, 8, 8))])
    g = b.counted()
    comp = fuse(g, "compiled")
    assert len(comp) == 1 and comp.kernels[0].folded == ["bn"]
    k, conv = comp.kernels[0], g.get("conv", "cost")
    # the conv writes the normalised output directly: its own write (4*8*8*2 = 512 B) only, and no BN FLOPs
    assert k.cost.flops == conv.flops
    assert k.cost.act_write_bytes == 4 * 8 * 8 * B
    assert k.cost.act_read_bytes == conv.act_read_bytes and k.cost.weight_bytes == conv.weight_bytes


def test_unknown_runtime_is_a_clear_error():
    with pytest.raises(InputError, match="unknown runtime preset 'tensorflow'; use one of: .*pytorch-eager"):
        get_runtime("tensorflow")


def test_gemm_shape_of_a_weight_on_the_left_of_a_batch():
    from graphroof.counters.cost import Cost
    from graphroof.fuse.classify import gemm_mnk

    # Mamba's dt_proj: W [5120, 160] @ x [64, 160, 1] -> [64, 5120, 1]: one GEMM [5120, 160] x [160, 64] sharing
    # the weight (M 5120, N 64, K 160), not 327,680 rows of a 1-wide GEMM
    w = TensorSpec((5120, 160), "bf16", Role.WEIGHT)
    x, y = TensorSpec((64, 160, 1), "bf16"), TensorSpec((64, 5120, 1), "bf16")
    n = OpNode("mm", "aten.matmul", (w, x), (y,), {}, "")
    assert gemm_mnk(n, Cost(matrix_flops=2 * 64 * 5120 * 160)) == (5120, 64, 160)
    # an activation on the left keeps the output's last dim as N
    a = OpNode("mm", "aten.matmul", (TensorSpec((64, 5120, 160), "bf16"), x), (y,), {}, "")
    assert gemm_mnk(a, Cost(matrix_flops=2 * 64 * 5120 * 160)) == (64 * 5120, 1, 160)
