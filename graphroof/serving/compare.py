"""``serve()``: one configuration (:func:`~graphroof.serving.api.serve_one`), or one traffic on several
configurations: devices x TP degrees x weight / KV dtypes (:func:`serve_compare`).

Each configuration is one :func:`~graphroof.serving.api.serve_one` run on the same requests (the same seed draws the
same workload); the model is traced once and its traces reused by every configuration (the trace store, as a
sweep does).  :class:`ServeComparison` holds the results and one summary row per configuration: the max
sustainable rate under the SLOs, the best output tokens/s per GPU among the rates that meet them, and the
replicas, GPUs and $ per million output tokens for a target rate.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._version import __version__
from ..errors import InputError
from .api import serve_one
from .result import SCHEMA_VERSION, ServeResult, _clean

__all__ = ["serve", "ServeComparison", "serve_compare", "as_list"]


def as_list(name: str, v: Any) -> list[Any]:
    """A value or a sequence of values, as a list of distinct values (None stays one value)."""
    if v is None or isinstance(v, (str, int, float)):
        return [v]
    vals = list(dict.fromkeys(v))
    if not vals:
        raise InputError(f"{name} needs at least one value")
    return vals


@dataclass
class ServeComparison:
    """Every configuration's :class:`ServeResult`, in order (hw, then TP, weights, KV)."""

    model: str
    results: list[ServeResult]

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for r in self.results:
            s = r.settings
            ok = [p for p in r.points if p.slo_attainment is None or p.slo_attainment >= 1.0]
            top = max(ok, key=lambda p: p.output_tokens_per_s_per_gpu, default=None)
            best = top.output_tokens_per_s_per_gpu if top is not None else None
            reps = r.replicas or {}
            dis = s.get("disagg")
            m = r.max_rate or {}
            out.append({
                "config": _config_text(s), "gpus_per_group": s.get("gpus") or s.get("tp"),
                "hw": r.hw, "hw_label": r.hw_label, "tp": s.get("tp"), "weights": s.get("weights"),
                "kv": s.get("kv"), "max_rate_rps": (r.max_rate or {}).get("rate_rps"),
                "binding_slo": (r.max_rate or {}).get("binding_slo"),
                "best_output_tokens_per_s_per_gpu": best,
                "replicas_needed": reps.get("replicas_needed"), "gpus": reps.get("gpus"),
                "usd_per_million_tokens": reps.get("usd_per_million_tokens"), "disagg": dis,
                # the error-band ranges (ServeResult.attach_bands); None without bands
                "max_rate_rps_low": m.get("rate_rps_low"), "max_rate_rps_high": m.get("rate_rps_high"),
                "best_output_tokens_per_s_per_gpu_low": getattr(top, "output_tokens_per_s_per_gpu_low", None),
                "best_output_tokens_per_s_per_gpu_high": getattr(top, "output_tokens_per_s_per_gpu_high", None),
            })
        return out

    def label(self, i: int) -> str:
        row = self.rows()[i]
        dt = " ".join(f"{k}={row[k]}" for k in ("weights", "kv") if row[k]) or "native"
        return f"{row['config']} {dt}"

    def to_dict(self) -> dict[str, Any]:
        return _clean({"schema_version": SCHEMA_VERSION, "kind": "serve_comparison", "model": self.model,
                       "rows": self.rows(), "results": [r.to_dict() for r in self.results],
                       "graphroof_version": __version__})

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def __repr__(self) -> str:
        return f"<ServeComparison {self.model}: {len(self.results)} configurations>"


def _config_text(s: dict[str, Any]) -> str:
    """``h100-sxm tp8``, ``h100-sxm 2 x tp4``, ``1p1d: h100-sxm tp4 -> h200-sxm tp8``."""
    dis = s.get("disagg")
    if dis:
        p, d = dis["prefill"], dis["decode"]
        return f"{dis['spec']}: {p['hw']} tp{p['tp']} -> {d['hw']} tp{d['tp']}"
    n = s.get("replicas") or 1
    return f"{s.get('hw')} {n} x tp{s.get('tp')}" if n > 1 else f"{s.get('hw')} tp{s.get('tp')}"


def serve_compare(model: Any, *, hw: Any, tp: Any = None, weights: Any = None, kv: Any = None,
                  pricing: Any = None, progress: Any = None, **kw: Any) -> ServeComparison:
    """:func:`~graphroof.serving.api.serve_one` on every combination of *hw* x *tp* x *weights* x *kv* (each a value
    or a list; None: *pricing*'s); the other keywords go to each run."""
    from ..llm import Pricing

    hws = as_list("hw", hw)
    base = pricing or Pricing()
    tps = as_list("tp", tp if tp is not None else base.tp)
    ws = as_list("weights", weights if weights is not None else base.weights)
    kvs = as_list("kv", kv if kv is not None else base.kv)
    for t in tps:
        if isinstance(t, bool) or not isinstance(t, int) or t < 1:
            raise InputError(f"tp values must be integers >= 1, got {t!r}")
    configs = list(itertools.product(hws, tps, ws, kvs))
    pricings = [base.with_(tp=t, weights=w, kv=k) for _, t, w, k in configs]  # dtypes checked before any run
    results = []
    for i, ((h, _t, _w, _k), p) in enumerate(zip(configs, pricings)):
        if progress:
            progress(f"configuration {i + 1}/{len(configs)}: {h}, TP {p.tp}, dtypes {p.quant.describe()}")
        results.append(serve_one(model, hw=h, pricing=p, progress=progress, **kw))
    name = results[0].model if results else str(model)
    return ServeComparison(name, results)


