"""Small-message collectives: host-launched vs CUDA-graph NCCL, the custom one-shot / two-shot all-reduce, the
runtime preset's choice, and the loader's new [collectives] fields.  Every expected time is derived by hand."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from graphroof.counters.cost import Cost
from graphroof.errors import HardwareProfileError, InputError
from graphroof.hardware import load_hardware
from graphroof.hardware.params import CollectiveParams, parse_collectives
from graphroof.timing import allreduce_time, collective_time_with

P = CollectiveParams(algorithms=("ring",), base_latency_s=40e-6, device_latency_s=6e-6, intra_hop_latency_s=1e-6,
                     device_hop_latency_s=0.25e-6, intra_bus_bw_bytes_per_s=200e9, custom_latency_s=3e-6,
                     p2p_bw_bytes_per_s=240e9)


def test_nccl_host_launched_vs_cuda_graph():
    # 8 KB over 8 GPUs, ring, LL protocol (half the bandwidth, no extra hop latency): bytes 2*7/8*8192 = 14,336 B
    # at 0.5 * 200 GB/s = 143.36 ns (LL128 would pay 14 * 1.43 us more per call, Simple 14 * 2.93 us)
    # host-launched: base 40 + 2*7 hops * 1 us = 54 us latency, of which 40 - 6 = 34 us is the host part
    host = collective_time_with("all_reduce", 8192, 8, P)
    assert host.protocol == "LL"
    assert host.t_latency_s == pytest.approx(54e-6)
    assert host.t_bandwidth_s == pytest.approx(143.36e-9)
    assert host.t_s == pytest.approx(54.14336e-6)
    assert host.t_host_s == pytest.approx(34e-6)
    # inside a CUDA graph: device part 6 us + 14 hops * 0.25 us = 9.5 us (+ the same 143.36 ns), no host part
    g = collective_time_with("all_reduce", 8192, 8, P, cuda_graphs=True)
    assert g.t_s == pytest.approx(9.64336e-6)
    assert g.t_host_s == 0.0 and g.implementation == "nccl" and g.algorithm == "ring"


def test_graph_latency_defaults_to_the_whole_base():
    # no device_latency_s / device_hop_latency_s: a graph call pays base 40 + 2 hops * 1 us = 42 us at p = 2
    p = replace(P, device_latency_s=None, device_hop_latency_s=None)
    # bytes (LL): 2*1/2*8192 = 8192 B / (0.5 * 200 GB/s) = 81.92 ns
    assert collective_time_with("all_reduce", 8192, 2, p, cuda_graphs=True).t_s == pytest.approx(42.08192e-6)


def test_custom_one_shot_and_two_shot():
    # one-shot (8 KB < 256 KiB at p = 8): 3 us + 7 peers * 8192 B / 240 GB/s = 3 us + 238.93 ns
    r = collective_time_with("all_reduce", 8192, 8, P, implementation="custom")
    assert (r.algorithm, r.implementation) == ("one_shot", "custom")
    assert r.t_s == pytest.approx(3e-6 + 7 * 8192 / 240e9)
    assert r.t_host_s == 0.0
    # two-shot (1 MiB >= 256 KiB at p = 8): 3 us + one more barrier 0.25 us + 2*7/8*1,048,576 B / 240 GB/s = 7.6459 us
    r = collective_time_with("all_reduce", 1048576, 8, P, implementation="custom")
    assert r.algorithm == "two_shot"
    assert r.t_s == pytest.approx(3.25e-6 + 1835008 / 240e9)
    # p = 4 keeps one-shot up to 512 KiB: 300 KiB = 307,200 B -> 3 us + 3 * 307,200 / 240e9 = 3 + 3.84 us
    r = collective_time_with("all_reduce", 307200, 4, P, implementation="custom")
    assert r.algorithm == "one_shot" and r.t_s == pytest.approx(6.84e-6)
    # p = 2 is always one-shot: 4 MiB -> 3 us + 4,194,304 / 240e9 = 3 + 17.476 us
    r = collective_time_with("all_reduce", 4194304, 2, P, implementation="custom")
    assert r.algorithm == "one_shot" and r.t_s == pytest.approx(3e-6 + 4194304 / 240e9)


def test_custom_falls_back_to_nccl():
    # beyond custom_max_bytes (8 MiB): NCCL; 16 MiB ring in a graph, 2*7/8*16,777,216 = 29,360,128 B:
    # LL 6 + 14 * 0.25 = 9.5 us + 29,360,128 / 100e9 = 303.1 us; LL128 6 + 14 * (0.25 + 1.43) = 29.52 us
    # + 29,360,128 / (200e9 * 120/128) = 156.59 us -> 186.1 us (picked); Simple 6 + 14 * 3.18 = 50.52 + 146.8 = 197.3 us
    r = collective_time_with("all_reduce", 16777216, 8, P, implementation="custom", cuda_graphs=True)
    assert r.implementation == "nccl" and r.protocol == "LL128"
    assert r.t_s == pytest.approx(29.52e-6 + 29360128 / 187.5e9)
    # no custom kernel on the device, across nodes, or another collective: NCCL
    assert collective_time_with("all_reduce", 8192, 8, replace(P, custom_latency_s=None),
                                implementation="custom").implementation == "nccl"
    multi = replace(P, inter_bw_bytes_per_s_per_nic=25e9)
    assert collective_time_with("all_reduce", 8192, 8, multi, gpus_per_node=4,
                                implementation="custom").implementation == "nccl"
    assert collective_time_with("all_gather", 8192, 8, P, implementation="custom").implementation == "nccl"
    # p = 1: nothing at all
    assert collective_time_with("all_reduce", 8192, 1, P, implementation="custom").t_s == 0.0


def test_nvls_implementation_and_bad_input():
    p = replace(P, algorithms=("ring", "nvls"), nvls_bw_bytes_per_s=100e9)
    # nvls forced: graph 6 us + 2 * 0.25 us + 8192 / 100e9 = 6.5 us + 81.92 ns (ring would be 9.57 us)
    r = collective_time_with("all_reduce", 8192, 8, p, implementation="nvls", cuda_graphs=True)
    assert r.algorithm == "nvls" and r.t_s == pytest.approx(6.58192e-6)
    with pytest.raises(InputError, match="implementation"):
        collective_time_with("all_reduce", 8192, 8, P, implementation="gloo")


def test_shipped_a100_constants():
    # a100-80gb-sxm: NCCL's CUDA-graph latencies (ring LL base 6.6 us, 0.6 us per NVLink hop) on the Vidur ring bandwidth
    # 177 GB/s, LL (half of it): 8 KB at TP 8 = 6.6 + 14 * 0.6 + 14,336 B / 88.5e9 (162 ns) = 15.162 us; host-launched:
    # 38.7 + 14 * 0.47 = 45.28 us + bytes
    hw = load_hardware("a100-80gb-sxm")
    assert allreduce_time(8192, 8, hw, cuda_graphs=True).t_s == pytest.approx(15.0e-6 + 14336 / 88.5e9)
    assert allreduce_time(8192, 8, hw).t_s == pytest.approx(45.28e-6 + 14336 / 88.5e9)
    # custom one-shot: 3.85 us + 7 * 8192 / 240e9 = 3.85 + 0.239 us
    assert allreduce_time(8192, 8, hw, implementation="custom").t_s == pytest.approx(3.85e-6 + 57344 / 240e9)


def test_comm_kernel_follows_the_runtime():
    from graphroof.fuse.runtimes import get_runtime
    from graphroof.graph import OpNode
    from graphroof.timing.kernel import kernel_time

    hw = load_hardware("a100-80gb-sxm")
    node = OpNode(name="ar", op="all_reduce", attrs={"world_size": 8, "collective": "all_reduce"})
    cost = Cost(act_read_bytes=8192, act_write_bytes=8192, net_bytes=14336)
    eager = kernel_time(node, "comm", cost, hw, "bf16", 0.0, 0.0, get_runtime("eager"))
    assert eager.t_kernel_s == pytest.approx(45.28e-6 + 14336 / 88.5e9)   # host-launched NCCL (LL)
    graphs = replace(get_runtime("eager"), cuda_graphs=True)
    assert kernel_time(node, "comm", cost, hw, "bf16", 0.0, 0.0, graphs).t_kernel_s == pytest.approx(
        15.0e-6 + 14336 / 88.5e9)  # 6.6 + 14 * 0.6 us inside a graph
    custom = replace(get_runtime("eager"), allreduce="custom")
    kt = kernel_time(node, "comm", cost, hw, "bf16", 0.0, 0.0, custom)
    assert kt.model == "collective:one_shot" and kt.t_kernel_s == pytest.approx(3.85e-6 + 57344 / 240e9)


def test_collective_without_timing_counts_as_a_collective():
    # a profile without [timing] prices a collective by its efficiency factors; it is still a collective (the
    # breakdown's "collectives" part was 0 s for such profiles)
    from graphroof.graph import OpNode
    from graphroof.roofline import evaluate

    hw = replace(load_hardware("a100"), timing=None)
    b = evaluate(Cost(net_bytes=1e6), hw, "bf16", node=OpNode(name="ar", op="all_reduce", attrs={}))
    assert b.time_model.startswith("collective")
    # 1 MB / (300 GB/s * 0.8) = 4.1667 us + the 4 us launch
    assert b.t_realistic_s == pytest.approx(1e6 / 240e9 + 4e-6)


def test_loader_validates_the_new_fields(tmp_path: Path):
    c = parse_collectives(tmp_path / "x.toml", {"device_latency_s": 5e-6, "base_latency_s": 20e-6,
                                                "custom_latency_s": 3e-6, "p2p_bw_bytes_per_s": 1e11,
                                                "device_hop_latency_s": 2e-7, "custom_max_bytes": 4194304})
    assert (c.graph_latency_s, c.graph_hop_latency_s, c.custom_max_bytes) == (5e-6, 2e-7, 4194304.0)
    with pytest.raises(HardwareProfileError, match="device_latency_s .* must be <="):
        parse_collectives(tmp_path / "x.toml", {"device_latency_s": 50e-6, "base_latency_s": 20e-6})
    with pytest.raises(HardwareProfileError, match="p2p_bw_bytes_per_s"):
        parse_collectives(tmp_path / "x.toml", {"p2p_bw_bytes_per_s": -1})


def test_library_and_ramp_fields(tmp_path: Path):
    c = parse_collectives(tmp_path / "x.toml", {"library": "xla", "inter_ramp_bytes_per_nic": 4e6})
    assert (c.library, c.inter_ramp_bytes_per_nic) == ("xla", 4e6)
    with pytest.raises(HardwareProfileError, match="collectives.library"):
        parse_collectives(tmp_path / "x.toml", {"library": "mpi"})
    # one protocol (XLA): 8 KB over 8 chips at the full 200 GB/s: 40 + 14 * 1 us + 14,336 / 200e9 = 54.07168 us
    r = collective_time_with("all_reduce", 8192, 8, replace(P, library="xla"))
    assert r.t_s == pytest.approx(54.07168e-6) and r.protocol == "simple"


def test_gpu_holdout_keeps_the_measured_network():
    # the inter-node network is the measured cluster's, not the GPU's: the gpu hold-out keeps it (only the A100 has
    # multi-node rows); the per-GPU base latency is the other fitted GPU's
    from graphroof.validate.holdout import held_out_profile

    own, held = load_hardware("a100-80gb-sxm").collectives, held_out_profile("a100-80gb-sxm").collectives
    assert own is not None and held is not None
    keep = ("inter_hop_latency_s", "inter_bw_bytes_per_s_per_nic", "inter_ramp_bytes_per_nic", "nics_per_node")
    assert [getattr(held, k) for k in keep] == [getattr(own, k) for k in keep]
    assert held.base_latency_s == load_hardware("h100-sxm").collectives.base_latency_s
