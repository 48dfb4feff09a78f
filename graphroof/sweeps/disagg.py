"""Static figures of a disaggregated prefill / decode pair in the LLM sweep (``sweep(..., disagg="XpYd")``).

Each swept point (device, TP, dtypes, batch ``b``, prompt ``P``, gen ``G``) becomes a pair of *x* prefill replicas
(the point's device and TP) and *y* decode replicas (``decode_hw`` / ``decode_tp``, default the point's), the same
dtypes.  Consistent with ``graphroof.serve``'s disaggregated simulation:

* ``ttft_s``: the prefill engine's TTFT of the batch (the first token comes from the prefill pool);
* the transfer: the batch's KV, ``b x P x kv_bytes_per_token`` (the full layout in the KV dtype), sent one request
  after the other over the prefill replica's link and decoded in lockstep once all of it landed:
  ``transfer_s = b P kv / bw + latency``;
* ``tpot_s = tpot_decode + transfer_s / (G - 1)``: the transfer delays the second token, and TPOT is
  ``(finish - first token) / (G - 1)`` as in serve (``G = 1``: no transfer, no TPOT);
* the pools work concurrently on successive batches: requests/s = ``min(x b / ttft, y b / ((G - 1) tpot_decode),
  x bw / (P kv))`` (prefill pool, decode pool, links); ``pair_tokens_per_s = G x`` that; tokens/s per GPU divides
  by ``gpus = x tp_prefill + y tp_decode``; ``usd_per_hour`` and ``board_power_w`` are the pair's per-GPU means;
* memory: the decode pool's (it holds every sequence's KV to ``P + G``).

With a free link (infinite bandwidth, zero latency) and the decode pool equal to the prefill pool, TTFT and TPOT are
the aggregated engine's exactly.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import InputError
from .kvlink import KVLink

__all__ = ["parse_pair", "pair_columns"]


def parse_pair(v: Any) -> tuple[int, int]:
    """``"XpYd"`` or ``(x, y)`` -> (x, y), each >= 1 (the sweep has no ``auto``: that is serve's search)."""
    import re

    if isinstance(v, str):
        m = re.fullmatch(r"(\d+)p(\d+)d", v.strip().lower())
        if not m:
            raise InputError(f"--disagg {v!r}: expected XpYd (x prefill and y decode replicas, e.g. 1p1d, 2p1d)")
        x, y = int(m.group(1)), int(m.group(2))
    elif isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(a, int) and not isinstance(a, bool)
                                                               for a in v):
        x, y = int(v[0]), int(v[1])
    else:
        raise InputError(f"disagg must be 'XpYd' (e.g. '1p1d') or a pair (x, y), got {v!r}")
    if x < 1 or y < 1:
        raise InputError(f"disagg {v!r}: the prefill and decode replicas must each be >= 1, got {x}p{y}d")
    return x, y


def pair_columns(pre: Any, dec: Any, B: np.ndarray, P: np.ndarray, G: np.ndarray, xy: tuple[int, int],
                 tps: tuple[int, int], kv_bytes_per_token: float, link: KVLink, usd: tuple[float, float],
                 power: tuple[float, float]) -> dict[str, Any]:
    """The sweep columns of the pairs (module docstring): *pre* / *dec* the prefill / decode pools'
    :class:`~graphroof.llm.price.Figures` at the points; *usd*, *power* per GPU of each pool (NaN: unknown)."""
    x, y = xy
    gpus = x * tps[0] + y * tps[1]
    kv = kv_bytes_per_token * B * P.astype(float)
    bw = link.bw_bytes_per_s
    wire = kv / bw if math.isfinite(bw) else np.zeros(len(B))
    xfer = wire + link.latency_s
    ttft = np.asarray(pre.ttft_s, dtype=float)
    tpot_d = np.asarray(dec.tpot_s, dtype=float)
    steps = np.maximum(G - 1, 1)
    has = G > 1
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(has, tpot_d + xfer / steps, np.nan)
        rates = [x * B / ttft, np.where(has, y * B / (steps * tpot_d), np.inf)]
        if math.isfinite(bw):
            rates.append(np.where(has, x * bw / (P * kv_bytes_per_token), np.inf))
        rps = np.minimum.reduce(rates)
    pool_gpus = (x * tps[0], y * tps[1])
    return {"ttft_s": ttft, "tpot_s": tpot, "memory_bytes": dec.memory["total_bytes"],
            "capacity_bytes": dec.memory["usable_bytes"], "gpus": np.full(len(B), gpus),
            "pair_tokens_per_s": rps * G,
            "usd_per_hour": np.full(len(B), (pool_gpus[0] * usd[0] + pool_gpus[1] * usd[1]) / gpus),
            "board_power_w": np.full(len(B), (pool_gpus[0] * power[0] + pool_gpus[1] * power[1]) / gpus)}
