"""Issue 23: the gpu hold-out transfers collective bandwidths in units of NCCL's per-channel ring bandwidth of the
device's architecture; CUDA-graph all-reduces are priced with NCCL's tuning-model latencies (no longer a gpt-fast fit, so
the engine hold-out leaves the profiles as they are)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from graphroof.hardware import load_hardware
from graphroof.hardware.params import CollectiveParams
from graphroof.timing import collective_time_with
from graphroof.timing.collectives import (
    NCCL_NVLINK_LL_HOP_S,
    NCCL_RING_CHANNEL_BW,
    NCCL_RING_LL_BASE_LATENCY_S,
    ring_channel_bw,
)
from graphroof.validate.holdout import held_out_profile

#: the CUDA-graph all-reduce latencies the profiles carry: NCCL's tuning model (ring LL base, NVLink LL hop)
NCCL_GRAPH_LATENCIES = {"device_latency_s": NCCL_RING_LL_BASE_LATENCY_S, "device_hop_latency_s": NCCL_NVLINK_LL_HOP_S}


def test_nccl_tables_as_nccl_states_them():
    # src/graph/tuning.cc perChMaxRingLL128Bws (one node): Ampere 20.0, Hopper 36.7, Blackwell 40.0 GB/s;
    # baseLat ring LL 6.6 us; hwLat NVLink ring LL 0.6 us
    assert NCCL_RING_CHANNEL_BW["NVLink 3"] == 20.0e9 and NCCL_RING_CHANNEL_BW["NVLink 4"] == 36.7e9
    assert NCCL_RING_CHANNEL_BW["NVLink 5"] == 40.0e9
    assert (NCCL_RING_LL_BASE_LATENCY_S, NCCL_NVLINK_LL_HOP_S) == (6.6e-6, 0.6e-6)
    assert ring_channel_bw(load_hardware("a100-80gb-sxm")) == 20.0e9
    assert ring_channel_bw(load_hardware("h100-sxm")) == 36.7e9
    assert ring_channel_bw(load_hardware("l4-24gb-pcie")) is None        # PCIe: no NCCL channel figure


def test_gpu_holdout_moves_the_ring_bandwidth_per_nccl_channel():
    a100, h100 = load_hardware("a100-80gb-sxm").collectives, load_hardware("h100-sxm").collectives
    assert a100 is not None and h100 is not None
    ha, hh = held_out_profile("a100-80gb-sxm").collectives, held_out_profile("h100-sxm").collectives
    assert ha is not None and hh is not None
    # A100 from the H100: 332 GB/s / 36.7 GB/s per channel = 9.0463 channels' worth x 20 GB/s = 180.93 GB/s
    # (own fit 177: +2.2%; the datasheet transfer 332 / 450 x 300 = 221.3 was +25%)
    assert ha.intra_bus_bw_bytes_per_s == pytest.approx(h100.intra_bus_bw_bytes_per_s / 36.7e9 * 20.0e9)
    if h100.intra_bus_bw_bytes_per_s == 332e9:
        assert ha.intra_bus_bw_bytes_per_s == pytest.approx(180.93e9, rel=1e-4)
    # H100 from the A100: 177 / 20 = 8.85 x 36.7 = 324.80 GB/s (own fit 332: -2.2%)
    assert hh.intra_bus_bw_bytes_per_s == pytest.approx(a100.intra_bus_bw_bytes_per_s / 20.0e9 * 36.7e9)
    if a100.intra_bus_bw_bytes_per_s == 177e9:
        assert hh.intra_bus_bw_bytes_per_s == pytest.approx(324.795e9, rel=1e-4)
    # NVLS: no other fitted GPU has it -> it keeps its share of the transferred ring bandwidth:
    # 232 / 332 = 0.6988 x 324.80 = 226.97 GB/s
    assert hh.nvls_bw_bytes_per_s == pytest.approx(
        h100.nvls_bw_bytes_per_s / h100.intra_bus_bw_bytes_per_s * hh.intra_bus_bw_bytes_per_s)
    if (h100.nvls_bw_bytes_per_s, h100.intra_bus_bw_bytes_per_s) == (232e9, 332e9):
        assert hh.nvls_bw_bytes_per_s == pytest.approx(226.97e9, rel=1e-4)


def test_h100_nvls_share_is_the_fit_scripts():
    # benchmarks/fit_collectives.NVLS_SHARE = 0.7: 0.7 x 332 = 232.4 -> 232 GB/s (3 significant figures)
    h100 = load_hardware("h100-sxm").collectives
    assert h100 is not None and h100.nvls_bw_bytes_per_s is not None and h100.intra_bus_bw_bytes_per_s
    assert h100.nvls_bw_bytes_per_s / h100.intra_bus_bw_bytes_per_s == pytest.approx(0.7, abs=0.005)


def test_engine_holdout_uses_nccl_latencies():
    # the profiles carry NCCL's figures (6.6 / 0.6 us), fitted on no row: the engine hold-out changes nothing
    a100 = load_hardware("a100-80gb-sxm")
    assert held_out_profile(a100, "engine", "gptfast") == a100
    c = a100.collectives
    assert c is not None
    assert (c.device_latency_s, c.device_hop_latency_s) == (6.6e-6, 0.6e-6)
    assert NCCL_GRAPH_LATENCIES == {"device_latency_s": 6.6e-6, "device_hop_latency_s": 0.6e-6}


def test_graph_all_reduce_with_nccl_latencies_by_hand():
    # 8 GPUs, 16 KiB (a batch-1 Llama-7B hidden state in bf16: 4096 x 2 B = 8 KiB; 16 KiB here), inside a CUDA
    # graph, the engine hold-out's constants on a 177 GB/s ring:
    #   LL:     6.6 + 14 x 0.6 = 15.0 us + 2 x 7/8 x 16384 B / (0.5 x 177e9) = 28672 / 88.5e9 = 0.32398 us
    #           = 15.32398 us
    #   LL128:  6.6 + 14 x (0.6 + 1.43) = 35.02 us + ...   Simple: 6.6 + 14 x (0.6 + 2.93) = 56.02 us + ...
    # the tuner picks LL
    p = CollectiveParams(algorithms=("ring",), base_latency_s=38.7e-6, intra_hop_latency_s=0.47e-6,
                         intra_bus_bw_bytes_per_s=177e9)
    p = replace(p, **NCCL_GRAPH_LATENCIES)
    r = collective_time_with("all_reduce", 16384, 8, p, cuda_graphs=True)
    assert r.protocol == "LL" and r.algorithm == "ring"
    assert r.t_s == pytest.approx(15.0e-6 + 28672 / 88.5e9)
    assert r.t_s == pytest.approx(15.32398e-6, rel=1e-6)
    assert r.t_host_s == 0.0
