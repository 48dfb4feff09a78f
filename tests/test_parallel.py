"""Pipeline / data / expert parallelism and system profiles (graphroof.llm.parallel, llm.pp, llm.ep,
timing.p2p, hardware.system): the new collectives' bytes and times by hand, the stage split, the pipeline bubble,
the DP batch split, the plain path unchanged, the device-count errors, cross-node TP dearer than in-node TP."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from graphroof.counters.rules.comm import all_to_all_cost
from graphroof.errors import InputError
from graphroof.graph import OpNode, TensorSpec
from graphroof.hardware import load_hardware
from graphroof.hardware.params import CollectiveParams
from graphroof.hardware.system import list_systems, load_system
from graphroof.llm import Engine, Pricing
from graphroof.llm.ep import expected_imbalance
from graphroof.llm.parallel import check_layout, stage_of_ops, stage_sizes
from graphroof.llm.pp import send_time_s
from graphroof.timing.p2p import all_to_all_bytes, all_to_all_time, send_recv_time
from tests.llm.toy import RULES, toy_source

C = CollectiveParams(algorithms=("ring",), base_latency_s=10e-6, intra_hop_latency_s=1e-6,
                     intra_bus_bw_bytes_per_s=100e9, inter_hop_latency_s=5e-6, inter_bw_bytes_per_s_per_nic=25e9,
                     nics_per_node=8)


def _engine(hw: str = "h100", src=None, **kw) -> Engine:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Engine(src or toy_source(L=4, H=256, heads=4, kv_heads=2, I=512, V=1000), hw=hw,
                      pricing=Pricing(rules=RULES, **kw))


# -- the new collectives, by hand ------------------------------------------------------------------------------

def test_send_recv_alpha_beta_by_hand():
    # same node: base 10 us + hop 1 us + 1e6 B / 100e9 B/s (10 us) = 21 us
    t = send_recv_time(1e6, C)
    assert t.t_s == pytest.approx(21e-6, rel=1e-12) and not t.inter_node
    # across nodes: base 10 us + hop 5 us + 1e6 / (25e9 * min(8, 8) / 8 = 25e9 per GPU) (40 us) = 55 us
    t = send_recv_time(1e6, C, inter_node=True, gpus_per_node=8)
    assert t.t_s == pytest.approx(55e-6, rel=1e-12) and t.t_bandwidth_s == pytest.approx(40e-6, rel=1e-12)
    # 4 NICs shared by 8 GPUs: each GPU gets 25e9 * 4 / 8 = 12.5e9 -> 80 us + 15 us
    c4 = CollectiveParams(**{**C.__dict__, "nics_per_node": 4})
    assert send_recv_time(1e6, c4, inter_node=True, gpus_per_node=8).t_s == pytest.approx(95e-6, rel=1e-12)
    assert send_recv_time(0, C).t_s == 0


def test_send_recv_own_latencies_by_hand():
    # a profile with NCCL send / recv's own fixed times (p2p_latency_s 7 us, p2p_inter_latency_s 20 us): same node
    # 7 us + 1e6 B / 100e9 B/s (10 us) = 17 us, not the collective's base 10 + hop 1; across nodes 20 us + 1e6 /
    # 25e9 (40 us) = 60 us, not base 10 + hop 5
    c = CollectiveParams(**{**C.__dict__, "p2p_latency_s": 7e-6, "p2p_inter_latency_s": 20e-6})
    t = send_recv_time(1e6, c)
    assert (t.t_s, t.t_latency_s) == (pytest.approx(17e-6, rel=1e-12), pytest.approx(7e-6, rel=1e-12))
    assert send_recv_time(1e6, c, inter_node=True, gpus_per_node=8).t_s == pytest.approx(60e-6, rel=1e-12)
    # the shipped H100 profile: 7.39 us + 2,048 B / 360e9 B/s = 7.3957 us inside the node (fitted on Vidur's
    # h100_dgx send_recv table, whose 2 KB row measured 5 us and 4-64 KB rows 7-8 us)
    h = load_hardware("h100-sxm")
    assert send_recv_time(2048, h).t_s == pytest.approx(7.39e-6 + 2048 / 360e9, rel=1e-12)
    assert send_recv_time(2048, h, inter_node=True).t_s == pytest.approx(17.63e-6 + 2048 / 40e9, rel=1e-12)


def test_send_recv_latencies_parse(tmp_path):
    from graphroof.errors import HardwareProfileError
    from graphroof.hardware.params import parse_collectives

    assert parse_collectives(tmp_path / "x.toml", {"p2p_latency_s": 7e-6}).p2p_latency_s == 7e-6
    assert parse_collectives(tmp_path / "x.toml", {}).p2p_inter_latency_s is None
    with pytest.raises(HardwareProfileError, match="p2p_inter_latency_s"):
        parse_collectives(tmp_path / "x.toml", {"p2p_inter_latency_s": -1e-6})


def test_all_to_all_bytes_and_time_by_hand():
    # 4 tokens, top-2... here top_k 6, hidden 2048, bf16 (2 B), 4 ranks: 4 * 6 * 2048 * 2 * 3/4 = 73,728 B leave
    assert all_to_all_bytes(4, 6, 2048, 2, 4) == 73_728
    assert all_to_all_bytes(4, 6, 2048, 2, 1) == 0
    # one node of 8: base 10 us + hop 1 us + 1.5e6 / 100e9 (15 us) = 26 us
    assert all_to_all_time(1.5e6, 8, C).t_s == pytest.approx(26e-6, rel=1e-12)
    # 16 ranks on 2 nodes of 8: 7/15 of 1.5e6 = 0.7e6 B to the node's peers (7 us on 100e9), 8/15 = 0.8e6 B to
    # the other node (32 us on 25e9 per GPU): max 32 us + base 10 us + inter hop 5 us = 47 us
    t = all_to_all_time(1.5e6, 16, C, gpus_per_node=8)
    assert t.t_s == pytest.approx(47e-6, rel=1e-12) and t.inter_node
    assert all_to_all_time(1.5e6, 1, C).t_s == 0


def test_all_to_all_counting_rule_by_hand():
    # [8 tokens, 2048] bf16 = 32,768 B; TP 2 -> each rank sends its 4 tokens' rows to top-6 experts:
    # 32,768 / 2 * 6 = 98,304 B of rows, 3/4 of them to the other 3 ranks -> 73,728 B on the network
    t = TensorSpec((8, 2048), "bf16")
    c = all_to_all_cost(OpNode("d", "comm.all_to_all", (t,), (t,), {"world_size": 4, "tp": 2, "top_k": 6}, "x"))
    assert c.net_bytes == 73_728 and c.act_read_bytes == 98_304 and c.act_write_bytes == 98_304


def test_expected_imbalance_by_hand():
    # 32,768 rows on 16 ranks: mu 2048, sigma = sqrt(32768 / 16 * 15 / 16) = 43.82, sqrt(2 ln 16) = 2.3548
    # -> E[max] = 2048 + 103.2 = 2151.2, over mu: 1.0504
    assert expected_imbalance(32_768, 16) == pytest.approx(1 + math.sqrt(32768 / 16 * 15 / 16) *
                                                           math.sqrt(2 * math.log(16)) / 2048, rel=1e-12)
    assert expected_imbalance(32_768, 16) == pytest.approx(1.0504, abs=1e-4)
    # 6 rows (one token, top-6) on 2 ranks: mu 3, sigma sqrt(1.5) = 1.2247, sqrt(2 ln 2) = 1.1774 -> 4.442 / 3
    assert expected_imbalance(6, 2) == pytest.approx((3 + math.sqrt(1.5) * math.sqrt(2 * math.log(2))) / 3)
    # 1 row on 8 ranks: the busiest holds the row: 1 / (1/8) = 8 (capped at n rows)
    assert expected_imbalance(1, 8) == pytest.approx(8.0)
    assert expected_imbalance(100, 1) == 1.0


# -- layout checks -----------------------------------------------------------------------------------------------

def test_stage_sizes_follow_vllm():
    assert stage_sizes(80, 2) == [40, 40]
    assert stage_sizes(80, 3) == [27, 27, 26]       # 80 = 3 * 26 + 2: the two stages before the last get one more
    assert stage_sizes(61, 4) == [15, 15, 16, 15]   # DeepSeek-V3's 61 layers: 61 = 4 * 15 + 1
    with pytest.raises(InputError, match="--pp 5 exceeds the model's 4 decoder layers"):
        stage_sizes(4, 5)


@pytest.mark.parametrize("kw, match", [
    (dict(tp=2, pp=1, dp=1, ep=3), r"--ep 3: .*use --ep 1 or --ep 2"),
    (dict(tp=2, pp=1, dp=2, ep=2), r"use --ep 1 or --ep 4"),
    (dict(tp=1, pp=0, dp=1, ep=1), r"--pp must be an integer >= 1"),
    (dict(tp=1, pp=1, dp=1, ep=1, nodes=2), r"--nodes needs --system"),
    (dict(tp=8, pp=4, dp=1, ep=1, system="dgx-h100", nodes=2), r"32 GPUs do not fit on --nodes 2 x 8 .*--nodes 4"),
    (dict(tp=1, pp=1, dp=1, ep=1, system="no-such"), r"--system no-such: unknown system; use one of: .*dgx-h100"),
    (dict(tp=2, pp=1, dp=1, ep=2, ep_imbalance=0.5), r"--ep-imbalance must be a number >= 1"),
])
def test_layout_errors_are_one_line(kw, match):
    tp, pp, dp, ep = kw.pop("tp"), kw.pop("pp"), kw.pop("dp"), kw.pop("ep")
    with pytest.raises(InputError, match=match) as e:
        check_layout(tp, pp, dp, ep, **kw)
    assert "\n" not in str(e.value)


def test_dense_model_with_ep_and_too_many_stages():
    with pytest.raises(InputError, match="--ep 2: the model has no fused MoE experts"):
        _engine(tp=2, ep=2).price(1, 16, 4)
    with pytest.raises(InputError, match="--pp 8 exceeds the model's 4 decoder layers"):
        _engine(pp=8).price(1, 16, 4)


def test_system_profiles_load_and_set_the_network():
    names = {s.name for s in list_systems()}
    assert {"dgx-h100", "dgx-a100", "gb200-nvl72", "mi300x-8"} <= names
    s = load_system("hgx-h100")
    assert s.name == "dgx-h100" and s.gpus_per_node == 8 and s.device == "h100-sxm"
    hw = s.apply()
    # 400 Gb/s NDR = 50e9 B/s per NIC, x 0.8 -> 40e9 (the h100-sxm profile's fitted inter-node rate), 8 NICs
    assert hw.collectives.inter_bw_bytes_per_s_per_nic == pytest.approx(40e9)
    assert hw.collectives.nics_per_node == 8
    assert load_system("gb200-nvl72").gpus_per_node == 72
    for sys in list_systems():
        assert sys.sources, sys.name


def test_placement_crosses_nodes_where_it_should():
    lay = check_layout(8, 2, 1, 1, system="dgx-h100")   # 16 GPUs: stage 0 on node 0, stage 1 on node 1
    assert lay.node_count == 2 and lay.boundary_inter_node(0) and lay.tp_nodes() == 1
    lay = check_layout(2, 4, 1, 1, system="dgx-h100")   # 8 GPUs in one node: every boundary on NVLink
    assert not any(lay.boundary_inter_node(k) for k in range(3))
    lay = check_layout(4, 2, 4, 16, system="dgx-h100")  # EP 16 over 2 nodes per stage, 4 nodes in all
    assert lay.ep_nodes() == 2 and lay.node_count == 4


# -- pipeline stages and the bubble --------------------------------------------------------------------------------

def test_stages_split_the_blocks_embedding_first_head_last():
    eng = _engine(pp=2)
    g = eng.pipeline.source.prefill_graph(1, 16)
    st = stage_of_ops(g, 2)
    by = {op.scope: st[op.name] for op in g.ops()}
    assert by["model.embed_tokens"] == 0 and by["model.layers.1.mlp.down_proj"] == 0
    assert by["model.layers.2.input_layernorm"] == 1 and by["lm_head"] == 1 and by["model.norm"] == 1


def test_stages_partition_the_plain_step():
    # eager (no fusion across the cut), ideal: each op's time is its own, so the two stages' prefill steps add up
    # to the plain step at the same batch, and their weights to the plain weights
    plain = _engine(runtime="eager", ideal=True)
    pp = _engine(runtime="eager", ideal=True, pp=2)
    f = plain.price(4, 64, 8)
    s = [pp.stage_priced(k, [4], [64], [8]) for k in range(2)]
    pre = [pm.phase_totals("prefill", pp.hw, np.array([4]), np.array([64]), np.array([64])).t_ideal_s[0] for pm in s]
    assert sum(pre) == pytest.approx(f.ttft_s[0], rel=1e-9)
    assert s[0].weight_bytes() + s[1].weight_bytes() == pytest.approx(f.memory["weight_bytes"][0], rel=1e-12)


def test_pipeline_bubble_and_decode_rounds():
    # prefill of b = 8 in m = 2 micro-batches of 4 over 2 stages: (m + pp - 1) = 3 slots of the slowest stage +
    # one boundary send of 4 x 64 tokens x 256 hidden x 2 B (bf16) = 131,072 B over NVLink (ideal: bytes / B)
    eng = _engine(ideal=True, pp=2)
    f = eng.price(8, 64, 8)
    s = [eng.stage_priced(k, [2, 4, 8], [64], [8]) for k in range(2)]   # the batches parallel_figures asks for
    stage_pre = max(pm.phase_totals("prefill", eng.hw, np.array([4]), np.array([64]), np.array([64])).t_ideal_s[0]
                    for pm in s)
    send = send_recv_time(4 * 64 * 256 * 2, eng.hw).t_bandwidth_s
    # GPipe fill: the first micro-batch through both stages, then one slowest stage for the second
    pres = [pm.phase_totals("prefill", eng.hw, np.array([4]), np.array([64]), np.array([64])).t_ideal_s[0] for pm in s]
    assert f.ttft_s[0] == pytest.approx(sum(pres) + (2 - 1) * stage_pre + send, rel=1e-9)
    assert f.ttft_s[0] <= (2 + 2 - 1) * stage_pre + send  # the balanced-stage bound
    # decode: 2 micro-batches of 4 in flight; TPOT = pp x slowest stage at batch 4 + one send of 4 tokens
    lo, hi = np.array([64]), np.array([64 + 8 - 2])
    stage_dec = max(pm.phase_totals("decode", eng.hw, np.array([4]), lo, hi).t_ideal_s[0] for pm in s)
    assert f.tpot_s[0] == pytest.approx(2 * stage_dec + send_recv_time(4 * 256 * 2, eng.hw).t_bandwidth_s, rel=1e-9)
    # microbatches=4: 4 micro-batches of 2
    f4 = _engine(ideal=True, pp=2, microbatches=4).price(8, 64, 8)
    eng4 = _engine(ideal=True, pp=2, microbatches=4)
    eng4.price(8, 64, 8)
    p2 = [eng4.stage_priced(k, [2, 4, 8], [64], [8]).phase_totals(
        "prefill", eng4.hw, np.array([2]), np.array([64]), np.array([64])).t_ideal_s[0] for k in range(2)]
    # GPipe fill of 4 micro-batches: both stages for the first, the slower stage for each of the 3 others
    want = sum(p2) + 3 * max(p2) + send_recv_time(2 * 64 * 256 * 2, eng4.hw).t_bandwidth_s
    assert f4.ttft_s[0] == pytest.approx(want, rel=1e-9)


def test_one_sequence_passes_the_stages_one_after_the_other():
    # batch 1 over 2 stages: one micro-batch in flight, so a decode round is stage 0 then stage 1 (their sum) + one
    # send of 1 token x 256 hidden x 2 B, not 2 x the slower stage (no second micro-batch to fill the other stage)
    eng = _engine(ideal=True, pp=2)
    f = eng.price(1, 64, 8)
    s = [eng.stage_priced(k, [1], [64], [8]) for k in range(2)]
    lo, hi = np.array([64]), np.array([64 + 8 - 2])
    dec = [pm.phase_totals("decode", eng.hw, np.array([1]), lo, hi).t_ideal_s[0] for pm in s]
    send = send_recv_time(1 * 256 * 2, eng.hw).t_bandwidth_s
    assert f.tpot_s[0] == pytest.approx(dec[0] + dec[1] + send, rel=1e-9)
    assert f.tpot_s[0] < 2 * max(dec) + send  # the stages are unequal (embedding / LM head)
    # serve's step cost: one decoding sequence, the same path; two sequences fill both micro-batches
    from graphroof.llm.pp import ParallelStepCost

    step = ParallelStepCost(eng)
    one = [st(0, 0, 1, 64, ideal=True) for st in step.stages]
    assert step(0, 0, 1, 64, ideal=True) == pytest.approx(float(sum(one)) + send, rel=1e-9)
    two = max(float(x) for x in one)  # 2 sequences: 1 per micro-batch, each stage serves both in turn
    assert step(0, 0, 2, 128, ideal=True) == pytest.approx(max(float(sum(one)), 2 * two) + send, rel=1e-9)


@pytest.mark.parametrize("batch", [2, 3, 4])
def test_decode_round_with_some_micro_batches_in_flight(batch):
    # pp = 4, batch b < pp or = pp: b micro-batches of 1 sequence in flight; a round is max(stages' sum, b x slowest
    # stage) + 3 sends of 1 token, each time field on its own (ideal and realistic: a realistic engine)
    eng = _engine(pp=4)
    f = eng.price(batch, 64, 8)
    s = [eng.stage_priced(k, [1], [64], [8]) for k in range(4)]
    lo, hi = np.array([64]), np.array([64 + 8 - 2])
    tot = [pm.phase_totals("decode", eng.hw, np.array([1]), lo, hi) for pm in s]
    send = send_time_s(eng, np.array([1.0]))
    for field, extra in (("t_realistic_s", send[0][0]), ("t_ideal_s", send[1][0])):
        per = [getattr(t, field)[0] for t in tot]
        want = max(sum(per), batch * max(per)) + extra
        got = f.tpot_s[0] if field == "t_realistic_s" else f.decode.t_ideal_s[0]
        assert got == pytest.approx(want, rel=1e-9), field
    assert f.decode.t_ideal_s[0] <= f.decode.t_realistic_s[0]

def test_layout_with_trivial_factors_equals_the_plain_path():
    # TP 2 inside one DGX H100 node (the system only changes the network between nodes): pp = dp = ep = 1 priced
    # by the parallel path equals the plain path
    plain, sys = _engine(tp=2), _engine(tp=2, system="dgx-h100")
    assert not sys.layout.plain
    a, b = plain.price([1, 8, 32], [64, 64, 64], [8, 8, 8]), sys.price([1, 8, 32], [64, 64, 64], [8, 8, 8])
    for x, y in ((a.ttft_s, b.ttft_s), (a.tpot_s, b.tpot_s), (a.memory["total_bytes"], b.memory["total_bytes"])):
        np.testing.assert_allclose(x, y, rtol=1e-9)


def test_dp_ranks_split_the_batch():
    plain, dp = _engine(tp=2), _engine(tp=2, dp=2)
    a, b = plain.price(4, 64, 8), dp.price(8, 64, 8)
    assert b.ttft_s[0] == pytest.approx(a.ttft_s[0], rel=1e-9) and b.tpot_s[0] == pytest.approx(a.tpot_s[0], rel=1e-9)
    assert b.tokens_per_s[0] == pytest.approx(2 * a.tokens_per_s[0], rel=1e-9)   # 8 sequences in the same time


def test_cross_node_tp_costs_more_than_in_node(tmp_path):
    half = tmp_path / "half.toml"   # DGX H100 with NVLink domains of 4: TP 8 spans 2 nodes
    with open(load_system("dgx-h100").path) as f:
        text = f.read()
    half.write_text(text.replace('name = "dgx-h100"', 'name = "half-h100"').replace("gpus_per_node = 8", "gpus_per_node = 4")
                    .replace('aliases = ["hgx-h100", "8xh100"]', "aliases = []"))
    src = toy_source(L=2, H=256, heads=8, kv_heads=8, I=512, V=1000)
    inside, across = _engine(src=src, tp=8, system="dgx-h100"), _engine(src=src, tp=8, system=str(half))
    assert across.layout.tp_nodes() == 2 and inside.layout.tp_nodes() == 1
    a, b = inside.price([1, 32], [64, 64], [8, 8]), across.price([1, 32], [64, 64], [8, 8])
    assert np.all(b.tpot_s > a.tpot_s) and np.all(b.ttft_s > a.ttft_s)


# -- step cost ------------------------------------------------------------------------------------------------------

def test_step_cost_of_a_pipeline_round():
    eng = _engine(pp=2)
    sc = eng.step_cost(max_batch=32, max_context=256, max_chunk=128)
    stages = sc.stages
    # 8 decode sequences of 100 cached tokens: 2 micro-batches of 4 -> 2 x slowest stage step(4, 400) + send
    want = 2 * max(float(s(0, 0, 4, 400)) for s in stages) + send_recv_time(4 * 256 * 2, eng.hw).t_s
    assert float(sc(0, 0, 8, 800)) == pytest.approx(want, rel=1e-9)
    dp = _engine(dp=2).step_cost(max_batch=32, max_context=256, max_chunk=128)
    plain = _engine().step_cost(max_batch=32, max_context=256, max_chunk=128)
    assert float(dp(0, 0, 8, 800)) == pytest.approx(float(plain(0, 0, 4, 400)), rel=1e-9)
    assert float(sc(0, 0, 0, 0)) == 0.0



def test_pipeline_round_keeps_a_chunk_on_one_micro_batch():
    """A prompt's chunk is not split over micro-batches (ParallelStepCost's class doc), by hand on the toy."""
    eng = _engine(pp=4)
    sc = eng.step_cost(max_batch=32, max_context=256, max_chunk=128)
    st = sc.stages
    hw = eng.hw

    def send(tokens):  # one micro-batch's [tokens, hidden 256] bf16 activations over one boundary, x 3 boundaries
        return 3 * send_recv_time(tokens * 256 * 2, hw).t_s

    # one chunk of 120 tokens, nothing else: one micro-batch in flight, the stages one after the other
    lone = sum(float(s(120, 0, 0, 0)) for s in st) + send(120)
    assert float(sc(120, 0, 0, 0, prefill_chunks=1, prefill_largest=120)) == pytest.approx(lone, rel=1e-9)
    # without the chunk count: the even spread of before, 30 tokens per micro-batch, 4 in flight
    even = max(sum(float(s(30, 0, 0, 0, prefill_attention=120.0 ** 2 / 4)) for s in st),
               4 * max(float(s(30, 0, 0, 0, prefill_attention=120.0 ** 2 / 4)) for s in st)) + send(30)
    assert float(sc(120, 0, 0, 0)) == pytest.approx(even, rel=1e-9)
    assert float(sc(120, 0, 0, 0)) != pytest.approx(lone, rel=1e-3)
    # 2 chunks (largest 80 of 120 tokens) and 6 decodes of 50 cached tokens: heavy micro-batch 80 tokens, the other
    # 40 over 3 light ones, ceil(40 / 3) = 14 each; decodes ceil(6 / 4) = 2 per micro-batch, 2 x 50 cached tokens;
    # attention work 10,000 split by tokens: 10,000 x 80 / 120 and x 14 / 120; live = min(4, 6 + 2) = 4
    heavy = [float(s(80, 0, 2, 100, prefill_attention=10000.0 * 80 / 120)) for s in st]
    light = [float(s(14, 0, 2, 100, prefill_attention=10000.0 * 14 / 120)) for s in st]
    want = max(sum(heavy), max(h + 3 * l for h, l in zip(heavy, light))) + send(80 + 2)
    got = float(sc(120, 0, 6, 300, prefill_attention=10000.0, prefill_chunks=2, prefill_largest=80))
    assert got == pytest.approx(want, rel=1e-9)
    # many small chunks (largest 20 <= the even share 30): the same as the even spread
    assert float(sc(120, 0, 0, 0, prefill_chunks=6, prefill_largest=20)) == pytest.approx(
        float(sc(120, 0, 0, 0)), rel=1e-9)
    # decode only: unchanged
    assert float(sc(0, 0, 8, 800, prefill_chunks=0, prefill_largest=0)) == pytest.approx(float(sc(0, 0, 8, 800)))
    for bad in (dict(prefill_chunks=1, prefill_largest=200), dict(prefill_chunks=3, prefill_largest=20),
                dict(prefill_chunks=0, prefill_largest=0), dict(prefill_chunks=1)):
        with pytest.raises(InputError, match="prefill_chunks"):
            sc(120, 0, 0, 0, **bad)
    # arrays of any shape broadcast, each element as its own step
    grid = sc(np.array([[120, 60], [30, 0]]), 0, 0, 0, prefill_chunks=np.array([[1, 2], [1, 0]]),
              prefill_largest=np.array([[120, 30], [30, 0]]))
    assert grid.shape == (2, 2) and grid[1, 1] == 0.0
    assert grid[0, 0] == pytest.approx(float(sc(120, 0, 0, 0, prefill_chunks=1, prefill_largest=120)), rel=1e-12)


def test_pipeline_round_keeps_the_other_chunks_on_the_micro_batches_in_flight():
    """3 chunks (largest 200 of 600 tokens), no decodes, pp 4: 3 micro-batches in flight, the heavy one 200 tokens
    and the other 400 over the 2 light ones, 200 each (not over 3: 134, which dropped 132 tokens).  A toy with a
    400,000-word vocabulary makes the last stage (the LM head) the slowest, so the busiest stage's turn, not the
    heavy micro-batch's path, sets the round."""
    eng = _engine(pp=4, src=toy_source(L=4, H=256, heads=4, kv_heads=2, I=512, V=400_000))
    sc = eng.step_cost(max_batch=32, max_context=1024, max_chunk=1024)
    st = sc.stages
    third = [float(s._step(200, 0, 0, 0, 40000.0, False)) for s in st]  # attention 3 x 200^2 = 120,000, a third
    turn = max(3 * h for h in third)
    assert turn > sum(third)  # the stages are unbalanced: the turn binds
    want = turn + 3 * send_recv_time(200 * 256 * 2, eng.hw).t_s
    got = float(sc(600, 0, 0, 0, prefill_attention=120000.0, prefill_chunks=3, prefill_largest=200))
    assert got == pytest.approx(want, rel=1e-9)



