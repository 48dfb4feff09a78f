"""The KV-cache transfer of disaggregated prefill / decode (``graphroof.serve`` and ``graphroof.sweep`` with
``disagg``): the link between a prefill pool and a decode pool, the bytes a
request sends, and the times its transfers take on a link of finite bandwidth.

* Link: by default the inter-node network of the profiles' ``[collectives]``: ``inter_bw_bytes_per_s_per_nic x
  nics_per_node`` and ``inter_hop_latency_s``; the smaller bandwidth and the larger latency of the two pools' devices
  (the slower end limits the transfer).  ``kv_link_bw_bytes_per_s`` / ``kv_link_latency_s`` override either.
* Bytes: the whole KV cache of the prompt, ``kv_bytes_per_token x prompt tokens``, per token the full layout
  (every layer's K and V over every KV head) in the prefill pool's KV dtype.  A TP-split pool holds ``1 / tp`` of
  it per device, so when the pools' TP degrees differ the layouts differ but the bytes on the wire are the same.
* Queueing: each prefill replica sends over its own link, one transfer at a time in the order the prefills end
  (FIFO): a transfer starts when its prefill has ended and the link is free, occupies the link ``bytes / bw`` and
  lands ``latency`` later (the latency is not link occupancy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError

__all__ = ["KVLink", "link_between", "full_kv_bytes_per_token", "transfer_times"]


@dataclass(frozen=True)
class KVLink:
    """One prefill replica's link to the decode pool."""

    bw_bytes_per_s: float   # inf: a free transfer
    latency_s: float
    source: str             # where the figures come from (stated in the result)

    def seconds(self, nbytes: float) -> float:
        """One transfer alone on the link: ``bytes / bw + latency``."""
        return (nbytes / self.bw_bytes_per_s if math.isfinite(self.bw_bytes_per_s) else 0.0) + self.latency_s

    def describe(self) -> str:
        """``320 GB/s + 10 us latency (where from)``."""
        bw = "infinite bandwidth" if not math.isfinite(self.bw_bytes_per_s) else f"{self.bw_bytes_per_s / 1e9:,.4g} GB/s"
        return f"{bw} + {self.latency_s * 1e6:g} us latency ({self.source})"

    def as_dict(self) -> dict[str, Any]:
        return {"bw_bytes_per_s": self.bw_bytes_per_s, "latency_s": self.latency_s, "source": self.source}


def _nic(hw: Any) -> tuple[float | None, float | None]:
    c = getattr(hw, "collectives", None)
    if c is None or not c.inter_bw_bytes_per_s_per_nic:
        return None, None
    return float(c.inter_bw_bytes_per_s_per_nic) * int(c.nics_per_node), float(c.inter_hop_latency_s)


def link_between(hw_prefill: Any, hw_decode: Any, bw_bytes_per_s: Any = None, latency_s: Any = None) -> KVLink:
    """The link of the two pools' devices (see the module docstring); overrides win.  A device without an
    inter-node bandwidth and no override: a one-line InputError."""
    bw = None
    if bw_bytes_per_s is not None:
        ok = isinstance(bw_bytes_per_s, (int, float)) and not isinstance(bw_bytes_per_s, bool)
        if not ok or not float(bw_bytes_per_s) > 0 or math.isnan(bw_bytes_per_s):
            raise InputError(f"kv_link_bw_bytes_per_s must be a number > 0 bytes/s (or math.inf), got {bw_bytes_per_s!r}")
        bw = float(bw_bytes_per_s)
    if latency_s is not None:
        ok = isinstance(latency_s, (int, float)) and not isinstance(latency_s, bool) and math.isfinite(latency_s)
        if not ok or latency_s < 0:
            raise InputError(f"kv_link_latency_s must be a finite number >= 0 seconds, got {latency_s!r}")
    ends = [(h.name, *_nic(h)) for h in (hw_prefill, hw_decode)]
    parts = []
    if bw is None:
        missing = [n for n, b, _ in ends if b is None]
        if missing:
            raise InputError(f"{missing[0]} has no [collectives] inter_bw_bytes_per_s_per_nic: give the KV link's "
                             "bandwidth (kv_link_bw_bytes_per_s / --kv-link-bw, e.g. 400GB/s)")
        known = [(n, float(b)) for n, b, _ in ends if b is not None]
        name, bw = min(known, key=lambda e: e[1])
        parts.append(f"{bw / 1e9:g} GB/s = {name} [collectives] inter_bw_bytes_per_s_per_nic x nics_per_node")
    else:
        parts.append("bandwidth given" if math.isfinite(bw) else "infinite bandwidth given")
    if latency_s is None:
        lats = [(n, float(lat)) for n, _, lat in ends if lat is not None]
        if not lats:
            raise InputError(f"{ends[0][0]} has no [collectives] inter_hop_latency_s: give the KV link's latency "
                             "(kv_link_latency_s / --kv-link-latency, e.g. 10us)")
        name, lat = max(lats, key=lambda e: e[1])
        parts.append(f"latency {lat * 1e6:g} us = {name} inter_hop_latency_s")
    else:
        lat = float(latency_s)
        parts.append("latency given")
    return KVLink(float(bw), float(lat), "; ".join(parts))


def full_kv_bytes_per_token(priced: Any, tp: int, kv_heads: int | None, ref_prompt: int) -> float:
    """The whole KV cache of one token (every layer, K and V, every KV head) in the pipeline's KV dtype, from the
    traced layout of *priced* (a :class:`~graphroof.llm.price.PricedModel`): the per-device bytes a decode step
    appends times the devices that split them (``min(tp, kv_heads)``: beyond ``kv_heads`` a TP split replicates
    heads rather than splitting them)."""
    per_device = float(priced.memory_inputs(1, ref_prompt)[1])
    return per_device * (min(int(tp), int(kv_heads)) if kv_heads else int(tp))


def transfer_times(ready_s: np.ndarray, nbytes: np.ndarray, link: KVLink) -> tuple[np.ndarray, np.ndarray]:
    """(start, landed) of each transfer on one FIFO link, in the order the transfers are ready."""
    ready_s = np.asarray(ready_s, dtype=float)
    wire = np.asarray(nbytes, dtype=float) / link.bw_bytes_per_s if math.isfinite(link.bw_bytes_per_s) \
        else np.zeros(len(ready_s))
    order = np.argsort(ready_s, kind="stable")
    start = np.empty(len(ready_s))
    free = -math.inf
    for i in order.tolist():
        s = max(float(ready_s[i]), free)
        start[i] = s
        free = s + float(wire[i])
    return start, start + wire + link.latency_s
