"""A plain nn.Module language model (no transformers, no KV cache) for ``module:factory`` tests."""

from __future__ import annotations

import torch
from torch import nn


class TinyLM(nn.Module):
    """Embedding -> one causal self-attention block -> vocabulary logits; ``forward(ids [batch, seq])``."""

    def __init__(self, vocab: int = 50, dim: int = 32, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.embed = nn.Embedding(vocab, dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.head(x + self.proj(a.transpose(1, 2).reshape(b, s, d)))
