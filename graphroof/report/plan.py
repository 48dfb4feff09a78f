"""Renderers of a configuration search (``graphroof.planner.PlanResult``): terminal / markdown (the cheapest
configuration per rate, the Pareto frontier, the engine flags of the picks, the pruned and rejected configurations
with their reasons, the notes), CSV (one row per configuration and rate), HTML (:mod:`.plan_html`).  JSON is the
result's ``to_dict()``.

Everything is read from the result's plain data (a result or its dict form): no engine, no simulator imported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .columns import Column, table
from .serve_bands import STEP_NOTE, band_parts, bands_of, range_text
from .tables import csv_text

__all__ = ["render_plan", "plan_rows", "pick_columns", "frontier_columns", "header_lines", "get", "plan_band_line",
           "has_bands"]


def get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _n(v: Any, spec: str = "{:,.1f}") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return spec.format(v)


def _ms(v: Any) -> str:
    return _n(None if v is None else v * 1e3, "{:,.1f} ms")


def _usd(v: Any, spec: str = "${:,.2f}") -> str:
    return _n(v, spec)


def _final(p: Mapping[str, Any]) -> Mapping[str, Any]:
    """A point's full-size figures when it was re-simulated, else its search figures."""
    f = p.get("full")
    return {**f, "config": p.get("config"), "config_index": p.get("config_index")} if f else p


def _range(key: str, fmt: Any) -> Any:
    return lambda p: range_text(p.get(f"{key}_low"), p.get(f"{key}_high"), fmt)


def _range_columns(pct: float) -> tuple[Column, ...]:
    """The error-band ranges of a pick or a frontier point (graphroof.planner.result's ``*_low`` / ``*_high``)."""
    return (Column(f"TTFT p{pct:g} range", lambda p: range_text(p.get("ttft_low_s"), p.get("ttft_high_s"), _ms)),
            Column(f"TPOT p{pct:g} range", lambda p: range_text(p.get("tpot_low_s"), p.get("tpot_high_s"), _ms)),
            Column("tok/s/user range", _range("tokens_per_s_per_user", _n)),
            Column("out tok/s/GPU range", _range("output_tokens_per_s_per_gpu", _n)))


def has_bands(r: Any) -> bool:
    """Whether the plan holds error bands (its picks and frontier points then carry ranges)."""
    return bool(get(r, "bands") or get(r, "error_bands"))


def plan_band_line(r: Any) -> str | None:
    """Each device's bands: regime and coverage, in words (None without bands)."""
    bands = get(r, "bands") or get(r, "error_bands") or {}
    if not bands:
        return None
    names = {"ttft": "TTFT", "tpot": "TPOT and tok/s/user", "throughput": "tok/s/GPU"}
    parts = [p for dev in bands.values() for p in band_parts(bands_of({"bands": dev}), names)]
    return ("error bands (the ranges: the factor within which 90% of graphroof validate's measured predictions of "
            f"the regime fell; {STEP_NOTE}): " + "; ".join(parts))


def pick_columns(pct: float, bands: bool = False) -> tuple[Column, ...]:
    """A pick's columns; *bands*: with the error-band range columns after the figures."""
    ranges = _range_columns(pct) if bands else ()
    return (
        Column("configuration", lambda p: p["config"]),
        Column("replicas", lambda p: str(p["replicas"])),
        Column("GPUs", lambda p: str(p["gpus"])),
        Column(f"TTFT p{pct:g}", lambda p: _ms(p["ttft_s"])),
        Column(f"TPOT p{pct:g}", lambda p: _ms(p["tpot_s"])),
        Column("tok/s/user", lambda p: _n(p["tokens_per_s_per_user"])),
        Column("out tok/s/GPU", lambda p: _n(p["output_tokens_per_s_per_gpu"])),
        *ranges,
        Column("$/h", lambda p: _usd(p.get("usd_per_hour"))),
        Column("$/M out tok", lambda p: _usd(p.get("usd_per_million_tokens"), "${:,.3f}")),
        Column("requests", lambda p: str(p.get("requests", "-"))),
    )


