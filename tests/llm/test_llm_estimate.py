"""The estimate API on the hand-built toy decoder: token accounting, exact decode sums, errors, JSON, CLI."""

from __future__ import annotations

import json

import pytest

from graphroof.api import count_graph
from graphroof.cli import main
from graphroof.errors import GraphroofWarning, InputError
from graphroof.graph import bind
from graphroof.llm import estimate
from graphroof.llm.kvcache import mark_kv_cache
from graphroof.report import render
from tests.llm.toy import RULES, toy_graph, toy_source

P, G = 16, 12


def _est(**kw):
    opts = dict(hw="a100", prompt=P, gen=G, batch=[1, 4], rules=RULES, runtime="eager")  # op-level series math
    opts.update(kw)
    return estimate(kw.pop("src", None) or toy_source(), **opts)


def _step_times(graph, dims, hw):
    """Independent path: the core pipeline on the graph bound at one step."""
    a = count_graph(mark_kv_cache(bind(graph, dims)), hw, rules=RULES, runtime="eager")
    return a.totals.t_lower_s, a.totals.t_realistic_s


def test_tpot_is_the_exact_mean_over_growing_context():
    r = _est()
    hw = r.hw
    dec = toy_graph(decode=True)
    pre = toy_graph()
    for c in r.configs:
        # decode steps j = 1 .. G-1 run with past = P + j - 1 tokens cached
        steps = [_step_times(dec, {"batch": c.batch, "past": P + j - 1}, hw) for j in range(1, G)]
        assert c.tpot(ideal=True) == pytest.approx(sum(s[0] for s in steps) / (G - 1), rel=1e-12)
        assert c.tpot_s == pytest.approx(sum(s[1] for s in steps) / (G - 1), rel=1e-12)
        t_ideal, t_real = _step_times(pre, {"batch": c.batch, "seq": P}, hw)
        assert c.ttft(ideal=True) == pytest.approx(t_ideal) and c.ttft_s == pytest.approx(t_real)
        # token accounting
        assert c.e2e_s == pytest.approx(c.ttft_s + (G - 1) * c.tpot_s)
        assert c.output_tokens_per_s == pytest.approx(c.batch * G / c.e2e_s)
        assert c.decode.context == (P, P + G - 2)
        assert c.tpot_s > c.tpot(ideal=True)  # realistic: efficiencies and launch overhead


def test_ideal_mode_reports_the_roofline_alone():
    r = _est(ideal=True)
    c = r.configs[0]
    assert c.ttft_s == c.ttft(ideal=True) and c.tpot_s == c.tpot(ideal=True)
    assert r.hw.launch_overhead_s == 0 and r.hw.mem_bw_efficiency == 1
    text = render(r)
    assert "ideal roofline only" in text and "TTFT ideal" not in text
    assert "TTFT ideal" in render(_est())


def test_gen_one_has_no_decode_steps():
    c = _est(gen=1, batch=[2]).configs[0]
    assert c.tpot_s is None and c.e2e_s == c.ttft_s and c.output_tokens_per_s == pytest.approx(2 / c.ttft_s)


def test_bad_inputs():
    with pytest.raises(InputError, match=r"--gen must be an integer >= 1"):
        _est(gen=0)
    with pytest.raises(InputError, match=r"--prompt 5000 is longer than toy-llama's maximum of 4096 positions"):
        _est(prompt=5000)
    with pytest.raises(InputError, match=r"4090 \+ --gen 12 = 4102 tokens exceeds .* lower --gen to <= 6"):
        _est(prompt=4090)
    with pytest.raises(InputError, match=r"use --prompt <= 4084"):
        _est(prompt=4096)
    with pytest.raises(InputError, match=r"--batch values must be integers >= 1"):
        _est(batch=[0])
    with pytest.raises(InputError, match=r"--activations 'bf17': unknown dtype"):
        _est(activations="bf17")


def test_no_kv_cache_model_recomputes_the_context():
    src = toy_source(kv=False)
    with pytest.warns(GraphroofWarning, match="has no KV cache .* full forward pass over the whole context"):
        r = _est(src=src, batch=[2])
    assert any("has no KV cache" in n and "full forward pass over the whole context" in n for n in r.notes)
    c = r.configs[0]
    pre = toy_graph()
    # step j recomputes the whole context of P + j tokens; summed exactly (costs quadratic in the context)
    steps = [_step_times(pre, {"batch": 2, "seq": P + j}, r.hw)[0] for j in range(1, G)]
    assert c.tpot(ideal=True) == pytest.approx(sum(steps) / (G - 1), rel=1e-12)
    assert c.kv_cache_bytes == 0
    assert "no KV cache: decode recomputes the context" in render(r)


def test_json_carries_the_documented_fields():
    d = json.loads(_est().to_json())
    assert d["mode"] == "realistic" and d["prompt"] == P and d["gen"] == G
    c = d["configs"][1]
    for k in ("ttft_s", "tpot_s", "e2e_s", "output_tokens_per_s", "kv_cache_bytes", "weight_bytes", "fits",
              "ttft_ideal_s", "tpot_ideal_s", "memory", "critical_batch", "prefill", "decode"):
        assert k in c, k
    assert c["batch"] == 4 and c["fits"] is True
    layer_keys = set(c["decode"]["layers"][0])
    from graphroof.api import analyze

    graph = mark_kv_cache(bind(toy_graph(), {"batch": 1, "seq": 4}))
    analyze_keys = set(analyze(graph, hw="a100", rules=RULES).layers[0])
    assert analyze_keys <= layer_keys and "repeat" in layer_keys
    assert {r["name"] for r in c["prefill"]["layers"]} == {r["name"] for r in c["decode"]["layers"]}


def test_side_by_side_table_shows_both_bounds():
    text = render(_est(batch=[1]), "markdown")
    assert "| layer" in text and "prefill time" in text and "decode time/step" in text
    assert "model.layers.*.mlp" in text and "critical batch" in text


def test_cli_errors_are_one_line(capsys):
    assert main(["llm", "toy", "--gen", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("graphroof: error: --gen must be an integer >= 1") and "Traceback" not in err
    assert main(["llm", "toy", "--weights", "int3"]) == 1
    assert "--weights 'int3': unknown dtype; use one of:" in capsys.readouterr().err
    assert main(["llm", "toy", "--batch", "1,x"]) == 1
    assert "expected integers separated by commas" in capsys.readouterr().err


def test_structure_change_falls_back_to_the_middle_step():
    """A decode graph whose op set changes with the context cannot be interpolated: the middle step stands
    for every step, and a note says so."""
    from graphroof.graph import OpNode, TensorSpec
    from graphroof.llm import GraphSource

    def decode(batch, past):
        g = bind(toy_graph(decode=True), {"batch": batch, "past": past})
        if past > 20:
            t = TensorSpec((batch, 1, 64), "bf16")
            g.add_op(OpNode("extra", "toy.add", (t, t), (t,), {}, "model.norm"))
        return g

    src = toy_source()
    r = estimate(GraphSource(src.prefill, decode, src.spec), hw="a100", prompt=16, gen=12, batch=[1], rules=RULES,
                 ideal=True, runtime="eager")
    assert any("changes structure" in n and "context 21" in n for n in r.notes)
    # steps 16..26: middle 21 (with the extra op)
    t_mid = count_graph(mark_kv_cache(decode(1, 21)), r.hw, rules=RULES, runtime="eager").totals.t_lower_s
    assert r.configs[0].tpot_s == pytest.approx(t_mid)
