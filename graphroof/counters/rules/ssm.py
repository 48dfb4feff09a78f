"""State-space (Mamba) scans, whole: graphroof's own op keys written by :mod:`graphroof.frontends.ssm`.

Notation: ``T`` tokens of the op (batch rows x length), ``D`` channels (Mamba-1 ``d_inner``; Mamba-2 heads x head
dim ``H*P``), ``N`` the state size per channel.  Elementary-operation counts follow the elementwise family
(:mod:`.elementwise`: exp = 1, softplus = 3, silu = 5; a multiply-add = 2 FLOPs).

**Selective scan, Mamba-1** (``graphroof.selective_scan``, prefill).  Per token and channel ``d``:
``dt = softplus(dt + bias)`` (1 + 3), ``u = dt * x`` (1), skip ``y += D * x`` (2), gate ``y *= silu(z)`` (5 + 1);
per token, channel and state element ``n``: ``dA = exp(dt * A)`` (2), ``u * B_n`` (1), ``h = dA * h + u B``
(a multiply-add, 2), ``y += C_n * h`` (2): **7 per state element**.  All vector FLOPs (the recurrence runs on
CUDA cores, not tensor cores).  Bytes, the kernel's streaming assumption: every input is read once and ``y``
written once; the state ``[D, N]`` of a batch row stays on chip for the whole sequence (never a ``[T, D, N]``
tensor in memory); the last state, when the op returns it, is written once into the recurrent-state cache
(KV-role bytes).

**State update** (``graphroof.selective_state_update``, one decode token of Mamba-1 or -2): the same
arithmetic for one token; the state is read from the cache (its input role says so) and written back (KV-role
write of the state's size).  Per state element 7, per ``dt`` element bias + softplus 4, per ``x`` element
``u = dt * x`` 1, skip 2, gate 6.

**Causal conv update** (``graphroof.causal_conv1d_update``, one decode token of the depthwise causal conv):
``weight [C, K]``: each output is a K-tap dot product (``2K``) + bias (1) + activation (silu 5), all vector
FLOPs (one output column per channel: a CUDA-core kernel, not a GEMM; the prefill's whole-sequence conv stays
``aten.conv1d``, counted by the conv family); reads the conv state ``[B, C, K]``, writes it back shifted
(KV-role bytes).

**SSD chunked scan, Mamba-2** (``graphroof.ssd_chunk_scan``, prefill; chunk ``Q``, ``L`` padded to ``Lp``, heads
``H``, head dim ``P``, groups ``G``, state ``N``), per batch row, the matrix products of the chunked algorithm as
its kernels compute them: ``C B^T`` per chunk and group ``2 Lp Q G N``; intra-chunk output ``(CB o decay) X``
``2 Lp Q H P``; chunk-end states ``(B o decay)^T X`` ``2 Lp H P N``; inter-chunk output ``C S`` ``2 Lp H P N``.
Vector: per token and head 10 (bias 1, softplus 3, clamp 2, ``dt*A`` 1, cumsum 1, two decay exps 2); the
intra-chunk decay mask per ``Q x Q`` pair and head 3 (subtract, exp, multiply); per token, head and head-dim
element 5 (``dt*x``, skip 2, decay scale, the sum of both outputs); per token, head and state element 1
(``B * decay``); the state passing between chunks ``2 (Lp/Q) H P N``.  Bytes as the Mamba-1 scan.
"""

from __future__ import annotations

import math

from ...graph import OpNode, TensorSpec
from ..common import read_bytes, req, write_bytes
from ..cost import FLOPS_PER_MAC, Cost
from ..registry import register_rule
from .elementwise import ACTIVATION_FLOPS_PER_ELEMENT

__all__ = ["SCAN_FLOPS_PER_STATE", "STATE_OPS", "scan_vector_flops", "ssd_flops"]

#: op keys whose KV-role writes rewrite a fixed recurrent state in place (decode), not a cache growing per token
STATE_OPS = ("graphroof.selective_state_update", "graphroof.causal_conv1d_update")

#: vector FLOPs per (token, channel, state element): exp(dt*A) 2, u*B 1, h update 2, C.h 2
SCAN_FLOPS_PER_STATE = 7
_SOFTPLUS = ACTIVATION_FLOPS_PER_ELEMENT["softplus"]
_SILU = ACTIVATION_FLOPS_PER_ELEMENT["silu"]


