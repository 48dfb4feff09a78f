"""The cache-layout probe over one block per group of identical layers (graphroof.frontends.hf.probe)."""

from __future__ import annotations

import pytest
import torch

from graphroof.frontends.hf.probe import skipped_blocks


class Block(torch.nn.Module):
    def __init__(self, i: int, probe: dict, calls: list):
        super().__init__()
        self.layer_idx = i
        self.proj = torch.nn.Linear(4, 4, device="meta")
        self.norm = torch.nn.LayerNorm(4, device="meta")
        self._probe, self._calls = probe, calls

    def forward(self, x):
        self._calls.append(self.layer_idx)
        self._probe[self.layer_idx] = (tuple(x.shape), tuple(x.shape[:-1]))  # what a cache layer would receive
        return self.norm(self.proj(x))


class Stack(torch.nn.Module):
    def __init__(self, n: int, probe: dict, calls: list, odd_input_at: int | None = None):
        super().__init__()
        self.layers = torch.nn.ModuleList(Block(i, probe, calls) for i in range(n))
        self.odd = odd_input_at

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(torch.cat([x, x]) if i == self.odd else x)
        return x


def test_only_the_first_block_runs_and_the_others_copy_its_entry():
    probe: dict = {}
    calls: list = []
    m = Stack(6, probe, calls)
    x = torch.zeros(2, 4, device="meta")
    with skipped_blocks(m, probe) as skipped:
        out = m(x)
    assert calls == [0]
    assert skipped == [1, 2, 3, 4, 5]
    assert probe == {i: ((2, 4), (2,)) for i in range(6)}
    assert out.shape == (2, 4)
    assert "forward" not in vars(m.layers[3])  # the members' own forward again


def test_a_block_with_other_inputs_runs_for_real():
    probe: dict = {}
    calls: list = []
    m = Stack(6, probe, calls, odd_input_at=3)  # layer 3 gets [4, 4]: it and the layers after it run
    with skipped_blocks(m, probe) as skipped:
        m(torch.zeros(2, 4, device="meta"))
    assert calls == [0, 3, 4, 5]
    assert skipped == [1, 2]
    assert probe[3] == ((4, 4), (4,)) and probe[5] == ((4, 4), (4,)) and probe[2] == ((2, 4), (2,))


def test_a_group_without_one_layer_number_is_not_skipped():
    probe: dict = {}
    calls: list = []
    m = Stack(5, probe, calls)
    for b in m.layers:
        b.block_id = 7  # a second layer_idx-like number that disagrees with layer_idx: which cache layer is unknown
    with skipped_blocks(m, probe) as skipped:
        m(torch.zeros(2, 4, device="meta"))
    assert calls == [0, 1, 2, 3, 4] and skipped == []


@pytest.mark.parametrize("model", ["gemma-3-1b", "deepseek-v2-lite", "mixtral-8x7b"])
def test_folded_probe_layout_equals_the_whole_forward(model, monkeypatch):
    # gemma-3-1b: 5 sliding layers per full one (two groups); deepseek-v2-lite: MLA latent cache, a dense first
    # layer beside 26 MoE layers; mixtral: MoE, GQA
    from graphroof.llm import open_source
    from graphroof.options import Options

    got, ran = [], []
    for fold in (True, False):
        src = open_source(model, options=Options(fold=fold))
        while hasattr(src, "_src"):
            src = src._src
        cls = type(src._step.lm.model.layers[0])
        real = cls.forward
        monkeypatch.setattr(cls, "forward", lambda self, *a, real=real, fold=fold, **k: ran.append(fold) or real(self, *a, **k))
        got.append((src.kv_layout(), src.spec.kv_elems_per_token, list(src.notes)))
        monkeypatch.undo()
    assert got[0] == got[1]
    n = {"gemma-3-1b": 26, "deepseek-v2-lite": 27, "mixtral-8x7b": 32}[model]
    assert len(got[0][0]) == n
    # the whole forward runs every layer; the folded one a first block per group (gemma: 2; deepseek: the dense
    # layer, which groups with nothing, and the first MoE layer; mixtral: 1)
    assert ran.count(False) == n
    assert ran.count(True) == {"gemma-3-1b": 2, "deepseek-v2-lite": 2, "mixtral-8x7b": 1}[model]


def test_folded_probe_runs_one_block_per_group(monkeypatch):
    from graphroof.frontends.hf.source import _meta_probe
    from graphroof.llm import open_source

    src = open_source("llama-2-7b")
    while hasattr(src, "_src"):
        src = src._src
    step = src._step
    cls = type(step.lm.model.layers[0])
    ran = []
    real = cls.forward

    def counted(self, *args, **kwargs):
        ran.append(self.self_attn.layer_idx)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(cls, "forward", counted)  # a class attribute: the blocks' signatures are unchanged
    probe: dict = {}
    step.probe = probe
    try:
        assert _meta_probe(step, probe, True)
    finally:
        step.probe = None
    assert ran == [0]  # 31 of the 32 layers returned layer 0's output without running
    assert sorted(probe) == list(range(32)) and len(set(probe.values())) == 1


def test_a_block_in_two_containers_gets_its_own_forward_back():
    probe: dict = {}
    calls: list = []
    m = Stack(6, probe, calls)
    m.tail = torch.nn.ModuleList(list(m.layers)[1:6])  # the same blocks again: wrapped twice, restored last first
    with skipped_blocks(m, probe):
        m(torch.zeros(2, 4, device="meta"))
    assert not any("forward" in vars(b) for b in m.layers)
    assert sorted(probe) == list(range(6))


def test_a_failure_while_installing_restores_the_blocks_already_wrapped(monkeypatch):
    probe: dict = {}
    m = Stack(6, probe, [])
    m.other = torch.nn.ModuleList(Block(10 + i, probe, []) for i in range(4))

    real = torch.nn.Module.__setattr__

    def refuse(self, name, value):
        if name == "forward" and getattr(self, "layer_idx", 0) == 12:
            raise AttributeError("read-only forward")
        real(self, name, value)

    monkeypatch.setattr(Block, "__setattr__", refuse)
    with pytest.raises(AttributeError), skipped_blocks(m, probe):
        pass
    assert not any("forward" in vars(b) for b in (*m.layers, *m.other))
