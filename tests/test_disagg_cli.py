"""``graphroof serve --disagg``: the flags checked before the model is built (one line, exit 1, no file), the
keywords reaching :func:`graphroof.serving.serve`, and a disaggregated result written in every format."""

from __future__ import annotations

import json
import math
import warnings

import pytest

from graphroof.cli import build_parser, main
from graphroof.cli.serve import serve_kwargs

BAD = [
    (["--disagg", "0p1d"], "must each be >= 1"),
    (["--disagg", "2x1"], "expected XpYd"),
    (["--prefill-tp", "4"], "--prefill-tp sets a pool of disaggregated serving: give --disagg"),
    (["--decode-hw", "h200"], "--decode-hw sets a pool"),
    (["--kv-link-bw", "100GB/s"], "--kv-link-bw sets the link"),
    (["--disagg", "1p1d", "--kv-link-bw", "0"], "--kv-link-bw '0': must be > 0"),
    (["--disagg", "1p1d", "--kv-link-latency", "5"], "give a unit"),
    (["--disagg", "1p1d", "--prefill-tp", "3"], "does not divide"),
    (["--disagg", "1p1d", "--prefill-hw", "no-such-gpu"], "prefill_hw: unknown hardware"),
    (["--config", "tp=4 bogus=1"], "expected KEY=VAL pairs"),
    (["--config", "disagg=0p2d"], "must each be >= 1"),
    (["--disagg", "auto", "--slo-ttft", "1s"], "target_rate"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_flag_errors_are_one_line_before_the_model(capsys, tmp_path, argv, message):
    out = tmp_path / "r.json"
    assert main(["serve", "llama-3-8b", "--hw", "h100", *argv, "-f", "json", "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("graphroof: error: ") and message in err, err
    assert not out.exists()


def test_flags_reach_serve():
    args = build_parser().parse_args(["serve", "llama-3-70b", "--hw", "h100", "--disagg", "2p1d", "--prefill-tp",
                                      "4", "--decode-hw", "h200", "--decode-tp", "8", "--decode-kv", "fp8",
                                      "--kv-link-bw", "inf", "--kv-link-latency", "0"])
    kw = serve_kwargs(args)
    assert kw["disagg"] == "2p1d" and kw["prefill_tp"] == 4 and kw["decode_hw"] == "h200"
    assert kw["decode_tp"] == 8 and kw["decode_kv"] == "fp8"
    assert kw["kv_link_bw_bytes_per_s"] == math.inf and kw["kv_link_latency_s"] == 0.0
    args = build_parser().parse_args(["serve", "llama-3-70b", "--hw", "h100", "--config", "tp=8", "--config",
                                      "tp=4 replicas=2", "--config", "disagg=1p1d,prefill-tp=4,decode-tp=4"])
    kw = serve_kwargs(args)
    assert kw["configs"] == [{"tp": 8}, {"tp": 4, "replicas": 2},
                             {"disagg": "1p1d", "prefill_tp": 4, "decode_tp": 4}]


@pytest.fixture(scope="module")
def disagg_result():
    from graphroof.llm import Pricing
    from graphroof.serving import serve
    from tests.llm.toy import RULES, toy_source

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return serve(toy_source(), hw="h100", pricing=Pricing(rules=RULES), rate=[50, 200], requests=40,
                     prompt_len="fixed:64", gen_len="fixed:16", slo_ttft_s=2.0, slo_tpot_s=0.05, disagg="2p1d",
                     find_max_rate=False)


def test_cli_writes_every_format(monkeypatch, capsys, tmp_path, disagg_result):
    import graphroof.serving

    calls = []
    monkeypatch.setattr(graphroof.serving, "serve", lambda model, **kw: calls.append(kw) or disagg_result,
                        raising=False)
    argv = ["serve", "llama-3-8b", "--hw", "h100", "--rate", "50,200", "--disagg", "2p1d", "-q"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "disaggregated 2p1d: prefill 2 x h100-sxm TP1" in out and "prefill busy" in out and "xfer p99" in out
    assert calls[0]["disagg"] == "2p1d"
    assert main([*argv, "-f", "markdown", "-o", str(tmp_path / "r.md")]) == 0
    # the default toy: 2 layers x 2 (K, V) x 2 KV heads x 16 head_dim x 2 B (bf16) = 256 B per token
    assert "KV transfer: 256 B per prompt token" in (tmp_path / "r.md").read_text()
    assert main([*argv, "-f", "json", "-o", str(tmp_path / "r.json")]) == 0
    d = json.loads((tmp_path / "r.json").read_text())
    assert d["settings"]["disagg"]["spec"] == "2p1d" and d["points"][0]["pools"]["prefill"]["replicas"] == 2
    assert main([*argv, "-f", "csv", "-o", str(tmp_path / "r.csv")]) == 0
    assert "transfer_s" in (tmp_path / "r.csv").read_text().splitlines()[0]
    assert main([*argv, "-f", "html", "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "disaggregated 2p1d" in page and "prefill busy" in page
