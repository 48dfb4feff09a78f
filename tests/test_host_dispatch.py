"""Host dispatch cost of eager runtimes (graphroof.timing.host): launches and library calls per graphroof kernel,
the host time they cost, and the device time of the extra kernels, each checked by hand."""

from __future__ import annotations

import pytest

from graphroof.counters import count
from graphroof.counters.settings import CountSettings
from graphroof.fuse.runtimes import get_runtime, read_preset
from graphroof.graph import BOUND, COST, OpGraph, OpNode, Role, TensorSpec
from graphroof.hardware import load_hardware
from graphroof.roofline import evaluate_graph
from graphroof.timing.host import eager_dispatches, extra_kernels_device_s, host_dispatch_s
from graphroof.validate.torchgpu import attention_graph


def _one(op: str, inputs, outputs, attrs=None) -> tuple[OpGraph, OpNode]:
    g = OpGraph("t")
    node = OpNode("x", op, tuple(inputs), tuple(outputs), attrs or {})
    g.add_op(node)
    count(g)
    return g, node


def _bn(act: str, weight: str) -> tuple[OpGraph, OpNode]:
    x = TensorSpec((1, 64, 56, 56), act)
    p = [TensorSpec((64,), weight, Role.WEIGHT) for _ in range(4)]
    return _one("aten.batch_norm", (x, *p), (TensorSpec((1, 64, 56, 56), act),))


def _attention(mode: str) -> tuple[OpGraph, OpNode]:
    g = attention_graph(1, 12, 12, 128, 128, 64, False, "fp16")
    count(g, settings=CountSettings(attention=mode))
    return g, g.node("sdpa")


def test_launches_and_library_calls_per_kernel():
    x = TensorSpec((128, 768), "fp16")
    g, add = _one("aten.add", (x, x), (x,))
    assert eager_dispatches(add, g.get("x", COST), True) == (1, 0)
    w = TensorSpec((768, 768), "fp16", Role.WEIGHT)
    g, lin = _one("aten.linear", (x, w, None), (x,))
    assert eager_dispatches(lin, g.get("x", COST), True) == (1, 1)  # a cuBLAS call
    # inference batch norm: native path (copy running mean, 1 / sqrt(var + eps), normalise) for fp16 weights or
    # bf16 input; cuDNN (one kernel) for an fp16 input with fp32 weights, and for fp32
    for act, weight, launches in (("fp16", "fp16", 3), ("bf16", "bf16", 3), ("fp16", "fp32", 1), ("fp32", "fp32", 1)):
        g, bn = _bn(act, weight)
        assert eager_dispatches(bn, g.get("x", COST), True) == (launches, 0), (act, weight)
        assert eager_dispatches(bn, g.get("x", COST), False) == (1, 0)  # not a PyTorch ATen runtime
        # torch.autocast keeps fp32 master weights: an fp16 input with them runs in cuDNN
        assert eager_dispatches(bn, g.get("x", COST), True, fp32_weights=True)[0] == (3 if act == "bf16" else 1)
    # an attention writing its scores: 4 layout copies + 2 batched GEMMs + scale + softmax = 8, 2 library calls;
    # a flash kernel is one library call
    g, att = _attention("naive")
    assert eager_dispatches(att, g.get("sdpa", COST), True) == (8, 2)
    g, att = _attention("flash")
    assert eager_dispatches(att, g.get("sdpa", COST), True) == (1, 1)
    assert eager_dispatches(None, None, True) == (1, 0)


def test_host_time_per_kernel_under_pytorch_eager():
    rt = get_runtime("pytorch-eager")
    assert (rt.host_overhead_per_kernel_s, rt.host_overhead_per_library_call_s, rt.aten_ops) == (9e-6, 24e-6,
                                                                                                True)
    launch = 4e-6  # the H100 profile's launch_overhead_s
    x = TensorSpec((128, 768), "fp16")
    g, add = _one("aten.add", (x, x), (x,))
    assert host_dispatch_s(rt, launch, add, g.get("x", COST)) == pytest.approx(13e-6)  # 4 + 9
    w = TensorSpec((768, 768), "fp16", Role.WEIGHT)
    g, lin = _one("aten.linear", (x, w, None), (x,))
    assert host_dispatch_s(rt, launch, lin, g.get("x", COST)) == pytest.approx(37e-6)  # 13 + 24
    # + one plain launch (the autocast weight cast): 2 * 13 + 24 = 50
    assert host_dispatch_s(rt, launch, lin, g.get("x", COST), extra_launches=1) == pytest.approx(50e-6)
    g, bn = _bn("fp16", "fp16")
    assert host_dispatch_s(rt, launch, bn, g.get("x", COST)) == pytest.approx(39e-6)  # 3 * 13
    g, att = _attention("naive")
    assert host_dispatch_s(rt, launch, att, g.get("sdpa", COST)) == pytest.approx(152e-6)  # 8 * 13 + 2 * 24
    # presets without a library surcharge or ATen kernels keep one launch + their host constant per kernel
    ft = get_runtime("fastertransformer")
    g, bn = _bn("fp16", "fp16")
    assert host_dispatch_s(ft, 5e-6, bn, g.get("x", COST)) == pytest.approx(5e-6 + ft.host_overhead_per_kernel_s)


