"""Host and eager-kernel physics of the FasterTransformer-docs BERT rows (graphroof.validate.vision,
graphroof.timing.host): the host CPU each GPU ran on, the TF + XLA host cost per kernel, and the bytes of an eager
naive attention's extra kernels, each checked by hand."""

from __future__ import annotations

import csv
import statistics

import pytest

from graphroof.counters import count
from graphroof.counters.settings import CountSettings
from graphroof.fuse import get_runtime
from graphroof.graph import COST, OpGraph, OpNode, Role, TensorSpec
from graphroof.timing.host import eager_attention_bytes, extra_kernels_device_s
from graphroof.validate.data import DATA_DIR
from graphroof.validate.vision import FT_HOSTS, PYTORCH18_HOST, _host_factor, _host_runtime


def _sdpa(mask: bool) -> tuple[OpGraph, OpNode]:
    """One fp16 attention, batch 1, 12 heads, 128 queries x 128 keys of dim 64, scores written (naive)."""
    q = TensorSpec((1, 12, 128, 64), "fp16")
    ins = (q, q, q) + ((TensorSpec((1, 1, 128, 128), "fp16"),) if mask else ())
    g = OpGraph("t")
    node = OpNode("sdpa", "aten.scaled_dot_product_attention", inputs=ins, outputs=(q,), scope="sdpa")
    g.add_op(node)
    count(g, settings=CountSettings(attention="naive"))
    return g, node


def test_eager_attention_bytes_by_hand():
    # Q, K, V, O: 1 x 12 x 128 x 64 x 2 B = 196,608 B each; the four layout copies read + write each:
    # 2 x 4 x 196,608 = 1,572,864 B.  Scores: 1 x 12 x 128 x 128 x 2 B = 393,216 B; the scaling reads + writes
    # them: 786,432 B.  Total 2,359,296 B; with a mask, its add reads + writes them once more: 3,145,728 B
    g, node = _sdpa(False)
    assert eager_attention_bytes(node, g.get("sdpa", COST)) == 2_359_296
    g, node = _sdpa(True)
    assert eager_attention_bytes(node, g.get("sdpa", COST)) == 3_145_728
    # a flash kernel (scores on chip) launches nothing more
    g, node = _sdpa(False)
    count(g, settings=CountSettings(attention="flash"))
    assert eager_attention_bytes(node, g.get("sdpa", COST)) == 0.0


def test_extra_kernels_stream_their_bytes():
    # 7 extra kernels x 1 us latency = 7 us (with or without a bandwidth: the attention's bytes are
    # eager_attention_device_s's), and nothing under a runtime that is not PyTorch's ATen ops
    from graphroof.hardware import load_hardware
    from graphroof.timing.aten import eager_attention_device_s

    g, node = _sdpa(False)
    cost = g.get("sdpa", COST)
    rt = get_runtime("pytorch-eager")
    assert extra_kernels_device_s(rt, node, cost, 1e-6, 1e12) == pytest.approx(7e-6)
    assert extra_kernels_device_s(rt, node, cost, 1e-6) == pytest.approx(7e-6)
    assert extra_kernels_device_s(get_runtime("eager"), node, cost, 1e-6, 1e12) == 0.0
    # on the H100 (3.35e12 B/s x elementwise 0.905 = 3.03175e12 B/s): the 2,359,296 B take 0.77820 us; the four
    # copies' 393,216 elements at 1.45 x 4.04e12 / 16 = 3.66125e11 / s take 1.07400 us against their 1,572,864 B'
    # 0.51880 us: + 0.55520 us; 128 keys a row is the warp softmax (nothing more): 1.33340 us
    hw = load_hardware("h100-sxm")
    want = 2_359_296 / 3.03175e12 + (393_216 / (1.45 * 4.04e12 / 16) - 1_572_864 / 3.03175e12)
    assert want == pytest.approx(1.33340e-6, rel=1e-4)
    assert eager_attention_device_s(node, cost, hw, rt) == pytest.approx(want)
    assert eager_attention_device_s(node, cost, hw, get_runtime("eager")) == 0.0
    # the same term from a mapping of cost columns (the LLM evaluator's steps), here two equal columns
    import numpy as np

    cols = {f: np.array([getattr(cost, f)] * 2, dtype=float) for f in ("matrix_flops", "act_write_bytes",
                                                                        "kv_read_bytes")}
    assert np.allclose(eager_attention_device_s(node, cols, hw, rt), [want, want])


