"""Result objects of :func:`graphroof.llm.estimate`: one :class:`LLMConfig` per batch size."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .._version import __version__
from ..analysis import CONVENTIONS
from ..counters.settings import CountSettings
from ..hardware import HardwareProfile
from ..layers import cost_fields
from ..units import json_safe
from .memory import MemoryFit
from .phases import Phase
from .quant import Quant
from .source import ModelSpec
from .tables import layer_rows

__all__ = ["LLMConfig", "LLMEstimate", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1


@dataclass
class LLMConfig:
    """One (batch, prompt, gen, TP) configuration."""

    batch: int
    prompt: int
    gen: int
    tp: int
    prefill: Phase
    decode: Phase
    memory: MemoryFit
    critical: list[dict]
    table_depth: int
    fold: bool = True
    ideal: bool = False

    # -- times: realistic unless ideal --------------------------------------------------------------------
    @property
    def decode_steps(self) -> int:
        return self.gen - 1

    def _step(self, pair: tuple[float, float]) -> float:
        return pair[0] if self.ideal else pair[1]

    def _t(self, phase: Phase, ideal: bool) -> float:
        return phase.t_ideal_s if (ideal or self.ideal) else phase.t_realistic_s

    def ttft(self, ideal: bool = False) -> float:
        return self._t(self.prefill, ideal)

    def tpot(self, ideal: bool = False) -> float | None:
        return self._t(self.decode, ideal) if self.decode_steps else None

    def e2e(self, ideal: bool = False) -> float:
        return self.ttft(ideal) + self.decode_steps * (self.tpot(ideal) or 0.0)

    def tokens_per_s(self, ideal: bool = False) -> float:
        e2e = self.e2e(ideal)
        return self.batch * self.gen / e2e if e2e else float("inf")

    @property
    def ttft_s(self) -> float:
        return self.ttft()

    @property
    def tpot_s(self) -> float | None:
        return self.tpot()

    @property
    def e2e_s(self) -> float:
        return self.e2e()

    @property
    def output_tokens_per_s(self) -> float:
        return self.tokens_per_s()

    @property
    def kv_cache_bytes(self) -> float:
        return self.memory.kv_cache_bytes

    @property
    def weight_bytes(self) -> float:
        return self.memory.weight_bytes

    @property
    def fits(self) -> bool | None:
        return self.memory.fits

    def layer_rows(self, phase: str) -> list[dict]:
        p = self.prefill if phase == "prefill" else self.decode
        return layer_rows(p.analysis, self.table_depth, self.fold)

    def _phase_dict(self, p: Phase) -> dict:
        t = p.analysis.totals
        return {"steps": p.steps if p.name == "prefill" else self.decode_steps,
                "context": {"from": p.context[0], "to": p.context[1]},
                "time_s": t.t_lower_s, "time_realistic_s": t.t_realistic_s, "time_upper_s": t.t_upper_s,
                "t_compute_s": t.t_compute_s, "t_memory_s": t.t_memory_s, "t_network_s": t.t_network_s,
                "bound": t.bound, "totals": cost_fields(t.cost), "dims": dict(p.analysis.graph.meta.get("dims", {})),
                "layers": self.layer_rows(p.name)}

    def to_dict(self) -> dict[str, Any]:
        tp_ideal = self.tpot(True)
        d = {
            "batch": self.batch, "prompt": self.prompt, "gen": self.gen, "tp": self.tp,
            "mode": "ideal" if self.ideal else "realistic",
            "ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "e2e_s": self.e2e_s,
            "output_tokens_per_s": self.output_tokens_per_s,
            "decode_tokens_per_s": self.batch / self.tpot_s if self.tpot_s else None,
            "tpot_first_s": self._step(self.decode.first_step_s) if self.decode_steps else None,
            "tpot_last_s": self._step(self.decode.last_step_s) if self.decode_steps else None,
            "ttft_ideal_s": self.ttft(True), "tpot_ideal_s": tp_ideal, "e2e_ideal_s": self.e2e(True),
            "output_tokens_per_s_ideal": self.tokens_per_s(True),
            "prefill_bound": self.prefill.analysis.totals.bound, "decode_bound": self.decode.analysis.totals.bound,
            "kv_cache_bytes": self.kv_cache_bytes, "weight_bytes": self.weight_bytes, "fits": self.fits,
            "memory": self.memory.as_dict(),
            "critical_batch": self.critical,
            "prefill": self._phase_dict(self.prefill),
            "decode": self._phase_dict(self.decode),
        }
        return d


@dataclass
class LLMEstimate:
    """Every configuration of one :func:`~graphroof.llm.estimate` call."""

    model: str
    hw: HardwareProfile
    prompt: int
    gen: int
    tp: int
    quant: Quant
    ideal: bool
    kv_cache: bool
    spec: ModelSpec
    configs: list[LLMConfig]
    notes: list[str] = field(default_factory=list)
    settings: CountSettings = field(default_factory=CountSettings)
    #: The :class:`~graphroof.llm.phases.Pipeline` that produced it (traces cached): ``pipeline.step(...)``.
    pipeline: Any = field(default=None, repr=False, compare=False)

    def __getitem__(self, batch: int) -> LLMConfig:
        for c in self.configs:
            if c.batch == batch:
                return c
        raise KeyError(batch)

    def header(self) -> dict[str, Any]:
        return {
            "model": self.model, "hardware": self.hw.label, "hardware_name": self.hw.name,
            "mode": "ideal" if self.ideal else "realistic", "prompt": self.prompt, "gen": self.gen, "tp": self.tp,
            "dtypes": {"weights": self.quant.weights, "activations": self.quant.activations, "kv": self.quant.kv},
            "kv_cache": self.kv_cache, "spec": {k: v for k, v in vars(self.spec).items()},
            "mem_bw_bytes_per_s": self.hw.mem_bw_bytes_per_s, "capacity_bytes": self.hw.mem_capacity_bytes,
            "interconnect_bw_bytes_per_s": self.hw.interconnect_bw_bytes_per_s,
            "efficiency": {"matrix": self.hw.matrix_efficiency, "vector": self.hw.vector_efficiency,
                           "mem_bw": self.hw.mem_bw_efficiency, "interconnect": self.hw.interconnect_efficiency,
                           "launch_overhead_s": self.hw.launch_overhead_s},
            "conventions": CONVENTIONS, "count_settings": self.settings.describe(),
            "graphroof_version": __version__,
        }

    def to_dict(self) -> dict[str, Any]:
        return json_safe({"schema_version": SCHEMA_VERSION, **self.header(), "notes": self.notes,
                          "configs": [c.to_dict() for c in self.configs]})

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def __repr__(self) -> str:
        bs = ", ".join(str(c.batch) for c in self.configs)
        return f"<LLMEstimate {self.model} on {self.hw.name}: prompt {self.prompt}, gen {self.gen}, batch [{bs}]>"
