"""Chunked prefill in the static-batch figures (graphroof.llm.chunked): with ``max_batched_tokens`` below a batch's
prompt tokens, ``llm``'s TTFT is the sum of the prefill steps ``serve`` prices, on the toy decoder."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from graphroof.llm import Engine, Pricing
from graphroof.llm.chunked import chunk_schedule
from graphroof.report.llm import render_llm
from graphroof.serving import serve
from tests.llm.toy import RULES, toy_source

TOY = dict(L=2, H=256, heads=4, kv_heads=2, I=512, V=1000)


def _engine(**kw) -> Engine:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Engine(toy_source(**TOY), hw=kw.pop("hw", "h100"), pricing=Pricing(rules=RULES, **kw))


def test_schedule_by_hand():
    # 2 prompts of 5 tokens, 4 a step: the stream's steps [0, 4), [4, 8), [8, 10).
    # Step 1: prompt 1 offsets 0..4: 4^2 = 16.  Step 2: prompt 1 offset 4..5 (25 - 16 = 9) and prompt 2 0..3
    # (9): 18.  Step 3: prompt 2 offsets 3..5: 25 - 9 = 16.  In all 2 x 5^2 = 50, the unchunked causal work.
    n, work = chunk_schedule(2, 5, 4)
    assert n.tolist() == [4, 4, 2] and work.tolist() == [16, 18, 16]
    # one prompt of 10 in steps of 4: 16, 8^2 - 4^2 = 48, 10^2 - 8^2 = 36
    n, work = chunk_schedule(1, 10, 4)
    assert n.tolist() == [4, 4, 2] and work.tolist() == [16, 48, 36]
    # a budget of the whole batch: one step, b p tokens, b p^2 work
    n, work = chunk_schedule(3, 7, 21)
    assert n.tolist() == [21] and work.tolist() == [3 * 49]


def test_a_budget_covering_the_batch_changes_nothing():
    plain = _engine().estimate(prompt=100, gen=4, batch=[1, 3]).configs
    same = _engine(max_batched_tokens=300).estimate(prompt=100, gen=4, batch=[1, 3]).configs
    for a, b in zip(plain, same):
        assert a.ttft_s == b.ttft_s and a.ttft(True) == b.ttft(True)
        assert "prefill_steps" not in b.to_dict()


@pytest.mark.parametrize("ideal", [False, True])
def test_ttft_is_the_sum_of_the_step_costs(ideal):
    """3 prompts of 50 tokens, 64 a step: 3 steps of 64, 64 and 22 tokens, each priced by the step cost serve
    calls; TTFT is their sum plus the runtime's per-request time."""
    eng = _engine(max_batched_tokens=64, ideal=ideal)
    cfg = eng.estimate(prompt=50, gen=4, batch=3).configs[0]
    sc = eng.step_cost(max_batch=2, max_context=2, max_chunk=64)
    n, work = chunk_schedule(3, 50, 64)
    assert n.tolist() == [64, 64, 22]
    # 64 tokens: prompt 1 (50^2) + prompt 2's first 14 (14^2); then 36 of prompt 2 (50^2 - 14^2) + 28 of prompt 3
    # (28^2); then the last 22 of prompt 3 (50^2 - 28^2)
    assert work.tolist() == [50 ** 2 + 14 ** 2, 50 ** 2 - 14 ** 2 + 28 ** 2, 50 ** 2 - 28 ** 2]
    steps = sum(float(sc(int(k), 0, 0, 0, prefill_attention=float(w), ideal=ideal)) for k, w in zip(n, work))
    request = 0.0 if ideal else float(eng.pipeline.runtime.request_overhead_s)
    assert cfg.ttft_s == pytest.approx(steps + request, rel=1e-9)
    d = cfg.to_dict()
    assert d["prefill_steps"] == 3 and d["prefill_steps_s"] == pytest.approx(steps, rel=1e-9)


def test_llm_ttft_equals_a_serve_run_of_one_request():
    """One request of 200 prompt tokens, 64 a step: serve's TTFT (4 prefill steps, the engine idle) is llm's."""
    eng = _engine(max_batched_tokens=64)
    want = eng.estimate(prompt=200, gen=2, batch=1).configs[0].ttft_s
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = serve(toy_source(**TOY), hw="h100", pricing=Pricing(rules=RULES), rate=(0.01,), requests=1,
                  prompt_len="fixed:200", gen_len="fixed:2", max_batched_tokens=64, max_num_seqs=4)
    assert r.points[0].ttft_s["mean"] == pytest.approx(want, rel=1e-9)


def test_every_chunk_reads_the_weights_again():
    """Ideal roofline: each of the K steps reads every weight (a lower bound of its memory time), so the chunked
    TTFT is at least K x weight bytes / bandwidth, while the one pass reads them once."""
    b, p, c = 4, 256, 32
    eng = _engine(max_batched_tokens=c, ideal=True)
    cfg = eng.estimate(prompt=p, gen=2, batch=b).configs[0]
    one = _engine(ideal=True).estimate(prompt=p, gen=2, batch=b).configs[0]
    k = math.ceil(b * p / c)                                   # 1024 tokens / 32 = 32 steps
    w = float(eng.price(b, p, 2).memory["weight_bytes"][0])
    floor = k * w / eng.hw.mem_bw_bytes_per_s
    assert cfg.to_dict()["prefill_steps"] == k
    assert cfg.ttft_s >= floor * (1 - 1e-9)
    assert one.ttft_s < floor < cfg.ttft_s
    assert cfg.figures["prefill_t_memory_s"] >= floor * (1 - 1e-9)


