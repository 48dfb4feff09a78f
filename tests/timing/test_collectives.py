"""Alpha-beta collectives: ring, tree, NVLS by hand; the fastest per size is picked."""

from __future__ import annotations

import pytest

from graphroof.errors import InputError
from graphroof.hardware import load_hardware
from graphroof.timing import CollectiveParams, allreduce_time, collective_time_with

P = CollectiveParams(algorithms=("ring", "tree", "nvls"), base_latency_s=10e-6, intra_hop_latency_s=1e-6,
                     intra_bus_bw_bytes_per_s=100e9, inter_hop_latency_s=5e-6, inter_bw_bytes_per_s_per_nic=20e9,
                     nics_per_node=8, nvls_bw_bytes_per_s=200e9)


def test_ring_allreduce_by_hand():
    # p = 8 in one node, S = 64e6, bytes 2 * 7/8 * 64e6 = 112e6 B; per protocol (share, extra per NVLink hop):
    # LL (1/2, 0): 10 + 14 * 1 = 24 us + 112e6 / 50e9 = 2.24 ms -> 2.264 ms
    # LL128 (120/128, 1.43 us): 10 + 14 * 2.43 = 44.02 us + 112e6 / 93.75e9 = 1194.67 us -> 1238.69 us
    # Simple (1, 2.93 us): 10 + 14 * 3.93 = 65.02 us + 112e6 / 100e9 = 1.12 ms -> 1185.02 us (picked)
    r = collective_time_with("all_reduce", 64e6, 8, P, algorithm="ring")
    assert r.protocol == "simple"
    assert r.t_latency_s == pytest.approx(65.02e-6)
    assert r.t_bandwidth_s == pytest.approx(1.12e-3)
    assert r.t_s == pytest.approx(1.18502e-3)


def test_nvls_by_hand_and_picked_when_faster():
    # NVLS: 10 + 2 * 1 = 12 us + 64e6 / 200e9 = 320 us -> 332 us < ring's 1.185 ms
    r = collective_time_with("all_reduce", 64e6, 8, P)
    assert r.algorithm == "nvls" and r.t_s == pytest.approx(332e-6)
    # without nvls in the list the ring runs
    ring_only = CollectiveParams(**{**P.__dict__, "algorithms": ("ring",)})
    assert collective_time_with("all_reduce", 64e6, 8, ring_only).algorithm == "ring"


def test_multi_node_ring_vs_tree_by_hand():
    # p = 16, 8 per node, 2 nodes; network = 20e9 * min(8, 8) = 160e9 per node > 100e9 NVLink: bottleneck 100e9
    # ring, Simple (NVLink hop 1 + 2.93 = 3.93 us, network hop 5 + 11.3 = 16.3 us): 30 steps, 2 of them on the
    # network: 10 + 28 * 3.93 + 2 * 16.3 = 152.64 us + 2 * 15/16 * 64e6 / 100e9 = 1200 us -> 1352.64 us (picked)
    # tree, Simple, 2 nodes: each node sends S per direction (S/2 up one tree, S/2 down the other):
    # 10 + 2 * (ceil(log2 2) * 16.3 + 7 * 3.93) = 97.62 us + 64e6 / 100e9 = 640 us -> 737.62 us (picked)
    ring = collective_time_with("all_reduce", 64e6, 16, P, gpus_per_node=8, algorithm="ring")
    tree = collective_time_with("all_reduce", 64e6, 16, P, gpus_per_node=8, algorithm="tree")
    assert ring.t_s == pytest.approx(1352.64e-6) and ring.protocol == "simple"
    assert tree.t_s == pytest.approx(737.62e-6) and tree.protocol == "simple"
    assert collective_time_with("all_reduce", 64e6, 16, P, gpus_per_node=8).algorithm == "tree"
    # 2 KB: LL; ring 10 + 28 * 1 + 2 * 5 = 48 us; tree 10 + 2 * (5 + 7 * 1) = 34 us + 2048 / 50e9 = 40.96 ns
    small = collective_time_with("all_reduce", 2048, 16, P, gpus_per_node=8)
    assert (small.algorithm, small.protocol) == ("tree", "LL") and small.t_s == pytest.approx(34.04096e-6)
    # one NIC per node: network 20e9 is the bottleneck: ring bandwidth 2 * 15/16 * 64e6 / 20e9 = 6 ms; the tree goes
    # through min(8, 2 * 1) = 2 NICs: 64e6 / 40e9 = 1.6 ms
    one_nic = CollectiveParams(**{**P.__dict__, "nics_per_node": 1})
    r1 = collective_time_with("all_reduce", 64e6, 16, one_nic, gpus_per_node=8, algorithm="ring")
    assert r1.t_bandwidth_s == pytest.approx(6e-3)
    t1 = collective_time_with("all_reduce", 64e6, 16, one_nic, gpus_per_node=8, algorithm="tree")
    assert t1.t_bandwidth_s == pytest.approx(1.6e-3)
    # 4 nodes of 4: an inner tree node sends S up and to two children: 2 * 64e6 / min(100e9, 20e9 * 4) = 1.6 ms
    t4 = collective_time_with("all_reduce", 64e6, 16, P, gpus_per_node=4, algorithm="tree")
    assert t4.t_bandwidth_s == pytest.approx(1.6e-3)
    # NVLS is intra-node only
    with pytest.raises(InputError, match="not available"):
        collective_time_with("all_reduce", 64e6, 16, P, gpus_per_node=8, algorithm="nvls")


