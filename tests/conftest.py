"""Shared test helpers: literal tensor specs, nodes and a round-number hardware profile."""

from __future__ import annotations

import gc
import os

import pytest

# every test traces afresh: the persistent store of traced graphs (graphroof.frontends.trace_store) is off unless a
# test turns it on with its own folder (tests/frontends/test_trace_store.py); CLI subprocesses inherit this
os.environ["GRAPHROOF_CACHE"] = "off"
# a model argument shaped like a Hugging Face id ("org/name") is looked up in the hub cache: never the network here
os.environ["HF_HUB_OFFLINE"] = "1"
from graphroof.cli import GC_THRESHOLD
from graphroof.graph import OpNode, Role, TensorSpec
from graphroof.hardware import HardwareProfile

# the suite's process holds every test module's models and engines: the collector thresholds a graphroof command
# runs under, not Python's defaults that walk that heap every few thousand allocations
gc.set_threshold(*GC_THRESHOLD)


def T(dtype: str, *shape, role: Role | str = Role.ACTIVATION) -> TensorSpec:
    """``T("bf16", 4, 5, role="weight")``: a tensor spec literal."""
    return TensorSpec(tuple(shape), dtype, Role(role))


def W(dtype: str, *shape) -> TensorSpec:
    return T(dtype, *shape, role=Role.WEIGHT)


def node(op: str, ins=(), outs=(), name: str = "n", scope: str = "", **attrs) -> OpNode:
    return OpNode(name, op, tuple(ins), tuple(outs), attrs, scope)


@pytest.fixture
def round_hw() -> HardwareProfile:
    """100 TFLOP/s matrix, 10 TFLOP/s vector, 1 TB/s: matrix ridge point = 100 FLOP/byte exactly."""
    return HardwareProfile(
        name="round", matrix_peak_flops_per_s={"bf16": 100e12, "fp32": 50e12},
        vector_peak_flops_per_s={"bf16": 10e12, "fp32": 10e12}, mem_bw_bytes_per_s=1e12,
        interconnect_bw_bytes_per_s=100e9, matrix_efficiency=0.5, vector_efficiency=0.5,
        mem_bw_efficiency=0.8, interconnect_efficiency=1.0, launch_overhead_s=1e-6,
    )