def test_host_factors_are_the_torchscript_batch1_seq32_fits():
    # mean of each host's two batch-1 seq-32 TorchScript rows (fp32, fp16) over the V100 DGX-1 host's:
    # T4 (11.51 + 11.04) / 2 = 11.275 ms, A10 (3.98 + 4.20) / 2 = 4.09 ms, V100 (6.91 + 6.66) / 2 = 6.785 ms:
    # 11.275 / 6.785 = 1.6618, 4.09 / 6.785 = 0.6028
    with open(DATA_DIR / "vision_encoder.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if "TorchScript" in r["framework"] and r["batch_size"] == "1"
                and r["seq_len"] == "32"]
    mean = {p: statistics.mean(float(r["latency_avg_ms"]) for r in rows if r["graphroof_hw"] == p)
            for p in FT_HOSTS}
    assert mean["v100-sxm2-32gb"] == pytest.approx(6.785)
    for p, (_, factor) in FT_HOSTS.items():
        assert factor == pytest.approx(mean[p] / mean["v100-sxm2-32gb"], abs=0.0005), p


def test_host_factor_applies_to_every_ft_docs_row_of_that_host():
    assert _host_factor("FT_BERT_PYTORCH", "t4-16gb-pcie") == 1.662
    # TorchScript rows: PyTorch 1.8 on that host against the pytorch-eager level (PyTorch 2.11, 2026 hosts) too:
    # 1.662 x 1.20 = 1.9944 (T4), 1.0 x 1.20 (V100)
    assert _host_factor("FT_BERT_PYTORCH", "t4-16gb-pcie", "PyTorch TorchScript") == pytest.approx(1.9944)
    assert _host_factor("FT_BERT_PYTORCH", "v100-sxm2-32gb", "PyTorch TorchScript") == PYTORCH18_HOST == 1.20
    assert _host_factor("FT_BERT_PYTORCH", "t4-16gb-pcie", "FasterTransformer PyTorch custom extension") == 1.662
    # the GPU hold-out's host (no GPU named: FT_HOSTS dropped, the source's PyTorch era kept)
    assert _host_factor("FT_BERT_PYTORCH", "", "PyTorch TorchScript") == PYTORCH18_HOST
    assert _host_factor("FT_BERT_PYTORCH", "", "FasterTransformer PyTorch custom extension") == 1.0
    assert _host_factor("FT_BERT_TENSORFLOW", "t4-16gb-pcie") == 1.662  # TF + XLA and FT's TF op on the same host
    assert _host_factor("FT_BERT_PYTORCH", "a10-24gb-pcie") == 0.603
    assert _host_factor("FT_BERT_PYTORCH", "v100-sxm2-32gb") == 1.0    # the reference host
    assert _host_factor("TRT_DEMO_BERT", "t4-16gb-pcie") == 1.0        # the source names no host


def test_host_runtime_scales_the_whole_dispatch():
    # pytorch-eager on the T4's host (factor 1.662, launch 5 us): per kernel 1.662 x (5 + 9) - 5 = 18.268 us,
    # per library call 1.662 x 24 = 39.888 us.  The encoder's 237 launches / 97 library calls:
    # 237 x 23.268 + 97 x 39.888 = 5514.516 + 3869.136 = 9383.652 us = 1.662 x 5646 us
    rt = _host_runtime("pytorch-eager", 1.662, 5e-6)
    assert rt.host_overhead_per_kernel_s == pytest.approx(18.268e-6)
    assert rt.host_overhead_per_library_call_s == pytest.approx(39.888e-6)
    host_s = 237 * (5e-6 + rt.host_overhead_per_kernel_s) + 97 * rt.host_overhead_per_library_call_s
    assert host_s == pytest.approx(9383.652e-6)
    # nothing to scale: factor 1, or a preset without a host stage
    assert _host_runtime("pytorch-eager", 1.0, 5e-6) == "pytorch-eager"
    assert _host_runtime("compiled", 1.662, 5e-6) == "compiled"


