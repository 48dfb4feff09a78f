"""The cost of an op: a frozen value that adds with ``+``.

Conventions (stated once, printed in every report header):

* ``FLOPS_PER_MAC = 2``: one fused multiply-add is 2 FLOPs (as torch's FlopCounterMode; fvcore counts 1).
* FLOPs are split by the unit that executes them: ``matrix_flops`` (matmul, conv, attention products: tensor
  cores / MXUs) and ``vector_flops`` (elementwise, softmax, norms, reductions: CUDA cores / VPUs).
* Bytes are split by role and direction, unfused: every op reads its inputs from and writes its outputs to
  main memory (HBM / DRAM).  Bytes are decimal (1 GB = 1e9 B).  ``bytes`` is memory traffic only;
  ``net_bytes`` (collectives: bytes one device sends over the interconnect) is costed on the link bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from ..errors import CostError

__all__ = ["FLOPS_PER_MAC", "Cost", "ZERO", "MAX_COUNT"]

#: One multiply-add = 2 FLOPs.
FLOPS_PER_MAC = 2
#: No real model's FLOPs or bytes come near this (1e30); a larger count means a wrong dim or trip count in the
#: input, and refusing it keeps every later sum and division finite.
MAX_COUNT = 1e30


@dataclass(frozen=True, slots=True)
class Cost:
    """FLOPs by unit and bytes by role.  ``estimated`` marks a count from the unknown-op fallback or a guess."""

    matrix_flops: float = 0
    vector_flops: float = 0
    weight_bytes: float = 0
    act_read_bytes: float = 0
    act_write_bytes: float = 0
    kv_read_bytes: float = 0
    kv_write_bytes: float = 0
    net_bytes: float = 0
    estimated: bool = False

    def __post_init__(self) -> None:
        vals = (self.matrix_flops, self.vector_flops, self.weight_bytes, self.act_read_bytes, self.act_write_bytes,
                self.kv_read_bytes, self.kv_write_bytes, self.net_bytes)
        # one cheap test for the common case (it runs on every Cost): values in [0, MAX_COUNT] are finite, and a
        # NaN (which compares false everywhere) makes the sum NaN; the loop below names the offending field
        if not (min(vals) >= 0 and max(vals) <= MAX_COUNT and math.isfinite(sum(vals))):
            for f in fields(self):
                v = getattr(self, f.name)
                if f.name == "estimated":
                    continue
                if v < 0:
                    raise CostError(f"Cost.{f.name} must be >= 0, got {v}")
                if v > MAX_COUNT or not math.isfinite(v):
                    shown = f"{v:.3g}" if isinstance(v, float) else f"{str(v)[:4]}...e{len(str(v)) - 1}"
                    raise CostError(f"Cost.{f.name} = {shown} is beyond any real model (> {MAX_COUNT:g}); a "
                                    "dim, shape or trip count in the input is wrong")

    @property
    def flops(self) -> float:
        return self.matrix_flops + self.vector_flops

    @property
    def act_bytes(self) -> float:
        return self.act_read_bytes + self.act_write_bytes

    @property
    def kv_bytes(self) -> float:
        return self.kv_read_bytes + self.kv_write_bytes

    @property
    def bytes(self) -> float:
        """Main-memory bytes (weights + activations + KV cache); excludes ``net_bytes``."""
        return self.weight_bytes + self.act_bytes + self.kv_bytes

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per byte (``inf`` when no bytes move, 0 when no FLOPs)."""
        if self.bytes == 0:
            return float("inf") if self.flops else 0.0
        return self.flops / self.bytes

    def __add__(self, other: Cost) -> Cost:
        if not isinstance(other, Cost):
            return NotImplemented
        return Cost(
            self.matrix_flops + other.matrix_flops,
            self.vector_flops + other.vector_flops,
            self.weight_bytes + other.weight_bytes,
            self.act_read_bytes + other.act_read_bytes,
            self.act_write_bytes + other.act_write_bytes,
            self.kv_read_bytes + other.kv_read_bytes,
            self.kv_write_bytes + other.kv_write_bytes,
            self.net_bytes + other.net_bytes,
            self.estimated or other.estimated,
        )

    def __radd__(self, other: object) -> Cost:
        if other == 0:  # lets sum() start from 0
            return self
        return NotImplemented

    def scale(self, k: float) -> Cost:
        """Every FLOP and byte multiplied by *k* (e.g. loop trip counts); *k* must be finite and >= 0."""
        if isinstance(k, bool) or not isinstance(k, (int, float)) or not math.isfinite(k) or k < 0:
            raise CostError(f"cannot scale a cost by {k!r}: a repeat or trip count must be a finite number >= 0")
        return Cost(self.matrix_flops * k, self.vector_flops * k, self.weight_bytes * k, self.act_read_bytes * k,
                    self.act_write_bytes * k, self.kv_read_bytes * k, self.kv_write_bytes * k, self.net_bytes * k,
                    estimated=self.estimated)

    def as_dict(self) -> dict[str, float | bool]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d.update(flops=self.flops, bytes=self.bytes)
        return d


ZERO = Cost()
