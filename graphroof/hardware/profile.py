"""The :class:`HardwareProfile` of one device: peaks per unit and dtype, memory, interconnect, efficiencies,
the optional kernel-level timing model, sources.  The file schema is in :mod:`graphroof.hardware`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..dtypes import canonical_dtype, peak_key_candidates
from ..errors import HardwareProfileError
from .params import CollectiveParams, KernelTiming
from .profile_cache import memo_of

__all__ = ["HardwareProfile"]


@dataclass(frozen=True)
class HardwareProfile:
    """One device.  Units are in the field names; see the module docstring for the file schema."""

    name: str
    matrix_peak_flops_per_s: dict[str, float]
    vector_peak_flops_per_s: dict[str, float]
    mem_bw_bytes_per_s: float
    display_name: str = ""
    vendor: str = ""
    kind: str = "gpu"
    aliases: tuple[str, ...] = ()
    mem_capacity_bytes: float | None = None
    onchip_cache_bytes: float | None = None
    interconnect_name: str = ""
    interconnect_bw_bytes_per_s: float | None = None  # per direction
    matrix_efficiency: float = 1.0
    vector_efficiency: float = 1.0
    mem_bw_efficiency: float = 1.0
    interconnect_efficiency: float = 1.0
    launch_overhead_s: float = 0.0
    sources: dict[str, str] = field(default_factory=dict)
    notes: str = ""
    path: str = ""
    timing: KernelTiming | None = None            # [timing]: kernel-level model (graphroof.timing)
    collectives: CollectiveParams | None = None   # [collectives]: alpha-beta collective model
    #: fp32 matmuls: ``high`` (default, as PyTorch's cuDNN convolutions) run on TF32 matrix units where the
    #: profile lists them; ``highest`` keeps fp32 math (vector units unless fp32 matrix units exist)
    matmul_precision: str = "high"
    #: [price]: a public on-demand list price per GPU-hour, its source and date (None: no price)
    usd_per_hour: float | None = None
    price_source: str = ""
    price_date: str = ""
    #: board_power_w: the vendor's board / module power (TDP, TBP), the most the device draws at full load, in
    #: watts; its source is ``sources["board_power_w"]`` (None: the profile does not give it)
    board_power_w: float | None = None
    #: timing_origin: how the kernel-level constants ([timing] / [collectives]) were obtained: ``fitted`` (fitted on
    #: measured kernel / collective times), ``derived`` (from datasheets and other profiles' fits); empty: read
    #: from ``sources.timing`` (see :attr:`origin`)
    timing_origin: str = ""
    #: compute_capability: the NVIDIA CUDA compute capability, ``"major.minor"`` (``"9.0"`` for H100); its source is
    #: ``sources["compute_capability"]`` (None: not an NVIDIA GPU, or not given).  Read where a kernel library's
    #: choice depends on the architecture (PyTorch's ``torch._grouped_mm``: graphroof.timing.moe)
    compute_capability: str | None = None

    # -- peaks ---------------------------------------------------------------------------------------
    def peak(self, unit: str, dtype: str) -> tuple[float, str]:
        """(peak FLOP/s, ``"matrix.bf16"``) for computing *dtype* on *unit*; falls back to a wider dtype (memoised
        per profile: :mod:`graphroof.hardware.profile_cache`)."""
        memo = memo_of(self)
        key = ("peak", unit, dtype)
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = self._peak(unit, dtype)
        return hit

    def _peak(self, unit: str, dtype: str) -> tuple[float, str]:
        table = self.matrix_peak_flops_per_s if unit == "matrix" else self.vector_peak_flops_per_s
        if not table and unit == "vector":  # no vector table (TPUs): the matrix units are all there is
            table, unit = self.matrix_peak_flops_per_s, "matrix"
        if unit == "matrix" and canonical_dtype(dtype) == "fp32" and self.matmul_precision == "high" \
                and table.get("tf32"):
            return table["tf32"], "matrix.tf32"  # TF32 tensor cores for fp32 matmuls (see matmul_precision)
        if unit == "matrix" and canonical_dtype(dtype) == "tf32" and not table.get("tf32"):
            dtype = "fp32"  # no TF32 units: fp32 math
        if unit == "matrix" and canonical_dtype(dtype) in ("fp32", "fp64") and canonical_dtype(dtype) not in table:
            # an fp32 / fp64 matmul without matrix units for it runs on the vector units (TF32 is opt-in)
            vec = self.vector_peak_flops_per_s.get(canonical_dtype(dtype))
            if vec:
                return vec, f"vector.{canonical_dtype(dtype)}"
        for key in peak_key_candidates(dtype):
            if table.get(key):
                return table[key], f"{unit}.{key}"
        key, val = max(table.items(), key=lambda kv: kv[1])  # last resort: the fastest listed
        return val, f"{unit}.{key}"

    def ridge_point(self, dtype: str = "bf16", unit: str = "matrix") -> float:
        """FLOP/byte where compute and memory time are equal: peak / bandwidth."""
        return self.peak(unit, dtype)[0] / self.mem_bw_bytes_per_s

    @property
    def label(self) -> str:
        return self.display_name or self.name

    @property
    def origin(self) -> str:
        """Where the realistic-time constants come from: ``fitted`` (the profile's kernel-level constants were fitted
        on measured data), ``derived`` (kernel-level constants derived from datasheets and other devices' fits) or
        ``assumed`` (no ``[timing]`` section: the ``[efficiency]`` factors, assumptions)."""
        if self.timing is None:
            return "assumed"
        if self.timing_origin:
            return self.timing_origin
        return "fitted" if str(self.sources.get("timing", "")).lower().startswith("fitted") else "derived"

    def with_overrides(self, *, peak_flops_per_s: float | None = None, mem_bw_bytes_per_s: float | None = None,
                       ideal: bool = False, matmul_precision: str | None = None) -> HardwareProfile:
        """What-if copy: every peak set to *peak_flops_per_s*, bandwidth replaced; ``ideal`` zeroes overheads."""
        p = self
        if matmul_precision is not None:
            if matmul_precision not in ("high", "highest"):
                raise HardwareProfileError(f"matmul precision {matmul_precision!r}: use high (TF32 for fp32 matmuls "
                                           "where the device has it) or highest (fp32 math)")
            p = replace(p, matmul_precision=matmul_precision)
        if peak_flops_per_s is not None:
            p = replace(p, matrix_peak_flops_per_s={k: float(peak_flops_per_s) for k in (p.matrix_peak_flops_per_s or {"fp32": 0})},
                        vector_peak_flops_per_s={k: float(peak_flops_per_s) for k in (p.vector_peak_flops_per_s or {"fp32": 0})},
                        name=f"{p.name}+peak", display_name=f"{p.label} (peak FLOP/s overridden)")
        if mem_bw_bytes_per_s is not None:
            p = replace(p, mem_bw_bytes_per_s=float(mem_bw_bytes_per_s), name=f"{p.name}+bw",
                        display_name=f"{p.label} (bandwidth overridden)")
        if ideal:
            p = replace(p, matrix_efficiency=1.0, vector_efficiency=1.0, mem_bw_efficiency=1.0,
                        interconnect_efficiency=1.0, launch_overhead_s=0.0, timing=None, collectives=None)
        return p

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "display_name": self.label, "vendor": self.vendor, "kind": self.kind,
            "aliases": list(self.aliases),
            "matrix_peak_flops_per_s": dict(self.matrix_peak_flops_per_s),
            "vector_peak_flops_per_s": dict(self.vector_peak_flops_per_s),
            "mem_bw_bytes_per_s": self.mem_bw_bytes_per_s, "mem_capacity_bytes": self.mem_capacity_bytes,
            "onchip_cache_bytes": self.onchip_cache_bytes, "interconnect_name": self.interconnect_name,
            "interconnect_bw_bytes_per_s": self.interconnect_bw_bytes_per_s,
            "efficiency": {"matrix": self.matrix_efficiency, "vector": self.vector_efficiency,
                           "mem_bw": self.mem_bw_efficiency, "interconnect": self.interconnect_efficiency,
                           "launch_overhead_s": self.launch_overhead_s},
            "sources": dict(self.sources), "path": self.path,
            "timing": dict(self.timing.__dict__) if self.timing else None,
            "collectives": dict(self.collectives.__dict__) if self.collectives else None,
            "price": ({"usd_per_hour": self.usd_per_hour, "source": self.price_source, "date": self.price_date}
                      if self.usd_per_hour is not None else None),
            "board_power_w": self.board_power_w,
            "timing_origin": self.origin,
            "compute_capability": self.compute_capability,
        }
