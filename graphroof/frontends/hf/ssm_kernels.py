"""State-space (Mamba) mixers captured as whole scan ops instead of transformers' per-token Python loop.

transformers runs a Mamba mixer's selective scan, without the ``mamba_ssm`` CUDA kernels, as a Python loop over
the tokens (about 10 recorded ops per token and layer: a 4k-token Mamba-2.8B trace would record ~2.5 million
nodes).  A serving engine runs the scan as one fused kernel.  While a transformers model is traced
(:func:`ssm_kernels`, entered by :func:`graphroof.frontends.hf.build.eager_prompt`), the module-level scan functions of
transformers' Mamba-family models are swapped for graphroof's own torch ops, each recorded as ONE node by both
the dispatch and the ``torch.export`` captures (a custom op is never decomposed):

* ``graphroof::selective_scan`` (Mamba-1 / Jamba prefill): ``x, dt [B, D, L]``, ``A [D, N]``, ``B, C [B, N, L]``
  (or grouped ``[B, G, N, L]``), optional ``D``, ``z``, ``dt_bias``; returns ``y [B, D, L]`` and, when asked, the
  last state ``[B, D, N]`` (fp32, as the reference scan and the CUDA kernel keep it);
* ``graphroof::ssd_chunk_scan`` (Mamba-2 prefill, the chunked "SSD" form): ``x [B, L, H, P]``, ``dt [B, L, H]``,
  ``A [H]``, ``B, C [B, L, G, N]``, optional ``D``, ``dt_bias`` and initial state; returns ``y`` and the state
  ``[B, H, P, N]``;
* ``graphroof::selective_state_update`` (one decode token of either): reads the recurrent state and returns the
  output and the new state (the cache write);
* ``graphroof::causal_conv1d_update`` (one decode token of the causal depthwise conv): reads the conv state
  ``[B, C, K]`` and returns the output and the shifted state.

The prefill's causal conv stays transformers' ``F.conv1d`` (counted by the conv rules).  Each op has a
reference implementation on real tensors (tests compare it with transformers' own path) and a fake one for
tracing; the counting rules are in :mod:`graphroof.counters.rules.ssm`.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ...counters.rules.ssm import STATE_OPS

__all__ = ["SCAN_OPS", "STATE_OPS", "ssm_kernels"]

#: op keys of the whole-scan ops (prefill) and of the ops that rewrite a recurrent state (decode)
SCAN_OPS = ("graphroof.selective_scan", "graphroof.ssd_chunk_scan")


def _act(y: Tensor, activation: str | None) -> Tensor:
    if activation is None:
        return y
    from transformers.activations import ACT2FN

    return ACT2FN[activation](y)


# -- Mamba-1 selective scan ----------------------------------------------------------------------------------

def _per_channel(m: Tensor, d: int) -> Tensor:
    """B or C, ``[b, N, L]`` (shared by the channels) or grouped ``[b, G, N, L]``, as ``[b, 1 or D, N, L]``."""
    if m.dim() == 3:
        return m.float()[:, None]
    return m.float().repeat_interleave(d // m.shape[1], dim=1)


@torch.library.custom_op("graphroof::selective_scan", mutates_args=())
def selective_scan(x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None, z: Tensor | None,
                   dt_bias: Tensor | None, dt_softplus: bool, return_state: bool) -> tuple[Tensor, Tensor]:
    """Reference: ``h_t = exp(dt_t A) h_{t-1} + dt_t B_t x_t``, ``y_t = C_t . h_t + D x_t``, ``y *= silu(z)``."""
    b, d, length = x.shape
    n = A.shape[-1]
    dt = dt.float() + (dt_bias.float()[None, :, None] if dt_bias is not None else 0)
    if dt_softplus:
        dt = F.softplus(dt)
    Bf, Cf = _per_channel(B, d), _per_channel(C, d)
    h = torch.zeros(b, d, n, dtype=torch.float32, device=x.device)
    ys = []
    for t in range(length):
        h = torch.exp(dt[:, :, t, None] * A.float()) * h + dt[:, :, t, None] * Bf[..., t] * x[:, :, t, None].float()
        ys.append((h * Cf[..., t]).sum(-1))
    y = torch.stack(ys, dim=-1) if ys else x.float().new_zeros(x.shape)
    if D is not None:
        y = y + x.float() * D.float()[None, :, None]
    if z is not None:
        y = y * F.silu(z.float())
    return y.to(x.dtype), (h if return_state else h.new_zeros(0))


@selective_scan.register_fake
def _(x, dt, A, B, C, D, z, dt_bias, dt_softplus, return_state):
    b, d = x.shape[0], x.shape[1]
    state = x.new_empty((b, d, A.shape[-1]) if return_state else (0,), dtype=torch.float32)
    return x.new_empty(x.shape), state


# -- Mamba-2 chunked scan (SSD) ------------------------------------------------------------------------------

@torch.library.custom_op("graphroof::ssd_chunk_scan", mutates_args=())
def ssd_chunk_scan(x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None, dt_bias: Tensor | None,
                   initial_state: Tensor | None, chunk_size: int, dt_softplus: bool, dt_min: float, dt_max: float,
                   return_state: bool) -> tuple[Tensor, Tensor]:
    """Reference (sequential; the chunked form computes the same): per head h, ``S_t = exp(dt_t A_h) S_{t-1} +
    dt_t x_t B_t^T`` (``[P, N]``), ``y_t = S_t C_t + D_h x_t``."""
    b, length, heads, p = x.shape
    g, n = B.shape[2], B.shape[3]
    dt = dt.float() + (dt_bias.float() if dt_bias is not None else 0)
    if dt_softplus:
        dt = F.softplus(dt)
    dt = dt.clamp(dt_min, dt_max)
    Bf = B.float().repeat_interleave(heads // g, dim=2)
    Cf = C.float().repeat_interleave(heads // g, dim=2)
    s = initial_state.float() if initial_state is not None else x.new_zeros((b, heads, p, n), dtype=torch.float32)
    ys = []
    for t in range(length):
        da = torch.exp(dt[:, t] * A.float())                                    # [b, h]
        s = da[:, :, None, None] * s + (dt[:, t, :, None] * x[:, t].float())[..., None] * Bf[:, t, :, None, :]
        ys.append((s * Cf[:, t, :, None, :]).sum(-1))                           # [b, h, p]
    y = torch.stack(ys, dim=1)
    if D is not None:
        y = y + x.float() * D.float()[:, None]
    return y.to(x.dtype), (s if return_state else s.new_zeros(0))


@ssd_chunk_scan.register_fake
def _(x, dt, A, B, C, D, dt_bias, initial_state, chunk_size, dt_softplus, dt_min, dt_max, return_state):
    b, _, heads, p = x.shape
    state = x.new_empty((b, heads, p, B.shape[-1]) if return_state else (0,), dtype=torch.float32)
    return x.new_empty(x.shape), state


# -- decode: one token against the cached states -------------------------------------------------------------

@torch.library.custom_op("graphroof::selective_state_update", mutates_args=())
def selective_state_update(state: Tensor, x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None,
                           z: Tensor | None, dt_bias: Tensor | None, dt_softplus: bool) -> tuple[Tensor, Tensor]:
    """One step: ``state [B, *S, N]`` (Mamba-1 ``S = [D]``, Mamba-2 ``S = [H, P]``), ``x, dt [B, *S]``,
    ``A [*S, N]``, ``B, C [B, G, N]`` or ``[B, N]``: ``h = exp(dt A) h + dt B x``, ``y = h . C + D x``,
    ``y *= silu(z)``.  Returns ``(y, new state)``."""
    dt = dt.float() + (dt_bias.float() if dt_bias is not None else 0)
    if dt_softplus:
        dt = F.softplus(dt)
    bsz, n = state.shape[0], state.shape[-1]
    lead = state.shape[1:-1]
    groups = B.shape[1] if B.dim() == 3 else 1
    shape = (bsz, groups, lead.numel() // groups, n)
    Bf = B.float().reshape(bsz, groups, 1, n).expand(shape).reshape(state.shape)
    Cf = C.float().reshape(bsz, groups, 1, n).expand(shape).reshape(state.shape)
    h = torch.exp(dt[..., None] * A.float()) * state.float() + (dt * x.float())[..., None] * Bf
    y = (h * Cf).sum(-1)
    if D is not None:
        y = y + x.float() * D.float()
    if z is not None:
        y = y * F.silu(z.float())
    return y.to(x.dtype), h.to(state.dtype)


@selective_state_update.register_fake
def _(state, x, dt, A, B, C, D, z, dt_bias, dt_softplus):
    return x.new_empty(x.shape), state.new_empty(state.shape)


@torch.library.custom_op("graphroof::causal_conv1d_update", mutates_args=())
def causal_conv1d_update(x: Tensor, conv_state: Tensor, weight: Tensor, bias: Tensor | None,
                         activation: str | None) -> tuple[Tensor, Tensor]:
    """``x [B, C, T]`` new columns, ``conv_state [B, C, K]`` the last K inputs, ``weight [C, K]``: the depthwise
    causal conv of the new columns; returns ``(out [B, C, T], new state)``."""
    k = conv_state.shape[-1]
    full = torch.cat([conv_state, x.to(conv_state.dtype)], dim=-1)
    out = F.conv1d(full.to(weight.dtype), weight.unsqueeze(1), bias, groups=x.shape[1])[..., -x.shape[-1]:]
    return _act(out, activation).to(x.dtype), full[..., -k:].clone()


@causal_conv1d_update.register_fake
def _(x, conv_state, weight, bias, activation):
    return x.new_empty(x.shape), conv_state.new_empty(conv_state.shape)


# -- the functions transformers calls, rewritten onto the ops --------------------------------------------------

_ops = torch.ops.graphroof


def _mamba_scan(hidden_states, dt, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                return_last_state=False, **kwargs):
    y, state = _ops.selective_scan(hidden_states, dt, A, B, C, D, z, delta_bias, bool(delta_softplus),
                                   bool(return_last_state))
    return (y, state) if return_last_state else y


def _state_update(state, hidden_states, dt, A, B, C, D=None, dt_bias=None, dt_softplus=False, z=None, **kwargs):
    y, _new = _ops.selective_state_update(state, hidden_states, dt, A, B, C, D, z, dt_bias, bool(dt_softplus))
    return y  # the new state is the op's cache write (counted by its rule), not copied again


def _conv_update(hidden_states, conv_state, weight, bias=None, activation=None, **kwargs):
    out, _new = _ops.causal_conv1d_update(hidden_states, conv_state, weight, bias, activation)
    return out


def _conv_fn(hidden_states, weight, bias=None, activation=None, **kwargs):
    """transformers' reference causal conv (one ``F.conv1d`` with left padding, counted by the conv rules),
    without its warning that the CUDA package is missing (tracing never runs it)."""
    seq_len, k = hidden_states.shape[-1], weight.shape[-1]
    out = F.conv1d(hidden_states.to(weight.dtype), weight.unsqueeze(1), bias, padding=k - 1,
                   groups=hidden_states.shape[1])[..., :seq_len]
    return _act(out, activation).to(hidden_states.dtype)


def _chunk_scan(hidden_states, dt, A, B, C, chunk_size, D=None, dt_bias=None, initial_states=None,
                dt_softplus=False, dt_limit=(0.0, float("inf")), return_final_states=False, **kwargs):
    lo, hi = (float(v) for v in dt_limit)
    y, state = _ops.ssd_chunk_scan(hidden_states, dt, A, B, C, D, dt_bias, initial_states, int(chunk_size),
                                   bool(dt_softplus), lo, hi, bool(return_final_states))
    return (y, state) if return_final_states else y


#: transformers function name -> (the parameters its signature must start with, graphroof's replacement)
_SWAPS: dict[str, tuple[tuple[str, ...], Any]] = {
    "mamba_selective_scan": (("hidden_states", "dt", "A", "B", "C", "D", "z", "delta_bias"), _mamba_scan),
    "mamba_selective_state_update": (("state", "hidden_states", "dt", "A", "B", "C", "D"), _state_update),
    "mamba2_selective_state_update": (("state", "hidden_states", "dt", "A", "B", "C", "D"), _state_update),
    "causal_conv1d_update": (("hidden_states", "conv_state", "weight", "bias", "activation"), _conv_update),
    "causal_conv1d_fn": (("hidden_states", "weight", "bias", "activation"), _conv_fn),
    "mamba2_chunk_scan": (("hidden_states", "dt", "A", "B", "C", "chunk_size", "D", "dt_bias", "initial_states"),
                          _chunk_scan),
}


def _params(fn: Any) -> tuple[str, ...]:
    try:
        return tuple(inspect.signature(inspect.unwrap(fn)).parameters)
    except (TypeError, ValueError):
        return ()


@contextlib.contextmanager
def ssm_kernels() -> Iterator[None]:
    """While active, every loaded ``transformers.models.*`` module's scan functions (by name, when their
    signature matches what the replacement expects) call graphroof's whole-scan ops."""
    swapped: list[tuple[Any, str, Any]] = []
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or not mod_name.startswith("transformers.models."):
            continue
        for fn_name, (params, repl) in _SWAPS.items():
            orig = getattr(mod, fn_name, None)
            if orig is None or orig is repl or _params(orig)[:len(params)] != params:
                continue
            swapped.append((mod, fn_name, orig))
            setattr(mod, fn_name, repl)
    try:
        yield
    finally:
        for mod, fn_name, orig in reversed(swapped):
            setattr(mod, fn_name, orig)