def frontier_columns(pct: float, bands: bool = False) -> tuple[Column, ...]:
    return (Column("rate req/s", lambda p: _n(p["rate_rps"], "{:,.4g}")), *pick_columns(pct, bands))


def header_lines(r: Any) -> list[str]:
    s, c = get(r, "settings") or {}, get(r, "counts") or {}
    slo = [f"TTFT <= {_ms(s.get('slo_ttft_s'))}"]
    if s.get("slo_tpot_s") is not None:
        slo.append(f"TPOT <= {_ms(s.get('slo_tpot_s'))}")
    out = [f"plan: {get(r, 'model')} on {', '.join(s.get('hw', []))}",
           f"rates {', '.join(f'{x:g}' for x in s.get('rates_rps', []))} req/s; SLO {' and '.join(slo)} at "
           f"p{s.get('slo_percentile', 99):g}; prompts {s.get('prompt_len')}, outputs {s.get('gen_len')}, "
           f"{s.get('arrival')} arrivals, seed {s.get('seed')}"
           + (f"; budget {s['gpu_budget']} GPUs" if s.get("gpu_budget") else ""),
           f"{c.get('configurations')} configurations: {c.get('simulated')} simulated ({c.get('no_capacity', 0)} of "
           f"them miss the SLOs at every rate), {c.get('pruned')} pruned on analytic bounds, {c.get('rejected')} "
           "rejected; "
           f"{c.get('simulations')} simulations of {s.get('search_requests')} requests, "
           f"{c.get('refined_points', 0)} points re-simulated at {s.get('requests')}"]
    t = get(r, "timing") or {}
    if t.get("total_s") is not None:
        fo = s.get("fanout") or {}
        how = f"Ray ({fo['ray']})" if fo.get("ray") else f"{fo.get('jobs', 1)} process(es)"
        out.append(f"wall {t['total_s']:.1f} s on {how}")
    return out


def _flags_lines(r: Any, md: bool) -> list[str]:
    configs = get(r, "configs") or []
    seen, out = set(), []
    for row in get(r, "cheapest") or []:
        for key in ("by_gpus", "by_usd"):
            p = row.get(key)
            if not p or p["config_index"] in seen:
                continue
            seen.add(p["config_index"])
            cfg = configs[p["config_index"]]
            out.append(f"{cfg['label']} (cheapest at {row['rate_rps']:g} req/s):")
            fl = cfg.get("flags") or {}
            cmds = [f"{'' if md else '    '}{fl[e]}" for e in ("vllm", "sglang", "trtllm") if e in fl]
            cmds += [f"{'# ' if md else '    ('}{n}{'' if md else ')'}" for n in fl.get("notes", [])]
            out += (["", "```", *cmds, "```"] if md else cmds)
    return out


def _reasons(r: Any, status: str, limit: int = 30) -> list[str]:
    rows = [c for c in get(r, "configs") or [] if c["status"] == status]
    out = [f"{c['label']}: {c['reason']}" for c in rows[:limit]]
    if len(rows) > limit:
        out.append(f"... and {len(rows) - limit} more (json / csv list every one)")
    return out


def plan_rows(r: Any) -> list[dict[str, Any]]:
    """One row per configuration and offered rate (a configuration without points: one row with its status)."""
    out = []
    for i, c in enumerate(get(r, "configs") or []):
        base = {k: c.get(k) for k in ("label", "hw", "tp", "pp", "ep", "dp", "weights", "kv", "max_num_seqs",
                                      "max_batched_tokens", "gpus_per_replica", "status", "reason", "capacity_rps")}
        mem = c.get("memory") or {}
        base.update(config_index=i, weight_gb_per_gpu=_gb(mem.get("weight_bytes")),
                    kv_gb_per_gpu=_gb(mem.get("kv_bytes")), kv_blocks=mem.get("kv_blocks"),
                    vllm=(c.get("flags") or {}).get("vllm"))
        pts = c.get("points") or []
        if not pts:
            out.append(base)
        for p in pts:
            f = _final(p)
            out.append({**base, "rate_rps": p["rate_rps"], "replicas": f["replicas"], "gpus": f["gpus"],
                        "meets_slo": f["meets_slo"], "ttft_s": f["ttft_s"], "tpot_s": f["tpot_s"],
                        "tokens_per_s_per_user": f["tokens_per_s_per_user"],
                        "output_tokens_per_s_per_gpu": f["output_tokens_per_s_per_gpu"],
                        "usd_per_hour": f.get("usd_per_hour"), "usd_per_million_tokens": f.get("usd_per_million_tokens"),
                        "requests": f.get("requests"), "over_budget": f.get("over_budget")})
    return out


