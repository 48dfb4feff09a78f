"""``graphroof sweep --disagg XpYd``: static figures of a disaggregated pair on the toy decoder (L=2, H=256, 4
heads, 2 KV heads: 1024 B of bf16 KV per token), checked against the aggregated sweep and by hand."""

from __future__ import annotations

import math
import warnings

import pytest

from graphroof.cli import main
from graphroof.errors import HardwareProfileError, InputError
from graphroof.sweeps import sweep
from tests.llm.toy import RULES, toy_source

KW = dict(hw=["h100"], batch=[1, 8], prompt=[128, 512], gen=[1, 32], rules=RULES)
KV_PER_TOKEN = 2 * 2 * 2 * 64 * 2  # layers x (K, V) x kv_heads x head_dim x 2 B = 1024 B


def _sweep(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sweep(toy_source(L=2, H=256, heads=4, kv_heads=2, I=512, V=1000), **{**KW, **kw})


@pytest.fixture(scope="module")
def agg():
    return _sweep()


def test_free_link_equals_the_aggregated_engine(agg):
    """1p1d, free link, decode pool = prefill pool: TTFT and TPOT are the aggregated sweep's to rel 1e-9; the pair's
    tokens/s per GPU is G x min(b / ttft, b / ((G - 1) tpot)) / 2 GPUs (G = 1: b / ttft / 2)."""
    d = _sweep(disagg="1p1d", kv_link_bw_bytes_per_s=math.inf, kv_link_latency_s=0.0)
    for a, p in zip(agg.points, d.points):
        assert p.ttft_s == pytest.approx(a.ttft_s, rel=1e-9)
        assert (p.tpot_s is None and a.tpot_s is None) or p.tpot_s == pytest.approx(a.tpot_s, rel=1e-9)
        rps = a.batch / a.ttft_s if a.gen == 1 else min(a.batch / a.ttft_s, a.batch / ((a.gen - 1) * a.tpot_s))
        assert p.gpus == 2 and p.tokens_per_s_per_gpu == pytest.approx(a.gen * rps / 2, rel=1e-12)


def test_transfer_and_link_limit_by_hand(agg):
    """2p1d on a 1 GB/s link + 100 us: batch 8 x prompt 512 sends 8 x 512 x 1024 = 4,194,304 B, 4.194304 ms + 0.1 ms;
    TPOT = aggregated TPOT + 4.294304 ms / 31.  Requests/s = min(2 x 8 / ttft, 8 / (31 tpot), 2 x 1e9 / (512 x 1024))
    (the link: 3,814.7 req/s); GPUs 2 x TP1 + 1 x TP1 = 3."""
    d = _sweep(disagg="2p1d", kv_link_bw_bytes_per_s=1e9, kv_link_latency_s=1e-4)
    i = [j for j, p in enumerate(agg.points) if (p.batch, p.prompt, p.gen) == (8, 512, 32)][0]
    a, p = agg.points[i], d.points[i]
    xfer = 8 * 512 * KV_PER_TOKEN / 1e9 + 1e-4
    assert p.tpot_s == pytest.approx(a.tpot_s + xfer / 31, rel=1e-9)
    rps = min(2 * 8 / a.ttft_s, 8 / (31 * a.tpot_s), 2 * 1e9 / (512 * KV_PER_TOKEN))
    assert p.gpus == 3 and p.tokens_per_s == pytest.approx(32 * rps, rel=1e-12)
    assert p.usd_per_million_tokens == pytest.approx(p.usd_per_hour * 3 / 3600 / p.tokens_per_s * 1e6)
    assert any("disaggregated 2p1d pairs" in n for n in d.notes)


def test_decode_pool_of_its_own(agg):
    """Decode on TP 2: the decode figures are the TP-2 sweep's, TTFT the TP-1 prefill's; GPUs 1 + 2."""
    tp2 = _sweep(tp=2)
    d = _sweep(disagg="1p1d", decode_tp=2, kv_link_bw_bytes_per_s=math.inf, kv_link_latency_s=0.0)
    for a, b, p in zip(agg.points, tp2.points, d.points):
        assert p.ttft_s == pytest.approx(a.ttft_s, rel=1e-9) and p.gpus == 3 and p.tp == 1
        assert (p.tpot_s is None and b.tpot_s is None) or p.tpot_s == pytest.approx(b.tpot_s, rel=1e-9)
        assert p.memory_bytes == pytest.approx(b.memory_bytes)
    csv = d.points[0].to_dict()
    assert csv["gpus"] == 3 and csv["pair_tokens_per_s"] > 0


@pytest.mark.parametrize("kw, text", [
    (dict(decode_tp=2), "give disagg"), (dict(kv_link_latency_s=0.0), "give disagg"),
    (dict(disagg="0p1d"), ">= 1"), (dict(disagg="auto"), "XpYd"), (dict(disagg="1p1d", decode_tp=0), "decode_tp"),
    (dict(disagg="1p1d", decode_hw="no-such-gpu"), "no-such-gpu"), (dict(disagg="1p1d", spec_tokens=2), "speculative"),
])
def test_bad_inputs_before_the_model(kw, text):
    with pytest.raises((InputError, HardwareProfileError)) as e:
        sweep("llama-3-8b", hw="h100", prompt=[128], gen=[8], **kw)
    assert text in str(e.value) and "\n" not in str(e.value)


def test_cli_flags(capsys, tmp_path):
    out = tmp_path / "s.csv"
    assert main(["sweep", "llama-3-8b", "--hw", "h100", "--prompt", "128", "--decode-tp", "2", "-f", "csv", "-o",
                 str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert "--decode-tp sets a disaggregated pair: give --disagg" in err and err.count("\n") == 0
    assert not out.exists()
    assert main(["sweep", "llama-3-8b", "--hw", "h100", "--prompt", "128", "--disagg", "1x1", "-o", str(out)]) == 1
    assert "expected XpYd" in capsys.readouterr().err
    from graphroof.sweeps.disagg import parse_pair

    with pytest.raises(InputError):
        parse_pair((0, 1))


def test_renders_in_every_format(tmp_path):
    """A disaggregated sweep renders like any sweep; the CSV carries gpus and pair_tokens_per_s, the notes the pair."""
    from graphroof.report.sweep import render_sweep as render  # the sweep renderer itself (see the report)

    d = _sweep(disagg="1p1d", kv_link_bw_bytes_per_s=1e9, kv_link_latency_s=1e-4)
    for fmt in ("terminal", "markdown", "json", "html"):
        assert "disaggregated 1p1d pairs" in render(d, fmt)
    head = render(d, "csv").splitlines()[0].split(",")
    assert "gpus" in head and "pair_tokens_per_s" in head
