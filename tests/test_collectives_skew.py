"""Launch skew of host-launched collectives: rank 0 waits for the last of p launches, ``launch_skew_s * (H_p - 1)``
on top of ``base_latency_s`` (graphroof.timing.collectives).  Every expected time is derived by hand."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from graphroof.errors import HardwareProfileError
from graphroof.hardware.params import CollectiveParams, parse_collectives
from graphroof.timing import collective_time_with
from graphroof.timing.collectives import host_base_latency_s, launch_skew_factor
from graphroof.timing.p2p import all_to_all_time, send_recv_time

# one protocol (library hccl: f = 1, no extra hop latency) keeps the arithmetic short
P = CollectiveParams(algorithms=("ring",), base_latency_s=10e-6, launch_skew_s=12e-6, intra_hop_latency_s=0.5e-6,
                     intra_bus_bw_bytes_per_s=100e9, device_latency_s=5e-6, device_hop_latency_s=0.5e-6,
                     library="hccl")


def test_launch_skew_factor_is_harmonic_minus_one():
    # H_1 - 1 = 0; H_2 - 1 = 1/2; H_4 - 1 = 1/2 + 1/3 + 1/4 = 13/12; H_8 - 1 = 761/280 - 1 = 481/280 = 1.717857...
    # H_16 - 1 = 2436559/720720 - 1 = 3.380729 - 1 = 2.380729
    assert launch_skew_factor(1) == 0.0
    assert launch_skew_factor(2) == pytest.approx(0.5)
    assert launch_skew_factor(4) == pytest.approx(13 / 12)
    assert launch_skew_factor(8) == pytest.approx(481 / 280)
    assert launch_skew_factor(16) == pytest.approx(2.380729, abs=1e-6)


def test_host_base_latency_grows_with_ranks():
    # base(2) = 10 + 12 * 1/2 = 16 us; base(4) = 10 + 12 * 13/12 = 23 us; base(8) = 10 + 12 * 481/280 = 30.6143 us
    assert host_base_latency_s(P, 2) == pytest.approx(16e-6)
    assert host_base_latency_s(P, 4) == pytest.approx(23e-6)
    assert host_base_latency_s(P, 8) == pytest.approx(30.614286e-6)


def test_all_reduce_host_launched_pays_the_skew():
    # 1 MB over 4 GPUs, ring: base(4) 23 us + 2*3 hops * 0.5 us = 3 us -> latency 26 us;
    # bytes 2*3/4 * 1e6 = 1.5e6 B at 100 GB/s = 15 us -> 41 us; host part = base(4) - base (no device split) = 13 us
    t = collective_time_with("all_reduce", 1e6, 4, replace(P, device_latency_s=None))
    assert t.t_latency_s == pytest.approx(26e-6)
    assert t.t_bandwidth_s == pytest.approx(15e-6)
    assert t.t_s == pytest.approx(41e-6)
    assert t.t_host_s == pytest.approx(13e-6)
    # with the device split (d = 5 us) the host part is base(4) - d = 23 - 5 = 18 us
    assert collective_time_with("all_reduce", 1e6, 4, P).t_host_s == pytest.approx(18e-6)


def test_two_ranks_wait_less_than_eight():
    # 2 KB: 2 GPUs: 16 + 2*1*0.5 = 17 us (+ 2*1/2*2048 B / 100 GB/s = 20.48 ns);
    # 8 GPUs: 30.6143 + 2*7*0.5 = 37.6143 us (+ 2*7/8*2048 / 100e9 = 35.84 ns)
    assert collective_time_with("all_reduce", 2048, 2, P).t_s == pytest.approx(17.02048e-6)
    assert collective_time_with("all_reduce", 2048, 8, P).t_s == pytest.approx(37.650126e-6)


def test_multi_node_counts_every_rank():
    # 16 ranks, 8 per node (2 nodes), ring: base(16) = 10 + 12 * 2.380729 = 38.568748 us; hops: 2*15 - 2*1 = 28 on
    # NVLink x 0.5 = 14 us, 2 on the network x 5 us = 10 us -> latency 62.568748 us (bytes aside)
    c = replace(P, inter_hop_latency_s=5e-6, inter_bw_bytes_per_s_per_nic=10e9, nics_per_node=8)
    t = collective_time_with("all_reduce", 2048, 16, c, gpus_per_node=8)
    assert t.t_latency_s == pytest.approx(62.568748e-6)


def test_cuda_graph_has_no_skew():
    # inside a CUDA graph the ranks replay together: d 5 us + 2*3 device hops * 0.5 us = 8 us; bytes 15 us -> 23 us
    t = collective_time_with("all_reduce", 1e6, 4, P, cuda_graphs=True)
    assert t.t_s == pytest.approx(23e-6)
    assert t.t_host_s == 0.0


def test_no_skew_keeps_one_base():
    # launch_skew_s 0 (the default): every p pays base_latency_s 10 us: 8 GPUs 10 + 7 = 17 us latency
    c = replace(P, launch_skew_s=0.0)
    assert collective_time_with("all_reduce", 2048, 8, c).t_latency_s == pytest.approx(17e-6)
    assert CollectiveParams().launch_skew_s == 0.0


def test_p2p_pays_the_skew_of_its_ranks():
    # send / recv (2 ranks) inside a node: base(2) 16 + a_in 0.5 + 1e6 B / 100 GB/s 10 us = 26.5 us
    assert send_recv_time(1e6, P).t_s == pytest.approx(26.5e-6)
    # all-to-all over 8 GPUs of one node: base(8) 30.614286 + 0.5 + 1e6 / 100e9 = 41.114286 us
    assert all_to_all_time(1e6, 8, P).t_s == pytest.approx(41.114286e-6)


def test_profile_parses_launch_skew():
    c = parse_collectives(Path("x.toml"), {"base_latency_s": 10e-6, "launch_skew_s": 2e-6})
    assert c is not None and c.launch_skew_s == 2e-6
    assert parse_collectives(Path("x.toml"), {"launch_skew_s": 0.0}).launch_skew_s == 0.0  # type: ignore[union-attr]
    with pytest.raises(HardwareProfileError):
        parse_collectives(Path("x.toml"), {"launch_skew_s": -1e-6})
