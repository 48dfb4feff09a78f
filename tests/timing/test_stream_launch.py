"""Streaming kernels (bandwidth saturation with bytes moved) and launch costs (eager vs CUDA graphs)."""

from __future__ import annotations

import pytest

from graphroof.errors import InputError
from graphroof.hardware import load_hardware
from graphroof.timing import KernelTiming, launch_time, stream_time, stream_time_with

T = KernelTiming(stream_latency_s=2e-6, stream_bw_efficiency={"elementwise": 0.9, "norm": 0.5},
                 launch_overhead_s=4e-6, graph_launch_overhead_s=20e-6)


def test_stream_time_by_hand():
    # RMSNorm of 1024 tokens x 4096 fp16: read x 8,388,608 B + write y 8,388,608 B + gamma 8,192 B = 16,785,408 B
    # at 2.039e12 * 0.5 B/s = 16.46 us, + 2 us latency = 18.46 us
    s = stream_time_with(16_785_408, timing=T, mem_bw_bytes_per_s=2.039e12, kind="norm")
    assert s.t_memory_s == pytest.approx(16_785_408 / (2.039e12 * 0.5))
    assert s.t_s == pytest.approx(16_785_408 / 1.0195e12 + 2e-6)
    assert s.t_s == pytest.approx(18.46e-6, rel=1e-3)


def test_small_kernels_do_not_reach_peak_bandwidth():
    # achieved bw = bytes / (2 us + bytes / (0.9 * 2.039e12)); half of the sustained 1.835 TB/s at
    # bytes = 2 us * 1.835e12 = 3.67 MB
    bw = 2.039e12
    half = 2e-6 * bw * 0.9
    assert stream_time_with(half, timing=T, mem_bw_bytes_per_s=bw).achieved_bw_bytes_per_s == pytest.approx(bw * 0.9 / 2)
    small = stream_time_with(64e3, timing=T, mem_bw_bytes_per_s=bw).achieved_bw_bytes_per_s
    big = stream_time_with(1e9, timing=T, mem_bw_bytes_per_s=bw).achieved_bw_bytes_per_s
    assert small < 0.02 * bw < 0.85 * bw < big < 0.9 * bw


def test_unknown_kind_falls_back_to_elementwise_and_bad_kind_errors():
    a = stream_time_with(1e6, timing=T, mem_bw_bytes_per_s=1e12, kind="copy")     # a known kind, not listed
    b = stream_time_with(1e6, timing=T, mem_bw_bytes_per_s=1e12, kind="elementwise")
    assert a.t_s == b.t_s and a.mem_bw_efficiency == 0.9
    with pytest.raises(InputError, match="stream kernel kind 'bogus'"):
        stream_time_with(1e6, timing=T, mem_bw_bytes_per_s=1e12, kind="bogus")
    assert stream_time_with(0, timing=T, mem_bw_bytes_per_s=1e12).t_s == 0.0


def test_launch_eager_vs_cuda_graphs():
    hw = load_hardware("a100")
    lt = hw.timing
    # eager: 1,300 kernels x 4 us = 5.2 ms; one CUDA-graph replay: 20 us whatever the count
    assert launch_time(1300, hw) == pytest.approx(1300 * lt.launch_overhead_s)
    assert launch_time(1300, hw, cuda_graphs=True) == pytest.approx(lt.graph_launch_overhead_s)
    assert launch_time(0, hw) == 0.0


def test_profile_without_timing_section_derives_from_efficiency():
    from dataclasses import replace

    hw = replace(load_hardware("mi300x"), timing=None)  # a profile without a [timing] section
    assert hw.timing is None and hw.launch_overhead_s > 0
    s = stream_time(1e9, hw)
    assert s.mem_bw_efficiency == hw.mem_bw_efficiency
    assert launch_time(10, hw) == pytest.approx(10 * hw.launch_overhead_s)
