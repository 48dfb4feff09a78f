"""Multi-head latent attention (DeepSeek-V2/V3) at decode, as serving engines run it: in the latent space.

transformers' MLA modules cache the compressed latent (``[B, 1, past, kv_lora_rank]`` and a single-head rope key
``[B, 1, past, rope_dim]``) and, at every step, re-expand the *whole* cache through ``kv_b_proj`` into per-head
keys and values before attending: ``2 * past * rank * heads * (nope + v)`` FLOPs per layer and step (4.3 GFLOP for
DeepSeek-V2-Lite at past 1024) plus the expanded K/V written and read again.  Serving engines (vLLM's MLA
backends, FlashMLA) absorb ``kv_b_proj`` into the query and the output instead (``W_UK``, ``W_UV``): per head the
query's no-rope part is mapped into the latent space, attention runs over the latent cache as one shared
"KV head" of width ``rank + rope`` (values: the latent itself), and the result is mapped back per head.  Per layer
and step that is ``2 H nope rank`` (query absorption) + ``2 H past (rank + rope)`` (scores) + ``2 H past rank``
(weighted latents) + ``2 H rank v`` (value up-projection) FLOPs, and the cache is read once.

:func:`absorbed_mla` swaps that form in while a decode step is traced: each MLA module's ``expand_kv`` returns the
latent key ``cat(latent, rope key)`` and the latent as value, and the attention call of such a module runs the
absorbed computation: two matmuls against slices of ``kv_b_proj.weight`` (query absorption, value
up-projection) around one ``graphroof::mla_decode`` op (a torch custom op, kept whole in the graph) that attends over
the cached latent and rope key as they are stored, read once (the ``latent_attention`` rule).  Prefill keeps the
expanded form, as the engines do (it is cheaper for long prompts).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["absorbed_mla", "mla_classes", "MLA_NOTE"]

MLA_NOTE = ("MLA decode attends in the latent space as serving engines do (kv_b_proj absorbed into the query and "
            "the output; the latent cache read once per step), not transformers' per-step re-expansion of the "
            "whole cache; prefill keeps the expanded form")


def mla_classes(model: Any) -> set[type]:
    """Module classes of *model* that implement MLA the transformers way (``kv_b_proj`` + ``expand_kv``)."""
    return {type(m) for m in model.modules() if hasattr(m, "kv_b_proj") and callable(getattr(type(m), "expand_kv", None))
            and hasattr(m, "qk_nope_head_dim") and hasattr(m, "v_head_dim")}


_MLA_OP: Any = None


def mla_decode_op() -> Any:
    """The ``graphroof::mla_decode(q, latent, rope, scale)`` custom op (registered on first use)."""
    global _MLA_OP
    if _MLA_OP is None:
        import torch
        import torch.nn.functional as F

        @torch.library.custom_op("graphroof::mla_decode", mutates_args=(),
                                 schema="(Tensor q, Tensor latent, Tensor rope, float scale) -> Tensor")
        def mla_decode(q: torch.Tensor, latent: torch.Tensor, rope: torch.Tensor, scale: float) -> torch.Tensor:
            key = torch.cat((latent, rope), dim=-1)
            return F.scaled_dot_product_attention(q, key, latent, scale=scale, enable_gqa=True)

        @mla_decode.register_fake
        def _(q: torch.Tensor, latent: torch.Tensor, rope: torch.Tensor, scale: float) -> torch.Tensor:
            return q.new_empty((*q.shape[:-1], latent.shape[-1]))

        _MLA_OP = mla_decode
    return _MLA_OP


def _absorbed(module: Any, query: Any, key: Any, value: Any, attention_mask: Any) -> tuple[Any, None]:
    """The attention of one MLA module at a decode step (one query token per sequence: every cached key is
    visible, so the causal mask is not needed); *key* is the ``(latent, rope key)`` pair from ``expand_kv``."""
    import torch

    nope, rope, vdim = module.qk_nope_head_dim, module.qk_rope_head_dim, module.v_head_dim
    heads, rank = query.shape[1], key[0].shape[-1]
    w = module.kv_b_proj.weight.view(heads, nope + vdim, rank)      # [H, nope + v, rank]
    w_uk, w_uv = w[:, :nope, :], w[:, nope:, :]
    q_nope, q_pe = torch.split(query, [nope, rope], dim=-1)
    q_lat = torch.matmul(q_nope, w_uk)                                # [B, H, S, rank]
    q_abs = torch.cat((q_lat, q_pe), dim=-1)                          # [B, H, S, rank + rope]
    latent, rope_key = key                                            # as cached: [B, 1, P, rank], [B, 1, P, rope]
    out = mla_decode_op()(q_abs, latent, rope_key, float(module.scaling))  # [B, H, S, rank]
    out = torch.matmul(out, w_uv.transpose(1, 2))                     # [B, H, S, v]
    return out.transpose(1, 2).contiguous(), None


@contextmanager
def absorbed_mla(model: Any) -> Iterator[bool]:
    """Within the block, MLA modules of *model* attend in the latent space (see the module docstring).

    Yields whether *model* has such modules (nothing is patched otherwise).
    """
    from .compat import attention_functions, changed

    classes = mla_classes(model)
    if not classes:
        if getattr(getattr(model, "config", None), "kv_lora_rank", None):  # an MLA config without the modules
            raise changed(f"{type(model).__name__} has kv_lora_rank but no attention module with kv_b_proj, "
                          "expand_kv, qk_nope_head_dim and v_head_dim",
                          "transformers' MLA attention modules, whose decode graphroof absorbs into the latent "
                          "space")
        yield False
        return
    ALL_ATTENTION_FUNCTIONS = attention_functions()

    def expand_kv(self: Any, kv_nope: Any, k_rot: Any) -> tuple[Any, Any]:
        return (kv_nope, k_rot), kv_nope  # no expansion: the attention call reads the cached latents

    original_get = ALL_ATTENTION_FUNCTIONS.get_interface

    def get_interface(name: str, default: Any) -> Any:
        inner = original_get(name, default)

        def attend(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> Any:
            if type(module) in classes:
                return _absorbed(module, query, key, value, attention_mask)
            return inner(module, query, key, value, attention_mask, **kwargs)

        return attend

    saved = {c: c.__dict__["expand_kv"] for c in classes if "expand_kv" in c.__dict__}
    try:
        for c in classes:
            setattr(c, "expand_kv", expand_kv)  # noqa: B010 - patching a class attribute mypy cannot see
        setattr(ALL_ATTENTION_FUNCTIONS, "get_interface", get_interface)  # noqa: B010 - instance override
        yield True
    finally:
        delattr(ALL_ATTENTION_FUNCTIONS, "get_interface")
        for c in classes:
            if c in saved:
                setattr(c, "expand_kv", saved[c])  # noqa: B010
            else:
                delattr(c, "expand_kv")
