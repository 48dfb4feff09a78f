"""NCCL's own ring / tree choice across nodes (graphroof.timing.nccl_tuner), by hand."""

from __future__ import annotations

import pytest

from graphroof.timing import CollectiveParams, collective_time_with
from graphroof.timing.nccl_tuner import nccl_algorithm, nccl_model_time_s

MIB = 1 << 20


def test_sixteen_gpus_on_two_nodes_by_hand():
    # p = 16, 8 per node, n = 2, X = 48 GB/s, AMD host (o = 2 us)
    # ring Simple: bw 48 * 16/30 = 25.6 GB/s; lat 1.4 * (8.4 + (30 - 4) * max(3.4, 3 * 2) + 4 * 14) = 308.56 us
    # tree Simple: bw 0.92 * 2 * 48 / 2 = 44.16 GB/s x tcf; lat 2 * (7 * 28 + 1 * 28) = 448 us
    # 12 MiB = 12582912 B: log2(12582912 >> 6 = 196608) = 17, tcf .8 -> 35.328 GB/s
    #   ring 308.56 + 12582912 / 25600 = 800.08 us; tree 448 + 12582912 / 35328 = 804.174 us -> ring
    assert nccl_model_time_s("ring", "simple", 12 * MIB, 16, 2, 48e9) == pytest.approx(800.08e-6)
    assert nccl_model_time_s("tree", "simple", 12 * MIB, 16, 2, 48e9) == pytest.approx(804.174e-6, rel=1e-5)
    assert nccl_algorithm(12 * MIB, 16, 8, 48e9) == "ring"
    # 13 MiB = 13631488 B: ring 308.56 + 532.48 = 841.04 us; tree 448 + 385.85 = 833.85 us -> tree
    assert nccl_algorithm(13 * MIB, 16, 8, 48e9) == "tree"
    # 17 MiB: log2 = 18, tcf .7 -> 30.912 GB/s: tree 448 + 17825792 / 30912 = 1024.67 us;
    # ring 308.56 + 17825792 / 25600 = 1004.88 us -> ring again (the power-of-two flip back)
    assert nccl_algorithm(17 * MIB, 16, 8, 48e9) == "ring"
    # LL at 12 MiB is far off: ring LL bw min(22.5, 48 / 4) * 16/30 = 6.4 GB/s -> 69.4 + 1966.1 us
    assert nccl_model_time_s("ring", "LL", 12 * MIB, 16, 2, 48e9) == pytest.approx(2035.53e-6, rel=1e-4)


def test_four_gpus_on_two_nodes_flip_with_the_correction_factor():
    # p = 4, 2 per node, X = 12 GB/s: ring Simple bw 12 * 4/6 = 8 GB/s, lat 1.4 * (8.4 + 2 * 6 + 4 * 14) = 106.96 us
    # tree Simple bw 0.92 * 2 * 12 / 2 = 11.04 GB/s x tcf, lat 2 * (1 * 28 + 28) = 112 us
    # 12 MiB (tcf .8, 8.832 GB/s): tree 112 + 1424.7 = 1536.7 us < ring 106.96 + 1572.9 = 1679.8 us -> tree
    # 20 MiB (log2(327680) = 18, tcf .7, 7.728 GB/s): tree 112 + 2713.7 = 2825.7 us > ring 2728.4 us -> ring
    assert nccl_algorithm(12 * MIB, 4, 2, 12e9) == "tree"
    assert nccl_algorithm(20 * MIB, 4, 2, 12e9) == "ring"


def test_collective_runs_what_nccl_picks():
    # the profile's per-GPU graph bandwidth 6 GB/s x 8 GPUs = the 48 GB/s above: at 12 MiB NCCL runs the ring although
    # graphroof's own tree is faster (two nodes: S / 100e9 against the ring's 2 * 15/16 * S / 100e9)
    p = CollectiveParams(algorithms=("ring", "tree"), base_latency_s=10e-6, intra_hop_latency_s=1e-6,
                         intra_bus_bw_bytes_per_s=100e9, inter_hop_latency_s=5e-6,
                         inter_bw_bytes_per_s_per_nic=20e9, nics_per_node=8)
    assert collective_time_with("all_reduce", 12 * MIB, 16, p, gpus_per_node=8).algorithm == "tree"
    nccl = CollectiveParams(**{**p.__dict__, "nccl_graph_bw_per_gpu_bytes_per_s": 6e9})
    assert collective_time_with("all_reduce", 12 * MIB, 16, nccl, gpus_per_node=8).algorithm == "ring"
    assert collective_time_with("all_reduce", 13 * MIB, 16, nccl, gpus_per_node=8).algorithm == "tree"
    # one node: no choice to make (NCCL's intra-node model is not used)
    assert collective_time_with("all_reduce", 12 * MIB, 8, nccl).algorithm == "ring"


def test_a_system_gives_nccls_ring_graph_its_own_nics():
    # dgx-a100: 8 HDR NICs of 25e9 B/s at 0.8 efficiency for 8 GPUs: NCCL's ring graph runs one channel per NIC,
    # 8 x 20e9 / 8 = 20e9 B/s per GPU (the A100 profile's own 6e9 is the Vidur cluster's network, not a DGX's)
    from graphroof.hardware import load_hardware
    from graphroof.hardware.system import load_system

    hw = load_system("dgx-a100").apply()
    assert hw.collectives.nccl_graph_bw_per_gpu_bytes_per_s == pytest.approx(20e9)
    assert load_hardware("a100-80gb-sxm").collectives.nccl_graph_bw_per_gpu_bytes_per_s == pytest.approx(6e9)
