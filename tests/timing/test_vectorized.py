"""The vectorised kernel-time model equals the scalar one element by element (GEMM tiles / waves / split-K, both
tile policies, streams, attention, the derated roofline; zero-cost kernels)."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from graphroof.counters.cost import Cost
from graphroof.graph import OpNode
from graphroof.hardware import load_hardware
from graphroof.roofline import evaluate
from graphroof.timing.vectorized import kernel_times

FIELDS = ("matrix_flops", "vector_flops", "weight_bytes", "act_read_bytes", "act_write_bytes", "kv_read_bytes",
          "kv_write_bytes", "net_bytes")


def _scalar(kind, keys, cost, mnk, hw, dtype):
    node = OpNode("k", f"kernel.{kind}", attrs={"kernel_kind": kind, "op_keys": keys, "gemm_mnk": mnk,
                                                   "compute_dtype": dtype})
    b = evaluate(cost, hw, dtype, node=node)
    return b.t_realistic_s - b.t_launch_s


@pytest.mark.parametrize("policy", ["best", "cover_m"])
@pytest.mark.parametrize("hw_name", ["a100", "h100"])
def test_gemm_and_streams_match_the_scalar_model(policy, hw_name):
    hw = load_hardware(hw_name)
    hw = replace(hw, timing=replace(hw.timing, gemm_tile_policy=policy))
    rng = random.Random(f"{policy}{hw_name}")
    n = 300
    # decode-like GEMMs (small M, split-K), prefill-like ones, and a zero-work row
    m = np.array([rng.choice([1, 3, 17, 64, 200, 4096]) for _ in range(n)] + [0])
    nn = np.array([rng.choice([128, 1000, 4096, 11008]) for _ in range(n)] + [0])
    k = np.array([rng.choice([64, 4096, 11008]) for _ in range(n)] + [0])
    wb = np.where(np.arange(n + 1) % 3 == 0, 0.0, k * nn * 0.5)  # every third: B's own bytes (weight_bytes None)
    cost = {"matrix_flops": 2.0 * m * nn * k, "vector_flops": np.where(np.arange(n + 1) % 5 == 0, m * nn * 1.0, 0),
            "weight_bytes": wb, "act_read_bytes": m * k * 2.0, "act_write_bytes": m * nn * 2.0 + 7,
            "kv_read_bytes": np.zeros(n + 1), "kv_write_bytes": np.zeros(n + 1), "net_bytes": np.zeros(n + 1)}
    for kind, keys in (("gemm", ("aten.mm",)), ("attention", ("aten.scaled_dot_product_attention",)),
                       ("vector", ("aten.silu", "aten.mul")), ("vector", ("aten.rms_norm",)), ("opaque", ("x.y",))):
        for dtype in ("bf16", "fp32"):
            vec = kernel_times(kind, keys, dtype, cost, (m, nn, k), hw)
            for i in range(n + 1):
                c = Cost(**{f: float(cost[f][i]) for f in FIELDS})
                want = _scalar(kind, keys, c, (int(m[i]), int(nn[i]), int(k[i])), hw, dtype)
                assert vec[i] == pytest.approx(want, rel=1e-12, abs=1e-18), (kind, dtype, i)


def test_collectives_and_untimed_profiles_fall_back():
    hw = load_hardware("a100")
    z = {f: np.zeros(2) for f in FIELDS}
    assert kernel_times("comm", ("comm.all_reduce",), "bf16", z, None, hw) is None
    assert kernel_times("gemm", ("aten.mm",), "bf16", z, None, hw) is None  # no shape: the scalar model derives it
    assert kernel_times("vector", ("aten.add",), "bf16", z, None, replace(hw, timing=None)) is None