def test_the_report_says_what_ttft_is():
    est = _engine(max_batched_tokens=64).estimate(prompt=200, gen=4, batch=[1, 2])
    text = render_llm(est)
    assert "batch 2 TTFT" in text and "7 chunked prefill steps" in text   # 400 tokens / 64 = 7 steps
    assert any("chunked prefill (--max-batched-tokens 64)" in n for n in est.notes)
    assert np.isfinite(est.configs[1].ttft_s) and est.configs[1].ttft_s > est.configs[0].ttft_s


def test_the_request_overhead_is_the_evaluators_not_a_difference():
    """Under a preset with a per-request time (nim: [launch].request_overhead_s = 4.4 ms), the figures carry the
    amount the evaluator added to TTFT and the report prints that figure beside the chunked steps."""
    est = _engine(max_batched_tokens=64, runtime="nim").estimate(prompt=200, gen=4, batch=1)
    c = est.configs[0]
    assert c.figures["request_overhead_s"] == pytest.approx(0.0044, rel=1e-12)
    assert c.ttft_s == pytest.approx(c.figures["prefill_steps_s"] + 0.0044, rel=1e-12)
    assert "TTFT" in render_llm(est) and "request overhead 4.4 ms + 4 chunked prefill steps" in render_llm(est)
    ideal = _engine(max_batched_tokens=64, runtime="nim", ideal=True).estimate(prompt=200, gen=4, batch=1)
    assert ideal.configs[0].figures["request_overhead_s"] == 0.0          # the ideal roofline carries none


def test_a_layout_carries_the_request_overhead_once():
    """An attention-DP layout's TTFT (one stage, one micro-batch: the rank's prefill step) plus the preset's 4.4 ms,
    as a plain replica's; without the preset's per-request time the two differ by exactly that."""
    with_req = _engine(runtime="nim", dp=2).estimate(prompt=100, gen=4, batch=4).configs[0]
    assert with_req.figures["request_overhead_s"] == pytest.approx(0.0044, rel=1e-12)
    plain = _engine(runtime="nim").estimate(prompt=100, gen=4, batch=2).configs[0]   # one DP rank's 2 sequences
    assert with_req.ttft_s == pytest.approx(plain.ttft_s, rel=1e-6)


def test_every_moe_chunk_reads_the_experts_its_tokens_visit():
    """Tiny Mixtral (8 experts, top-2; tests.llm.test_llm_moe): a chunk's grouped GEMMs cost what its n tokens
    cost, whatever is cached before it (their weight bytes follow the experts n tokens visit, 8 (1 - (6/8)^n) per
    layer, not the prompt's causal attention work): every chunk of a 240-token prompt in 48-token steps streams at
    least the weights of the same 48 tokens prefilled from scratch; at 16 tokens the chunk is the counted prefill."""
    pytest.importorskip("graphroof.frontends.torch.export", reason="needs the PyTorch frontend")
    pytest.importorskip("transformers")
    from graphroof.frontends.hf.source import HFSource
    from tests.llm.test_llm_moe import TINY_MIXTRAL

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eng = Engine(HFSource(TINY_MIXTRAL, name="tiny-mixtral"), hw="h100", pricing=Pricing(max_batched_tokens=48))
        priced = eng.priced([1], [240], [2])
        sc = priced.chunk_step_cost(eng.hw, 48)
        n, work = chunk_schedule(1, 240, 48)                       # 5 steps of 48 tokens at offsets 0 .. 192
        sums = sc.prefill_sums(n, work)
        alone = sc.prefill_sums(np.array([48]), np.array([48.0 ** 2]))
        assert np.all(sums[3] >= alone[3, 0] * (1 - 1e-9))         # memory terms: no chunk reads fewer weights
        assert sums[1][-1] > sums[1][0]                            # later chunks attend to more cached keys
        # the grouped GEMMs exact at 16 tokens; the other kernels interpolated on the chunk grid (within 1e-3 here)
        want = eng.step("prefill", 1, 16).totals.t_realistic_s
        assert float(sc(16)) == pytest.approx(want, rel=1e-3)
        assert sc._tok, "the grouped GEMMs are priced per chunk size"


def test_host_ahead_presets_keep_the_one_pass_and_say_so():
    """Under a preset whose host dispatches ahead of the device (pytorch-eager), a step is not the sum of its
    kernels' rows, so the chunked steps are not priced: TTFT is the one pass, with a note."""
    plain = _engine(runtime="pytorch-eager").estimate(prompt=200, gen=4, batch=2)
    est = _engine(runtime="pytorch-eager", max_batched_tokens=64).estimate(prompt=200, gen=4, batch=2)
    assert est.configs[0].ttft_s == plain.configs[0].ttft_s
    assert "prefill_steps" not in est.configs[0].to_dict()
    assert any("priced as one pass" in n and "launched ahead from the host" in n for n in est.notes)
