"""Issue 27 (D2): the same nn.Module gives the same graph passed on the CPU and built on the meta device.

On meta, ``scaled_dot_product_attention`` ran the math fallback, whose output is contiguous ``[B, H, L, E]``,
so the model's ``out.transpose(1, 2).contiguous()`` became an ``aten.clone`` per attention (649 MB against
611 MB for one model); the CPU (and CUDA) flash kernels write the query's layout and the copy never runs.  On
the CPU, ``torch.tensor([])`` entered the trace as a free ``aten.lift_fresh`` node that meta never records.
"""

from __future__ import annotations

import collections

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import graphroof


class Attention(nn.Module):
    """The transformers pattern: project, split heads by view + transpose, attend, transpose back, contiguous."""

    def __init__(self, dim: int = 64, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in self.qkv(x).chunk(3, -1))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        bias = torch.tensor([0.0] * d, device=x.device)  # a constant made in forward (lift_fresh on the CPU)
        return self.out(o.transpose(1, 2).contiguous().view(b, s, d)) + bias


def _both(build, inputs):
    torch.manual_seed(0)
    on_cpu = build().eval()
    with torch.device("meta"):
        on_meta = build().eval()
    return (graphroof.analyze(on_cpu, inputs, hw="h100", capture="dispatch"),
            graphroof.analyze(on_meta, inputs, hw="h100", capture="dispatch"))


def _rows(a):
    return [(o["op"], o["scope"], tuple(o["inputs"]), tuple(o["outputs"]), o["bytes"], o["flops"]) for o in a.ops]


def test_attention_block_same_graph_on_cpu_and_meta():
    cpu, meta = _both(Attention, [(1, 16, 64)])
    assert _rows(cpu) == _rows(meta)
    assert cpu.totals.cost == meta.totals.cost
    ops = collections.Counter(o["op"] for o in meta.ops)
    # no copy of the attention output: [1, 16, 64] fp32 = 4,096 B read + 4,096 B written per clone
    assert ops["aten.clone"] == 0 and ops["aten.lift_fresh"] == 0


def test_tiny_llama_same_totals_and_ops_on_cpu_and_meta():
    tf = pytest.importorskip("transformers")
    cfg = tf.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2)
    cpu, meta = _both(lambda: tf.LlamaForCausalLM(cfg), {"input_ids": (1, 16)})
    assert _rows(cpu) == _rows(meta)
    assert cpu.totals.cost == meta.totals.cost
    assert not any(o["op"] == "aten.clone" for o in meta.ops)
