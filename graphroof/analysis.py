"""The :class:`Analysis` result: graph + hardware + counts + roofline, as rows the reports render."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from ._version import __version__
from .counters.cost import FLOPS_PER_MAC
from .counters.count import CountSummary
from .graph import BOUND, COST, OpGraph
from .hardware import HardwareProfile
from .hardware.bands import ErrorBand, band_for
from .layers import (
    cost_fields,
    default_depth,
    fold_layers,
    fold_rows,
    layer_row,
    op_params,
    order_by_work,
    rollup,
    runs,
)
from .roofline import Totals, compute_dtype, totals
from .units import fmt_bytes, fmt_flops, fmt_time, json_safe

__all__ = ["Analysis", "CONVENTIONS", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1
CONVENTIONS = (
    f"{FLOPS_PER_MAC} FLOPs per multiply-add; dense (not 2:4-sparse) peak FLOP/s; bytes in decimal units "
    "(1 GB = 1e9 B); kernel bytes = tensors crossing kernel boundaries under the runtime preset (op rows: "
    "unfused, each op reads its inputs and writes its outputs); time = max(FLOPs / peak, bytes / bandwidth) "
    "per kernel"
)

@dataclass
class Analysis:
    """Everything one ``analyze`` call found.  ``graph.nx`` is the networkx graph with ``cost`` / ``bound``.

    ``ops`` and ``layers`` are lists of plain dicts with raw (unrounded) numbers; their keys are the stable
    JSON schema (see README).
    """

    graph: OpGraph
    hw: HardwareProfile
    summary: CountSummary
    depth: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    #: the kernel graph (:meth:`graphroof.fuse.KernelGraph.as_opgraph`), evaluated; ``None``: ops are kernels
    kernels: OpGraph | None = None
    runtime: str = "eager"
    #: launch cost paid once per step (a CUDA-graph replay) instead of per kernel
    step_launch_s: float = 0.0
    #: the HTML page's what-if data (:func:`graphroof.sweeps.whatif_costs.whatif_costs`); None: not computed
    whatif: dict[str, Any] | None = None
    #: what to change, quantified (plain dicts, the JSON ``next_steps``): set once by the engine that built the
    #: analysis (:func:`graphroof.api.count_graph` via :func:`graphroof.advice.analysis_advice`); empty otherwise
    next_steps: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.depth is None:
            self.depth = default_depth(self.graph)
        #: the op graph's own totals: every op its own kernel (the eager view)
        self.eager_totals: Totals = totals(self.graph, self.hw)
        t = totals(self.timed_graph, self.hw)
        if self.step_launch_s:
            t = replace(t, t_realistic_s=t.t_realistic_s + self.step_launch_s)
        self.totals: Totals = t
        self._ops: list[dict] | None = None
        self._layers: list[dict] | None = None
        self._kernel_rows: list[dict] | None = None
        self._params: dict[str, int] | None = None
        self._memory: dict[str, Any] | None = None
        self._tables: dict[tuple[str, bool], list[dict[str, Any]]] = {}

    @property
    def timed_graph(self) -> OpGraph:
        """The graph the totals and layers come from: the kernels when fused, else the ops."""
        return self.kernels if self.kernels is not None else self.graph

    def time_parts(self) -> dict[str, float]:
        """How the realistic time is made: the true floor, the per-kernel roofline sum, derating, launches,
        collectives (``t_realistic_s`` = roofline sum + derating + launch)."""
        g = self.timed_graph
        bounds = [g.get(n, BOUND) for n in g.nx.nodes]
        launch = sum(b.t_launch_s for b in bounds) + self.step_launch_s
        t = self.totals
        return {
            "time_floor_s": t.time_floor_s,
            "time_roofline_s": t.t_lower_s,
            "time_derating_s": t.t_realistic_s - launch - t.t_lower_s,
            "time_launch_s": launch,
            "time_collectives_s": sum(b.t_realistic_s - b.t_launch_s for b in bounds
                                      if b.time_model.startswith("collective")),
            "time_realistic_s": t.t_realistic_s,
            "n_kernels": sum(runs(op) for op in g.ops()),
        }

    # one name per figure, as in the JSON ``totals`` and the report labels (floor / roofline / realistic)
    @property
    def time_floor_s(self) -> float:
        """max(Σ Tc, Σ Tm, Σ Tn) over the kernels."""
        return self.totals.time_floor_s

    @property
    def time_roofline_s(self) -> float:
        """Σ max(Tc, Tm, Tn) per kernel."""
        return self.totals.time_roofline_s

    @property
    def time_realistic_s(self) -> float:
        """roofline + derating + launches."""
        return self.totals.time_realistic_s

    # -- rows ---------------------------------------------------------------------------------------
    @property
    def ops(self) -> list[dict[str, Any]]:
        if self._ops is None:
            total_t = self.eager_totals.t_lower_s or 1.0
            rows = []
            for node in self.graph.ops():
                cost, b = self.graph.get(node.name, COST), self.graph.get(node.name, BOUND)
                rows.append({
                    "name": node.name, "op": node.op, "scope": node.scope, "dtype": compute_dtype(node),
                    **cost_fields(cost),
                    "intensity": b.intensity, "attainable_flops_per_s": b.attainable_flops_per_s,
                    "peak_flops_per_s": b.peak_flops_per_s, "peak_used": b.peak_used,
                    "t_compute_s": b.t_compute_s, "t_memory_s": b.t_memory_s, "t_network_s": b.t_network_s,
                    "time_s": b.t_s, "time_realistic_s": b.t_realistic_s, "bound": b.bound,
                    "share": b.t_s / total_t, "params": self.params_by_op.get(node.name, 0),
                    "inputs": [str(t) if t is not None else None for t in node.inputs],
                    "outputs": [str(t) for t in node.outputs],
                })
            self._ops = rows
        return self._ops

    @property
    def layers(self) -> list[dict[str, Any]]:
        if self._layers is None:
            total_t = self.totals.t_lower_s
            rows = [layer_row(g, self.hw, total_t) for g in rollup(self.timed_graph, self.hw, self.depth)]
            params = self.params_by_op
            self._layers = [{**r, "params": sum(params.get(n, 0) for n in r["ops"])} for r in rows]
        return self._layers

    # -- the report's tables: the one fold policy of graphroof.layers -------------------------------------------
    def layer_table(self, fold: bool = True) -> list[dict[str, Any]]:
        """The layer rows as the reports show them: identical repeated blocks folded (*fold*) into one row with
        ``repeat`` (:func:`graphroof.layers.fold_layers`), each with a ``label`` (``model.layers.* ×32``, what a
        structural row holds), in the order their first op with work runs."""
        key = ("layers", fold)
        if key not in self._tables:
            assert self.depth is not None
            rows = fold_layers(self.timed_graph, self.hw, self.depth, self.totals.t_lower_s, self.params_by_op, fold)
            self._tables[key] = order_by_work(rows, self.ops)
        return self._tables[key]

    def op_table(self, fold: bool = True) -> list[dict[str, Any]]:
        """Op rows with ``module``, ``repeat`` and ``label``; with *fold*, the same op at the same place of
        identical repeated blocks is one row (:func:`graphroof.layers.fold_rows`)."""
        key = ("ops", fold)
        if key not in self._tables:
            self._tables[key] = fold_rows(self.ops, lambda r: r["op"], fold)
        return self._tables[key]

    def kernel_table(self, fold: bool = True) -> list[dict[str, Any]]:
        """Kernel rows (:attr:`kernel_rows`) with ``module``, ``repeat`` and ``label``, folded as :meth:`op_table`
        (same op kinds, dtype, FLOPs and bytes at the same place of repeated blocks)."""
        key = ("kernels", fold)
        if key not in self._tables:
            self._tables[key] = fold_rows(self.kernel_rows, lambda r: tuple(r.get("op_keys") or (r["kind"],)), fold)
        return self._tables[key]

    def runtime_description(self) -> str:
        """The runtime preset the kernels were formed under, in words (:meth:`graphroof.fuse.Runtime.describe`)."""
        from .fuse.runtimes import RUNTIMES

        rt = RUNTIMES.get(self.runtime)
        return rt.describe() if rt is not None else f"runtime preset {self.runtime}"

    @property
    def params_by_op(self) -> dict[str, int]:
        """Op name -> parameters it reads (:func:`graphroof.layers.op_params`); the layer rows' ``params`` sum it."""
        if self._params is None:
            self._params = op_params(self.graph)
        return self._params

    @property
    def kernel_rows(self) -> list[dict[str, Any]]:
        """One row per kernel (the kernel view): the op rows' fields plus ``kind``, ``n_ops``, ``ops``,
        ``gemm_mnk``, ``time_model`` and ``t_launch_s``."""
        if self._kernel_rows is None:
            g = self.timed_graph
            total_t = self.totals.t_lower_s or 1.0
            rows = []
            for node in g.ops():
                cost, b = g.get(node.name, COST), g.get(node.name, BOUND)
                rows.append({
                    "name": node.name, "kind": node.attrs.get("kernel_kind", node.op), "scope": node.scope,
                    "dtype": compute_dtype(node), "n_ops": node.attrs.get("n_ops", 1),
                    "ops": list(node.attrs.get("ops", (node.name,))), "gemm_mnk": node.attrs.get("gemm_mnk"),
                    "op_keys": list(node.attrs.get("op_key_counts") or (node.op,)),
                    **cost_fields(cost), "intensity": b.intensity, "peak_used": b.peak_used,
                    "attainable_flops_per_s": b.attainable_flops_per_s, "peak_flops_per_s": b.peak_flops_per_s,
                    "t_compute_s": b.t_compute_s, "t_memory_s": b.t_memory_s, "t_network_s": b.t_network_s,
                    "time_s": b.t_s, "time_realistic_s": b.t_realistic_s, "t_launch_s": b.t_launch_s,
                    "time_model": b.time_model, "bound": b.bound, "share": b.t_s / total_t,
                })
            self._kernel_rows = rows
        return self._kernel_rows

    # -- header facts ---------------------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return str(self.meta.get("model") or self.graph.name)

    def dtypes_used(self) -> list[str]:
        seen: dict[str, None] = {}
        for r in self.ops:
            if r["flops"]:
                seen.setdefault(r["dtype"])
        return list(seen)

    def peaks_used(self) -> dict[str, float]:
        """``{"matrix.bf16": 3.12e14, ...}`` for every peak some op used."""
        out: dict[str, float] = {}
        for r in self.ops:
            for key in r["peak_used"].split("+"):
                if key != "-" and key not in out:
                    unit, dt = key.split(".")
                    table = self.hw.matrix_peak_flops_per_s if unit == "matrix" else self.hw.vector_peak_flops_per_s
                    out[key] = table.get(dt, 0.0)
        return out

    def ridge_points(self) -> dict[str, float]:
        return {k: v / self.hw.mem_bw_bytes_per_s for k, v in self.peaks_used().items()}

    @property
    def band_figure(self) -> str:
        """The validated regime the realistic total falls in: ``vision-latency`` (convolutions), ``ttft`` (a causal
        decoder's forward pass is a prefill), ``encoder-latency`` (bidirectional attention), else ``layer-kernel``."""
        kinds = [op.op.split(".")[-1].lower() for op in self.graph.ops()]
        if any("conv" in k for k in kinds):
            return "vision-latency"
        attn = [op for op in self.graph.ops() if "attention" in op.op.split(".")[-1].lower()]
        if attn:
            causal = any(op.attrs.get("is_causal") or op.attrs.get("mask_causal") or op.attrs.get("unidirectional")
                         or op.op.endswith("GroupQueryAttention") for op in attn)
            return "ttft" if causal else "encoder-latency"
        return "layer-kernel"

    @property
    def band(self) -> ErrorBand:
        """The error band of the realistic total (:mod:`graphroof.hardware.bands`): the regime's validation."""
        return band_for(self.band_figure, self.hw.name, self.hw.vendor, self.runtime)

    def header(self) -> dict[str, Any]:
        return {
            "model": self.model_name, "hardware": self.hw.label, "hardware_name": self.hw.name,
            "hardware_timing_origin": self.hw.origin,
            "mem_bw_bytes_per_s": self.hw.mem_bw_bytes_per_s, "peaks_used_flops_per_s": self.peaks_used(),
            "ridge_points_flop_per_byte": self.ridge_points(), "dtypes": self.dtypes_used(),
            "capture": self.meta.get("capture", self.graph.meta.get("capture", "")),
            "dims": dict(self.graph.meta.get("dims", {})), "depth": self.depth,
            "runtime": self.runtime, "n_ops": sum(runs(op) for op in self.graph.ops()),
            "n_kernels": sum(runs(op) for op in self.timed_graph.ops()),
            "conventions": CONVENTIONS, "graphroof_version": __version__,
        }

    def memory_fit(self) -> dict[str, Any]:
        """Does one forward pass fit on the device: every weight once (its dtype as built) plus the activation
        peak of a liveness sweep in op order (:func:`graphroof.memory.activation_peak_bytes`) against the
        profile's memory capacity; ``fits`` is ``None`` when the profile lists no capacity.  No KV cache is
        held (``graphroof llm`` sizes that)."""
        if self._memory is None:
            from .memory import activation_peak_bytes, params_from_graph

            weights = float(sum(t.nbytes for _, t in params_from_graph(self.graph)))
            acts = activation_peak_bytes(self.graph) if len(self.graph) else 0.0
            cap = self.hw.mem_capacity_bytes
            self._memory = {"weight_bytes": weights, "activation_peak_bytes": acts, "total_bytes": weights + acts,
                            "capacity_bytes": cap, "fits": None if not cap else weights + acts <= cap}
        return self._memory

    def notes(self) -> list[str]:
        notes = [self.summary.coverage_line()]
        settings = self.graph.meta.get("count_settings")
        if settings is not None and any(r["op"].split(".")[-1].lower().find("attention") >= 0 for r in self.ops):
            notes.append(settings.describe())
        if not self.hw.vector_peak_flops_per_s and self.totals.cost.vector_flops:
            notes.append(f"{self.hw.name} lists no vector-unit peak: vector FLOPs (elementwise, softmax, norms) are "
                         "timed at the matrix peak, which is optimistic for them")
        notes.extend(str(n) for n in self.graph.meta.get("notes", []))
        notes.extend(str(n) for n in self.meta.get("notes", []))
        return notes

    # -- outputs --------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        t = self.totals
        return json_safe({
            "schema_version": SCHEMA_VERSION,
            **self.header(),
            "hardware_profile": self.hw.as_dict(),
            "totals": {
                **cost_fields(t.cost), "intensity": t.cost.intensity,
                "time_s": t.t_lower_s, "time_lower_s": t.t_lower_s, "time_upper_s": t.t_upper_s,
                "time_realistic_s": t.t_realistic_s, "t_compute_s": t.t_compute_s,
                "t_memory_s": t.t_memory_s, "t_network_s": t.t_network_s, "bound": t.bound,
                "time_realistic_low_s": self.band.low(t.t_realistic_s),
                "time_realistic_high_s": self.band.high(t.t_realistic_s),
                **self.time_parts(),
            },
            "error_band": self.band.as_dict(),
            "eager_totals": {
                **cost_fields(self.eager_totals.cost), "time_roofline_s": self.eager_totals.t_lower_s,
                "time_realistic_s": self.eager_totals.t_realistic_s, "n_kernels": sum(
                    runs(op) for op in self.graph.ops() if self.graph.get(op.name, BOUND).t_launch_s
                    or self.graph.get(op.name, COST).bytes or self.graph.get(op.name, COST).flops),
            },
            "memory": self.memory_fit(),
            "coverage": self.summary.as_dict(),
            "notes": self.notes(),
            "layers": self.layers,
            "kernels": self.kernel_rows,
            "ops": self.ops,
            "next_steps": self.next_steps,
        })

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def to_dataframe(self, level: str = "layers"):
        """Per-layer (or ``level="ops"``) rows as a pandas DataFrame; needs pandas."""
        try:
            import pandas as pd
        except ImportError:
            from .errors import GraphroofError

            raise GraphroofError("to_dataframe() needs pandas: pip install pandas") from None
        return pd.DataFrame(self.layers if level == "layers" else self.ops)

    def __repr__(self) -> str:
        t = self.totals
        return (f"<Analysis {self.model_name} on {self.hw.name}: {len(self.graph)} ops, "
                f"{fmt_flops(t.cost.flops)}, {fmt_bytes(t.cost.bytes)}, roofline {fmt_time(t.t_lower_s)} "
                f"(realistic {fmt_time(t.t_realistic_s)}), {t.bound}-bound>")