def test_pipeline_round_pays_the_host_floor_once():
    """A runtime's per-sequence host floor is the rank's scheduler's, paid once per round: pp 4 on the toy with
    tensorrt-llm's preset, its floor raised to 1 ms per sequence so that it binds: 2 decode sequences take
    max(device round, 2 x 1 ms) + sends = 2 ms + sends, not the floor in every stage (4 x 1 ms, what it was)."""
    from dataclasses import replace

    eng = _engine(pp=4, runtime="tensorrt-llm")
    sc = eng.step_cost(max_batch=32, max_context=256, max_chunk=128)
    assert sc.stages[0].pipe.runtime.host_per_sequence_s == pytest.approx(35e-6)  # the preset's, fitted
    for st in sc.stages:
        st.pipe.runtime = replace(st.pipe.runtime, host_per_sequence_s=1e-3)
    per = [float(st._step(0, 0, 1, 100, None, False)) for st in sc.stages]  # one sequence per micro-batch, no floor
    device = max(sum(per), 2 * max(per))  # live = min(pp 4, 2 sequences) = 2
    assert device < 2e-3
    assert float(sc(0, 0, 2, 200)) == pytest.approx(2e-3 + 3 * send_recv_time(256 * 2, eng.hw).t_s, rel=1e-9)
    # 8 sequences, 2 per micro-batch: max(device, 8 ms) + one micro-batch's sends
    assert float(sc(0, 0, 8, 800)) == pytest.approx(8e-3 + 3 * send_recv_time(2 * 256 * 2, eng.hw).t_s, rel=1e-9)
    assert float(sc(0, 0, 2, 200, ideal=True)) < 1e-3  # the ideal figure has no host floor

