"""``sweep`` of an LLM: every (device, dtypes, TP, batch, prompt, gen) point, its Pareto frontier and SLO picks.

One point is one serving configuration on one device: TTFT, TPOT, tokens/s per GPU and per user, memory fit and
bound, all from :meth:`graphroof.llm.price.PricedModel.price` (the engine behind :func:`graphroof.llm.estimate`):
one :class:`~graphroof.llm.phases.Pipeline` per (dtypes, TP), its phases sampled on a few traces and every
point priced as array arithmetic; traced graphs are shared by every pipeline and device, so a sweep over
``--hw`` / ``--weights`` / ``--tp`` adds no trace.

Definitions (per point, ``n = batch`` sequences on ``tp`` GPUs):

* ``tokens_per_s = n * gen / e2e_s`` (all GPUs of the point), ``tokens_per_s_per_gpu = tokens_per_s / tp``;
* ``tokens_per_s_per_user = gen / e2e_s``: output tokens per second one user sees, TTFT included;
* ``usd_per_million_tokens = usd_per_hour * tp / 3600 / tokens_per_s * 1e6`` (price per GPU-hour);
* ``joules_per_token = board_power_w * tp / tokens_per_s``: an upper bound, every GPU at its full board power
  (the profile's ``board_power_w``); ``tokens_per_joule`` its inverse (None without a board power).

The **frontier** of a device keeps the points that fit in memory and that no other such point beats on both
tokens/s per GPU and tokens/s per user.  :func:`~graphroof.sweeps.points.pick_slo` picks per device the fitting
point with the most tokens/s per GPU among those meeting ``max_ttft_s`` / ``max_tpot_s``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InputError
from ..frontends.source import SharedTraces
from ..hardware.bands import band_for
from .limits import MAX_POINTS, check_grid
from .points import _OBJECT, COLUMNS, RunningFrontier, SweepPoint, SweepResult

__all__ = ["sweep_llm"]


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


def sweep_llm(
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
    gpu_mem_util: float = 0.9,
    kv_block: int = 16,
    max_batched_tokens: int | None = None,
    options: Any = None,
    interpolate: bool = True,
    spec_tokens: int = 0,
    spec_acceptance: Any = 0.0,
    spec_draft: Any = None,
    spec_draft_cost: float = 0.0,
    disagg: Any = None,
    decode_hw: Any = None,
    decode_tp: int | None = None,
    kv_link_bw_bytes_per_s: float | None = None,
    kv_link_latency_s: float | None = None,
    **frontend_opts: Any,
) -> SweepResult:
    """Every combination of *hw* x dtypes x *tp* x *prompt* x *gen* x *batch* (see the module docstring).

    *usd_per_hour*: price per GPU-hour by profile name (or the name as given in *hw*); a device not named there
    takes its profile's ``[price]`` list price when it has one.  Everything checkable
    from the arguments and the model's config is checked before the first trace, the grid's size included: more
    than *max_points* points (default :data:`~graphroof.sweeps.limits.MAX_POINTS`; None: no limit) is an
    :class:`~graphroof.errors.InputError`.

    *interpolate*: False prices every point from traces at its own batch and contexts (slow; the check of the
    interpolation).

    *disagg*: ``"XpYd"``: every point is a disaggregated pair of x prefill replicas (the point's device and TP) and
    y decode replicas (*decode_hw* / *decode_tp*, default the point's), the KV sent over the link
    (*kv_link_bw_bytes_per_s* / *kv_link_latency_s*, default the profiles' inter-node network): TTFT from the
    prefill engine, TPOT from the decode engine plus the transfer, tokens/s per GPU over both pools
    (:mod:`graphroof.sweeps.disagg`).

    *on_point*: called with each point as it is priced, which is then not kept: the result holds only the
    frontier and the SLO picks (kept up to date point by point), so a grid of any size takes constant memory
    (``graphroof sweep --stream``).

    >>> r = sweep("llama-3-8b", hw=["a100", "h100"], batch=[1, 8, 64], max_tpot_s=0.05)  # doctest: +SKIP
    >>> r.best()["h100"].label                                                          # doctest: +SKIP
    """
    from ..api import resolve_hardware
    from ..counters.settings import CountSettings
    from ..llm.estimate import check_lengths, open_source
    from ..llm.memory import ServingMemory
    from ..llm.phases import Pipeline
    from ..llm.price import PricedModel
    from ..llm.quant import Quant
    from ..llm.tp import check_tp

    serving = ServingMemory(gpu_mem_util, kv_block, max_batched_tokens)
    batches, prompts, gens, tps = (_ints(batch, "--batch"), _ints(prompt, "--prompt"), _ints(gen, "--gen"),
                                   _ints(tp, "--tp"))
    for p_, g_ in itertools.product(prompts, gens):
        check_lengths(p_, g_)
    from ..llm.specdec import SpecDec, check_spec, profile_of

    check_spec(spec_tokens, spec_acceptance, spec_draft, spec_draft_cost)
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
    pair = _pair_setup(disagg, decode_hw, decode_tp, kv_link_bw_bytes_per_s, kv_link_latency_s, spec_tokens, profs,
                       ideal, resolve_hardware)
    for flag, slo in (("--max-ttft", max_ttft_s), ("--max-tpot", max_tpot_s)):
        if slo is not None and not slo > 0:
            raise InputError(f"{flag} must be > 0 seconds, got {slo}")
    if max(tps) > 1:
        for pr in profs:
            if not pr.interconnect_bw_bytes_per_s:
                raise InputError(f"--tp {max(tps)}: hardware profile {pr.name} has no interconnect bandwidth to "
                                 "cost the collectives on; pick profiles with an interconnect or --tp 1")
    settings = CountSettings(attention=attention, causal=causal)
    if progress and not hasattr(model, "prefill_graph"):
        progress(f"building {model if isinstance(model, str) else type(model).__name__}")
    raw_src = open_source(model, options=options, **frontend_opts) if options is not None else \
        open_source(model, **frontend_opts)
    if getattr(raw_src, "encoder_decoder", False):  # its decode depends on the encoder length, not modelled here
        raise InputError(f"{raw_src.name} is an encoder-decoder: the LLM sweep does not model its cross-attention "
                         "cache yet; use `graphroof llm` for each prompt")
    raw_src.check_context(max(prompts), max(gens))
    for t in tps + ([pair["tp"]] if pair and pair["tp"] else []):
        check_tp(t, raw_src.spec.heads, raw_src.spec.kv_heads, raw_src.spec.intermediate)
    src: Any = SharedTraces(raw_src)
    drafts: dict[str, Any] = {}  # the draft model's engine per device
    cols: dict[str, list] = {c: [] for c in COLUMNS}
    running = RunningFrontier(max_ttft_s, max_tpot_s)  # with on_point: the frontier and picks, point by point
    notes = list(getattr(raw_src, "notes", []) or [])
    if listed:
        notes.append("prices from the profiles' on-demand list prices (--usd-per-hour overrides): " + "; ".join(listed))
    if not raw_src.kv_cache:
        notes.append(f"{raw_src.name} has no KV cache ({raw_src.no_cache_reason}): each decode step recomputes "
                     "the whole context")
    # the points of one (dtypes, TP, device) in the order prompt x gen x batch
    grid = np.array(list(itertools.product(prompts, gens, batches)), dtype=np.int64).reshape(-1, 3)
    P, G, B = grid[:, 0], grid[:, 1], grid[:, 2]
    for (w, a, k, quant), t in itertools.product(quants, tps):
        pipe = Pipeline(src, profs[0], quant=quant, tp=t, settings=settings, rules=rules, strict=strict,
                        progress=progress)
        # speculative decoding: the verify step extrapolates along the batch (a second grid batch when one is swept)
        spec_grid = (batches[0], batches[0] + 1) if spec_tokens and len(batches) == 1 else None
        priced = PricedModel(pipe, batches, prompts, gens, interpolate=interpolate, grid_batches=spec_grid)
        for pr in profs:
            spec = _spec(SpecDec, profile_of, spec_tokens, spec_acceptance, spec_draft, spec_draft_cost, pr, quant,
                         drafts, progress)
            if spec is not None and spec.note() not in notes:
                notes.append(spec.note())
            if progress:
                progress(f"evaluating {len(grid)} points on {pr.name}, TP {t}, dtypes {quant.describe()}")
            f = priced.price(pr, B, P, G, ideal=ideal, serving=serving, spec=spec)
            n = len(f)
            part = {"hw": [pr.name] * n, "batch": B, "prompt": P, "gen": G, "tp": np.full(n, t),
                    "ttft_s": f.ttft_s, "tpot_s": f.tpot_s, "prefill_bound": f.prefill.bound,
                    "decode_bound": _no_decode_none(f.decode.bound, G),
                    "memory_bytes": f.memory["total_bytes"], "capacity_bytes": f.memory["usable_bytes"],
                    "weights": [w] * n, "activations": [a] * n, "kv": [k] * n,
                    "usd_per_hour": np.full(n, prices.get(pr.name, np.nan)),
                    "board_power_w": np.full(n, pr.board_power_w if pr.board_power_w is not None else np.nan),
                    "gpus": np.full(n, np.nan), "pair_tokens_per_s": np.full(n, np.nan)}
            if pair:
                def make(td: int, quant: Any = quant) -> Any:
                    p_ = Pipeline(src, profs[0], quant=quant, tp=td, settings=settings, rules=rules, strict=strict,
                                  progress=progress)
                    return PricedModel(p_, batches, prompts, gens, interpolate=interpolate)

                part.update(_pair_part(pair, f, pr, t, (w, a, k), make, priced, B, P, G, ideal, serving, prices,
                                       raw_src.spec.kv_heads, prompts[0], notes))
            for m in f.notes:  # the priced model's notes and this evaluation's (chunked prefill)
                if m not in notes:
                    notes.append(m)
            if on_point is None:
                for c in COLUMNS:
                    cols[c].append(part[c])
                continue
            chunk = SweepResult(raw_src.name, columns=part)
            for i in range(n):
                point = chunk.point(i)
                on_point(point)
                running.add(point)
    columns: dict[str, Any] = {c: np.concatenate([np.asarray(v, dtype=object if c in _OBJECT else float) for v in vs])
               if vs else [] for c, vs in cols.items()}
    if len(profs) > 1 and not ideal:
        from ..timing.profile import sustained_note

        notes.append(sustained_note(list(profs)))
    return SweepResult(raw_src.name, columns=columns, hw_labels={pr.name: pr.label for pr in profs},
                       hw_origins={pr.name: pr.origin for pr in profs},
                       bands=None if ideal else {pr.name: {k: band_for(k, pr.name, pr.vendor, "serving").as_dict()
                                                           for k in ("ttft", "tpot", "throughput")} for pr in profs},
                       max_ttft_s=max_ttft_s, max_tpot_s=max_tpot_s, ideal=ideal, notes=notes,
                       traces=src.traces, trace_s=src.trace_s,
                       streamed=running if on_point is not None else None)


def _no_decode_none(bound: np.ndarray, gen: np.ndarray) -> np.ndarray:
    """The decode bound per point, None where ``gen == 1`` (no decode step)."""
    out = bound.astype(object)
    out[gen <= 1] = None
    return out


def _spec(spec_cls: Any, profile_of: Any, k: int, acceptance: Any, draft: Any, draft_cost: float, hw: Any,
          quant: Any, drafts: dict[str, Any], progress: Any) -> Any:
    """The speculative setting on device *hw* (None: off); a draft model gets one engine per device."""
    if not k:
        return None
    eng = None
    if draft is not None:
        if hw.name not in drafts:
            from ..llm import Engine, Pricing

            dp = Pricing(weights=quant.weights, activations=quant.activations, kv=quant.kv)
            drafts[hw.name] = Engine(draft, hw=hw, pricing=dp, progress=progress)
        eng = drafts[hw.name]
    return spec_cls(k, profile_of(k, acceptance), draft_cost, eng)


def _pair_setup(disagg: Any, decode_hw: Any, decode_tp: Any, bw: Any, lat: Any, spec_tokens: int, profs: list[Any],
                ideal: bool, resolve: Any) -> dict[str, Any] | None:
    """The disaggregated pair's settings, checked before any trace (None: no pair)."""
    from .disagg import parse_pair
    from .kvlink import link_between

    if disagg is None:
        for name, v in (("decode_hw", decode_hw), ("decode_tp", decode_tp), ("kv_link_bw_bytes_per_s", bw),
                        ("kv_link_latency_s", lat)):
            if v is not None:
                raise InputError(f"{name} sets the decode pool or the KV link of a disaggregated pair: give disagg "
                                 "too (--disagg 1p1d)")
        return None
    xy = parse_pair(disagg)
    if spec_tokens:
        raise InputError("speculative decoding is not modelled in a disaggregated sweep: drop --spec-tokens or "
                         "--disagg")
    if decode_tp is not None and (isinstance(decode_tp, bool) or not isinstance(decode_tp, int) or decode_tp < 1):
        raise InputError(f"decode_tp must be an integer >= 1, got {decode_tp!r}")
    dec = resolve(decode_hw, ideal=ideal) if decode_hw is not None else None
    links = {pr.name: link_between(pr, dec or pr, bw, lat) for pr in profs}
    return {"xy": xy, "hw": dec, "tp": decode_tp, "links": links, "priced": {}}


def _pair_part(pair: dict[str, Any], f: Any, pr: Any, t: int, dts: tuple, make: Any, priced: Any, B: np.ndarray,
               P: np.ndarray, G: np.ndarray, ideal: bool, serving: Any, prices: dict[str, float], kv_heads: Any,
               ref_prompt: int, notes: list[str]) -> dict[str, Any]:
    """The columns of the points of (device *pr*, TP *t*, dtypes *dts*) as disaggregated pairs."""
    from .disagg import pair_columns
    from .kvlink import full_kv_bytes_per_token

    dec_hw, td = pair["hw"] or pr, pair["tp"] or t
    if dec_hw.name == pr.name and td == t:
        fd = f
    else:
        key = (dts, td)
        if key not in pair["priced"]:
            pair["priced"][key] = priced if td == t else make(td)
        fd = pair["priced"][key].price(dec_hw, B, P, G, ideal=ideal, serving=serving)
    kv_tok = full_kv_bytes_per_token(priced, t, kv_heads, ref_prompt)
    link = pair["links"][pr.name]
    x, y = pair["xy"]

    def num(v: Any) -> float:
        return float(v) if v is not None else math.nan

    usd = (num(prices.get(pr.name)), num(prices.get(dec_hw.name, dec_hw.usd_per_hour)))
    power = (num(pr.board_power_w), num(dec_hw.board_power_w))
    note = (f"disaggregated {x}p{y}d pairs: prefill {x} x {pr.name} TP{t}, decode {y} x {dec_hw.name} TP{td}; KV "
            f"{kv_tok:,.0f} B per prompt token over a link per prefill replica of {link.describe()}; TTFT from the prefill engine, TPOT = decode TPOT + "
            "the batch's transfer / (gen - 1); tokens/s per GPU of the pools working concurrently over both pools' "
            "GPUs (graphroof.sweeps.disagg)")
    if note not in notes:
        notes.append(note)
    out = pair_columns(f, fd, B, P, G, (x, y), (t, td), kv_tok, link, usd, power)
    out["decode_bound"] = _no_decode_none(fd.decode.bound, G)
    return out
