"""Disaggregated prefill / decode in graphroof.serve, on the toy decoder (L=2, H=256, 4 heads, 2 KV heads).

Hand-derived: the KV bytes a request sends, the FIFO link, a transfer-bound second token; with a free link and one
request at a time the disaggregated TTFT / TPOT equal the aggregated simulation's; bad inputs fail before the model.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from graphroof.errors import InputError
from graphroof.llm import Pricing
from graphroof.serving import ServeComparison, serve
from graphroof.serving.disagg_api import parse_disagg
from graphroof.sweeps.kvlink import KVLink, transfer_times
from tests.llm.toy import RULES, toy_source

TOY = dict(L=2, H=256, heads=4, kv_heads=2, I=512, V=1000)
FREE = dict(kv_link_bw_bytes_per_s=math.inf, kv_link_latency_s=0.0)
# KV bytes per token of the toy: layers x 2 (K, V) x kv_heads x head_dim x bf16 bytes = 2 x 2 x 2 x (256 / 4) x 2
KV_PER_TOKEN = 2 * 2 * 2 * 64 * 2  # = 1024 B


def _run(**kw):
    kw.setdefault("pricing", Pricing(rules=RULES))
    kw.setdefault("hw", "h100")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return serve(toy_source(**TOY), **kw)


def _trace(tmp_path, rows, name="t.csv"):
    p = tmp_path / name
    p.write_text("arrival_s,input_tokens,output_tokens\n" + "".join(f"{a},{i},{o}\n" for a, i, o in rows))
    return str(p)


def test_kv_bytes_per_request_hand_derived(tmp_path):
    """256-token prompt: 256 x 1024 B = 262,144 B; over 1 GB/s + 100 us: 262144 / 1e9 + 1e-4 = 3.62144e-4 s.
    TP 2 in both pools splits the 2 KV heads (512 B per device), but the full 1024 B per token still goes."""
    trace = _trace(tmp_path, [(0, 256, 4)])
    for tp in (2,):  # TP 1: test_transfer_bound_second_token
        r = _run(trace=trace, disagg="1p1d", prefill_tp=tp, decode_tp=tp, kv_link_bw_bytes_per_s=1e9,
                 kv_link_latency_s=1e-4)
        assert r.settings["disagg"]["kv_bytes_per_token"] == KV_PER_TOKEN
        assert r.records[0]["transfer_s"][0] == pytest.approx(256 * 1024 / 1e9 + 1e-4, rel=1e-12)
        assert r.settings["disagg"]["gpus"] == 2 * tp
    # fp8 KV in the prefill pool: 1 byte per element, 512 B per token
    r = _run(trace=trace, disagg="1p1d", prefill_kv="fp8", decode_kv="fp8", **FREE)
    assert r.settings["disagg"]["kv_bytes_per_token"] == KV_PER_TOKEN / 2


def test_fifo_link_hand_derived():
    """Three transfers of 1000 B on 1000 B/s + 0.5 s: ready at 0, 0.2, 5 -> start 0, 1, 5 (the second waits for the
    link, the third finds it free); landed = start + 1 + 0.5."""
    start, done = transfer_times(np.array([0.0, 0.2, 5.0]), np.full(3, 1000.0), KVLink(1000.0, 0.5, "test"))
    assert start.tolist() == [0.0, 1.0, 5.0]
    assert done.tolist() == [1.5, 2.5, 6.5]


def test_free_link_one_at_a_time_equals_aggregated(tmp_path):
    """Requests far apart (no interference), free link, pools equal to the replica: every request's TTFT and TPOT
    equal the aggregated simulation's (the prefill chunks, then decode steps at the same contexts)."""
    trace = _trace(tmp_path, [(0, 300, 9), (10, 64, 17), (20, 1000, 5), (30, 40, 1)])
    agg = _run(trace=trace)
    dis = _run(trace=trace, disagg="1p1d", **FREE)
    a, d = agg.records[0], dis.records[0]
    assert d["ttft_s"] == pytest.approx(a["ttft_s"], rel=1e-9)
    np.testing.assert_allclose(d["tpot_s"], a["tpot_s"], rtol=1e-9)  # NaN for the one-token request on both
    assert d["e2e_s"] == pytest.approx(a["e2e_s"], rel=1e-9)
    assert dis.points[0].output_tokens_per_s_per_gpu == pytest.approx(agg.points[0].output_tokens_per_s_per_gpu / 2)


