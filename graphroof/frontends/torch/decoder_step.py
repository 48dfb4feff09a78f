"""The decoder step ``tools/measure_gpu.py`` times for ``decode.csv``, as an ``nn.Module`` ``graphroof.analyze`` prices.

The measured program is not a transformers model: it is a Llama-shaped step in plain torch ops, and its kernels are
what the row measures.  Per layer: RMSNorm in fp32 (``x * rsqrt(mean(x.float()^2) + eps).to(bf16) * w``), one fused
QKV GEMM split into Q / K / V views, K and V written into a static cache at one position (``index_copy_``), SDPA of
the one query over the whole cache (GQA, ``enable_gqa``), the output GEMM and residual add, RMSNorm, one fused
gate+up GEMM chunked in two, SiLU x up, the down GEMM and residual add; then the final norm and the LM head.  No
rotary embedding, no separate Q / K / V or gate / up GEMMs: pricing ``graphroof llm llama-3-8b`` (transformers'
program: rotary, four attention GEMMs, three MLP GEMMs) for these rows priced about 450 kernels a step that the
measured program does not run.

One definition serves both sides: :func:`decoder_step` builds the module on the meta device for
``graphroof.analyze`` (no weights materialised) and, with ``device="cuda", init=True``, the measured one
(``tools/measure_gpu.py`` ``Decoder``).  Torch is imported when a step is built.  :func:`decoder_step_graph` is
the captured graph of a meta step through the trace store (keyed by the step's shape; the store's key holds a hash
of graphroof's sources, this module's included), so a later run skips the capture.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["DIMS", "decoder_step", "decoder_step_graph"]

#: ``decode.csv``'s ``model`` (less ``-shaped``) -> the step's shape (tools/measure_gpu.py: the default set's
#: Llama-3-8B, the blind set's Llama-2-13B)
DIMS: dict[str, dict[str, int]] = {
    "llama-3-8b": dict(layers=32, d=4096, inter=14336, heads=32, kv=8, vocab=128256),
    "llama-2-13b": dict(layers=40, d=5120, inter=13824, heads=40, kv=40, vocab=32000),
}


def _rms(x: Any, w: Any) -> Any:
    import torch

    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(x.dtype) * w


@functools.cache
def _classes() -> tuple[type, type]:
    """The step's module classes, defined once (torch is imported on first use)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    bf = torch.bfloat16

    def weight(*shape: int) -> Any:
        return nn.Parameter(torch.empty(*shape, dtype=bf), requires_grad=False)

    class Layer(nn.Module):
        k: Any  # the K / V cache buffers
        v: Any

        def __init__(self, batch: int, ctx: int, d: int, inter: int, heads: int, kv: int) -> None:
            super().__init__()
            self.h, self.kv, self.hd = heads, kv, d // heads
            self.qkv, self.o = weight((heads + 2 * kv) * self.hd, d), weight(d, d)
            self.gu, self.dn = weight(2 * inter, d), weight(d, inter)
            self.n1, self.n2 = weight(d), weight(d)
            self.register_buffer("k", torch.empty(batch, kv, ctx, self.hd, dtype=bf))
            self.register_buffer("v", torch.empty(batch, kv, ctx, self.hd, dtype=bf))

        def forward(self, x: Any, pos: Any) -> Any:
            b, hd = x.shape[0], self.hd
            q, k, v = (_rms(x, self.n1) @ self.qkv.t()).split([self.h * hd, self.kv * hd, self.kv * hd], dim=-1)
            self.k.index_copy_(2, pos, k.view(b, self.kv, 1, hd))
            self.v.index_copy_(2, pos, v.view(b, self.kv, 1, hd))
            o = F.scaled_dot_product_attention(q.view(b, self.h, 1, hd), self.k, self.v, enable_gqa=True)
            x = x + o.reshape(b, self.h * hd) @ self.o.t()
            g, u = (_rms(x, self.n2) @ self.gu.t()).chunk(2, dim=-1)
            return x + (F.silu(g) * u) @ self.dn.t()

    class Step(nn.Module):
        def __init__(self, batch: int, ctx: int, layers: int, d: int, inter: int, heads: int, kv: int,
                     vocab: int) -> None:
            super().__init__()
            self.layers = nn.ModuleList(Layer(batch, ctx, d, inter, heads, kv) for _ in range(layers))
            self.emb, self.head, self.nf = weight(vocab, d), weight(vocab, d), weight(d)

        def forward(self, ids: Any, pos: Any) -> Any:
            x = self.emb[ids]
            for layer in self.layers:
                x = layer(x, pos)
            return _rms(x, self.nf) @ self.head.t()

    return Layer, Step


def decoder_step(batch: int, ctx: int, model: str = "llama-3-8b", *, device: str = "meta", init: bool = False,
                 **dims: int) -> tuple[Any, tuple[Any, Any]]:
    """``(module, (ids, pos))``: the step of *batch* sequences attending over a *ctx*-position cache, writing
    position ``ctx - 1``; *model* a key of :data:`DIMS`, or explicit *dims* (``layers``, ``d``, ``inter``,
    ``heads``, ``kv``, ``vocab``).  *init*: random weights and cache as the measurement draws them (bf16 normal x
    0.02 weights, unit norm scales, normal K / V), for a real device."""
    import torch

    shape = {**DIMS[model], **dims} if model in DIMS else dict(dims)
    _, step_cls = _classes()
    with torch.device(device):
        m = step_cls(batch, ctx, **shape)
        if init:
            with torch.no_grad():
                for name, p in m.named_parameters():
                    if name.rsplit(".", 1)[-1] in ("n1", "n2", "nf"):
                        p.fill_(1.0)
                    else:
                        p.normal_().mul_(0.02)
                for buf in m.buffers():
                    buf.normal_()
        ids = (torch.randint(0, shape["vocab"], (batch,)) if init
               else torch.zeros(batch, dtype=torch.long))
        pos = torch.tensor([ctx - 1])
    return m, (ids, pos)


def decoder_step_graph(batch: int, ctx: int, model: str = "llama-3-8b", *, options: Any = None) -> Any:
    """The :class:`~graphroof.graph.OpGraph` of the meta step :func:`decoder_step` builds for *model*, a key of
    :data:`DIMS` (what ``graphroof.analyze`` captures from it), read from the trace store when a run stored it
    before (``options``: the trace store's switch, :class:`graphroof.options.Options`)."""
    from ...graph import OpGraph
    from ...options import DEFAULT
    from .. import load, trace_store

    opts = DEFAULT if options is None else options
    shape = DIMS[model]
    entry = trace_store.Entry("decoder-step", {"model": model, "batch": batch, "ctx": ctx, "dims": shape}, opts)

    def capture() -> Any:
        module, inputs = decoder_step(batch, ctx, model)
        return load(module, inputs, options=opts)

    return trace_store.capture(entry, "graph", capture, expect=OpGraph)
