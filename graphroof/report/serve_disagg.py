"""The disaggregated-serving parts of a serve report (``settings["disagg"]`` and the points' ``pools`` /
``transfer_s``): the pools, the KV link and the x:y search in the header; per-pool busy shares and transfer-time
percentiles as rate-table columns.  Plain data only: no engine, no simulator imported."""

from __future__ import annotations

from typing import Any

from ..units import fmt_time
from .columns import Column

__all__ = ["disagg_lines", "disagg_columns", "is_disagg"]


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def is_disagg(r: Any) -> bool:
    return bool((_get(r, "settings") or {}).get("disagg"))


def _pool(name: str, p: dict[str, Any]) -> str:
    dt = " ".join(f"{k}={p[k]}" for k in ("weights", "kv") if p.get(k)) or "native dtypes"
    usd = p.get("usd_per_hour")
    price = f", ${usd:g}/GPU-h" if usd else ""
    return f"{name} {p['replicas']} x {p['hw']} TP{p['tp']} ({dt}, {p['kv_blocks']:,} KV blocks each{price})"


def disagg_lines(r: Any) -> list[str]:
    """The pools, GPUs, link and (``auto``) the x:y search, one line each; [] when aggregated."""
    d = (_get(r, "settings") or {}).get("disagg")
    if not d:
        return []
    link = d["link"]
    bw = link["bw_bytes_per_s"]
    bw_text = "free (infinite bandwidth)" if bw is None or bw == float("inf") else f"{bw / 1e9:,.4g} GB/s"
    lines = [f"disaggregated {d['spec']}: {_pool('prefill', d['prefill'])}; {_pool('decode', d['decode'])}; "
             f"{d['gpus']} GPUs; requests dealt {d.get('balance', 'round robin')}",
             f"KV transfer: {d['kv_bytes_per_token']:,.0f} B per prompt token over a link per prefill replica of "
             f"{bw_text} + {fmt_time(link['latency_s']) if link['latency_s'] else '0 s'} latency ({link['source']})"]
    s = d.get("search")
    if s and s.get("chosen"):
        tried = s.get("tried") or []
        lines.append(f"x:y picked: {d['spec']}, the fewest GPUs ({d['gpus']}) meeting the SLOs at the target rate "
                     f"({len(tried)} simulations: the smallest x meeting TTFT, then x:y by GPUs)")
    return lines


def _busy(pool: str) -> Column:
    def cell(p: Any) -> str:
        pools = _get(p, "pools") or {}
        v = (pools.get(pool) or {}).get("busy")
        return "-" if v is None else f"{100 * v:.0f}%"

    return Column(f"{pool} busy", cell)


def _xfer(q: str) -> Column:
    def cell(p: Any) -> str:
        t = _get(p, "transfer_s") or {}
        v = t.get(q)
        return "-" if v is None else fmt_time(v)

    return Column(f"xfer {q}", cell)


def disagg_columns() -> tuple[Column, ...]:
    """Rate-table columns: each pool's busy share (step time / (duration x replicas)), transfer p50 / p99 (prefill
    end -> KV landed: link queue + wire + latency)."""
    return (_busy("prefill"), _busy("decode"), _xfer("p50"), _xfer("p99"))