def scan_vector_flops(state_elems: int, dt_elems: int, x_elems: int, *, bias: bool, softplus: bool, skip: bool,
                      gate: bool) -> int:
    """Vector FLOPs of a selective scan / state update over ``state_elems`` (token x channel x state) elements,
    ``dt_elems`` time steps and ``x_elems`` inputs (see the module docstring)."""
    per_dt = (1 if bias else 0) + (_SOFTPLUS if softplus else 0)
    per_x = 1 + (2 if skip else 0) + (_SILU + 1 if gate else 0)
    return SCAN_FLOPS_PER_STATE * state_elems + per_dt * dt_elems + per_x * x_elems


def _cost(node: OpNode, matrix: int, vector: int, reads: list[TensorSpec | None], out: TensorSpec,
          state_out: TensorSpec | None) -> Cost:
    r = read_bytes(reads)
    w = write_bytes([out])
    kv_w = w["kv_write_bytes"] + (state_out.nbytes if state_out is not None else 0)
    return Cost(matrix_flops=matrix, vector_flops=vector, weight_bytes=r["weight_bytes"],
                act_read_bytes=r["act_read_bytes"], kv_read_bytes=r["kv_read_bytes"],
                act_write_bytes=w["act_write_bytes"], kv_write_bytes=kv_w)


@register_rule("graphroof.selective_scan")
def selective_scan(node: OpNode) -> Cost:
    """Inputs ``(x [B, D, L], dt, A [D, N], B, C, D?, z?, dt_bias?)``; outputs ``(y, last state or [0])``."""
    x, a = req(node, 0), req(node, 2)
    state_elems = x.numel * int(a.shape[-1])     # B * L tokens x D channels x N
    vec = scan_vector_flops(state_elems, req(node, 1).numel, x.numel, bias=node.input(7) is not None,
                            softplus=bool(node.attrs.get("dt_softplus")), skip=node.input(5) is not None,
                            gate=node.input(6) is not None)
    state = node.outputs[1] if len(node.outputs) > 1 and node.outputs[1].numel else None
    return _cost(node, 0, vec, list(node.inputs), node.outputs[0], state)


@register_rule("graphroof.selective_state_update")
def selective_state_update(node: OpNode) -> Cost:
    """Inputs ``(state [B, *S, N], x [B, *S], dt, A, B, C, D?, z?, dt_bias?)``; outputs ``(y, new state)``."""
    state, x = req(node, 0), req(node, 1)
    vec = scan_vector_flops(state.numel, req(node, 2).numel, x.numel, bias=node.input(8) is not None,
                            softplus=bool(node.attrs.get("dt_softplus")), skip=node.input(6) is not None,
                            gate=node.input(7) is not None)
    return _cost(node, 0, vec, list(node.inputs), node.outputs[0], state)


@register_rule("graphroof.causal_conv1d_update")
def causal_conv1d_update(node: OpNode) -> Cost:
    """Inputs ``(x [B, C, T], conv_state [B, C, K], weight [C, K], bias?)``; outputs ``(out, new state)``."""
    out, conv_state, weight = node.outputs[0], req(node, 1), req(node, 2)
    taps = int(weight.shape[-1])
    act = _SILU if node.attrs.get("activation") in ("silu", "swish") else 0
    vec = out.numel * (FLOPS_PER_MAC * taps + (1 if node.input(3) is not None else 0) + act)
    return _cost(node, 0, vec, list(node.inputs), out, conv_state)


def ssd_flops(batch: int, length: int, heads: int, head_dim: int, groups: int, state: int,
              chunk: int) -> tuple[int, int]:
    """(matrix, vector) FLOPs of the chunked SSD scan (see the module docstring)."""
    q = max(1, min(chunk, length))
    lp = math.ceil(length / q) * q
    chunks = lp // q
    h, p, n = heads, head_dim, state
    matrix = FLOPS_PER_MAC * lp * (q * groups * n + q * h * p + 2 * h * p * n)
    vector = lp * (10 * h + 3 * q * h + 5 * h * p + h * n) + FLOPS_PER_MAC * chunks * h * p * n
    return batch * matrix, batch * vector


@register_rule("graphroof.ssd_chunk_scan")
def ssd_chunk_scan(node: OpNode) -> Cost:
    """Inputs ``(x [B, L, H, P], dt [B, L, H], A [H], B [B, L, G, N], C, D?, dt_bias?, initial_state?)``,
    ``attrs["chunk_size"]``; outputs ``(y, final state or [0])``."""
    x, bm = req(node, 0), req(node, 3)
    b, length, h, p = (int(d) for d in x.shape)
    m, v = ssd_flops(b, length, h, p, int(bm.shape[2]), int(bm.shape[3]), int(node.attrs.get("chunk_size") or length))
    state = node.outputs[1] if len(node.outputs) > 1 and node.outputs[1].numel else None
    return _cost(node, m, v, list(node.inputs), node.outputs[0], state)
