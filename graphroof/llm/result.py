"""Result objects of :func:`graphroof.llm.estimate`: one :class:`LLMConfig` per batch size."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .._version import __version__
from ..analysis import CONVENTIONS
from ..counters.settings import CountSettings
from ..frontends.source import ModelSpec
from ..hardware import HardwareProfile
from ..hardware.bands import ErrorBand
from ..layers import cost_fields
from ..units import json_safe
from .memory import MemoryFit
from .phases import Phase
from .quant import Quant
from .tables import layer_rows
from .tokens import e2e_s, tokens_per_s

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
    #: the priced figures (:func:`graphroof.llm.price.figure_row`): ``prefill_t_ideal_s``, ``decode_t_realistic_s``,
    #: ``decode_first_ideal_s``, ``prefill_bound`` ...; the phases above are their per-op breakdowns
    figures: dict[str, Any] = field(default_factory=dict)
    #: the parallel layout (:meth:`graphroof.llm.parallel.Layout.to_dict`: tp, pp, dp, ep, system, nodes ...) when
    #: not a plain TP replica; the phases above are then one rank's step of the slowest stage
    layout: dict[str, Any] | None = None
    #: the error band of each realistic figure kind (``ttft``, ``tpot``, ``throughput``:
    #: :class:`~graphroof.hardware.bands.ErrorBand`), empty for the ideal roofline
    bands: dict[str, ErrorBand] = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        """Devices the configuration runs on: the layout's world, else TP."""
        return int(self.layout["world"]) if self.layout else self.tp

    # -- times: realistic unless ideal --------------------------------------------------------------------
    @property
    def decode_steps(self) -> int:
        return self.gen - 1

    def _fig(self, phase: str, what: str, ideal: bool = False) -> float:
        mode = "ideal" if (ideal or self.ideal) else "realistic"
        return float(self.figures[f"{phase}_{what}_{mode}_s"])

    def ttft(self, ideal: bool = False) -> float:
        return self._fig("prefill", "t", ideal)

    def tpot(self, ideal: bool = False) -> float | None:
        return self._fig("decode", "t", ideal) if self.decode_steps else None

    def e2e(self, ideal: bool = False) -> float:
        return e2e_s(self.ttft(ideal), self.tpot(ideal), self.gen)

    def tokens_per_s(self, ideal: bool = False) -> float:
        return tokens_per_s(self.batch, self.gen, self.e2e(ideal))

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

    def band_range(self, what: str) -> tuple[float, float] | None:
        """(low, high) of a realistic figure from its error band: ``ttft`` / ``tpot`` / ``e2e`` in seconds,
        ``tokens_per_s``; None for the ideal roofline or a figure that does not exist (no decode step)."""
        kind = {"ttft": "ttft", "tpot": "tpot", "e2e": "throughput", "tokens_per_s": "throughput"}[what]
        band = self.bands.get(kind)
        value = {"ttft": self.ttft_s, "tpot": self.tpot_s, "e2e": self.e2e_s,
                 "tokens_per_s": self.output_tokens_per_s}[what]
        if band is None or self.ideal or value is None:
            return None
        if what == "tokens_per_s":  # a rate: the reciprocal of a time's band
            return value / (1.0 + band.p90_abs), value * (1.0 + band.p90_abs)
        return band.low(value), band.high(value)

    def _band_fields(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for what in ("ttft", "tpot", "e2e"):
            r = self.band_range(what)
            out[f"{what}_low_s"], out[f"{what}_high_s"] = r if r else (None, None)
        r = self.band_range("tokens_per_s")
        out["output_tokens_per_s_low"], out["output_tokens_per_s_high"] = r if r else (None, None)
        return out

    @property
    def board_power_w(self) -> float | None:
        """The device's board power (TDP / TBP) from its profile, None when the profile does not give it."""
        return self.prefill.analysis.hw.board_power_w

    def joules_per_token(self, ideal: bool = False) -> float | None:
        """Energy per output token, an upper bound: the TP devices at full board power for the whole request,
        ``board_power_w * tp * e2e / (batch * gen)``; None without a board power."""
        w = self.board_power_w
        tps = self.tokens_per_s(ideal)
        return None if w is None or not tps or tps == float("inf") else w * self.gpus / tps

    def tokens_per_joule(self, ideal: bool = False) -> float | None:
        j = self.joules_per_token(ideal)
        return 1.0 / j if j else None

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
        t, f = p.analysis.totals, self.figures
        n = p.name
        return {"steps": f.get("prefill_steps", p.steps) if n == "prefill" else self.decode_steps,
                "context": {"from": p.context[0], "to": p.context[1]},
                "time_s": f[f"{n}_t_ideal_s"], "time_realistic_s": f[f"{n}_t_realistic_s"],
                "time_upper_s": t.t_upper_s, "t_compute_s": f[f"{n}_t_compute_s"],
                "t_memory_s": f[f"{n}_t_memory_s"], "t_network_s": f[f"{n}_t_network_s"], "bound": f[f"{n}_bound"], "totals": cost_fields(t.cost), "dims": dict(p.analysis.graph.meta.get("dims", {})),
                "layers": self.layer_rows(p.name)}

    def to_dict(self) -> dict[str, Any]:
        tp_ideal = self.tpot(True)
        d = {
            "batch": self.batch, "prompt": self.prompt, "gen": self.gen, "tp": self.tp,
            "mode": "ideal" if self.ideal else "realistic",
            "ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "e2e_s": self.e2e_s,
            "output_tokens_per_s": self.output_tokens_per_s,
            **(self._band_fields() if self.bands and not self.ideal else {}),
            "decode_tokens_per_s": self.batch / self.tpot_s if self.tpot_s else None,
            "tpot_first_s": self._fig("decode", "first") if self.decode_steps else None,
            "tpot_last_s": self._fig("decode", "last") if self.decode_steps else None,
            "ttft_ideal_s": self.ttft(True), "tpot_ideal_s": tp_ideal, "e2e_ideal_s": self.e2e(True),
            "output_tokens_per_s_ideal": self.tokens_per_s(True),
            "prefill_bound": self.figures["prefill_bound"], "decode_bound": self.figures["decode_bound"],
            "kv_cache_bytes": self.kv_cache_bytes, "weight_bytes": self.weight_bytes, "fits": self.fits,
            "board_power_w": self.board_power_w, "joules_per_token": self.joules_per_token(),
            "tokens_per_joule": self.tokens_per_joule(),
            "memory": self.memory.as_dict(),
            "critical_batch": self.critical,
            "prefill": self._phase_dict(self.prefill),
            "decode": self._phase_dict(self.decode),
        }
        if self.layout is not None:
            d["layout"] = self.layout
        if self.figures.get("prefill_steps", 1) > 1:  # chunked prefill: TTFT is these steps (+ request overhead)
            d["prefill_steps"] = self.figures["prefill_steps"]
            d["prefill_steps_s"] = self.figures["prefill_steps_s"]
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
    #: what the prefill reads, in words (``prompt 1024 tokens``; an encoder-decoder's encoder input)
    input: str = ""
    #: What to change, quantified (plain dicts, the JSON ``next_steps``): :func:`graphroof.llm.advice.llm_advice`,
    #: computed once by :func:`~graphroof.llm.estimate`.
    next_steps: list[dict[str, Any]] = field(default_factory=list)
    #: the parallel layout (:meth:`graphroof.llm.parallel.Layout.to_dict`), None for a plain TP replica
    layout: dict[str, Any] | None = None
    #: the runtime preset the figures were priced under (names the error bands' regime)
    runtime: str = ""

    def __getitem__(self, batch: int) -> LLMConfig:
        for c in self.configs:
            if c.batch == batch:
                return c
        raise KeyError(batch)

    def input_text(self) -> str:
        return self.input or f"prompt {self.prompt} tokens"

    @property
    def bands(self) -> dict[str, ErrorBand]:
        """The error band of each realistic figure kind (the configurations share them); empty when ideal."""
        return self.configs[0].bands if self.configs else {}

    def header(self) -> dict[str, Any]:
        return {
            "model": self.model, "hardware": self.hw.label, "hardware_name": self.hw.name,
            "hardware_timing_origin": self.hw.origin,
            "mode": "ideal" if self.ideal else "realistic", "prompt": self.prompt, "gen": self.gen, "tp": self.tp,
            "input": self.input_text(),
            "dtypes": {"weights": self.quant.weights, "activations": self.quant.activations, "kv": self.quant.kv},
            "kv_cache": self.kv_cache, "spec": {k: v for k, v in vars(self.spec).items()},
            "mem_bw_bytes_per_s": self.hw.mem_bw_bytes_per_s, "capacity_bytes": self.hw.mem_capacity_bytes,
            "interconnect_bw_bytes_per_s": self.hw.interconnect_bw_bytes_per_s,
            "efficiency": {"matrix": self.hw.matrix_efficiency, "vector": self.hw.vector_efficiency,
                           "mem_bw": self.hw.mem_bw_efficiency, "interconnect": self.hw.interconnect_efficiency,
                           "launch_overhead_s": self.hw.launch_overhead_s},
            "conventions": CONVENTIONS, "count_settings": self.settings.describe(),
            "graphroof_version": __version__,
            **({"runtime": self.runtime} if self.runtime else {}),
            **({"error_bands": {k: b.as_dict() for k, b in self.bands.items()}} if self.bands else {}),
        } | ({"layout": self.layout} if self.layout is not None else {})

    def to_dict(self) -> dict[str, Any]:
        return json_safe({"schema_version": SCHEMA_VERSION, **self.header(), "notes": self.notes,
                          "configs": [c.to_dict() for c in self.configs], "next_steps": self.next_steps})

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def __repr__(self) -> str:
        bs = ", ".join(str(c.batch) for c in self.configs)
        return f"<LLMEstimate {self.model} on {self.hw.name}: prompt {self.prompt}, gen {self.gen}, batch [{bs}]>"