def test_serve_prices_a_lone_prompt_under_pp_as_its_stages_in_turn():
    """serve at a low rate under pp 4: a lone prompt's TTFT is the llm figure (the stages one after the other,
    plus sends), not the even spread over four micro-batches it was before."""
    from graphroof.serving import serve

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src = toy_source(L=4, H=256, heads=4, kv_heads=2, I=512, V=1000)
        p = Pricing(rules=RULES, pp=4)
        res = serve(src, hw="h100", rate=[0.01], arrival="constant", requests=3, prompt_len="fixed:120",
                    gen_len="fixed:2", max_batched_tokens=128, max_num_seqs=8, pricing=p)
        eng = Engine(src, hw="h100", pricing=p)
    sc = eng.step_cost(max_batch=8, max_context=122, max_chunk=128)
    lone = float(sc(120, 0, 0, 0, prefill_chunks=1, prefill_largest=120))
    assert res.points[0].ttft_s["p50"] == pytest.approx(lone, rel=0.02)

def test_estimate_holds_and_renders_the_layout():
    from graphroof.report import render

    r = _engine(tp=2, pp=2, system="dgx-h100").estimate(prompt=64, gen=8, batch=[1, 8])
    assert r.layout["world"] == 4 and r.layout["pp_boundaries_inter_node"] == [False]
    assert r.configs[1].layout["pp"] == 2 and r.configs[1].gpus == 4
    assert render(r, "json").strip() == r.to_json().strip()
    text = render(r, "terminal")
    assert "parallel layout: TP 2 x PP 2 x DP 1, EP 1: 4 GPUs on 1 x dgx-h100 node" in text
    assert "x 4 GPUs (the layout)" in text and "decode step of the last of 2 stages" in text
    # the estimate's figures are Engine.price's
    f = _engine(tp=2, pp=2, system="dgx-h100").price([1, 8], 64, 8)
    assert [c.tpot_s for c in r.configs] == pytest.approx(list(f.tpot_s), rel=1e-12)


