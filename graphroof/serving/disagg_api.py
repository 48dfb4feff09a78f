"""``serve(..., disagg="XpYd")``: disaggregated prefill / decode serving (:mod:`~graphroof.serving.disagg`), and
``disagg="auto"``: the cheapest x:y (fewest GPUs) meeting the SLOs at a rate.

Keywords (all on :func:`graphroof.serve`):

* ``disagg``: ``"XpYd"`` (``"1p1d"``, ``"2p1d"``), a pair ``(x, y)`` or ``"auto"`` (needs ``target_rate`` and an SLO);
* ``prefill_hw`` / ``prefill_tp`` / ``prefill_weights`` / ``prefill_kv`` and the same with ``decode_``: one pool's
  device, TP degree and dtypes (None: ``hw`` and ``pricing``'s);
* ``kv_link_bw_bytes_per_s`` / ``kv_link_latency_s``: the link between the pools (None: the profiles' inter-node
  network, :mod:`~graphroof.serving.kvlink`);
* ``max_pool_replicas``: the bound of the ``auto`` search on x and on y (default 8).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import GraphroofError, InputError
from ..sweeps.kvlink import full_kv_bytes_per_token, link_between
from .api import _check_fits, _engine_model, _settings, _shown
from .disagg import DisaggOut, disagg_point, disagg_records, simulate_disagg
from .metrics import serve_bands, timeline_of
from .result import ServeResult
from .search import _verdict, max_rate, replicas_for
from .workload import draw, workload_at

__all__ = ["serve_disagg", "parse_disagg", "POOL_KEYS", "DISAGG_KEYS", "check_pool_keys"]

#: the per-pool keywords, ``prefill_<key>`` and ``decode_<key>``
POOL_KEYS = ("hw", "tp", "weights", "kv")
#: every keyword of a disaggregated run besides the aggregated ones
DISAGG_KEYS = ("disagg", *(f"{p}_{k}" for p in ("prefill", "decode") for k in POOL_KEYS),
               "kv_link_bw_bytes_per_s", "kv_link_latency_s", "max_pool_replicas")


def parse_disagg(v: Any) -> tuple[int, int] | str:
    """``"XpYd"`` or ``(x, y)`` -> (x, y), each an integer >= 1; ``"auto"`` stays."""
    if isinstance(v, str):
        t = v.strip().lower()
        if t == "auto":
            return "auto"
        m = re.fullmatch(r"(\d+)p(\d+)d", t)
        if not m:
            raise InputError(f"disagg {v!r}: expected XpYd (x prefill and y decode replicas, e.g. 1p1d, 2p1d) or auto")
        x, y = int(m.group(1)), int(m.group(2))
    elif isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(a, int) and not isinstance(a, bool) for a in v):
        x, y = int(v[0]), int(v[1])
    else:
        raise InputError(f"disagg must be 'XpYd' (e.g. '1p1d'), a pair (x, y) or 'auto', got {v!r}")
    if x < 1 or y < 1:
        raise InputError(f"disagg {v!r}: the prefill and decode replicas must each be >= 1, got {x}p{y}d")
    return x, y


def check_pool_keys(disagg: Any, kw: dict[str, Any]) -> None:
    """A pool or link keyword without *disagg*: a one-line InputError."""
    if disagg is None:
        given = [k for k in DISAGG_KEYS[1:] if kw.get(k) is not None]
        if given:
            raise InputError(f"{given[0]} is a disaggregated-serving setting: give disagg too (e.g. disagg='1p1d', "
                             "--disagg 1p1d)")


def _pool(name: str, hw: Any, base: Any, over: dict[str, Any]) -> tuple[Any, Any]:
    """(profile, Pricing) of one pool, checked."""
    from ..hardware import load_hardware

    h = over.get("hw") or hw
    try:
        prof = load_hardware(h)
    except GraphroofError as e:
        raise InputError(f"{name}_hw: {e}") from None
    tp = over.get("tp")
    if tp is not None and (isinstance(tp, bool) or not isinstance(tp, int) or tp < 1):
        raise InputError(f"{name}_tp must be an integer >= 1, got {tp!r}")
    changes = {k: over[k] for k in ("tp", "weights", "kv") if over.get(k) is not None}
    return prof, base.with_(**changes) if changes else base


def _ratio_search(trial: Callable[..., DisaggOut], rec_of: Callable[[DisaggOut], dict[str, np.ndarray]], rate: float,
                  s: dict[str, Any], tps: tuple[int, int], bound: int) -> dict[str, Any]:
    """The fewest-GPU (x, y) with x, y <= *bound* meeting the SLOs at *rate*.  TTFT depends on the prefill pool
    only, so the smallest x meeting the TTFT SLO is found first (prefill simulations only); then the candidates
    with at least that x are tried in order of GPUs (then fewer prefill replicas): the first that passes wins."""
    pct, ttft, tpot = s["slo_percentile"], s["slo_ttft_s"], s["slo_tpot_s"]
    tried: list[dict[str, Any]] = []
    x_min = None
    for x in range(1, bound + 1):
        why = _verdict(rec_of(trial(rate, x, 1, decode=False)), pct, ttft, None)
        tried.append({"x": x, "y": None, "verdict": why or "ttft ok"})
        if why is None:
            x_min = x
            break
    if x_min is None:
        return {"chosen": None, "tried": tried, "why": f"no x <= {bound} meets the TTFT SLO at {rate:g} req/s"}
    cands = sorted(((x * tps[0] + y * tps[1], x, y) for x in range(x_min, bound + 1) for y in range(1, bound + 1)))
    for gpus, x, y in cands:
        why = _verdict(rec_of(trial(rate, x, y)), pct, ttft, tpot)
        tried.append({"x": x, "y": y, "gpus": gpus, "verdict": why or "pass"})
        if why is None:
            return {"chosen": (x, y), "gpus": gpus, "tried": tried}
    return {"chosen": None, "tried": tried, "why": f"no x, y <= {bound} meets the SLOs at {rate:g} req/s"}


def serve_disagg(model: Any, *, disagg: Any, hw: Any = "a100", pricing: Any = None, prefill_hw: Any = None,
                 prefill_tp: Any = None, prefill_weights: Any = None, prefill_kv: Any = None, decode_hw: Any = None,
                 decode_tp: Any = None, decode_weights: Any = None, decode_kv: Any = None,
                 kv_link_bw_bytes_per_s: Any = None, kv_link_latency_s: Any = None, max_pool_replicas: int = 8,
                 progress: Callable[[str], None] | None = None, options: Any = None, **kw: Any) -> ServeResult:
    """Simulate *x* prefill and *y* decode replicas (see the module docstring and :mod:`graphroof.serving.disagg`)."""
    from ..llm import Engine, Pricing

    front = {k: kw.pop(k) for k in list(kw) if k not in _SERVE_KEYS}
    s = _settings(hw=hw, **{k: kw.get(k, v) for k, v in _SERVE_KEYS.items() if k != "hw"})
    xy = parse_disagg(disagg)
    bound = max_pool_replicas
    if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
        raise InputError(f"max_pool_replicas must be an integer >= 1, got {bound!r}")
    if s["mode"] != "continuous":
        raise InputError("disaggregated serving runs continuous batching: drop mode='static' (--mode static)")
    if s["arrival"] is not None and s["arrival"].kind == "closed":
        raise InputError("disaggregated serving needs an open arrival process (poisson, gamma:CV, constant) or a trace")
    if s["prefix_share"] > 0:
        raise InputError("prefix caching is not modelled with disaggregated serving: drop prefix_share")
    if xy == "auto" and (s["target_rate"] is None or (s["slo_ttft_s"] is None or s["slo_tpot_s"] is None)):
        raise InputError("disagg='auto' picks x:y for a rate: give target_rate (--target-rate) and both SLOs "
                         "(slo_ttft_s and slo_tpot_s)")
    if pricing is not None and not isinstance(pricing, Pricing):
        raise InputError(f"pricing must be a graphroof.llm.Pricing, got {type(pricing).__name__}")
    base = (pricing or Pricing()).with_(max_batched_tokens=s["max_batched_tokens"])
    hw_p, pr_p = _pool("prefill", hw, base, {"hw": prefill_hw, "tp": prefill_tp, "weights": prefill_weights,
                                               "kv": prefill_kv})
    hw_d, pr_d = _pool("decode", hw, base, {"hw": decode_hw, "tp": decode_tp, "weights": decode_weights,
                                              "kv": decode_kv})
    link = link_between(hw_p, hw_d, kv_link_bw_bytes_per_s, kv_link_latency_s)
    eng_p = Engine(model, hw=hw_p, pricing=pr_p, options=options, progress=progress, **front)
    same = hw_p.name == hw_d.name and pr_p == pr_d
    eng_d = eng_p if same else Engine(model, hw=hw_d, pricing=pr_d, options=options, progress=progress, **front)
    d = draw(s["seed"], s["requests"], s["arrival"], s["prompt_len"], s["gen_len"], s["trace"],
             eng_p.source.spec.max_positions)
    em_p, notes = _engine_model(eng_p, s, d)
    em_d, notes_d = (em_p, []) if same else _engine_model(eng_d, s, d)
    em_d = replace(em_d, request_s=0.0)  # the request's own time was spent before its prefill, not again on landing
    _check_fits(em_p, replace(d, gen=np.ones_like(d.gen)), 0.0)  # a prefill replica holds the prompt only
    _check_fits(em_d, d, 0.0)
    ref = int(np.median(d.prompt))
    kv_tok = full_kv_bytes_per_token(eng_p.priced([1], [ref], [2]), pr_p.tp, eng_p.source.spec.kv_heads, ref)
    tps = (pr_p.tp, pr_d.tp)

    def trial(rate: float, x: int, y: int, decode: bool = True) -> DisaggOut:
        return simulate_disagg(em_p, em_d, workload_at(d, rate, 0.0, em_p.block), x, y, link, kv_tok, progress, decode)

    def rec_of(o: DisaggOut) -> dict[str, np.ndarray]:
        return disagg_records(o, workload_at(d, 1.0, 0.0, em_p.block))

    search = None
    if xy == "auto":
        search = _ratio_search(trial, rec_of, s["target_rate"], s, tps, bound)
        if search["chosen"] is None:
            raise InputError(f"disagg='auto': {search['why']}; raise max_pool_replicas (--max-pool-replicas), the "
                             "TP degrees or the SLOs")
        x, y = search["chosen"]
    else:
        assert not isinstance(xy, str)
        x, y = xy
    gpus = x * tps[0] + y * tps[1]
    rates: tuple[float, ...] = s["rate"] if d.trace_rate is None else (d.trace_rate,)
    if xy == "auto" and s["target_rate"] not in rates:
        rates = (*rates, s["target_rate"])
    points, records, timeline = [], [], {}
    for r in rates:
        o = trial(r, x, y)
        timeline = timeline_of(o.decode[0]) if o.decode else {}
        rec = disagg_records(o, workload_at(d, r, 0.0, em_p.block))
        points.append(disagg_point(r, o, rec, x, y, gpus, s["slo_ttft_s"], s["slo_tpot_s"]))
        records.append(rec)
    best = None
    if s["find_max_rate"]:
        best = max_rate(lambda r: rec_of(trial(r, x, y)), max(p.rate_rps for p in points), s["slo_percentile"],
                        s["slo_ttft_s"], s["slo_tpot_s"])
    usd_p = s["usd_per_hour"] or hw_p.usd_per_hour
    usd_d = s["usd_per_hour"] or hw_d.usd_per_hour
    group_usd = x * tps[0] * usd_p + y * tps[1] * usd_d if usd_p and usd_d else None
    reps = None
    if s["target_rate"] is not None:
        if best is not None and best["rate_rps"]:
            cap, basis = best["rate_rps"], "max sustainable rate under the SLOs of one x:y group"
        else:
            cap, basis = max(p.throughput_rps for p in points), "highest simulated throughput of one x:y group"
        reps = replicas_for(s["target_rate"], cap, gpus, group_usd / gpus if group_usd else None,
                            float(np.mean(d.gen)), basis)
    notes += [n for n in notes_d if n not in notes]
    notes += [n for n in eng_p.notes() + (eng_d.notes() if eng_d is not eng_p else []) if n not in notes]
    notes.append(f"disaggregated {x}p{y}d: requests dealt round robin over each pool's replicas (prefill: in arrival "
                 "order; decode: in the order their KV lands); TTFT = prefill end; the KV transfer and the wait for "
                 "decode blocks delay the second token (TPOT and ITL include them)")
    notes.append(f"KV link per prefill replica: {link.describe()}; {kv_tok:,.0f} B of KV per prompt token "
                 f"({pr_p.kv or eng_p.source.spec.dtype or 'bf16'}; the full layout, whatever each pool's TP)")
    if pr_p.kv != pr_d.kv:
        notes.append(f"the pools' KV dtypes differ ({pr_p.kv} vs {pr_d.kv}): the bytes sent are the prefill pool's")
    settings = _shown(s)

    def pool(prof: Any, pr: Any, em: Any, n: int) -> dict[str, Any]:
        return {"hw": prof.name, "hw_label": prof.label, "tp": pr.tp, "replicas": n, "weights": pr.weights,
                "kv": pr.kv, "kv_blocks": em.blocks, "usd_per_hour": s["usd_per_hour"] or prof.usd_per_hour}

    settings.update(tp=None, kv_block=em_p.block, gpu_mem_util=base.gpu_mem_util, weights=base.weights, kv=base.kv,
                    runtime=base.runtime, ideal=base.ideal, hw=hw_p.name, gpus=gpus,
                    disagg={"x": x, "y": y, "spec": f"{x}p{y}d", "gpus": gpus, "prefill": pool(hw_p, pr_p, em_p, x),
                            "decode": pool(hw_d, pr_d, em_d, y), "link": link.as_dict(),
                            "kv_bytes_per_token": kv_tok, "balance": "round robin", "usd_per_hour_group": group_usd,
                            "search": search})
    hw_name = hw_p.name if hw_p.name == hw_d.name else f"{hw_p.name} + {hw_d.name}"
    label = hw_p.label if hw_p.name == hw_d.name else f"{hw_p.label} (prefill) + {hw_d.label} (decode)"
    res = ServeResult(model=eng_p.source.name, hw=hw_name, hw_label=label, settings=settings, points=points,
                      max_rate=best, replicas=reps, timeline=timeline, records=records, notes=notes)
    res.attach_bands(serve_bands(eng_p.hw, eng_d.hw, eng_d.runtime.name, base.ideal))
    return res


#: the aggregated keywords of a run and their defaults (those of :func:`~graphroof.serving.api.serve_one`)
_SERVE_KEYS: dict[str, Any] = {
    "hw": None, "rate": (1.0,), "requests": 1000, "arrival": "poisson", "prompt_len": "fixed:1024",
    "gen_len": "fixed:256", "trace": None, "prefix_share": 0.0, "seed": 0, "mode": "continuous",
    "max_batched_tokens": 8192, "max_num_seqs": 256, "policy": "decode-first", "admission": "on-demand",
    "slo_ttft_s": None, "slo_tpot_s": None, "slo_percentile": 99.0, "find_max_rate": None, "target_rate": None,
    "usd_per_hour": None}