def test_aggregated_replicas_one_at_a_time(tmp_path):
    """replicas=2, requests far apart: each request runs as on one replica (same records); the same span of time
    on twice the GPUs halves tok/s/GPU; KV use: the replicas' mean is half the single replica's (each holds half the
    requests' KV-time), the peak the fullest replica's (= the single's)."""
    trace = _trace(tmp_path, [(0, 300, 9), (10, 64, 17), (20, 1000, 5), (30, 40, 3)])
    one, two = _run(trace=trace), _run(trace=trace, replicas=2)
    for k in ("ttft_s", "e2e_s", "queue_s"):
        assert two.records[0][k] == pytest.approx(one.records[0][k], rel=1e-12)
    p1, p2 = one.points[0], two.points[0]
    assert p2.output_tokens_per_s_per_gpu == pytest.approx(p1.output_tokens_per_s_per_gpu / 2, rel=1e-12)
    assert p2.kv_used_mean == pytest.approx(p1.kv_used_mean / 2, rel=1e-9)
    assert p2.kv_used_max == pytest.approx(p1.kv_used_max, rel=1e-12)
    assert two.settings["gpus"] == 2 and two.settings["replicas"] == 2


def test_transfer_bound_second_token(tmp_path):
    """One request of 512 + 8 tokens on a 1 MB/s link with 2 ms latency: the transfer takes
    512 x 1024 / 1e6 + 2e-3 = 0.526288 s, after the prefill; the second token comes that much later than in the
    aggregated engine, so e2e grows by it and TPOT by it / 7."""
    trace = _trace(tmp_path, [(0, 512, 8)])
    agg = _run(trace=trace).records[0]
    r = _run(trace=trace, disagg="1p1d", kv_link_bw_bytes_per_s=1e6, kv_link_latency_s=2e-3)
    d = r.records[0]
    xfer = 512 * 1024 / 1e6 + 2e-3
    assert d["transfer_s"][0] == pytest.approx(xfer, rel=1e-12)
    assert d["ttft_s"][0] == pytest.approx(agg["ttft_s"][0], rel=1e-9)
    assert d["e2e_s"][0] - agg["e2e_s"][0] == pytest.approx(xfer, rel=1e-9)
    assert d["tpot_s"][0] - agg["tpot_s"][0] == pytest.approx(xfer / 7, rel=1e-9)
    # the second token's inter-token gap carries the transfer: the ITL's max sample
    assert r.points[0].itl_s["p99"] >= xfer


def test_pools_and_throughput_under_load():
    """2p1d under load: both pools busy, utilisation in (0, 1], GPUs counted over both pools, figures finite."""
    r = _run(rate=[400.0], requests=200, prompt_len="fixed:512", gen_len="fixed:16", disagg="2p1d",
             kv_link_bw_bytes_per_s=50e9, kv_link_latency_s=1e-5)
    p = r.points[0]
    assert set(p.pools) == {"prefill", "decode"}
    for pool in p.pools.values():
        assert 0 < pool["busy"] <= 1.0 + 1e-9
    assert p.pools["prefill"]["replicas"] == 2 and r.settings["gpus"] == 3
    assert p.output_tokens_per_s_per_gpu == pytest.approx(p.output_tokens_per_s / 3)
    assert p.transfer_s["p50"] >= 512 * 1024 / 50e9 + 1e-5 - 1e-15
    assert 0.8 < p.littles_law["ratio"] < 1.2
    assert r.to_json()


@pytest.mark.parametrize("kw, field", [
    (dict(disagg="0p1d"), ">= 1"), (dict(disagg="1p0d"), ">= 1"), (dict(disagg="one"), "XpYd"),
    (dict(disagg=(1,)), "XpYd"), (dict(prefill_tp=4), "disagg"), (dict(decode_hw="h200"), "disagg"),
    (dict(kv_link_bw_bytes_per_s=1e9), "disagg"), (dict(disagg="1p1d", prefill_hw="no-such-gpu"), "prefill_hw"),
    (dict(disagg="1p1d", decode_tp=0), "decode_tp"), (dict(disagg="1p1d", mode="static"), "static"),
    (dict(disagg="1p1d", kv_link_latency_s=-1.0), "kv_link_latency_s"),
    (dict(disagg="1p1d", kv_link_bw_bytes_per_s=0.0), "kv_link_bw_bytes_per_s"),
    (dict(disagg="auto", slo_ttft_s=1.0), "target_rate"), (dict(disagg="1p1d", prefix_share=0.5), "prefix"),
    (dict(disagg="1p1d", arrival="closed:4"), "open arrival"), (dict(disagg="1p1d", replicas=2), "replicas"),
    (dict(configs=[{"tp": 1}, {"disagg": "0p2d"}]), ">= 1"), (dict(configs=[{"nope": 1}]), "unknown key"),
])
def test_bad_inputs_are_one_line_errors_before_the_model(kw, field):
    with pytest.raises(InputError) as e:
        serve("no-such-model-anywhere", **kw)
    msg = str(e.value)
    assert "\n" not in msg and field in msg, msg


