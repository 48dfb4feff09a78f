"""MoE expert GEMMs: how many experts a grouped GEMM's rows are split over, and what a launch per expert costs.

The counting rule of a grouped GEMM ``a [S, K] x b [E, K, N]`` (:mod:`graphroof.counters.rules.matmul`) already
reads the weights of the experts a step visits, ``E (1 - (1 - k/E)^T)`` under uniform top-k routing of T tokens
(:mod:`graphroof.frontends.moe`): the bytes are right.  The time model adds the shape: the ``S = T k`` rows are
split over the ``V`` visited experts, ``S / V`` rows each, and each expert's rows are tiled on their own::

    V     = weight bytes counted / one expert's weight bytes          (read back from the count: no double count)
    tiles = ceil(V * E[ceil(n_e / tm)]) * ceil(N / tn)                (:func:`group_m_tiles`, in
                                                                       :func:`graphroof.timing.gemm_time_with`)

with each expert's own row count spread around ``S / V`` (:func:`group_m_tiles`: its last tile is partly
empty on average, half a tile per expert once the spread reaches half a tile), so a decode step's experts run at a
handful of rows each (weight streaming of every visited expert), and a long
prefill's at ``S / E`` rows each (compute, with each expert's last tile partly empty).  Without a grouped GEMM
(runtime ``moe_grouped_gemm = False``: one GEMM launch per expert, as a loop over experts) each visited expert
also pays one GEMM's fixed time (:func:`per_expert_latency_s`).

``moe_grouped_gemm = "torch"`` is PyTorch's ``torch._grouped_mm`` (transformers 5.x runs MoE experts with it by
default), which is either, by device (:func:`grouped_gemm_on`): one CUTLASS grouped GEMM where PyTorch has that
kernel, bf16 on compute capability 9.x / 10.x (aten/src/ATen/native/cuda/GroupMM.cu,
``bf16bf16_grouped_gemm_impl_sm90_sm100``; Blas.cpp ``_grouped_mm_cuda``: ``use_fast_path`` on sm90 / sm100 with
bf16 A, B and out), else ``_grouped_mm_fallback`` (aten/src/ATen/native/GroupedMMUtils.h), one ``mm`` per group.
A profile without a compute capability (not NVIDIA, or not given) takes the loop: the fallback is what PyTorch
runs on every device it has no grouped kernel for (ROCm by default too), and it was graphroof's pricing before.

**PyTorch's CUTLASS grouped kernel** (kernel family ``torch_grouped``, :func:`graphroof.timing.gemm.gemm_time_with`)
is not cuBLAS: its shape is fixed in the source, not searched (GroupMM.cu ``dispatch_bf16_grouped_kernel_on_tile_size``,
the CUTLASS persistent group scheduler ``PersistentTileSchedulerSm90Group``), and :func:`torch_grouped_tile` reads it:

* one CTA tile by device and shape: sm100 64 x 128; sm90 64 x 128 (ping-pong) when the mean rows per group
  ``M / E`` (all E experts, the empty ones too) or N is at most 128, else 128 x 256 (cooperative);
* a 2 x 1 thread-block cluster: each group's M tiles are rounded up to a multiple of 2 (``round_up(ctas_along_m,
  cluster_m)``), so an expert with 1-64 rows costs two 64-row CTAs, one with 257-384 rows four 128-row ones;
* a static persistent schedule over whole tiles: no split-K, no stream-K, ``waves = ceil(tiles / SMs)``;
* one more kernel before it (``prepare_grouped_gemm_data<<<1, E>>>``, the per-group pointers and problem sizes):
  the device's plain-kernel floor ``stream_latency_s``.

**The Triton fused-MoE kernel** of vLLM and SGLang (``moe_grouped_gemm = "triton"``, kernel family
``triton_moe``; vLLM model_executor/layers/fused_moe/fused_moe.py ``fused_moe_kernel``) is one grouped GEMM whose
program ids walk the experts' row blocks (``moe_align_block_size`` pads each expert's rows to BLOCK_SIZE_M) times
the N blocks.  What sets its time, from its source:

* tiles: BLOCK_SIZE_M in 16 ... 256, BLOCK_SIZE_N in 32 ... 256 (:data:`TRITON_BLOCK_M`, :data:`TRITON_BLOCK_N`: the
  search space of vLLM's benchmarks/kernels/benchmark_moe.py ``get_configs_compute_bound``, which writes the tuned
  config files the engine ships per device and shape); graphroof takes the tuned one, the least compute time;
* a plain grid, one program per tile, no split-K and no stream-K: whole waves;
* A rows gathered through a token index (``offs_token // top_k``) and B by pointer arithmetic, software pipelined
  (``num_stages``), not TMA-fed and not warp-specialised: loads and math overlap as in a whole-wave cuBLAS kernel
  (the profile's ``gemm_overlap_exponent``), and a tile's rate is ``triton_mma_efficiency`` of cuBLAS's (a profile
  constant: 1.0 where cuBLAS itself runs mma.sync from cp.async pipelines, Ampere / Ada; fitted on Hopper, whose
  cuBLAS tiles are TMA-fed warp-specialised wgmma kernels that the gathered-pointer kernel is not).

Floats or numpy arrays alike.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..dtypes import canonical_dtype, dtype_bits
from ..hardware.params import KernelTiming

__all__ = ["TRITON_BLOCK_M", "TRITON_BLOCK_N", "expert_weight_shape", "experts_in_step", "group_m_tiles", "per_expert_latency_s", "grouped_gemm_on",
           "TORCH_GROUPED_MM_MAJORS", "TORCH_GROUPED_CLUSTER_M", "cc_major", "torch_grouped_tile"]

#: compute capability majors on which PyTorch runs ``torch._grouped_mm`` (bf16) as one CUTLASS grouped GEMM
#: (sm90: H100 / H200, sm100: B200; module doc)
TORCH_GROUPED_MM_MAJORS = (9, 10)
#: PyTorch's CUTLASS grouped GEMM runs 2 x 1 x 1 thread-block clusters (GroupMM.cu ``ClusterShape``): each group's
#: M tiles round up to a multiple of 2 (module doc)
TORCH_GROUPED_CLUSTER_M = 2
#: tile heights / widths of the Triton fused-MoE kernel's tuned configs (vLLM benchmarks/kernels/benchmark_moe.py
#: get_configs_compute_bound: block_m_range [16, 32, 64, 128, 256], block_n_range [32, 64, 128, 256]; module doc)
TRITON_BLOCK_M = (16, 32, 64, 128, 256)
TRITON_BLOCK_N = (32, 64, 128, 256)


def cc_major(hw: Any) -> int:
    """The compute capability major of *hw* (0: not given, not NVIDIA)."""
    cc = getattr(hw, "compute_capability", None)
    try:
        return int(str(cc).split(".")[0]) if cc else 0
    except ValueError:
        return 0


def torch_grouped_tile(major: int, m_per_group: float, n: int) -> tuple[int, int]:
    """(tile M, tile N) of PyTorch's CUTLASS bf16 grouped GEMM on compute capability *major* for *m_per_group* mean
    rows per group (all the experts) and *n* columns (module doc): 64 x 128 on sm100, and on sm90 when either is at
    most 128, else 128 x 256."""
    if major >= 10 or m_per_group <= 128 or n <= 128:
        return 64, 128
    return 128, 256


def grouped_gemm_on(setting: Any, hw: Any, dtype: str = "bf16") -> bool:
    """Whether a runtime's ``moe_grouped_gemm`` *setting* runs a grouped GEMM computing in *dtype* as one kernel on
    *hw*: True / False as given; ``"triton"``: one kernel (the fused-MoE kernel, on any device Triton targets);
    ``"torch"``: one kernel iff *hw*'s compute capability major is in :data:`TORCH_GROUPED_MM_MAJORS` and *dtype* is
    bf16, else one GEMM per visited expert (module doc)."""
    if setting == "triton":
        return True
    if setting != "torch":
        return bool(setting)
    return cc_major(hw) in TORCH_GROUPED_MM_MAJORS and canonical_dtype(dtype) == "bf16"


def expert_weight_shape(node: Any) -> tuple[int, int, int, float] | None:
    """(E, K, N, bytes of one expert's weight) of a grouped GEMM node's 3-D weight, or None (not a grouped GEMM)."""
    from ..graph import Role

    for t in getattr(node, "inputs", ()) or ():
        if t is not None and t.role is Role.WEIGHT and t.rank == 3:
            try:
                e, k, n = (int(d) for d in t.shape)
            except (TypeError, ValueError):
                return None
            return e, k, n, k * n * dtype_bits(t.dtype) / 8
    return None


def experts_in_step(weight_bytes: Any, expert_bytes: float, experts: int) -> Any:
    """Visited experts of one step, read back from the counted weight bytes (at least 1, at most E)."""
    v = np.clip(np.asarray(weight_bytes, dtype=float) / max(expert_bytes, 1.0), 1.0, float(experts))
    return float(v) if np.ndim(v) == 0 else v


def per_expert_latency_s(visited: Any, timing: KernelTiming, grouped: bool) -> Any:
    """Extra fixed time when each visited expert is its own GEMM launch (no grouped GEMM): ``(V - 1)`` GEMM
    latencies (the first is the kernel's own)."""
    if grouped:
        return 0.0 * np.asarray(visited) if np.ndim(visited) else 0.0
    return (np.asarray(visited, dtype=float) - 1.0) * timing.gemm_latency_s if np.ndim(visited) else \
        (float(visited) - 1.0) * timing.gemm_latency_s


def group_m_tiles(m: Any, groups: Any, tm: Any, cluster: int = 1, spread: bool = True) -> Any:
    """M tiles of a GEMM whose *m* rows are split over *groups* independently tiled groups (MoE experts).

    Under uniform random routing an expert's row count ``n_e`` is binomial: mean ``mu = m / groups``, spread
    ``sigma = sqrt(mu)`` (``sqrt(mu (1 - k/E))`` at most ``sqrt(mu)``).  Each expert needs ``ceil(n_e / tm)``
    tiles.  When ``sigma`` is small against a tile that is ``ceil(mu / tm)``; once it reaches half a tile the last
    tile's fill is spread evenly and the expectation is ``mu / tm + 1/2``.  Between the two, a blend with weight
    ``w = min(1, 2 sigma / tm)``; at least one tile per visited expert::

        per expert = max(1, (1 - w) ceil(mu / tm) + w (mu / tm + 1/2)),   tiles = ceil(groups * per expert)

    (Qwen3-30B-A3B prefill of 8192 tokens: 65,536 rows over 128 experts, mu = 512: at tm = 128, sigma = 22.6,
    w = 0.35, 4.18 tiles per expert where ceil gives 4.)  One group: ``ceil(m / tm)``.  Floats or arrays alike.

    *cluster*: each group's tiles rounded up to a multiple of *cluster* (thread-block clusters along M, PyTorch's
    CUTLASS grouped kernel: :data:`TORCH_GROUPED_CLUSTER_M`): the same formula in units of ``cluster * tm`` rows,
    times *cluster*.  *spread* False: the rows are split evenly (a benchmark's fixed split, node attr
    ``moe_balanced``), ``ceil(mu / tm)`` tiles per expert."""
    if type(m) in (int, float) and type(groups) in (int, float) and type(tm) in (int, float):
        return _group_m_tiles_scalar(float(m), float(groups), tm * cluster, cluster, spread)
    g = np.maximum(np.asarray(groups, dtype=float), 1.0)
    mu = np.asarray(m, dtype=float) / g
    unit = tm * cluster
    w = np.minimum(1.0, 2.0 * np.sqrt(mu) / unit) if spread else 0.0 * mu
    per = np.maximum(1.0, (1.0 - w) * np.ceil(mu / unit) + w * (mu / unit + 0.5))
    out = np.where(g > 1.0, np.ceil(g * per), np.ceil(mu / unit)) * cluster
    return int(out) if np.ndim(out) == 0 else out


def _group_m_tiles_scalar(m: float, groups: float, unit: float, cluster: int, spread: bool) -> int:
    """:func:`group_m_tiles` of plain numbers: the same operations in the same order without numpy's per-call
    cost (the GEMM tile search calls it for every tile height of every GEMM priced)."""
    g = max(groups, 1.0)
    mu = m / g
    if g <= 1.0:
        return int(math.ceil(mu / unit) * cluster)
    w = min(1.0, 2.0 * math.sqrt(mu) / unit) if spread else 0.0
    per = max(1.0, (1.0 - w) * math.ceil(mu / unit) + w * (mu / unit + 0.5))
    return int(math.ceil(g * per) * cluster)