def is_multi(hw: Any, *lists: Any) -> bool:
    """Whether the arguments ask for more than one configuration."""
    def many(v: Any) -> bool:
        return isinstance(v, Sequence) and not isinstance(v, str) and len(v) > 1

    return many(hw) or any(many(v) for v in lists)


def serve(model: Any, *, hw: Any = "a100", tp: Any = None, weights: Any = None, kv: Any = None,
          pricing: Any = None, disagg: Any = None, configs: Any = None, **kw: Any) -> Any:
    """Simulate serving *model* under traffic (see :func:`~graphroof.serving.api.serve_one` for every keyword).

    *hw*, *tp*, *weights*, *kv*: one value each, or lists to compare configurations on the same requests (every
    combination: a :class:`~graphroof.serving.compare.ServeComparison`); None: *pricing*'s.  One configuration
    gives a :class:`ServeResult`.  *replicas*: aggregated replicas sharing the traffic (round robin).

    Disaggregated prefill / decode (:mod:`graphroof.serving.disagg_api`): ``disagg="XpYd"`` (x prefill and y
    decode replicas, e.g. ``"1p1d"``), a pair ``(x, y)``, or ``"auto"`` (the fewest-GPU x:y meeting both SLOs at
    *target_rate*, x and y up to ``max_pool_replicas``, default 8); each pool's ``prefill_hw`` / ``prefill_tp`` /
    ``prefill_weights`` / ``prefill_kv`` and ``decode_*`` (None: *hw*, *pricing*'s); the KV link
    ``kv_link_bw_bytes_per_s`` / ``kv_link_latency_s`` (None: the profiles' inter-node network).

    *configs*: a list of keyword dicts, one per configuration (e.g. ``[{"tp": 8}, {"tp": 4, "replicas": 2},
    {"disagg": "1p1d", "prefill_tp": 4, "decode_tp": 4}]``), each run on the same requests with the other
    keywords: a :class:`ServeComparison`."""
    from ..llm import Pricing
    from .disagg_api import check_pool_keys, serve_disagg

    if configs is not None:
        return serve_configs(model, configs, hw=hw, tp=tp, weights=weights, kv=kv, pricing=pricing, disagg=disagg,
                             **kw)
    check_pool_keys(disagg, kw)
    if disagg is not None:
        if is_multi(hw, tp, weights, kv):
            raise InputError("disagg runs one configuration: compare it with others through configs=[...] "
                             "(--config)")
        if kw.get("replicas", 1) != 1:
            raise InputError("replicas counts aggregated replicas: with disagg give the pools' replicas as XpYd")
        kw.pop("replicas", None)
        one_hw = hw[0] if isinstance(hw, (list, tuple)) else hw
        changes = {k: (v[0] if isinstance(v, (list, tuple)) else v)
                   for k, v in (("tp", tp), ("weights", weights), ("kv", kv)) if v is not None}
        if pricing is not None and not isinstance(pricing, Pricing):
            raise InputError(f"pricing must be a graphroof.llm.Pricing, got {type(pricing).__name__}")
        base = (pricing or Pricing()).with_(**changes) if changes else pricing
        return serve_disagg(model, disagg=disagg, hw=one_hw, pricing=base, **kw)
    if is_multi(hw, tp, weights, kv):
        return serve_compare(model, hw=hw, tp=tp, weights=weights, kv=kv, pricing=pricing, **kw)

    def one(v: Any) -> Any:
        return v[0] if isinstance(v, (list, tuple)) and len(v) == 1 else v

    changes = {k: one(v) for k, v in (("tp", tp), ("weights", weights), ("kv", kv)) if v is not None}
    if changes:
        if pricing is not None and not isinstance(pricing, Pricing):
            raise InputError(f"pricing must be a graphroof.llm.Pricing, got {type(pricing).__name__}")
        pricing = (pricing or Pricing()).with_(**changes)
    return serve_one(model, hw=one(hw), pricing=pricing, **kw)


def serve_configs(model: Any, configs: Any, **common: Any) -> ServeComparison:
    """Each configuration of *configs* (keyword dicts over *common*) through :func:`serve`, on the same requests.
    Every configuration is checked (one-line errors) before the first model is built."""
    from .disagg_api import DISAGG_KEYS, check_pool_keys, parse_disagg

    if isinstance(configs, (str, bytes)) or not isinstance(configs, Sequence) or not configs:
        raise InputError("configs must be a non-empty list of keyword dicts, e.g. [{'tp': 8}, {'disagg': '1p1d'}]")
    allowed = {"hw", "tp", "weights", "kv", "replicas", *DISAGG_KEYS}
    runs = []
    for i, c in enumerate(configs):
        if not isinstance(c, dict):
            raise InputError(f"configs[{i}] must be a dict of keywords, got {type(c).__name__}")
        bad = sorted(set(c) - allowed)
        if bad:
            raise InputError(f"configs[{i}]: unknown key {bad[0]!r}; known: {', '.join(sorted(allowed))}")
        kw = {**common, **c}
        for k in ("hw", "tp", "weights", "kv"):
            if isinstance(kw.get(k), (list, tuple)):
                raise InputError(f"configs[{i}]: {k} takes one value inside a configuration")
        check_pool_keys(kw.get("disagg"), kw)
        if kw.get("disagg") is not None:
            parse_disagg(kw["disagg"])
        runs.append(kw)
    progress = common.get("progress")
    results = []
    for i, kw in enumerate(runs):
        if progress:
            progress(f"configuration {i + 1}/{len(runs)}")
        results.append(serve(model, **kw))
    return ServeComparison(results[0].model, results)
