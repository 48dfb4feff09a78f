"""Attention data parallelism in the serving simulator: each DP rank is an engine core with its own scheduler
(vLLM's data-parallel deployment: one core engine process per DP rank), so ``max_num_seqs`` and
``max_batched_tokens`` are a rank's, the replica runs ``dp`` times as many sequences and tokens per step, and one
prompt's chunk stays within its rank's budget."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from graphroof.errors import InputError
from graphroof.llm import Pricing
from graphroof.serving import serve
from graphroof.serving.api import _check_fits
from graphroof.serving.sim import EngineModel, simulate
from graphroof.serving.workload import Draws, Workload
from tests.llm.toy import RULES, toy_source


def _calls(em_kw, k, prompt):
    """The (prefill tokens, decodes, largest chunk) of each general step when k requests of *prompt* + 2 tokens
    arrive at t = 0 (every step 1 ms)."""
    calls = []

    def step(n, o, m, s, *, prefill_attention=None, prefill_chunks=None, prefill_largest=None, ideal=False):
        if np.ndim(n) == 0 and np.ndim(m) == 0:
            calls.append((int(n), int(m), prefill_largest))
        return np.full(np.broadcast(n, o, m, s).shape, 1e-3)

    wl = Workload(np.zeros(k), np.full(k, prompt), np.full(k, 2), np.zeros(k, dtype=np.int64))
    simulate(EngineModel(step, 10**6, 16, **em_kw), wl)
    return calls


def test_a_chunk_stays_within_its_ranks_budget():
    # two ranks of 256 tokens each (the replica 512): a lone 600-token prompt is chunked 256 + 256 + 88 on its
    # rank, not 512 + 88 as one scheduler of 512 tokens would
    assert [c[0] for c in _calls(dict(budget=512, max_seqs=16, chunk_max=256), 1, 600)][:3] == [256, 256, 88]
    assert [c[0] for c in _calls(dict(budget=512, max_seqs=16), 1, 600)][:2] == [512, 88]
    # four 100-token prompts: 400 tokens fit the replica's 512 in one step (one 256-token scheduler: 256, then 144)
    assert _calls(dict(budget=512, max_seqs=16, chunk_max=256), 4, 100)[0][:2] == (400, 0)
    assert _calls(dict(budget=256, max_seqs=8), 4, 100)[0][:2] == (256, 0)
    # a chunk_max above the budget (or unset) is the budget
    assert EngineModel(lambda *a, **k: 0.0, 1, 16, 256, 8, chunk_max=1000).chunk_max == 256
    assert EngineModel(lambda *a, **k: 0.0, 1, 16, 256, 8).chunk_max == 256


def _serve(tmp_path, dp, rows, **kw):
    trace = tmp_path / f"t{dp}.csv"
    trace.write_text("arrival_s,input_tokens,output_tokens\n" + "".join(f"{a},{i},{o}\n" for a, i, o in rows))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return serve(toy_source(L=2, H=256, heads=4, kv_heads=2, I=512, V=1000), hw="h100",
                     pricing=Pricing(rules=RULES, dp=dp), trace=str(trace), **kw)


def _waves(res) -> int:
    """How many distinct times requests were first scheduled (all arrive at t = 0: queue_s is the start)."""
    return len(np.unique(np.round(res.records[0]["queue_s"], 9)))


def test_dp_ranks_each_run_max_num_seqs(tmp_path):
    # 16 requests at t = 0, max_num_seqs 4: one scheduler starts them in 4 waves of 4; at dp 2 each rank runs 4,
    # so they start in 2 waves of 8 and the replica finishes them sooner
    rows = [(0, 32, 64)] * 16
    one = _serve(tmp_path, 1, rows, max_num_seqs=4, max_batched_tokens=256)
    two = _serve(tmp_path, 2, rows, max_num_seqs=4, max_batched_tokens=256)
    assert (_waves(one), _waves(two)) == (4, 2)
    assert two.points[0].duration_s < one.points[0].duration_s
    assert one.settings["max_num_seqs"] == two.settings["max_num_seqs"] == 4  # the flag as given: a rank's
    assert any("DP rank" in n for n in two.notes) and not any("DP rank" in n for n in one.notes)


def test_static_batches_are_max_num_seqs_per_rank(tmp_path):
    # 8 requests at t = 0 in static batches of max_num_seqs 2: 4 batches at dp 1, 2 batches of 2 x 2 at dp 2
    rows = [(0, 32, 8)] * 8
    assert _waves(_serve(tmp_path, 1, rows, max_num_seqs=2, mode="static")) == 4
    assert _waves(_serve(tmp_path, 2, rows, max_num_seqs=2, mode="static")) == 2


def test_a_request_must_fit_one_dp_rank():
    # two ranks of 10 blocks of 16 tokens: a 200-token request needs 13 blocks, more than its rank holds although
    # the replica's 20 would take it; 160 tokens (10 blocks) fit
    em = EngineModel.of_ranks(lambda *a, **k: 0.0, 10, 16, 256, 8, 2)
    assert (em.blocks, em.rank_blocks) == (20, 10)

    def draws(prompt):
        return Draws(np.array([prompt]), np.array([1]), np.zeros(1), None)

    with pytest.raises(InputError, match="needs 13 KV blocks; a DP rank of the replica holds 10"):
        _check_fits(em, draws(199), 0.0)
    _check_fits(em, draws(159), 0.0)
    one = EngineModel(lambda *a, **k: 0.0, 20, 16, 256, 8)  # no DP: the replica's blocks
    assert one.rank_blocks == 20
    _check_fits(one, draws(199), 0.0)