def test_tf_xla_host_cost_is_its_v100_fit():
    # V100 fp32 batch 1 seq 32 (bert_guide.md#L1262): 2.84 ms over the encoder's 324 XLA kernels (with the
    # layout copies and statistics passes of graphroof.fuse.passes) = 8.765 us, less the V100's 5 us launch
    # = 3.765 us per kernel; the preset overlaps host and device
    rt = get_runtime("tf-xla")
    assert rt.overlap_launch and rt.fuse_vector_chains
    assert rt.host_overhead_per_kernel_s == pytest.approx(2.84e-3 / 324 - 5e-6, abs=0.01e-6)


def test_ft_encoder_attention_reads_its_mask():
    # FT's benchmarks add a [b, 1, s, s] mask in every layer: the attention kernel reads it (batch 1, 128 x 128
    # fp16: 32,768 B), adds it to each score, and under PyTorch eager that add is one more launch: 9 launches, 2 of
    # them library calls: 9 x (5 + 9) + 2 x 24 = 126 + 48 = 174 us of host (8 launches: 160 us)
    from graphroof.fuse import fuse
    from graphroof.timing.host import host_dispatch_s
    from graphroof.validate.torchgpu import attention_graph
    from graphroof.validate.vision import _with_mask

    g = _with_mask(attention_graph(1, 12, 12, 128, 128, 64, False, "fp16"), 1, 128)
    count(g, settings=CountSettings(attention="naive"))
    rt = get_runtime("pytorch-eager")
    kg = fuse(g, rt).as_opgraph(g)
    (kernel,) = list(kg)
    assert [t.shape for t in kernel.inputs if t is not None][-1] == (1, 1, 128, 128)
    cost = kg.get(kernel.name, COST)
    plain = attention_graph(1, 12, 12, 128, 128, 64, False, "fp16")
    count(plain, settings=CountSettings(attention="naive"))
    assert cost.act_read_bytes - plain.get("sdpa", COST).act_read_bytes == 32_768
    assert host_dispatch_s(rt, 5e-6, kernel, cost) == pytest.approx(174e-6)


def _linear(rank: int, bias: bool = True) -> tuple[OpGraph, OpNode]:
    """One fp16 linear 768 -> 3072 on a [1, 128, 768] (rank 3) or [128, 768] (rank 2) input."""
    x = TensorSpec((1, 128, 768) if rank == 3 else (128, 768), "fp16")
    w, b = TensorSpec((3072, 768), "fp16", role=Role.WEIGHT), TensorSpec((3072,), "fp16", role=Role.WEIGHT)
    y = TensorSpec((1, 128, 3072) if rank == 3 else (128, 3072), "fp16")
    g = OpGraph("t")
    g.add_op(OpNode("fc", "aten.linear", inputs=(x, w, b) if bias else (x, w), outputs=(y,), scope="fc"))
    return g, g.node("fc")


def test_pytorch18_linear_adds_its_bias_apart_by_hand():
    # PyTorch 1.8's at::linear on a 3-D input: matmul, then output.add_(bias): the output (1 x 128 x 3072 x 2 B =
    # 786,432 B) read and written once more, the bias (3072 x 2 B = 6,144 B) read: 2 x 786,432 + 6,144 = 1,579,008 B.
    # Device: one more kernel, 1 us latency + 1,579,008 B at 1e12 B/s (1.579008 us) = 2.579008 us.  Host: issued
    # inside the one linear op: the same 1 launch + 1 library call as a fused linear
    from graphroof.fuse import fuse
    from graphroof.timing.host import eager_bias_bytes, host_dispatch_s
    from graphroof.validate.vision import _with_bias_add

    rt = get_runtime("pytorch-eager")
    for rank, split in ((3, True), (2, False)):  # a 2-D input takes addmm: the bias inside the GEMM
        g, _ = _linear(rank)
        g = _with_bias_add(g)
        count(g)
        kg = fuse(g, rt).as_opgraph(g)
        (kernel,) = list(kg)
        cost = kg.get(kernel.name, COST)
        assert eager_bias_bytes(kernel, cost) == (1_579_008 if split else 0.0)
        assert extra_kernels_device_s(rt, kernel, cost, 1e-6, 1e12) == pytest.approx(2.579008e-6 if split else 0.0)
        assert host_dispatch_s(rt, 5e-6, kernel, cost) == pytest.approx(5e-6 + 9e-6 + 24e-6)
    g, _ = _linear(3, bias=False)  # no bias: nothing to add
    assert "bias_add" not in _with_bias_add(g).node("fc").attrs