def test_parse_disagg():
    assert parse_disagg("2P3D") == (2, 3) and parse_disagg((1, 4)) == (1, 4) and parse_disagg("auto") == "auto"


def test_comparison_with_aggregated_and_replicas(tmp_path):
    """TP 2 vs 2 x TP 1 vs 1p1d TP 1: one comparison on the same requests; rows, labels and every format."""
    from graphroof.report import render

    c = _run(rate=[100.0], requests=30, prompt_len="fixed:128", gen_len="fixed:8",
             configs=[{"tp": 2}, {"replicas": 2}, {"disagg": "1p1d", **FREE}])
    assert isinstance(c, ServeComparison)
    rows = c.rows()
    assert [r["config"] for r in rows] == ["h100-sxm tp2", "h100-sxm 2 x tp1", "1p1d: h100-sxm tp1 -> h100-sxm tp1"]
    assert [r["gpus_per_group"] for r in rows] == [2, 2, 2]
    assert rows[2]["disagg"]["spec"] == "1p1d"
    for fmt in ("terminal", "markdown", "json", "html"):
        assert "1p1d" in render(c, fmt)
    csv = render(c, "csv").splitlines()
    head = csv[0].split(",")
    assert head[:4] == ["hw", "tp", "weights", "kv"] and "transfer_s" in head and "configuration" in head
    assert len(csv) == 1 + 3 * 30 and csv[-1].split(",")[head.index("transfer_s")] != ""
    for r in c.results[1:]:
        assert "1p1d" in render(r, "terminal") or r.settings.get("replicas") == 2


def test_auto_picks_the_fewest_gpus(tmp_path):
    """disagg='auto' at 8000 req/s of 2048 + 64 tokens (TTFT <= 1 ms, TPOT <= 140 us at p99): one prefill replica
    misses the TTFT SLO, so x = 2; 2p1d (3 GPUs) misses the TPOT SLO; 2p2d (4 GPUs) is the first that passes."""
    kw = dict(rate=[1.0], requests=120, prompt_len="fixed:2048", gen_len="fixed:64", slo_ttft_s=1e-3,
              slo_tpot_s=1.4e-4, target_rate=8000.0, find_max_rate=False, max_pool_replicas=4, **FREE)
    r = _run(disagg="auto", **kw)
    dis = r.settings["disagg"]
    assert (dis["x"], dis["y"], dis["gpus"]) == (2, 2, 4)
    assert [(t["x"], t["y"], t["verdict"]) for t in dis["search"]["tried"]] == [
        (1, None, "ttft"), (2, None, "ttft ok"), (2, 1, "tpot"), (2, 2, "pass")]
    at_target = [p for p in r.points if p.rate_rps == 8000.0][0]
    assert at_target.ttft_s["p99"] <= 1e-3 and at_target.tpot_s["p99"] <= 1.4e-4
    assert "x:y picked: 2p2d" in render_text(r)


def render_text(r):
    from graphroof.report import render

    return render(r, "terminal")


def test_default_link_from_the_profiles():
    """H100 SXM [collectives]: 40 GB/s per NIC x 8 NICs = 320 GB/s, 5.86 us (the A100 fit's network hop); the slower end and the larger latency of
    the two pools' devices; an override wins; a device with no inter-node figures and no override is an error."""
    from graphroof.hardware import adhoc_profile, load_hardware
    from graphroof.sweeps.kvlink import link_between

    h100 = load_hardware("h100")
    c = h100.collectives
    link = link_between(h100, h100)
    assert link.bw_bytes_per_s == c.inter_bw_bytes_per_s_per_nic * c.nics_per_node == 320e9
    assert link.latency_s == c.inter_hop_latency_s == 5.86e-6 and "h100-sxm" in link.source
    assert link.seconds(320e6) == pytest.approx(1e-3 + 5.86e-6)
    assert link_between(h100, h100, 1e9, 0.0).bw_bytes_per_s == 1e9
    bare = adhoc_profile(1e15, 3e12)  # two numbers only: no [collectives]
    with pytest.raises(InputError, match="kv_link_bw_bytes_per_s"):
        link_between(h100, bare)
    assert link_between(h100, bare, 1e9, 1e-6).latency_s == 1e-6
