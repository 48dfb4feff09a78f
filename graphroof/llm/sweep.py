"""``sweep``: every (device, dtypes, TP, batch, prompt, gen) point of an LLM, its Pareto frontier and SLO picks.

One point is one serving configuration on one device: TTFT, TPOT, tokens/s per GPU and per user, memory fit and
bound, computed by the same machinery as :func:`graphroof.llm.estimate` (a :class:`~graphroof.llm.phases.Pipeline`
per (dtypes, TP); traced graphs are shared by every pipeline and device, and counted graphs by every device, so
a sweep over ``--hw`` / ``--weights`` / ``--tp`` adds no trace).

Definitions (per point, ``n = batch`` sequences on ``tp`` GPUs):

* ``tokens_per_s = n * gen / e2e_s`` (all GPUs of the point), ``tokens_per_s_per_gpu = tokens_per_s / tp``;
* ``tokens_per_s_per_user = gen / e2e_s``: output tokens per second one user sees, TTFT included;
* ``usd_per_million_tokens = usd_per_hour * tp / 3600 / tokens_per_s * 1e6`` (price per GPU-hour);
* ``joules_per_token = board_power_w * tp / tokens_per_s``: an upper bound, every GPU at its full board power
  (the profile's ``board_power_w``); ``tokens_per_joule`` its inverse (None without a board power).

The **frontier** of a device keeps the points that fit in memory and that no other such point beats on both
tokens/s per GPU and tokens/s per user.  :func:`pick_slo` picks per device the fitting point with the most
tokens/s per GPU among those meeting ``max_ttft_s`` / ``max_tpot_s``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .._version import __version__
from ..errors import InputError
from ..sweep.limits import MAX_POINTS, check_grid
from ..units import json_safe

__all__ = ["SweepPoint", "SweepResult", "pareto", "pick_slo", "sweep"]

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class SweepPoint:
    """One configuration on one device (times realistic unless the sweep is ideal)."""

    hw: str
    batch: int
    prompt: int
    gen: int
    tp: int
    ttft_s: float
    tpot_s: float | None
    prefill_bound: str
    decode_bound: str | None
    memory_bytes: float
    capacity_bytes: float | None   # usable device memory (capacity x the serving gpu_mem_util)
    weights: str | None = None
    activations: str | None = None
    kv: str | None = None
    usd_per_hour: float | None = None
    #: the device's board power (TDP / TBP) from its profile; None: not given (energy shown as n/a)
    board_power_w: float | None = None

    @property
    def e2e_s(self) -> float:
        return self.ttft_s + (self.gen - 1) * (self.tpot_s or 0.0)

    @property
    def tokens_per_s(self) -> float:
        return self.batch * self.gen / self.e2e_s if self.e2e_s else float("inf")

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.tp

    @property
    def tokens_per_s_per_user(self) -> float:
        return self.gen / self.e2e_s if self.e2e_s else float("inf")

    @property
    def fits(self) -> bool | None:
        return None if self.capacity_bytes is None else self.memory_bytes <= self.capacity_bytes

    @property
    def usd_per_million_tokens(self) -> float | None:
        if self.usd_per_hour is None:
            return None
        return self.usd_per_hour * self.tp / 3600.0 / self.tokens_per_s * 1e6

    @property
    def joules_per_token(self) -> float | None:
        """Upper bound: every GPU of the point at its full board power for the whole request,
        ``board_power_w * tp * e2e_s / (batch * gen)`` = ``board_power_w * tp / tokens_per_s``."""
        if self.board_power_w is None or not self.tokens_per_s:
            return None
        return self.board_power_w * self.tp / self.tokens_per_s

    @property
    def tokens_per_joule(self) -> float | None:
        j = self.joules_per_token
        return 1.0 / j if j else None

    @property
    def dtype(self) -> str:
        """``w=int4 kv=fp8`` style label of the what-if dtypes (``native`` when none)."""
        parts = [f"{k}={v}" for k, v in (("w", self.weights), ("a", self.activations), ("kv", self.kv)) if v]
        return " ".join(parts) or "native"

    @property
    def bound(self) -> str:
        return self.decode_bound or self.prefill_bound

    @property
    def label(self) -> str:
        return f"b{self.batch} tp{self.tp} {self.dtype}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(e2e_s=self.e2e_s, tokens_per_s=self.tokens_per_s, tokens_per_s_per_gpu=self.tokens_per_s_per_gpu,
                 tokens_per_s_per_user=self.tokens_per_s_per_user, fits=self.fits, dtype=self.dtype,
                 usd_per_million_tokens=self.usd_per_million_tokens, joules_per_token=self.joules_per_token,
                 tokens_per_joule=self.tokens_per_joule)
        return d


def pareto(points: Iterable[SweepPoint]) -> list[SweepPoint]:
    """The points that fit (or whose fit is unknown) and that no other such point beats on both tokens/s per GPU
    and tokens/s per user (ties on both keep the first); sorted by tokens/s per user, fastest first."""
    pts = [p for p in points if p.fits is not False]
    pts.sort(key=lambda p: (-p.tokens_per_s_per_user, -p.tokens_per_s_per_gpu))
    out: list[SweepPoint] = []
    best_gpu = float("-inf")
    for p in pts:
        if p.tokens_per_s_per_gpu > best_gpu:
            out.append(p)
            best_gpu = p.tokens_per_s_per_gpu
    return out


def meets(p: SweepPoint, max_ttft_s: float | None = None, max_tpot_s: float | None = None) -> bool:
    """Fits in memory (or unknown) and meets the SLOs (a point without decode steps has no TPOT to violate)."""
    if p.fits is False:
        return False
    if max_ttft_s is not None and p.ttft_s > max_ttft_s:
        return False
    return not (max_tpot_s is not None and p.tpot_s is not None and p.tpot_s > max_tpot_s)


def pick_slo(points: Iterable[SweepPoint], max_ttft_s: float | None = None,
             max_tpot_s: float | None = None) -> dict[str, SweepPoint | None]:
    """Per device (in first-seen order): the point meeting the SLOs with the most tokens/s per GPU (ties: the
    lower TPOT, then the lower TTFT); None for a device where no point meets them."""
    out: dict[str, SweepPoint | None] = {}
    for p in points:
        out.setdefault(p.hw, None)
        if not meets(p, max_ttft_s, max_tpot_s):
            continue
        cur = out[p.hw]
        key = (p.tokens_per_s_per_gpu, -(p.tpot_s or 0.0), -p.ttft_s)
        if cur is None or key > (cur.tokens_per_s_per_gpu, -(cur.tpot_s or 0.0), -cur.ttft_s):
            out[p.hw] = p
    return out


class RunningFrontier:
    """The per-device Pareto frontier and SLO pick of points seen one at a time, in constant memory per device:
    equal to :func:`pareto` and :func:`pick_slo` over all the points (candidates kept in arrival order, so ties
    resolve as they do over the whole list)."""

    def __init__(self, max_ttft_s: float | None = None, max_tpot_s: float | None = None):
        self.max_ttft_s, self.max_tpot_s = max_ttft_s, max_tpot_s
        self.front: dict[str, list[SweepPoint]] = {}
        self.best: dict[str, SweepPoint | None] = {}
        self.n = 0

    def add(self, p: SweepPoint) -> None:
        self.n += 1
        cands = self.front.setdefault(p.hw, [])
        if p.fits is not False:
            kept = {id(q) for q in pareto([*cands, p])}
            self.front[p.hw] = [q for q in (*cands, p) if id(q) in kept]
        self.best[p.hw] = pick_slo([x for x in (self.best.get(p.hw), p) if x is not None],
                                   self.max_ttft_s, self.max_tpot_s)[p.hw]


@dataclass
class SweepResult:
    """Every point of one :func:`sweep` call."""

    model: str
    points: list[SweepPoint]
    hw_labels: dict[str, str] = field(default_factory=dict)
    max_ttft_s: float | None = None
    max_tpot_s: float | None = None
    ideal: bool = False
    notes: list[str] = field(default_factory=list)
    traces: int = 0
    trace_s: float = 0.0      # wall time of the traces (graphs built), of the whole sweep
    #: a streamed sweep (``on_point``): its points went to the caller; the frontier and picks are kept here
    streamed: RunningFrontier | None = None

    @property
    def devices(self) -> list[str]:
        if self.streamed is not None:
            return list(self.streamed.best)
        return list(dict.fromkeys(p.hw for p in self.points))

    def frontier(self, hw: str | None = None) -> dict[str, list[SweepPoint]] | list[SweepPoint]:
        if self.streamed is not None:
            fronts = {d: pareto(self.streamed.front.get(d, [])) for d in self.devices}
            return fronts.get(hw, []) if hw is not None else fronts
        if hw is not None:
            return pareto(p for p in self.points if p.hw == hw)
        return {d: pareto(p for p in self.points if p.hw == d) for d in self.devices}

    def best(self) -> dict[str, SweepPoint | None]:
        if self.streamed is not None:
            return dict(self.streamed.best)
        return pick_slo(self.points, self.max_ttft_s, self.max_tpot_s)

    def cheapest(self) -> SweepPoint | None:
        """The SLO pick with the lowest $ per million output tokens (devices with a price only)."""
        priced = [p for p in self.best().values() if p is not None and p.usd_per_million_tokens is not None]
        return min(priced, key=lambda p: p.usd_per_million_tokens) if priced else None

    def to_dict(self) -> dict[str, Any]:
        best = self.best()
        cheap = self.cheapest()
        return json_safe({
            "schema_version": SCHEMA_VERSION, "kind": "llm_sweep", "model": self.model,
            "mode": "ideal" if self.ideal else "realistic", "hardware": self.hw_labels,
            "slo": {"max_ttft_s": self.max_ttft_s, "max_tpot_s": self.max_tpot_s},
            "traces": self.traces, "trace_s": self.trace_s, "notes": self.notes,
            "points": [p.to_dict() for p in self.points],
            "frontier": {d: [self.points.index(p) for p in f] for d, f in self.frontier().items()},
            "best": {d: (None if p is None else self.points.index(p)) for d, p in best.items()},
            "cheapest": None if cheap is None else self.points.index(cheap),
            "graphroof_version": __version__,
        })

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def __repr__(self) -> str:
        return f"<SweepResult {self.model}: {len(self.points)} points on {', '.join(self.devices)}>"


class _SharedTraces:
    """An LLM source whose graphs are traced once per (phase, batch, x) and shared by every pipeline."""

    def __init__(self, src: Any):
        self._src = src
        self._graphs: dict[tuple[str, int, int], Any] = {}
        self.trace_s = 0.0   # wall time spent tracing (the rest of a sweep is counting and evaluation)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._src, name)

    def _get(self, phase: str, batch: int, x: int):
        key = (phase, batch, x)
        if key not in self._graphs:
            import time

            fn = self._src.decode_graph if phase == "decode" else self._src.prefill_graph
            t0 = time.perf_counter()
            self._graphs[key] = fn(batch, x)
            self.trace_s += time.perf_counter() - t0
        return self._graphs[key]

    def prefill_graph(self, batch: int, seq: int):
        return self._get("prefill", batch, seq)

    def decode_graph(self, batch: int, past: int):
        return self._get("decode", batch, past)


def _ints(values: int | Sequence[int], flag: str) -> list[int]:
    vs = [values] if isinstance(values, int) else list(values)
    if not vs:
        raise InputError(f"{flag} needs at least one value")
    for v in vs:
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise InputError(f"{flag} values must be integers >= 1, got {v!r}")
    return list(dict.fromkeys(vs))


def _opt_list(v: str | None | Sequence[str | None]) -> list[str | None]:
    if v is None or isinstance(v, str):
        return [v]
    return list(dict.fromkeys(v)) or [None]


def sweep(
    model: Any,
    *,
    hw: str | Sequence[Any] = ("a100",),
    batch: int | Sequence[int] = 1,
    prompt: int | Sequence[int] = 1024,
    gen: int | Sequence[int] = 256,
    weights: str | None | Sequence[str | None] = None,
    activations: str | None | Sequence[str | None] = None,
    kv: str | None | Sequence[str | None] = None,
    tp: int | Sequence[int] = 1,
    ideal: bool = False,
    usd_per_hour: Mapping[str, float] | None = None,
    max_ttft_s: float | None = None,
    max_tpot_s: float | None = None,
    attention: str = "flash",
    causal: str = "kernel",
    rules: Mapping[str, Any] | None = None,
    strict: bool = False,
    progress: Callable[[str], None] | None = None,
    max_points: int | None = MAX_POINTS,
    on_point: Callable[[SweepPoint], None] | None = None,
    **frontend_opts: Any,
) -> SweepResult:
    """Every combination of *hw* x dtypes x *tp* x *prompt* x *gen* x *batch* (see the module docstring).

    *usd_per_hour*: price per GPU-hour by profile name (or the name as given in *hw*); a device not named there
    takes its profile's ``[price]`` list price when it has one.  Everything checkable
    from the arguments and the model's config is checked before the first trace, the grid's size included: more
    than *max_points* points (default :data:`~graphroof.sweep.limits.MAX_POINTS`; None: no limit) is an
    :class:`~graphroof.errors.InputError`.

    *on_point*: called with each point as it is priced, which is then not kept: the result holds only the
    frontier and the SLO picks (kept up to date point by point), so a grid of any size takes constant memory
    (``graphroof sweep --stream``).

    >>> r = sweep("llama-3-8b", hw=["a100", "h100"], batch=[1, 8, 64], max_tpot_s=0.05)  # doctest: +SKIP
    >>> r.best()["h100"].label                                                          # doctest: +SKIP
    """
    from ..api import resolve_hardware
    from ..counters.settings import CountSettings
    from .estimate import _check_lengths, open_source
    from .quant import Quant
    from .tp import check_tp

    batches, prompts, gens, tps = (_ints(batch, "--batch"), _ints(prompt, "--prompt"), _ints(gen, "--gen"),
                                   _ints(tp, "--tp"))
    for p_, g_ in itertools.product(prompts, gens):
        _check_lengths(p_, g_)
    for t in tps:
        check_tp(t)
    quants = [(w, a, k, Quant.parse(w, a, k)) for w, a, k in
              itertools.product(_opt_list(weights), _opt_list(activations), _opt_list(kv))]
    names = [hw] if isinstance(hw, str) else list(hw)
    if not names:
        raise InputError("--hw needs at least one hardware profile")
    check_grid({"--hw": len(names), "dtypes": len(quants), "--tp": len(tps), "--prompt": len(prompts),
                "--gen": len(gens), "--batch": len(batches)}, max_points)
    profs = [resolve_hardware(h, ideal=ideal) for h in names]
    prices: dict[str, float] = {}
    for key, v in (usd_per_hour or {}).items():
        match = [pr for n, pr in zip(names, profs) if key in (str(n), pr.name)]
        if not match:
            raise InputError(f"--usd-per-hour {key}={v}: {key} is not one of the swept devices "
                             f"({', '.join(pr.name for pr in profs)})")
        if not v > 0:
            raise InputError(f"--usd-per-hour {key}: the price must be > 0, got {v}")
        prices[match[0].name] = float(v)
    listed = []
    for pr in profs:  # devices without --usd-per-hour: the profile's list price, when it has one
        if pr.name not in prices and pr.usd_per_hour is not None:
            prices[pr.name] = pr.usd_per_hour
            listed.append(f"{pr.name} ${pr.usd_per_hour:g}/GPU-hour ({pr.price_source}, {pr.price_date})")
    for flag, v in (("--max-ttft", max_ttft_s), ("--max-tpot", max_tpot_s)):
        if v is not None and not v > 0:
            raise InputError(f"{flag} must be > 0 seconds, got {v}")
    if max(tps) > 1:
        for pr in profs:
            if not pr.interconnect_bw_bytes_per_s:
                raise InputError(f"--tp {max(tps)}: hardware profile {pr.name} has no interconnect bandwidth to "
                                 "cost the collectives on; pick profiles with an interconnect or --tp 1")
    settings = CountSettings(attention=attention, causal=causal)
    if progress and not hasattr(model, "prefill_graph"):
        progress(f"building {model if isinstance(model, str) else type(model).__name__}")
    raw_src = open_source(model, **frontend_opts)
    if getattr(raw_src, "encoder_decoder", False):  # its decode depends on the encoder length, not modelled here
        raise InputError(f"{raw_src.name} is an encoder-decoder: the LLM sweep does not model its cross-attention "
                         "cache yet; use `graphroof llm` for each prompt")
    raw_src.check_context(max(prompts), max(gens))
    for t in tps:
        check_tp(t, raw_src.spec.heads, raw_src.spec.kv_heads, raw_src.spec.intermediate)
    src = _SharedTraces(raw_src)
    points: list[SweepPoint] = []
    running = RunningFrontier(max_ttft_s, max_tpot_s)  # with on_point: the frontier and picks, point by point
    notes = list(getattr(raw_src, "notes", []) or [])
    if listed:
        notes.append("prices from the profiles' on-demand list prices (--usd-per-hour overrides): " + "; ".join(listed))
    if not raw_src.kv_cache:
        notes.append(f"{raw_src.name} has no KV cache ({raw_src.no_cache_reason}): each decode step recomputes "
                     "the whole context")
    for (w, a, k, quant), t in itertools.product(quants, tps):
        pipes = [_pipeline(src, pr, quant, t, settings, rules, strict, progress) for pr in profs]
        fast = _fast(pipes[0], batches, prompts, gens, notes)
        for pr, pipe in zip(profs, pipes):
            if progress:
                progress(f"evaluating {len(prompts) * len(gens) * len(batches)} points on {pr.name}, TP {t}, "
                         f"dtypes {quant.describe()}")
            for p_, g_, b in itertools.product(prompts, gens, batches):
                figs = (fast.figures(pipe, b, p_, g_, ideal) if fast is not None
                        else _direct_figures(src, pipe, b, p_, g_, ideal))
                point = _point(src, pipe, pr, b, p_, g_, t, (w, a, k), prices.get(pr.name), figs)
                if on_point is None:
                    points.append(point)
                else:
                    on_point(point)
                    running.add(point)
    return SweepResult(model=raw_src.name, points=points, hw_labels={pr.name: pr.label for pr in profs},
                       max_ttft_s=max_ttft_s, max_tpot_s=max_tpot_s, ideal=ideal, notes=notes,
                       traces=len(src._graphs), trace_s=src.trace_s,
                       streamed=running if on_point is not None else None)


def _pipeline(src, prof, quant, tp, settings, rules, strict, progress):
    """A Pipeline per (dtypes, TP, device); counted graphs do not depend on the device, so pipelines of the
    same (dtypes, TP) share one count cache."""
    from .phases import Pipeline

    key = (quant, tp)
    cache = src.__dict__.setdefault("_counted_by", {})
    pipe = Pipeline(src, prof, quant=quant, tp=tp, settings=settings, rules=rules, strict=strict,
                    progress=progress)
    if key in cache:
        pipe._cache = cache[key]   # noqa: SLF001 - counts are per (quant, tp); the device only enters evaluation
    else:
        cache[key] = pipe._cache   # noqa: SLF001
    return pipe


def _fast(pipe, batches, prompts, gens, notes):
    """The interpolated evaluation of a pipeline group (llm/sweep_fast.py), or None: every point traced."""
    from .sweep_fast import FastLLM, NotPolynomial

    if len(batches) * len(prompts) * len(gens) <= 1:
        return None
    if pipe.source.spec.state_layers:  # recurrent state: memory and decode are not a KV cache over (batch, context)
        msg = "points priced one trace each: state-space layers are not interpolated"
        if msg not in notes:
            notes.append(msg)
        return None
    try:
        return FastLLM(pipe, batches, prompts, gens)
    except NotPolynomial as e:
        msg = f"points priced one trace each: costs are not interpolated ({e})"
        if msg not in notes:
            notes.append(msg)
        return None


def _direct_figures(src, pipe, b, prompt, gen, ideal):
    """(ttft_s, prefill bound, tpot_s, decode bound, activation peak, KV bytes per token) from traces at the
    point.  What does not depend on ``gen`` is kept on the pipeline per (batch, prompt)."""
    from .estimate import _Run
    from .memory import activation_peak_bytes

    run = _Run(src, pipe, prompt, gen, None, True, ideal)
    per_prompt = pipe.__dict__.setdefault("_sweep_by_prompt", {})
    if (b, prompt) not in per_prompt:
        pre = pipe.phase("prefill", "prefill", b, prompt, prompt, 0, {"model": src.name})
        per_prompt[b, prompt] = (pre.t_ideal_s if ideal else pre.t_realistic_s, pre.analysis.totals.bound,
                                 activation_peak_bytes(pipe.counted("prefill", b, prompt).graph),
                                 run.kv_bytes_per_token(b))
    ttft, pbound, act, kv_tok = per_prompt[b, prompt]
    tpot, dbound = None, None
    if gen > 1:
        dec = run.decode_phase(b)
        tpot = dec.t_ideal_s if ideal else dec.t_realistic_s
        dbound = dec.analysis.totals.bound
    return ttft, pbound, tpot, dbound, act, kv_tok


def _point(src, pipe, prof, b, prompt, gen, tp, dtypes, price, figures) -> SweepPoint:
    """One point from its *figures* (:func:`_direct_figures` or the interpolated ones)."""
    from .estimate import _Run
    from .memory import ServingMemory, resident_weight_bytes

    ttft, pbound, tpot, dbound, act, kv_tok = figures
    if "_weights" not in pipe.__dict__:
        if "_params" not in src.__dict__:
            src.__dict__["_params"] = _Run(src, pipe, prompt, gen, None, True, False).params()
        pipe.__dict__["_weights"] = resident_weight_bytes(src.__dict__["_params"], pipe.quant, tp, pipe.plan)
    weights = pipe.__dict__["_weights"]
    ctx = prompt + gen
    sm = ServingMemory()  # the same serving memory model as estimate(): sliding windows, paged-KV blocks
    mem = weights + kv_tok * src.spec.kv_cache_tokens(ctx) / ctx * sm.kv_tokens(ctx) * b + act
    if src.spec.state_layers:  # state-space layers: a fixed recurrent state per sequence
        mem += _Run(src, pipe, prompt, gen, None, True, False).state_bytes_per_seq(b) * b
    return SweepPoint(hw=prof.name, batch=b, prompt=prompt, gen=gen, tp=tp, ttft_s=ttft, tpot_s=tpot,
                      prefill_bound=pbound, decode_bound=dbound, memory_bytes=mem,
                      capacity_bytes=(prof.mem_capacity_bytes * sm.gpu_mem_util if prof.mem_capacity_bytes else None),
                      weights=dtypes[0], activations=dtypes[1],
                      kv=dtypes[2], usd_per_hour=price, board_power_w=prof.board_power_w)