def test_system_file_errors_are_one_line(tmp_path):
    from graphroof.errors import HardwareProfileError

    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\ndevice = "h100-sxm"\ngpus_per_node = 8\nbogus = 1\n')
    with pytest.raises(HardwareProfileError, match="bad.toml: unknown field bogus"):
        load_system(str(bad))
    bad.write_text('name = "x"\ndevice = "h100-sxm"\ngpus_per_node = 0\n')
    with pytest.raises(HardwareProfileError, match="gpus_per_node must be a number > 0"):
        load_system(str(bad))
    bad.write_text('name = "x"\ndevice = "h100-sxm"\ngpus_per_node = 8\n[scale_out]\nefficiency = 1.5\n')
    with pytest.raises(HardwareProfileError, match=r"scale_out.efficiency must be a number > 0 and <= 1"):
        load_system(str(bad))


def test_the_simulator_keeps_chunks_whole_only_when_they_are_all_the_prefill_work():
    """The simulator passes the step's chunks (ParallelStepCost keeps them whole on their micro-batches / DP ranks)
    only when nothing else could be scheduled: nothing waiting, no running prompt left out.  With more work queued
    its budget stands for every micro-batch's and rank's own, and the step is the even spread (no chunk arguments):
    a saturated pipeline keeps every micro-batch busy with other prompts."""
    from graphroof.serving.sim import EngineModel, simulate
    from graphroof.serving.workload import Workload

    calls = []

    def step(n, o, m, s, *, prefill_attention=None, prefill_chunks=None, prefill_largest=None, ideal=False):
        if np.ndim(n) == 0 and np.ndim(m) == 0:  # a general step (decode-only runs come as arrays)
            calls.append((int(n), int(m), prefill_chunks, prefill_largest))
        return np.full(np.broadcast(n, o, m, s).shape, 1e-3)

    def run(k):  # k requests of 100 + 2 tokens at t = 0, a 256-token budget
        calls.clear()
        wl = Workload(np.zeros(k), np.full(k, 100), np.full(k, 2), np.zeros(k, dtype=np.int64))
        simulate(EngineModel(step, 10**6, 16, 256, 8), wl)
        return list(calls)

    assert EngineModel(step, 10**6, 16, 256, 8).chunk_args
    assert run(1)[0] == (100, 0, 1, 100)  # alone: one whole chunk
    four = run(4)
    assert four[0] == (256, 0, None, None)  # 100 + 100 + 56, the fourth request waiting: the even spread
    assert four[1] == (144, 2, 2, 100)  # 2 decodes; the third's last 44 and the fourth's 100: all there is, whole
