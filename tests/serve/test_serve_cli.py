"""Issue 24: ``graphroof serve``: every argument checked before the model is built (one line on stderr, exit 1,
no file written), and the options reaching :func:`graphroof.serving.serve`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from graphroof.cli import COMMANDS, build_parser, main
from graphroof.cli.serve import parse_rates, parse_seconds, serve_kwargs


def _err(capsys, argv, tmp_path=None) -> str:
    out = None
    if tmp_path is not None:
        out = tmp_path / "report.html"
        argv = [*argv, "-o", str(out)]
    assert main(["serve", *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("graphroof: error: "), err
    if out is not None:
        assert not out.exists()  # no partial output file
    return err


BAD = [
    (["--rate", "1,x"], "--rate '1,x': expected request rates in req/s"),
    (["--rate", "0"], "every rate must be > 0"),
    (["--rate", "2,2"], "rate 2 is given twice"),
    (["--rate", ","], "--rate needs at least one rate"),
    (["--requests", "0"], "--requests '0': values must be >= 1"),
    (["--requests", "2,3"], "--requests '2,3': takes one integer"),
    (["--seed", "x"], "--seed 'x': expected an integer"),
    (["--prompt-len", "1000"], "name the distribution, e.g. --prompt-len fixed:1000"),
    (["--prompt-len", "gauss:3:1"], "unknown distribution"),
    (["--gen-len", "uniform:5:2"], "--gen-len: uniform:A:B needs integers 1 <= A <= B"),
    (["--prompt-len", "fixed:100000"], "--prompt-len 100000 is longer than llama-3-8b's maximum of 8192 positions"),
    (["--prompt-len", "fixed:8000", "--gen-len", "fixed:500"], "--prompt-len 8000 + --gen-len 500 = 8500 tokens exceeds"),
    (["--arrival", "gamma"], "gamma:CV needs a coefficient of variation"),
    (["--arrival", "bursty"], "unknown process"),
    (["--slo-ttft", "2"], "--slo-ttft 2: give a unit"),
    (["--slo-tpot", "0ms"], "--slo-tpot must be > 0"),
    (["--slo-percentile", "120"], "--slo-percentile '120': must be > 0 and <= 100"),
    (["--target-rate", "0"], "--target-rate '0': must be > 0"),
    (["--usd-per-hour", "-1"], "--usd-per-hour '-1': must be >= 0"),
    (["--prefix-share", "1"], "--prefix-share '1': must be in [0, 1)"),
    (["--gpu-mem-util", "1.5"], "--gpu-mem-util '1.5': must be in (0, 1]"),
    (["--kv-block", "0"], "--kv-block '0': values must be >= 1"),
    (["--max-num-seqs", "x"], "--max-num-seqs 'x': expected integers"),
    (["--tp", "3"], "--tp 3 does not divide the model's 32 attention heads"),
    (["--weights", "int3"], "--weights 'int3': unknown dtype"),
    (["--rate", "1,2", "--csv-rate", "3", "-f", "csv"], "--csv-rate 3: not one of --rate 1, 2"),
    (["--csv-rate", "1"], "--csv-rate picks the records of one rate in the CSV: use it with -f csv"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_argument_errors_are_one_line_before_the_model(capsys, tmp_path, argv, message):
    err = _err(capsys, ["llama-3-8b", *argv], tmp_path if "-f" not in argv else None)
    assert message in err, err


def test_trace_errors(capsys, tmp_path):
    assert "cannot read trace" in _err(capsys, ["llama-3-8b", "--trace", str(tmp_path / "none.csv")], tmp_path)
    bad = tmp_path / "t.csv"
    bad.write_text("arrival_s,input_tokens,output_tokens\n1,10,5\n0.5,10,5\n")
    assert "arrival_s is not sorted" in _err(capsys, ["llama-3-8b", "--trace", str(bad)], tmp_path)


def test_output_path_checked_first(capsys, tmp_path):
    err = _err(capsys, ["llama-3-8b", "-o", str(tmp_path / "no" / "r.html")])
    assert "directory" in err and "does not exist" in err
    assert "is a directory" in _err(capsys, ["llama-3-8b", "-f", "json", "-o", str(tmp_path)])


def test_errors_import_no_torch():
    code = ("import sys\nfrom graphroof.cli import main\n"
            "assert main(['serve', 'llama-3-8b', '--prompt-len', 'fixed:100000']) == 1\n"
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_registered_with_its_options():
    assert "serve" in COMMANDS
    help_text = build_parser()._subparsers._group_actions[0].choices["serve"].format_help()  # type: ignore[union-attr]
    for flag in ("--rate", "--requests", "--arrival", "--trace", "--prompt-len", "--gen-len", "--prefix-share",
                 "--seed", "--mode", "--max-batched-tokens", "--max-num-seqs", "--policy", "--slo-ttft", "--slo-tpot",
                 "--slo-percentile", "--target-rate", "--usd-per-hour", "--tp", "--weights", "--kv", "--runtime",
                 "--gpu-mem-util", "--kv-block", "--format", "--output", "--quiet"):
        assert flag in help_text, flag


def test_units_and_lists():
    assert parse_rates("1, 2,4.5") == [1.0, 2.0, 4.5]
    assert parse_seconds("2s", "--slo-ttft") == 2.0 and parse_seconds("50ms", "--slo-tpot") == pytest.approx(0.05)
    assert parse_seconds(None, "--slo-ttft") is None


def test_arguments_reach_the_simulator():
    args = build_parser().parse_args(["serve", "llama-3-8b", "--hw", "h100", "--rate", "1,2,4,8,16", "--prompt-len",
                                      "lognormal:1000:500", "--gen-len", "lognormal:250:100", "--slo-ttft", "2s",
                                      "--slo-tpot", "50ms", "--target-rate", "20", "--usd-per-hour", "$2.5",
                                      "--tp", "2", "--kv", "fp8", "--gpu-mem-util", "0.85", "--kv-block", "32",
                                      "--prefix-share", "0.25", "--seed", "7", "--requests", "300"])
    kw = serve_kwargs(args)
    assert kw["hw"] == "h100" and kw["rate"] == [1.0, 2.0, 4.0, 8.0, 16.0] and kw["requests"] == 300
    assert kw["prompt_len"] == "lognormal:1000:500" and kw["gen_len"] == "lognormal:250:100"
    assert kw["slo_ttft_s"] == 2.0 and kw["slo_tpot_s"] == pytest.approx(0.05) and kw["slo_percentile"] == 99.0
    assert kw["target_rate"] == 20.0 and kw["usd_per_hour"] == 2.5 and kw["seed"] == 7
    assert kw["prefix_share"] == 0.25 and kw["max_batched_tokens"] == 8192 and kw["max_num_seqs"] == 256
    p = kw["pricing"]
    assert (p.tp, p.kv, p.gpu_mem_util, p.kv_block, p.runtime) == (2, "fp8", 0.85, 32, "serving")


# -- the happy path, on the toy model (not reachable by name: the simulator is swapped for a real toy run) -------

@pytest.fixture(scope="module")
def toy_result():
    import warnings

    from graphroof.llm import Pricing
    from graphroof.serving import serve
    from tests.llm.toy import RULES, toy_source

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return serve(toy_source(), hw="a100", pricing=Pricing(rules=RULES), rate=[1, 4], requests=50,
                     prompt_len="fixed:64", gen_len="fixed:16", slo_ttft_s=2.0, slo_tpot_s=0.05)


@pytest.fixture
def fake_serve(monkeypatch, toy_result):
    import graphroof.serving

    calls: list[dict] = []

    def run(model, **kw):
        calls.append({"model": model, **kw})
        return toy_result

    monkeypatch.setattr(graphroof.serving, "serve", run, raising=False)
    return calls


def test_cli_writes_every_format(fake_serve, capsys, tmp_path, monkeypatch):
    import json

    argv = ["serve", "llama-3-8b", "--hw", "h100", "--rate", "1,4", "--prompt-len", "lognormal:1000:500",
            "--gen-len", "lognormal:250:100", "--slo-ttft", "2s", "--slo-tpot", "50ms"]
    assert main([*argv, "-q"]) == 0
    out = capsys.readouterr().out
    assert "serve: toy-llama" in out and "TTFT p99" in out
    call = fake_serve[0]
    assert call["model"] == "llama-3-8b" and call["slo_ttft_s"] == 2.0 and call["rate"] == [1.0, 4.0]
    assert main([*argv, "-f", "json", "-o", str(tmp_path / "r.json"), "-q"]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["kind"] == "serve"
    assert main([*argv, "-f", "csv", "--csv-rate", "4", "-o", str(tmp_path / "r.csv"), "-q"]) == 0
    lines = (tmp_path / "r.csv").read_text().splitlines()
    assert len(lines) == 51 and lines[1].startswith("4.0,0,")
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "-f", "html"]) == 0                 # a page without -o: MODEL-report.html
    assert (tmp_path / "llama-3-8b-report.html").read_text().startswith("<!doctype html>")
    assert "wrote llama-3-8b-report.html" in capsys.readouterr().err
