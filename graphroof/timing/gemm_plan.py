"""What a GEMM kernel node runs as, read once from the node and the runtime preset (the facts that do not change
with batch or context), and the per-op kernel time of a GEMM node under it.

:class:`GemmPlan` is shared by the per-op model (:func:`gemm_kernel_time`, called by
:func:`graphroof.timing.kernel.kernel_time`) and the vectorised one (:func:`graphroof.timing.vectorized.
gemm_times`), so both price the same kernel:

* the compute dtype (its peak and its achievable ceiling);
* weight-only quantization (:mod:`graphroof.timing.quantgemm`): the stored weight bits, the scale group, and the
  runtime's ``weight_only_gemm`` variant (``fused_dequant`` | ``dequant_then_gemm``);
* MoE grouped GEMMs (:mod:`graphroof.timing.moe`): the expert count and one expert's weight bytes (the visited
  experts are read back from the counted weight bytes at each point), and ``moe_grouped_gemm`` (``"torch"``
  resolved against the device here: :func:`graphroof.timing.moe.grouped_gemm_on`; where it runs as one kernel,
  that kernel is PyTorch's CUTLASS grouped GEMM, family ``torch_grouped``: its tile by the device's compute
  capability and the rows per expert, :func:`graphroof.timing.moe.torch_grouped_tile`; ``"triton"``: vLLM /
  SGLang's Triton fused-MoE kernel, family ``triton_moe``);
* the runtime's ``gemm_schedule`` (which cuBLAS generation it ships: whole waves or stream-K,
  :func:`graphroof.timing.gemm.schedule_of`), for plain cuBLAS GEMMs;
* the kernel family (``node.attrs["gemm_library"]``, else the runtime's ``gemm_library``, else ``cublas``):
  ``deepgemm`` is DeepGEMM (:mod:`graphroof.timing.gemm`) (an ``aten.bmm`` under it: the grouped kernel, one group
  per batch entry);
* an fp8 GEMM whose input comes from an attention kernel under a runtime with ``fp8_quantize_after_attention``
  (the fusion pass marks it ``quantize_input``): the quantize of that input is a streaming kernel of its own, one
  more launch (:func:`quantize_input_s`)::

      t_quant_s = stream_latency_s + M K (act_bytes + 1) / (mem_bw_bytes_per_s * stream_efficiency("elementwise"))

  (read the [M, K] input in the activation dtype, write it in fp8, one scale per tensor); the GEMM then reads
  that input in fp8: its counted activation read (the activation dtype) is ``M K (act_bytes - 1)`` bytes too many
  (:func:`quantized_input_saved_bytes`, taken off the bytes its epilogue streams).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..counters.cost import Cost
from ..dtypes import canonical_dtype, dtype_bits
from ..errors import InputError
from .gemm import GEMM_LIBRARIES
from .l2 import fits_l2, l2_bytes_of
from .moe import (
    TORCH_GROUPED_CLUSTER_M,
    cc_major,
    expert_weight_shape,
    experts_in_step,
    grouped_gemm_on,
    per_expert_latency_s,
    torch_grouped_tile,
)
from .quantgemm import dequant_then_gemm_bytes, node_weight_dtype, quant_group, scale_bytes, weight_only_bits

__all__ = ["gemv_rows_of", "gemv_time_s", "GemmPlan", "gemm_plan", "gemm_kernel_time", "quantize_input_s", "quantized_input_saved_bytes"]


@dataclass(frozen=True)
class GemmPlan:
    dtype: str                      # compute dtype (the peak used)
    bits: int | None = None         # weight-only: stored bits per weight (None: weights in the compute dtype)
    group: int | None = None        # weights per scale (4-bit)
    variant: str = "fused_dequant"  # runtime weight_only_gemm
    experts: int = 0                # MoE grouped GEMM: E (0: not grouped)
    expert_bytes: float = 0.0       # one expert's weight bytes as counted
    grouped: bool = True            # runtime moe_grouped_gemm, resolved on the device (moe.grouped_gemm_on)
    act_dtype: str = ""             # the roofline's compute dtype as given (the vector peak of epilogue FLOPs)
    library: str = "cublas"         # kernel family (graphroof.timing.gemm.GEMM_LIBRARIES)
    batch: int = 1                  # independent GEMMs of one shape (aten.bmm's batch), each with its own B
    out_dtype: str = ""             # D's dtype as the node writes it ("": as the compute dtype), e.g. bf16 of fp8
    act_in_l2: bool = False         # runtime l2_activations: A from L2 when the GEMM fits (graphroof.timing.l2)
    quantize_input: bool = False    # an fp8 GEMM whose input quantize is a kernel of its own (quantize_input_s)
    schedule: str = "auto"          # runtime gemm_schedule: the cuBLAS generation's tile schedule (timing.gemm)
    arch: int = 0                   # compute capability major (torch_grouped's tile: timing.moe.torch_grouped_tile)
    balanced: bool = False          # MoE rows split evenly over the experts (node attr moe_balanced: a benchmark's)
    gemv_sm_bw: float = 0.0         # runtime gemv_(quant_)sm_bw_bytes_per_s: one SM's mat-vec stream rate (0: none)
    gemv_eff: float = 0.0           # runtime gemv_mem_bw_efficiency: its share of the bandwidth (0: the profile's)
    gemv_rows: int = 0              # runtime gemv_(float_)max_rows: the most rows per weight run as the mat-vec (0: none)


def gemm_plan(node: Any, dtype: str, hw: Any, runtime: Any = None) -> GemmPlan:
    """The plan of GEMM *node* computing in *dtype* (the roofline's compute dtype) under *runtime*."""
    gd = dtype if dtype in hw.matrix_peak_flops_per_s or dtype == "fp32" else "fp16"
    wd = node_weight_dtype(node)
    if (wd and canonical_dtype(wd).startswith("fp8") and getattr(runtime, "fp8_gemm", False)
            and "fp8" in hw.matrix_peak_flops_per_s):
        # fp8 weights under an engine with fp8 GEMMs on a device with fp8 tensor cores: the activations are
        # quantised per token on the fly and the GEMM runs at the fp8 rate (W8A8: vLLM / TensorRT-LLM fp8), no dequant
        gd = "fp8"
    bits = weight_only_bits(wd, gd)
    variant = str(getattr(runtime, "weight_only_gemm", "fused_dequant") or "fused_dequant")
    ex = expert_weight_shape(node)
    attrs = getattr(node, "attrs", None) or {}
    lib = str(attrs.get("gemm_library") or getattr(runtime, "gemm_library", "") or "cublas")
    if lib not in GEMM_LIBRARIES:
        raise InputError(f"GEMM node {getattr(node, 'name', '')!r}: gemm_library {lib!r} is not one of "
                         f"{', '.join(GEMM_LIBRARIES)}")
    batch = 1
    a = node.inputs[0] if lib != "cublas" and node.inputs else None
    bmm = getattr(node, "op", "") == "aten.bmm" or tuple(attrs.get("op_keys", ())) == ("aten.bmm",)  # or its kernel
    if lib != "cublas" and bmm and a is not None and a.rank == 3 and a.is_bound:
        batch = max(1, int(a.shape[0]))  # a grouped kernel: each group its own [m, K] x [K, N]
    outs = tuple(getattr(node, "outputs", None) or ())
    out = str(outs[0].dtype) if outs and outs[0].dtype != gd else ""  # fp8 GEMMs write bf16 (W8A8, _scaled_mm)
    quant = gd == "fp8" and bool(attrs.get("quantize_input")) and not str(dtype).startswith("fp8")
    setting = getattr(runtime, "moe_grouped_gemm", True)
    grouped = grouped_gemm_on(setting, hw, gd)
    if ex and setting == "torch" and grouped and lib == "cublas":
        lib = "torch_grouped"  # torch._grouped_mm's CUTLASS kernel (timing.moe)
    elif ex and setting == "triton" and lib == "cublas":
        lib = "triton_moe"  # vLLM / SGLang's Triton fused-MoE kernel (timing.moe)
    return GemmPlan(gd, bits, quant_group(node, runtime) if bits else None, variant,
                    ex[0] if ex else 0, ex[3] if ex else 0.0, grouped, dtype,
                    lib, batch, out, bool(getattr(runtime, "l2_activations", False)), quant,
                    str(getattr(runtime, "gemm_schedule", "auto") or "auto"), cc_major(hw),
                    bool(attrs.get("moe_balanced", False)),
                    float((bits and getattr(runtime, "gemv_quant_sm_bw_bytes_per_s", 0.0))
                          or getattr(runtime, "gemv_sm_bw_bytes_per_s", 0.0) or 0.0),
                    float(getattr(runtime, "gemv_mem_bw_efficiency", 0.0) or 0.0),
                    int((getattr(runtime, "gemv_max_rows", 0) if bits else getattr(runtime, "gemv_float_max_rows", 0))
                        or 0))


def gemv_rows_of(plan: GemmPlan, m: Any, hw: Any, groups: Any = 1.0) -> Any:
    """Whether a GEMM of *m* rows runs as the runtime's matrix-vector kernel (bool, or a bool array for an array
    *m*): the runtime has one for the GEMM's weights (``gemv_max_rows`` > 0 for weight-only quantized weights,
    ``gemv_float_max_rows`` for float ones: :func:`gemm_plan`), the profile has ``sm_count``, and the rows of each
    weight matrix (*m* over the MoE experts the step visits, *groups*: ggml's ``mul_mat_id`` runs each expert's rows
    as a kernel of its own) are at most that many."""
    from .profile import timing_of

    if not plan.gemv_rows or not timing_of(hw).sm_count:
        return np.asarray(m) < 0
    return np.asarray(m) <= plan.gemv_rows * np.maximum(1.0, groups)


def gemv_time_s(plan: GemmPlan, m: Any, nbytes: Any, hw: Any, groups: Any = 1.0) -> Any:
    """Time of a GEMM of *m* rows moving *nbytes* when the runtime runs it as its own matrix-vector kernel
    (``[kernels] gemv_*`` keys, module doc), NaN where it does not (:func:`gemv_rows_of`); *m*, *nbytes*: numbers or
    numpy arrays (the vectorised model)::

        t = gemm_latency_s + nbytes / min(mem_bw * gemv_mem_bw_efficiency, sm_count * gemv_sm_bw_bytes_per_s)

    (a rate of 0: the profile's ``gemm_mem_bw_efficiency``, no per-SM limit)

    A matrix-vector kernel has no tiles to quantise: each block streams its rows of the weight once, so its time
    is the bytes at the rate it sustains.  That rate is the smaller of the kernel's share of the bandwidth and, by
    Little's law, what its bytes in flight allow: a kernel holding ``B`` bytes in flight per SM on a memory of
    latency ``L`` streams at most ``sm_count B / L``.  On a part with many SMs beside its bandwidth (GDDR6X) the
    first binds; on an HBM part of ~2 TB/s the second does, and the kernel reaches only part of the bandwidth
    (llama.cpp's mat-vec kernels: the ``llama.cpp`` preset, whose rates are fitted).  A weight-only quantized
    GEMM takes ``gemv_quant_sm_bw_bytes_per_s`` where the runtime gives it (its quantized mat-vec kernel is
    another kernel, with its own bytes in flight), and reads the packed weights and their scales whatever the
    runtime's ``weight_only_gemm`` (a ``dequant_then_gemm`` runtime dequantises only for its GEMM library: ggml's
    MMVQ reads the blocks as they are)."""
    from .profile import timing_of

    use = gemv_rows_of(plan, m, hw, groups)
    if not np.any(use):
        return np.where(use, 0.0, np.nan) if np.ndim(use) else float("nan")
    timing = timing_of(hw)
    rate = hw.mem_bw_bytes_per_s * (plan.gemv_eff or timing.gemm_mem_bw_efficiency)
    if plan.gemv_sm_bw:
        rate = min(rate, (timing.sm_count or 0) * plan.gemv_sm_bw)  # sm_count is set (gemv_rows_of)
    return np.where(use, timing.gemm_latency_s + nbytes / rate, np.nan)


def quantize_input_s(plan: GemmPlan, m: Any, k: Any, hw: Any) -> Any:
    """Device time of the separate kernel quantizing an fp8 GEMM's [*m*, *k*] input (module doc; 0 when the
    plan has none); *m*, *k*: numbers or numpy arrays (the vectorised model)."""
    if not plan.quantize_input:
        return 0.0
    from .profile import timing_of

    timing = timing_of(hw)
    act_bytes = dtype_bits(plan.act_dtype or "fp16") / 8
    nbytes = m * 1.0 * k * (act_bytes + dtype_bits("fp8") / 8)
    return timing.stream_latency_s + nbytes / (hw.mem_bw_bytes_per_s * timing.stream_efficiency("elementwise"))


def quantized_input_saved_bytes(plan: GemmPlan, m: Any, k: Any) -> Any:
    """Bytes of the GEMM's counted [*m*, *k*] input read it does not move when a separate kernel quantized that
    input to fp8 (module doc; 0 without one)."""
    if not plan.quantize_input:
        return 0.0
    return m * 1.0 * k * (dtype_bits(plan.act_dtype or "fp16") - dtype_bits("fp8")) / 8


def gemm_kernel_time(plan: GemmPlan, mnk: tuple[int, int, int], cost: Cost, hw: Any) -> float:
    """Kernel time (no launch) of a GEMM node with counted *cost* and shape *mnk* under *plan*."""
    from .gemm import gemm_time
    from .profile import timing_of
    from .stream import stream_time

    timing = timing_of(hw)
    m, n, k = mnk
    groups, extra_lat = 1.0, 0.0
    if plan.experts:
        groups = float(experts_in_step(cost.weight_bytes, plan.expert_bytes, plan.experts))
        extra_lat = float(per_expert_latency_s(groups, timing, plan.grouped))
    wb = cost.weight_bytes or None
    pre, scales = 0.0, 0.0
    if plan.bits and plan.variant == "dequant_then_gemm" and not bool(gemv_rows_of(plan, m, hw, groups)):
        act_b = dtype_bits(plan.dtype) / 8
        nw = groups if plan.experts else 1.0
        pre = stream_time(dequant_then_gemm_bytes(n, k, plan.bits, plan.group, act_b) * nw, hw).t_s
        g = gemm_time(m, n, k, hw, plan.dtype, weight_bytes=k * n * act_b * nw, groups=groups)
        counted_w = g.bytes - k * n * act_b * nw + (wb or 0.0)  # the GEMM reads bf16 weights, the count packed
    elif plan.bits:
        g = gemm_time(m, n, k, hw, plan.dtype, weight_bytes=wb, weight_dtype=f"int{plan.bits}",
                      quant_group=plan.group, groups=groups,
                      dequant_variant="fused_dequant" if plan.variant == "dequant_then_gemm" else plan.variant)
        scales = scale_bytes(n, k, plan.bits, plan.group) * (groups if plan.experts else 1.0)
        counted_w = g.bytes - scales
    elif plan.library == "torch_grouped":
        g = gemm_time(m, n, k, hw, plan.dtype, weight_bytes=wb, out_dtype=plan.out_dtype or None, groups=groups,
                      library=plan.library, tile=torch_grouped_tile(plan.arch, m / max(plan.experts, 1), n),
                      cluster_m=TORCH_GROUPED_CLUSTER_M, balanced=plan.balanced)
        counted_w = g.bytes
    elif plan.library == "triton_moe":
        g = gemm_time(m, n, k, hw, plan.dtype, weight_bytes=wb, out_dtype=plan.out_dtype or None, groups=groups,
                      library=plan.library, balanced=plan.balanced)
        counted_w = g.bytes
    elif plan.library != "cublas":
        b = plan.batch if m % plan.batch == 0 else 1
        g = gemm_time(m // b, n, k, hw, plan.dtype, batch=b, weight_bytes=wb if b == 1 else None,
                      out_dtype=plan.out_dtype or None, groups=groups, library=plan.library)
        counted_w = g.bytes
    else:
        # back to back (runtime l2_activations): a GEMM that fits reads A and its epilogue operands from L2
        l2 = plan.act_in_l2 and fits_l2(cost.bytes, l2_bytes_of(hw))
        g = gemm_time(m, n, k, hw, plan.dtype, weight_bytes=wb, groups=groups, act_in_l2=l2,
                      out_dtype=plan.out_dtype or None, schedule=plan.schedule,  # D in the epilogue's dtype
                      balanced=plan.balanced)
        counted_w = g.bytes + (cost.act_read_bytes if l2 else quantized_input_saved_bytes(plan, m, k))
    # epilogue operands (bias, residual) stream alongside (an input quantized apart is read in fp8: counted_w)
    extra = max(0.0, cost.bytes - counted_w)
    tv = float(gemv_time_s(plan, m, g.bytes, hw, groups)) if g.flops else math.nan  # an empty GEMM: no kernel
    t = pre + (g.t_s if math.isnan(tv) else tv) + extra_lat + extra / (hw.mem_bw_bytes_per_s * timing.gemm_mem_bw_efficiency)
    if cost.vector_flops:
        t = max(t, cost.vector_flops / (hw.peak("vector", plan.act_dtype or plan.dtype)[0] * hw.vector_efficiency))
    return t + quantize_input_s(plan, m, k, hw)