def test_allgather_reduce_scatter_ring_by_hand():
    # p = 4, S = 4e6, bytes 3/4 * 4e6 = 3e6: LL 10 + 3 * 1 = 13 us + 3e6 / 50e9 = 60 us -> 73 us;
    # LL128 10 + 3 * 2.43 = 17.29 us + 3e6 / 93.75e9 = 32 us -> 49.29 us (picked); Simple 10 + 3 * 3.93 + 30 = 51.79 us
    for op in ("all_gather", "reduce_scatter"):
        r = collective_time_with(op, 4e6, 4, P)
        assert r.algorithm == "ring" and r.protocol == "LL128" and r.t_s == pytest.approx(49.29e-6)


def test_network_ramp_by_hand():
    # one NIC per 4e6 B of buffer, at most min(g = 8, nics 8): 1e6 B -> 1 NIC (20e9), 16e6 -> 4 (80e9), 64e6 -> 8
    from dataclasses import replace

    from graphroof.timing.collectives import network_bw
    ramp = replace(P, inter_ramp_bytes_per_nic=4e6)
    assert [network_bw(s, 8, ramp) for s in (1e6, 16e6, 64e6)] == pytest.approx([20e9, 80e9, 160e9])
    assert network_bw(1e6, 8, P) == pytest.approx(160e9)          # no ramp: every NIC from the first byte
    # 1e6 B over 2 nodes of 1 GPU (p = 2): network 20e9 < NVLink; ring LL: 10 + 2 * 5 = 20 us + 1e6 / 10e9 = 100 us;
    # Simple: 10 + 2 * 16.3 = 42.6 us + 1e6 / 20e9 = 50 us -> 92.6 us (picked); LL128 10 + 2 * 6.3 = 22.6 us
    # + 1e6 / 18.75e9 = 53.33 us -> 75.93 us (picked over both)
    r = collective_time_with("all_reduce", 1e6, 2, ramp, gpus_per_node=1, algorithm="ring")
    assert r.protocol == "LL128" and r.t_s == pytest.approx(22.6e-6 + 1e6 / 18.75e9)


def test_small_messages_are_latency_bound():
    # 2 KB over 8 GPUs: bandwidth terms < 0.1 us; NVLS latency 12 us < ring 24 us
    r = collective_time_with("all_reduce", 2048, 8, P)
    assert r.algorithm == "nvls" and r.t_latency_s == pytest.approx(12e-6) and r.t_bandwidth_s < 1e-7


def test_trivial_and_bad_inputs():
    assert collective_time_with("all_reduce", 1e6, 1, P).t_s == 0.0
    with pytest.raises(InputError, match="collective 'broadcast'"):
        collective_time_with("broadcast", 1e6, 2, P)
    with pytest.raises(InputError, match="inter_bw"):
        collective_time_with("all_reduce", 1e6, 16, CollectiveParams(intra_bus_bw_bytes_per_s=1e11), gpus_per_node=8)


def test_profiles():
    # fitted profiles: a Llama-2-7B decode all-reduce (1 token x 4096 x fp16 = 8 KB) over TP 8 costs some tens of us
    for name in ("a100", "h100"):
        r = allreduce_time(8192, 8, load_hardware(name))
        assert 5e-6 < r.t_s < 100e-6
    # a profile without [collectives]: ring over the interconnect at its efficiency factor, no base latency
    hw = load_hardware("a100-80gb-pcie")
    assert hw.collectives is None
    r = allreduce_time(64e6, 8, hw)
    assert r.algorithm == "ring"
    assert r.t_bandwidth_s == pytest.approx(2 * 7 / 8 * 64e6 / (hw.interconnect_bw_bytes_per_s * hw.interconnect_efficiency))
