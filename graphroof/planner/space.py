"""The search space of :func:`graphroof.plan`: one :class:`Config` per deployment configuration, the axes this build
supports, and every input checked before any model is built.

A configuration is one engine replica (``tp x pp x dp`` GPUs of one device; a disaggregated one is ``x`` prefill and
``y`` decode replicas) under weight / KV dtypes and batch limits (``max_num_seqs``, ``max_batched_tokens``).  The
replicas a request rate needs are found per rate, not enumerated.

Axes that depend on other rooms are switched on by what the installed code offers, never by a version check:
pipeline / expert / attention-data parallelism when :class:`graphroof.llm.Pricing` has a ``pp`` / ``ep`` / ``dp``
field, disaggregated pools when :func:`graphroof.serve` takes ``disagg``.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InputError

__all__ = ["Config", "Settings", "parallel_axes", "disagg_supported", "expand", "check_list", "ENGINES", "by_gpus",
           "by_usd", "replicas_floor"]

#: the serving engines whose flags a configuration is written as
ENGINES = ("vllm", "sglang", "trtllm")
#: parallel degrees of a replica besides TP (each enabled when ``Pricing`` has the field)
PARALLEL = ("pp", "ep", "dp")


def parallel_axes() -> tuple[str, ...]:
    """The parallel axes besides TP that :class:`graphroof.llm.Pricing` supports in this build."""
    from ..llm import Pricing

    names = {f.name for f in dataclasses.fields(Pricing)}
    return tuple(a for a in PARALLEL if a in names)


def disagg_supported() -> bool:
    """Whether :func:`graphroof.serve` simulates disaggregated prefill / decode pools (a ``disagg`` keyword)."""
    from ..serving import serve

    return "disagg" in inspect.signature(serve).parameters


@dataclass(frozen=True)
class Config:
    """One deployment configuration (a replica's layout, dtypes and batch limits)."""

    hw: str
    tp: int
    weights: str | None
    kv: str | None
    max_num_seqs: int
    max_batched_tokens: int
    pp: int = 1
    ep: int = 1
    dp: int = 1
    disagg: tuple[int, int] | None = None  # (prefill replicas, decode replicas) of one group

    @property
    def gpus_per_replica(self) -> int:
        """GPUs of one replica (a disaggregated group: both pools)."""
        n = self.tp * self.pp * self.dp
        return n * (self.disagg[0] + self.disagg[1]) if self.disagg else n

    def key(self) -> tuple:
        """A total, stable sort key (None dtypes sort first)."""
        return (self.hw, self.tp, self.pp, self.ep, self.dp, self.weights or "", self.kv or "", self.max_num_seqs,
                self.max_batched_tokens, self.disagg or (0, 0))

    def pipeline_key(self) -> tuple:
        """What the counted graphs depend on (not the device): shared by a worker's engines of every device."""
        return (self.tp, self.pp, self.ep, self.dp, self.weights or "", self.kv or "")

    def engine_key(self) -> tuple:
        return (self.hw, *self.pipeline_key())

    @property
    def label(self) -> str:
        par = f"tp{self.tp}" + "".join(f" {a}{getattr(self, a)}" for a in PARALLEL if getattr(self, a) > 1)
        dt = f"w={self.weights or 'native'} kv={self.kv or 'native'}"
        dis = f" {self.disagg[0]}p{self.disagg[1]}d" if self.disagg else ""
        return f"{self.hw} {par}{dis} {dt} seqs={self.max_num_seqs} tokens={self.max_batched_tokens}"

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["disagg"] = list(self.disagg) if self.disagg else None
        d["gpus_per_replica"] = self.gpus_per_replica
        d["label"] = self.label
        return d


@dataclass(frozen=True)
class Settings:
    """Everything a worker needs besides its configurations (plain, picklable values)."""

    model: Any
    frontend_opts: tuple[tuple[str, Any], ...]
    options: Any
    rates: tuple[float, ...]
    arrival: str
    prompt_len: str
    gen_len: str
    seed: int
    search_requests: int
    requests: int
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    slo_percentile: float
    tolerance: float
    policy: str
    admission: str
    runtime: str
    gpu_mem_util: float
    kv_block: int
    activations: str | None
    prices: tuple[tuple[str, float], ...]   # device -> $ per GPU-hour
    gpu_budget: int | None
    base: Any = None           # a graphroof.llm.Pricing the configurations' settings are applied to (rules ...)
    grid_seqs: int = 256       # every step cost is placed at the largest batch limits of the plan
    grid_tokens: int = 8192
    run_id: str = ""           # one plan() call: a worker's cached source and engines serve that call only

    def price(self, hw: str) -> float | None:
        return dict(self.prices).get(hw)


def check_list(name: str, values: Any, *, integer: bool = False, allow_none: bool = False) -> list[Any]:
    """A value or a sequence of them as a list of distinct values; integers >= 1 when *integer*."""
    if values is None and allow_none:
        return [None]
    vals = [values] if isinstance(values, (str, int, float)) or values is None else list(values)
    if not vals:
        raise InputError(f"{name} needs at least one value")
    out: list[Any] = []
    for v in vals:
        if integer and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise InputError(f"{name} values must be integers >= 1, got {v!r}")
        if not integer and v is not None and not isinstance(v, str):
            raise InputError(f"{name} values must be names (strings) or None, got {v!r}")
        if v not in out:
            out.append(v)
    return out


def _disagg_pairs(disagg: Any) -> list[tuple[int, int] | None]:
    if disagg is None:
        return [None]
    items = [disagg] if isinstance(disagg, (str, tuple)) else list(disagg)
    out: list[tuple[int, int] | None] = []
    for it in items:
        if it is None or it == "none":
            out.append(None)
            continue
        if isinstance(it, str):
            t = it.strip().lower()
            p, _, d = t.partition("p")
            if not (t.endswith("d") and p.isdigit() and d[:-1].isdigit()):
                raise InputError(f"disagg {it!r}: expected XpYd (x prefill, y decode replicas), e.g. 1p1d")
            pair = (int(p), int(d[:-1]))
        elif isinstance(it, tuple) and len(it) == 2 and all(isinstance(a, int) and not isinstance(a, bool) for a in it):
            pair = (int(it[0]), int(it[1]))
        else:
            raise InputError(f"disagg values must be 'XpYd' strings or (x, y) pairs, got {it!r}")
        if min(pair) < 1:
            raise InputError(f"disagg {it!r}: the prefill and decode replicas must each be >= 1")
        out.append(pair)
    return list(dict.fromkeys(out))


def expand(hw: Sequence[str], tp: Sequence[int], weights: Sequence[str | None], kv: Sequence[str | None],
           max_num_seqs: Sequence[int], max_batched_tokens: Sequence[int], parallel: Mapping[str, Sequence[int]],
           disagg: Any) -> tuple[list[Config], list[str]]:
    """Every configuration of the axes (sorted by :meth:`Config.key`), and notes on the axes left out.

    *parallel*: ``{"pp": [...], "ep": [...], "dp": [...]}``; an axis given with a degree above 1 that this build's
    ``Pricing`` lacks is an InputError.  ``max_batched_tokens < max_num_seqs`` pairs are skipped (an engine step must
    hold every running sequence's decode token)."""
    notes: list[str] = []
    have = parallel_axes()
    axes: dict[str, list[int]] = {}
    for a in PARALLEL:
        vals = check_list(a, parallel.get(a, [1]), integer=True)
        if a not in have:
            if vals != [1]:
                raise InputError(f"{a} {vals}: this build's graphroof.llm.Pricing has no {a!r} field (no "
                                 f"{a.upper()} pricing); leave {a} at 1")
            notes.append(f"{a.upper()} axis not searched: graphroof.llm.Pricing has no {a!r} field in this build")
        axes[a] = vals
    pairs = _disagg_pairs(disagg)
    if any(p is not None for p in pairs) and not disagg_supported():
        raise InputError("disagg: this build's graphroof.serve has no disaggregated pools (no 'disagg' keyword); "
                         "leave disagg out")
    if disagg is None:
        notes.append("disaggregated prefill / decode pools not searched (give disagg=['1p1d', ...] to add them)"
                     if disagg_supported() else
                     "disaggregated prefill / decode pools not searched: graphroof.serve has no 'disagg' keyword in "
                     "this build")
    out = []
    for h, t, w, k, s, m, pp, ep, dp, dis in itertools.product(hw, tp, weights, kv, max_num_seqs, max_batched_tokens,
                                                                axes["pp"], axes["ep"], axes["dp"], pairs):
        if m < s:
            continue
        out.append(Config(h, t, w, k, s, m, pp=pp, ep=ep, dp=dp, disagg=dis))
    if not out:
        raise InputError("no configuration left: every max_batched_tokens is below every max_num_seqs (a step holds "
                         "each running sequence's decode token); raise max_batched_tokens")
    out.sort(key=Config.key)
    return out, notes


def by_gpus(p: dict[str, Any]) -> tuple:
    """Cheapest first: fewest GPUs, then lowest $ per hour, then most output tokens/s per GPU, then the stable key."""
    usd = p.get("usd_per_hour")
    return (p["gpus"], usd if usd is not None else math.inf, -p["output_tokens_per_s_per_gpu"], p.get("key", ()))


def by_usd(p: dict[str, Any]) -> tuple:
    """Lowest $ per hour first (no price: last), then fewest GPUs, then the stable key."""
    usd = p.get("usd_per_hour")
    return (usd if usd is not None else math.inf, p["gpus"], p.get("key", ()))


def replicas_floor(rate: float, capacity_rps: float) -> int:
    """Replicas of *capacity_rps* each that *rate* needs (at least one)."""
    return max(1, math.ceil(rate / capacity_rps - 1e-9))
