"""graphroof plan on the command line: bad input is one line, exit 1, no output file, before any model is built;
the flags map onto graphroof.plan's keywords; a run writes the rendered result."""

from __future__ import annotations

import json
import warnings

import pytest

import graphroof.planner
from graphroof.cli import build_parser, main
from graphroof.cli.plan import plan_kwargs
from graphroof.llm import Pricing
from tests.llm.toy import RULES, toy_source

BASE = ["plan", "no-such-model-anywhere", "--hw", "h100", "--rate", "1,4", "--slo-ttft", "2s"]


@pytest.mark.parametrize("extra, msg", [
    (["--rate", "0"], "every rate must be > 0"),
    (["--slo-ttft", "2"], "--slo-ttft"),
    (["--slo-tpot", "fast"], "--slo-tpot"),
    (["--engines", "vllm,tgi"], "unknown engine 'tgi'"),
    (["--tp", "2,4", "--gpu-budget", "1"], "below one replica"),
    (["--tp", "0"], "--tp"),
    (["--jobs", "x"], "--jobs"),
    (["--usd-per-hour", "h100=cheap"], "--usd-per-hour"),
    (["--weights", "int3"], "int3"),
])
def test_bad_input_one_line_no_file(extra, msg, tmp_path, capsys):
    out = tmp_path / "plan.json"
    code = main([*BASE, *extra, "-f", "json", "-o", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1 and err[0].startswith("graphroof: error:") and msg in err[0]
    assert not out.exists()


def test_flags_map_onto_the_api():
    args = build_parser().parse_args([*BASE, "--tp", "4,8", "--weights", "bf16,fp8", "--kv", "native,fp8",
                                      "--max-num-seqs", "64,256", "--max-batched-tokens", "8192",
                                      "--usd-per-hour", "h100=3.5", "--gpu-budget", "64", "--jobs", "2",
                                      "--slo-tpot", "50ms", "--slo-percentile", "90"])
    kw = plan_kwargs(args)
    assert kw["hw"] == ["h100"] and kw["rate"] == [1.0, 4.0] and kw["tp"] == [4, 8]
    assert kw["weights"] == ["bf16", "fp8"] and kw["kv"] == [None, "fp8"]
    assert kw["max_num_seqs"] == [64, 256] and kw["max_batched_tokens"] == [8192]
    assert kw["slo_ttft_s"] == 2.0 and kw["slo_tpot_s"] == pytest.approx(0.05) and kw["slo_percentile"] == 90.0
    assert kw["usd_per_hour"] == {"h100": 3.5} and kw["gpu_budget"] == 64 and kw["jobs"] == 2


def test_a_run_writes_the_report(tmp_path, monkeypatch, capsys):
    real = graphroof.planner.plan

    def toy_plan(model, **kw):  # the CLI's keywords on the toy decoder (the CLI names a model; the toy is a source)
        kw.update(pricing=Pricing(rules=RULES), requests=20, search_requests=20, prompt_len="fixed:64",
                  gen_len="fixed:8", max_num_seqs=[8], max_batched_tokens=[256])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return real(toy_source(L=2, H=256, heads=4, kv_heads=2, I=512, V=1000), **kw)

    monkeypatch.setattr(graphroof.planner, "plan", toy_plan)
    out = tmp_path / "plan.json"
    code = main(["-q", *BASE[:5], "400,1600", "--slo-ttft", "2ms", "--tp", "1", "--jobs", "1", "-f", "json", "-o",
                 str(out)])
    assert code == 0, capsys.readouterr().err
    d = json.loads(out.read_text())
    assert d["kind"] == "plan" and d["counts"]["configurations"] == 1
    assert d["configs"][0]["flags"]["vllm"].startswith("vllm serve toy-llama --tensor-parallel-size 1")
