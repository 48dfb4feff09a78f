"""graphroof.serve's inputs (one-line InputErrors before any model is built), the result's serialisation and
the max-rate search."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from graphroof.errors import InputError
from graphroof.llm import Pricing
from graphroof.serving import serve
from graphroof.serving.inputs import parse_lengths
from tests.llm.toy import RULES, toy_source


def _run(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return serve(toy_source(L=2, H=256, heads=4, kv_heads=2, I=512, V=1000), hw="h100",
                     pricing=Pricing(rules=RULES), **kw)


def _file(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("kw, field", [
    (dict(rate=(-1.0,)), "rate"), (dict(rate=(float("nan"),)), "rate"), (dict(rate=()), "rate"),
    (dict(arrival="weibull"), "arrival"), (dict(arrival="gamma:0"), "gamma"), (dict(arrival="closed:1.5"), "closed"),
    (dict(prompt_len="normal:5:1"), "prompt_len"), (dict(gen_len="uniform:9:3"), "gen_len"),
    (dict(prompt_len="fixed:abc"), "prompt_len"), (dict(prompt_len="lognormal:nan:1"), "prompt_len"),
    (dict(slo_ttft_s=0.0), "slo_ttft_s"), (dict(slo_tpot_s=-1.0), "slo_tpot_s"),
    (dict(slo_percentile=0), "slo_percentile"), (dict(mode="dynamic"), "mode"), (dict(policy="lifo"), "policy"),
    (dict(prefix_share=1.0), "prefix_share"), (dict(requests=0), "requests"), (dict(seed=-1), "seed"),
    (dict(max_num_seqs=512, max_batched_tokens=256), "max_batched_tokens"),
    (dict(find_max_rate=True), "find_max_rate"), (dict(target_rate=float("inf")), "target_rate"),
    (dict(mode="static", arrival="closed:4"), "closed"),
])
def test_bad_inputs_are_one_line_errors_before_the_model(kw, field):
    # the model is a name that does not exist: the inputs must fail first
    with pytest.raises(InputError) as e:
        serve("no-such-model-anywhere", **kw)
    msg = str(e.value)
    assert "\n" not in msg and field in msg


def test_bad_files_are_one_line_errors(tmp_path):
    cases = [
        (dict(trace=_file(tmp_path, "a.csv", "arrival_s,input_tokens\n0,5\n")), "output_tokens"),
        (dict(trace=_file(tmp_path, "b.csv", "arrival_s,input_tokens,output_tokens\n1,5,5\n0.5,5,5\n")), "sorted"),
        (dict(trace=_file(tmp_path, "c.csv", "arrival_s,input_tokens,output_tokens\nnan,5,5\n")), "arrival_s"),
        (dict(trace=_file(tmp_path, "d.jsonl", '{"arrival_s": 0, "input_tokens": 3}\n')), "output_tokens"),
        (dict(prompt_len="file:" + _file(tmp_path, "e.txt", "12\nx\n")), "not an integer"),
        (dict(gen_len="file:" + str(tmp_path / "missing.txt")), "gen_len"),
    ]
    for kw, text in cases:
        with pytest.raises(InputError) as e:
            serve("no-such-model-anywhere", **kw)
        assert "\n" not in str(e.value) and text in str(e.value), (kw, str(e.value))


def test_length_distributions(tmp_path):
    rng = np.random.default_rng(0)
    ln = parse_lengths("prompt_len", "lognormal:1000:300").sample(rng, 100_000)
    # the spec is of the counts themselves: their mean and std come back (to sampling noise)
    assert ln.mean() == pytest.approx(1000, rel=0.01) and ln.std() == pytest.approx(300, rel=0.03)
    u = parse_lengths("prompt_len", "uniform:3:5").sample(rng, 1000)
    assert set(u.tolist()) == {3, 4, 5}
    f = parse_lengths("gen_len", "file:" + _file(tmp_path, "g.txt", "7\n9\n")).sample(rng, 1000)
    assert set(f.tolist()) == {7, 9}


def test_lengths_are_clipped_to_the_model_positions():
    # the toy has 4096 positions: prompts <= 4095, prompt + output <= 4096
    r = _run(prompt_len="fixed:5000", gen_len="fixed:10", requests=2, rate=(1.0,))
    assert r.records[0]["input_tokens"].tolist() == [4095, 4095]
    assert r.records[0]["output_tokens"].tolist() == [1, 1]


def test_result_serialises():
    r = _run(rate=(100.0, 200.0), requests=50, prompt_len="fixed:64", gen_len="fixed:1")
    d = json.loads(r.to_json())
    assert d["schema_version"] == 1 and d["conventions"]["ttft_s"]
    assert [p["rate_rps"] for p in d["points"]] == [100.0, 200.0]
    assert d["points"][0]["tpot_s"]["p50"] is None                 # one output token: NaN -> null
    assert set(d["timeline"]) == {"time_s", "running", "waiting", "batch_tokens", "kv_used_fraction"}
    lines = r.records_csv(1).splitlines()
    assert len(lines) == 51 and lines[0].startswith("arrival_s,first_token_s")
    assert d["settings"]["prompt_len"] == "fixed:64" and d["settings"]["rate"] == [100.0, 200.0]


def test_max_rate_search_brackets_the_slo():
    slo = 2.0e-3
    kw = dict(requests=300, prompt_len="fixed:512", gen_len="fixed:8", max_num_seqs=16, max_batched_tokens=1024)
    r = _run(rate=(2000.0,), slo_ttft_s=slo, slo_percentile=90.0, target_rate=1000.0, usd_per_hour=2.0, **kw)
    best = r.max_rate
    # from 2000 requests/s: doubling brackets the ~9000 of this toy in 4 trials, 8 halvings reach 2%
    assert best["iterations"] <= 12 and best["binding_slo"] == "ttft"
    assert best["converged"] and best["upper_rps"] - best["rate_rps"] <= 0.02 * best["upper_rps"]
    at = _run(rate=(best["rate_rps"],), **kw).records[0]["ttft_s"]
    above = _run(rate=(best["upper_rps"],), **kw).records[0]["ttft_s"]
    assert np.percentile(at, 90) <= slo < np.percentile(above, 90)
    rep = r.replicas
    # replicas = ceil(1000 / max rate); gpus = replicas x tp (1); $ / 1e6 output tokens = gpus x $2/h /
    # (1000 req/s x 8 tokens x 3600 s) x 1e6
    n = math.ceil(1000.0 / best["rate_rps"])
    assert rep["replicas_needed"] == n and rep["gpus"] == n
    assert rep["usd_per_million_tokens"] == pytest.approx(n * 2.0 / (1000 * 8 * 3600) * 1e6)
