"""TensorRT-LLM v0.5 / v0.6 preset physics (issue 23): the per-request runtime time before the first token
(``[launch].request_overhead_s``) and the fp8 rows' dtypes (fp8 GEMMs and KV cache, fp16 activations).

Every expected figure is derived by hand in the comments."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from graphroof.errors import InputError
from graphroof.fuse import get_runtime
from graphroof.fuse.preset_file import preset_fields
from graphroof.llm import Engine, Pricing
from graphroof.llm.tokens import PhaseTotals, e2e_s, tokens_per_s, with_request_s
from tests.llm.toy import RULES, toy_source


def _totals(t: float) -> PhaseTotals:
    a = np.array([t])
    return PhaseTotals(a * 0.5, a, a * 0.4, a * 0.3, a * 0.0, a * 0.5, a, a * 0.5, a)


def test_preset_reads_request_overhead():
    rt = get_runtime("tensorrt-llm-v0.5")
    assert rt.request_overhead_s == pytest.approx(0.0008)  # refit: test_trtllm_context_prep
    assert "request_overhead_s" in rt.sources
    assert get_runtime("tensorrt-llm").request_overhead_s == 0.0  # 0.7+: not fitted, the default


def test_preset_rejects_bad_request_overhead():
    with pytest.raises(InputError, match="request_overhead_s"):
        preset_fields({"name": "x", "launch": {"request_overhead_s": -1e-3}})
    assert preset_fields({"name": "x", "launch": {"request_overhead_s": 0.003}})["request_overhead_s"] == 0.003


def test_with_request_s_adds_to_realistic_only():
    # prefill realistic 4.4 ms + 2 ms per request = 6.4 ms; the ideal (2.2 ms) and the terms are unchanged
    t = with_request_s(_totals(4.4e-3), 2e-3)
    assert t.t_realistic_s[0] == pytest.approx(6.4e-3)
    assert t.first_realistic_s[0] == pytest.approx(6.4e-3) and t.last_realistic_s[0] == pytest.approx(6.4e-3)
    assert t.t_ideal_s[0] == pytest.approx(2.2e-3)
    assert t.t_compute_s[0] == pytest.approx(1.76e-3) and t.t_memory_s[0] == pytest.approx(1.32e-3)
    assert with_request_s(_totals(4.4e-3), 0.0).t_realistic_s[0] == pytest.approx(4.4e-3)


def test_request_overhead_counts_once_per_request_in_e2e():
    # TTFT 10 ms + 2 ms = 12 ms; gen 3: e2e = 12 + 2 x 5 ms = 22 ms; batch 4: 4 x 3 / 0.022 = 545.45 tok/s
    ttft = with_request_s(_totals(10e-3), 2e-3).t_realistic_s
    e2e = e2e_s(ttft, np.array([5e-3]), np.array([3]))
    assert e2e[0] == pytest.approx(22e-3)
    assert tokens_per_s(np.array([4]), np.array([3]), e2e)[0] == pytest.approx(545.4545, rel=1e-4)


def test_engine_ttft_carries_the_preset_request_time():
    # the same engine with and without 2 ms per request: realistic TTFT and e2e move by exactly 2 ms, TPOT and the
    # ideal TTFT do not; tok/s of batch 2, gen 4: 8 / e2e
    base = get_runtime("tensorrt-llm-v0.5")
    src = toy_source(L=2, H=256, heads=4, kv_heads=2, I=512, V=1000)
    figs = {}
    for r in (0.0, 2e-3):
        rt = replace(base, request_overhead_s=r)
        eng = Engine(src, hw="h100-sxm", pricing=Pricing(rules=RULES, runtime=rt))
        figs[r] = eng.price([2], [128], [4])
    a, b = figs[0.0], figs[2e-3]
    assert b.ttft_s[0] - a.ttft_s[0] == pytest.approx(2e-3, rel=1e-9)
    assert b.tpot_s[0] == pytest.approx(a.tpot_s[0])
    assert b.ttft(True)[0] == pytest.approx(a.ttft(True)[0])
    assert b.e2e_s[0] - a.e2e_s[0] == pytest.approx(2e-3, rel=1e-9)
    assert b.tokens_per_s[0] == pytest.approx(8 / b.e2e_s[0])


def test_trtllm_fp8_rows_keep_fp16_activations():
    # v0.5 / v0.6 FP8Linear: fp8 GEMM inputs, fp16 outputs; the adapter prices fp8 weights + KV, no --activations
    from graphroof.validate.context import Context
    from graphroof.validate.llmrows import trtllm_rows

    ctx = Context(only={"trtllm_v05_v061_static.csv:17"})
    rows = trtllm_rows(ctx)
    assert len(rows) == 1 and "--weights fp8 --kv fp8" in rows[0].command
    assert "--activations" not in rows[0].command