def test_extra_kernels_add_their_latency_on_the_device():
    rt = get_runtime("pytorch-eager")
    g, bn = _bn("fp16", "fp16")
    # two extra kernels (mean copy, invstd) x the H100's 1.65 us stream_latency_s = 3.3 us
    assert extra_kernels_device_s(rt, bn, g.get("x", COST), 1.65e-6) == pytest.approx(3.3e-6)
    assert extra_kernels_device_s(get_runtime("eager"), bn, g.get("x", COST), 1.65e-6) == 0.0
    assert extra_kernels_device_s(get_runtime("pytorch-eager-amp"), bn, g.get("x", COST), 1.65e-6) == 0.0  # cuDNN
    g, att = _attention("naive")
    assert extra_kernels_device_s(rt, att, g.get("sdpa", COST), 1e-6) == pytest.approx(7e-6)  # 8 - 1 kernels


def test_cuda_graph_replay_runs_the_aten_kernels_without_their_host_issue():
    # pytorch-cuda-graph replays the eager ATen kernels: an fp16 batch norm is still 3 kernels on the device
    # (2 extra x the H100's 1.65 us stream_latency_s = 3.3 us), but the replay issues nothing per extra kernel:
    # one issue at the profile's 4 us launch (host_overhead_per_kernel_s 0), not 3 x 4 = 12 us
    rt = get_runtime("pytorch-cuda-graph")
    assert (rt.aten_ops, rt.cuda_graphs, rt.host_overhead_per_kernel_s) == (True, True, 0.0)
    g, bn = _bn("fp16", "fp16")
    assert extra_kernels_device_s(rt, bn, g.get("x", COST), 1.65e-6) == pytest.approx(3.3e-6)
    assert host_dispatch_s(rt, 4e-6, bn, g.get("x", COST)) == pytest.approx(4e-6)
    assert host_dispatch_s(get_runtime("pytorch-eager"), 4e-6, bn, g.get("x", COST)) == pytest.approx(39e-6)


def test_a_short_flash_attention_is_one_kernel_not_a_materialised_score_matrix():
    # 16 tokens, 12 heads, head dim 64, fp16, counted under the flash byte model: O = 12 x 16 x 64 x 2 B = 24,576 B
    # written, more than twice the score matrix it never writes (12 x 16 x 16 x 2 B = 6,144 B; 2 x = 12,288), so the
    # bytes alone would read as the naive model's S and P.  The fused kernel carries the model it was counted
    # under: one launch + one SDPA library call under pytorch-eager (4 + 9 + 24 = 37 us at a 4 us launch),
    # not the unfused attention's 8 launches (8 x 13 + 2 x 24 = 152 us), and no extra device kernels
    from graphroof.fuse import fuse

    g = attention_graph(1, 12, 12, 16, 16, 64, False, "fp16")
    count(g, settings=CountSettings(attention="flash"))
    assert g.get("sdpa", COST).act_write_bytes == 24576
    kg = fuse(g, "pytorch-eager").as_opgraph(g)
    (k,) = [n for n in kg.ops() if n.attrs.get("kernel_kind") == "attention"]
    assert k.attrs["attention_bytes"] == "flash"
    rt = get_runtime("pytorch-eager")
    assert host_dispatch_s(rt, 4e-6, k, kg.get(k.name, COST)) == pytest.approx(37e-6)
    assert extra_kernels_device_s(rt, k, kg.get(k.name, COST), 1.65e-6) == 0.0
    # the same shape counted naive does write S and P: 24,576 + 2 x 6,144 = 36,864 B, the unfused attention's launches
    count(g, settings=CountSettings(attention="naive"))
    kg = fuse(g, "pytorch-eager").as_opgraph(g)
    (k,) = [n for n in kg.ops() if n.attrs.get("kernel_kind") == "attention"]
    assert k.attrs["attention_bytes"] == "naive" and kg.get(k.name, COST).act_write_bytes == 36864
    assert host_dispatch_s(rt, 4e-6, k, kg.get(k.name, COST)) == pytest.approx(152e-6)


def test_one_batch_norm_through_the_pipeline():
    # one fp16 batch norm alone under pytorch-eager on an H100: the host issues its 3 launches
    # (3 * (4 + 9) = 39 us), then the device runs it: t_realistic = 39 us + device time, and the device
    # time is 3.3 us (two extra kernels x 1.65 us) longer than the same op under eager (one kernel)
    hw = load_hardware("h100-sxm")
    g, _ = _bn("fp16", "fp16")
    evaluate_graph(g, hw, get_runtime("eager"))
    plain = g.get("x", BOUND)
    evaluate_graph(g, hw, get_runtime("pytorch-eager"))
    b = g.get("x", BOUND)
    assert b.t_launch_s == pytest.approx(39e-6)
    dev = b.t_realistic_s - b.t_launch_s
    assert dev == pytest.approx(plain.t_realistic_s - plain.t_launch_s + 3.3e-6)


def test_preset_keys_are_validated(tmp_path):
    p = tmp_path / "x.toml"
    p.write_text('name = "x"\n[launch]\noverlap = true\nhost_overhead_per_library_call_s = 2e-5\naten_ops = true\n')
    rt = read_preset(p)
    assert rt.host_overhead_per_library_call_s == 2e-5 and rt.aten_ops
    from graphroof.errors import InputError

    p.write_text('name = "x"\n[launch]\naten_ops = "yes"\n')
    with pytest.raises(InputError, match="aten_ops must be true or false"):
        read_preset(p)
    p.write_text('name = "x"\n[launch]\nhost_overhead_per_library_call_s = -1\n')
    with pytest.raises(InputError, match="seconds in"):
        read_preset(p)
