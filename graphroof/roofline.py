"""The roofline pass: time = max(FLOPs / peak FLOP/s, bytes / bandwidth) per op.

Matrix FLOPs run at the profile's matrix peak for the op's compute dtype and vector FLOPs at its vector peak;
their times add (``t_compute_s = matrix_flops / matrix_peak + vector_flops / vector_peak``).  Memory time is
``bytes / mem_bw_bytes_per_s`` and network time ``net_bytes / interconnect_bw_bytes_per_s``.  Within an op the
three overlap perfectly (``t_s = max``), which makes the sum over ops a lower bound; the sum of
``t_compute_s + t_memory_s`` (no overlap) is the upper bound.  The *realistic* time divides each term by the
profile's efficiency factor and adds the per-kernel launch overhead to every op that does work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .counters.cost import Cost
from .errors import CostError
from .fuse.classify import compute_dtype, kernel_kind
from .fuse.runtimes import Runtime
from .graph import BOUND, COST, REPEAT, OpGraph, OpNode
from .hardware import HardwareProfile
from .timing.host import extra_kernels_device_s, host_dispatch_s

__all__ = ["Bound", "compute_dtype", "evaluate", "evaluate_graph", "Totals", "totals"]


@dataclass(frozen=True, slots=True)
class Bound:
    """Roofline result of one op (or a sum of ops, see :func:`combine`)."""

    t_compute_s: float
    t_memory_s: float
    t_network_s: float
    t_s: float                      # ideal: max(compute, memory, network)
    t_realistic_s: float            # with efficiency factors and launch overhead
    bound: str                      # "compute" | "memory" | "network"
    intensity: float                # FLOP / byte (main memory)
    attainable_flops_per_s: float   # min(peak, intensity * bandwidth)
    peak_flops_per_s: float         # peak of the unit(s) used (harmonic blend when matrix + vector)
    peak_used: str                  # "matrix.bf16", "vector.fp32", "matrix.bf16+vector.fp32", "-"
    t_launch_s: float = 0.0         # launch cost inside t_realistic_s (0 when the step is a CUDA graph)
    time_model: str = "efficiency"  # how t_realistic_s was priced ("gemm", "stream:norm", "efficiency", ...)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}


def _bound_name(tc: float, tm: float, tn: float) -> str:
    if tn > tc and tn > tm:
        return "network"
    if tc == 0 and tm == 0:
        return "memory"  # nothing moves or computes (free views): reported as memory, t_s = 0
    return "compute" if tc >= tm else "memory"


def bound_name(tc: float, tm: float, tn: float) -> str:
    """``compute`` / ``memory`` / ``network``: the bound of summed compute, memory and network times."""
    return _bound_name(tc, tm, tn)


def _peaks(hw: HardwareProfile, dtype: str) -> tuple[float, str, float, str]:
    return (*hw.peak("matrix", dtype), *hw.peak("vector", dtype))


def evaluate(cost: Cost, hw: HardwareProfile, dtype: str = "bf16",
             peaks: tuple[float, str, float, str] | None = None, node: OpNode | None = None,
             runtime: Runtime | None = None) -> Bound:
    """Roofline for one cost on *hw*, computing in *dtype* (*peaks*: precomputed ``_peaks(hw, dtype)``).

    With *node* (the op or kernel the cost belongs to) and a profile that has a ``[timing]`` section, the
    realistic time is the kernel-level model of :mod:`graphroof.timing.kernel` (GEMM tiles and waves, streaming
    bandwidth by kernel kind, alpha-beta collectives); otherwise it divides by the profile's efficiency factors.
    *runtime*: the engine preset the kernel runs under (passed to the kernel model; ``None``: default kernels).
    """
    peak_m, key_m, peak_v, key_v = peaks or _peaks(hw, dtype)
    times = _times(node)
    if times > 1:  # an op or kernel run `times` times: one run's roofline (tiles, waves, one launch), times that
        assert node is not None
        once = evaluate(cost.scale(1 / times), hw, dtype, (peak_m, key_m, peak_v, key_v),
                        replace(node, attrs={k: v for k, v in node.attrs.items() if k != REPEAT}), runtime)
        return replace(once, t_compute_s=once.t_compute_s * times, t_memory_s=once.t_memory_s * times,
                       t_network_s=once.t_network_s * times, t_s=once.t_s * times,
                       t_realistic_s=once.t_realistic_s * times, t_launch_s=once.t_launch_s * times)
    tc = cost.matrix_flops / peak_m + cost.vector_flops / peak_v
    tm = cost.bytes / hw.mem_bw_bytes_per_s
    tn = 0.0
    if cost.net_bytes:
        if not hw.interconnect_bw_bytes_per_s:
            from .errors import HardwareProfileError

            raise HardwareProfileError(f"{hw.name}: no interconnect.bw_bytes_per_s_per_direction; needed for collectives")
        tn = cost.net_bytes / hw.interconnect_bw_bytes_per_s
    t = max(tc, tm, tn)
    tc_r = cost.matrix_flops / (peak_m * hw.matrix_efficiency) + cost.vector_flops / (peak_v * hw.vector_efficiency)
    tm_r = tm / hw.mem_bw_efficiency
    tn_r = tn / hw.interconnect_efficiency
    launch = hw.launch_overhead_s if (cost.flops or cost.bytes or cost.net_bytes) else 0.0
    # a collective priced by the efficiency factors is still a collective (the breakdown's "collectives" part)
    model = "collective:efficiency" if cost.net_bytes else "efficiency"
    t_real = max(tc_r, tm_r, tn_r)
    more = 0  # kernels the runtime launches beside this one (timing.kernel.KernelTime.extra_launches)
    if node is not None and hw.timing is not None and (cost.flops or cost.bytes or cost.net_bytes):
        from .timing.kernel import kernel_time

        kt = kernel_time(node, kernel_kind(node, cost), cost, hw, dtype, tc, tm, runtime)
        t_real, launch, model, more = kt.t_kernel_s, kt.t_launch_s, kt.model, kt.extra_launches
        if runtime is not None and runtime.aten_ops:  # an op PyTorch runs as several kernels (timing.host)
            from .timing.aten import eager_attention_device_s
            from .timing.profile import timing_of

            t_real += extra_kernels_device_s(runtime, node, cost, timing_of(hw).stream_latency_s,
                                             hw.mem_bw_bytes_per_s * timing_of(hw).stream_efficiency("elementwise"))
            t_real += eager_attention_device_s(node, cost, hw, runtime)  # a naive attention's other kernels
    cast = bool(runtime is not None and runtime.autocast and cost.matrix_flops and cost.weight_bytes)
    if cast:
        t_real, launch = _with_weight_cast(cost, hw, node, t_real, launch)
    if launch and runtime is not None and runtime.overlap_launch:  # host stage (evaluate_graph, timing.host)
        launch = host_dispatch_s(runtime, launch / (1 + cast), node, cost, extra_launches=int(cast) + more)
    else:
        launch += more * launch / (1 + cast)
    if cost.matrix_flops and cost.vector_flops:
        used, peak = f"{key_m}+{key_v}", cost.flops / tc
    elif cost.vector_flops:
        used, peak = key_v, peak_v
    elif cost.matrix_flops:
        used, peak = key_m, peak_m
    else:
        used, peak = "-", peak_m
    intensity = cost.intensity
    attainable = min(peak, intensity * hw.mem_bw_bytes_per_s) if cost.flops else 0.0
    return Bound(tc, tm, tn, t, t_real + launch, _bound_name(tc, tm, tn), intensity,
                 attainable, peak, used, launch, model)


def _with_weight_cast(cost: Cost, hw: HardwareProfile, node: OpNode | None, t_real: float,
                      launch: float) -> tuple[float, float]:
    """Under ``torch.autocast`` a GEMM / conv first casts its fp32 weight to fp16: one more streaming kernel
    (4 B read + 2 B written per weight = 3x the fp16 weight bytes) and one more launch."""
    nbytes = 3.0 * cost.weight_bytes
    if node is not None and hw.timing is not None:
        from .timing.stream import stream_time

        return t_real + stream_time(nbytes, hw, "elementwise").t_s, 2 * launch
    return t_real + nbytes / (hw.mem_bw_bytes_per_s * hw.mem_bw_efficiency), 2 * launch


def _times(node: OpNode | None) -> int:
    """How many times *node* runs (its ``graphroof.repeat`` when that is a whole number > 1), else 1.  A symbolic
    repeat (an ONNX loop's trip count bound later) is priced as one run of the scaled cost."""
    if node is None:
        return 1
    r = node.attrs.get(REPEAT, 1)
    return r if isinstance(r, int) and not isinstance(r, bool) and r > 1 else 1


def _same_op_key(node: OpNode, cost: Cost) -> tuple | None:
    """What a node's bound depends on (everything but its name and scope), or None when its attrs are not
    hashable: nodes with equal keys (replicated blocks) share one evaluation."""
    try:
        key = (node.op, node.inputs, node.outputs, tuple(sorted(node.attrs.items())), cost)
        hash(key)
    except TypeError:
        return None
    return key


def evaluate_graph(graph: OpGraph, hw: HardwareProfile, runtime: Runtime | None = None) -> None:
    """Write ``nodes[n]["bound"]`` for every counted op (run ``counters.count`` first); *runtime*: the engine
    preset the graph's kernels run under (``None``: default kernels)."""
    memo: dict[str, tuple[float, str, float, str]] = {}
    seen: dict[tuple, Bound] = {}
    for node in graph.ops():
        cost = graph.get(node.name, COST)
        if cost is None:
            raise ValueError(f"op {node.name!r} has no cost; run graphroof.counters.count(graph) first")
        key = _same_op_key(node, cost)
        if key is not None and key in seen:
            graph.set(node.name, BOUND, seen[key])
            continue
        dtype = compute_dtype(node)
        if dtype not in memo:
            memo[dtype] = _peaks(hw, dtype)
        try:
            b = evaluate(cost, hw, dtype, memo[dtype], node, runtime)
        except (OverflowError, ZeroDivisionError) as e:
            raise CostError(f"{node.name} ({node.op}): roofline arithmetic failed on {hw.name} ({e}); its counts "
                            f"({cost.flops:.3g} FLOPs, {cost.bytes:.3g} B) or the profile's peaks are out of range") \
                from None
        if not (math.isfinite(b.t_s) and math.isfinite(b.t_realistic_s)):
            raise CostError(f"{node.name} ({node.op}): its roofline time on {hw.name} is not finite ({cost.flops:.3g} "
                            f"FLOPs, {cost.bytes:.3g} B against peaks {memo[dtype][0]:.3g} / {memo[dtype][2]:.3g} "
                            f"FLOP/s and {hw.mem_bw_bytes_per_s:.3g} B/s); a count or the profile is out of range")
        if key is not None:
            seen[key] = b
        graph.set(node.name, BOUND, b)
    if runtime is not None and runtime.overlap_launch:
        _pipeline(graph, float(getattr(runtime, "call_overhead_s", 0.0) or 0.0))


def _pipeline(graph: OpGraph, call_s: float = 0.0) -> None:
    """The host dispatches the kernels ahead of the device (:func:`graphroof.timing.stream.host_pipeline`): each
    kernel's realistic time becomes the wall time it adds to the step, its ``t_launch_s`` the part of that the
    device waits on the host (0 when the host is ahead).  *call_s*: the runtime's host time per inference call
    (``[launch].call_overhead_s``), spent before the first kernel can be issued: the first kernel's host stage."""
    from .timing.stream import host_pipeline

    names = [op.name for op in graph.ops()]
    bounds = [graph.get(n, BOUND) for n in names]
    host = [b.t_launch_s for b in bounds]
    if host and call_s > 0.0:
        host[0] += call_s  # once per call (spread over the launches when the first kernel repeats)
    added = host_pipeline([b.t_realistic_s - b.t_launch_s for b in bounds], host,
                          [_times(graph.node(n)) for n in names])
    for n, b, t in zip(names, bounds, added):
        graph.set(n, BOUND, replace(b, t_realistic_s=t, t_launch_s=max(0.0, t - (b.t_realistic_s - b.t_launch_s))))


@dataclass(frozen=True, slots=True)
class Totals:
    """Whole-model figures."""

    cost: Cost
    t_lower_s: float       # Σ max(Tc, Tm, Tn): perfect overlap inside each op
    t_upper_s: float       # Σ (Tc + Tm + Tn): no overlap
    t_realistic_s: float   # Σ realistic (efficiencies + launch overhead)
    t_compute_s: float
    t_memory_s: float
    t_network_s: float
    bound: str             # from summed compute vs memory vs network time

    # one name per figure, as in the JSON report (``totals.time_floor_s`` ...) and the report labels
    @property
    def flops(self) -> float:
        return self.cost.flops

    @property
    def bytes(self) -> float:
        return self.cost.bytes

    @property
    def time_floor_s(self) -> float:
        """The floor: max(Σ Tc, Σ Tm, Σ Tn) over the kernels (perfect overlap across the whole model)."""
        return max(self.t_compute_s, self.t_memory_s, self.t_network_s)

    @property
    def time_roofline_s(self) -> float:
        """The roofline: Σ max(Tc, Tm, Tn) per kernel (``t_lower_s``)."""
        return self.t_lower_s

    @property
    def time_realistic_s(self) -> float:
        """The realistic time: roofline + derating + launches (``t_realistic_s``)."""
        return self.t_realistic_s

    @property
    def time_upper_s(self) -> float:
        """The no-overlap sum Σ (Tc + Tm + Tn) (``t_upper_s``)."""
        return self.t_upper_s

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__slots__ if k != "cost"}
        d.update(self.cost.as_dict())
        return d


def combine(bounds: list[Bound], cost: Cost, hw: HardwareProfile) -> Totals:
    """Sum a group of op bounds (a layer or the whole model)."""
    tc = sum(b.t_compute_s for b in bounds)
    tm = sum(b.t_memory_s for b in bounds)
    tn = sum(b.t_network_s for b in bounds)
    return Totals(
        cost=cost,
        t_lower_s=sum(b.t_s for b in bounds),
        t_upper_s=tc + tm + tn,
        t_realistic_s=sum(b.t_realistic_s for b in bounds),
        t_compute_s=tc, t_memory_s=tm, t_network_s=tn,
        bound=_bound_name(tc, tm, tn),
    )


def totals(graph: OpGraph, hw: HardwareProfile) -> Totals:
    """Totals over every op of an evaluated graph."""
    nodes = [graph.nx.nodes[n] for n in graph.nx.nodes]
    return combine([d[BOUND] for d in nodes], sum((d[COST] for d in nodes), Cost()), hw)