def _gb(v: Any) -> float | None:
    return None if v is None else v / 1e9


CSV_COLUMNS = ["config_index", "label", "hw", "tp", "pp", "ep", "dp", "weights", "kv", "max_num_seqs",
               "max_batched_tokens", "gpus_per_replica", "status", "reason", "capacity_rps", "rate_rps", "replicas",
               "gpus", "meets_slo", "over_budget", "ttft_s", "tpot_s", "tokens_per_s_per_user",
               "output_tokens_per_s_per_gpu", "usd_per_hour", "usd_per_million_tokens", "requests",
               "weight_gb_per_gpu", "kv_gb_per_gpu", "kv_blocks", "vllm"]


def render_plan(r: Any, fmt: str = "terminal") -> str:
    """*r* in ``terminal`` | ``markdown`` | ``csv`` (``html``: :func:`graphroof.report.plan_html.render_plan_html`)."""
    if fmt == "csv":
        return csv_text(plan_rows(r), CSV_COLUMNS)
    md = fmt == "markdown"
    tf = "markdown" if md else "terminal"
    pct = (get(r, "settings") or {}).get("slo_percentile", 99.0)
    banded = has_bands(r)
    h2 = "## " if md else "== "
    lines = [("# " if md else "") + header_lines(r)[0], ""]
    lines += [f"{x}{'  ' if md else ''}" for x in header_lines(r)[1:]] + [""]
    lines += [f"{h2}cheapest configuration per rate (fewest GPUs; lowest $/h)", ""]
    for row in get(r, "cheapest") or []:
        picks = [p for p in (row.get("by_gpus"), row.get("by_usd")) if p]
        if not picks:
            lines += [f"{row['rate_rps']:g} req/s: no configuration meets the SLOs", ""]
            continue
        uniq = [picks[0]] + [p for p in picks[1:] if p["config_index"] != picks[0]["config_index"]]
        lines += [f"{row['rate_rps']:g} req/s:", table(uniq, pick_columns(pct, banded), tf), ""]
    lines += [f"{h2}Pareto frontier: output tok/s per GPU against tok/s per user (SLOs met, within budget)", ""]
    front = [{**_final(p), "rate_rps": p["rate_rps"]} for p in get(r, "frontier") or []]
    lines += [table(front, frontier_columns(pct, banded), tf) if front else "(no point meets the SLOs)", ""]
    band = plan_band_line(r)
    if band:
        lines += [band, ""]
    fl = _flags_lines(r, md)
    if fl:
        lines += [f"{h2}engine flags of the picks", ""] + (fl if md else fl) + [""]
    by = (get(r, "counts") or {}).get("by_reason") or {}
    if by:
        lines += [f"{h2}pruned and rejected", ""] + [f"{'- ' if md else ''}{k}: {v}" for k, v in sorted(by.items())]
        for status in ("rejected", "pruned"):
            rs = _reasons(r, status)
            if rs:
                lines += ["", f"{status}:"] + [f"{'- ' if md else '  '}{x}" for x in rs]
        lines.append("")
    notes = get(r, "notes") or []
    if notes:
        lines += [f"{h2}notes", ""] + [f"{'- ' if md else '* '}{n}" for n in notes]
    return "\n".join(lines) + "\n"
