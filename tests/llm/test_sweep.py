"""``graphroof sweep``: Pareto frontier and SLO picks on hand-built points, the sweep equal to ``estimate`` at
every point (traces shared across devices, dtypes and TP), the CLI formats, early errors and the batch sweep."""

from __future__ import annotations

import importlib
import json

import pytest

from graphroof.cli import main
from graphroof.errors import InputError
from graphroof.llm import estimate
from graphroof.report import render
from graphroof.sweeps import SweepPoint, pareto, pick_slo, sweep
from graphroof.sweeps.batch import BatchPoint, solve_critical
from tests.llm.toy import RULES, toy_source

TINY = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=100,
            max_position_embeddings=512, torch_dtype="bfloat16")


def _pt(hw="a", batch=1, tp=1, ttft=0.1, tpot=0.01, gen=11, mem=1.0, cap=10.0, price=None):
    return SweepPoint(hw=hw, batch=batch, prompt=100, gen=gen, tp=tp, ttft_s=ttft, tpot_s=tpot,
                      prefill_bound="compute", decode_bound="memory", memory_bytes=mem, capacity_bytes=cap,
                      usd_per_hour=price)


# -- hand-built frontier -------------------------------------------------------------------------------------

def test_point_arithmetic():
    # gen 11: e2e = 0.1 + 10 * 0.01 = 0.2 s; 8 sequences on 2 GPUs: 8 * 11 / 0.2 = 440 tok/s, 220 per GPU;
    # per user 11 / 0.2 = 55 tok/s; $2/GPU-hour: 2 * 2 / 3600 $/s / 440 tok/s * 1e6 = 2.5252... $/Mtok
    p = _pt(batch=8, tp=2, price=2.0)
    assert p.e2e_s == pytest.approx(0.2)
    assert p.tokens_per_s == pytest.approx(440)
    assert p.tokens_per_s_per_gpu == pytest.approx(220)
    assert p.tokens_per_s_per_user == pytest.approx(55)
    assert p.usd_per_million_tokens == pytest.approx(4 / 3600 / 440 * 1e6)
    assert p.label == "b8 tp2 native" and p.fits is True


def test_pareto_and_slo_on_a_hand_built_frontier():
    # per-user and per-GPU tokens/s (gen 11, ttft 0.1, e2e = 0.1 + 10 tpot):
    #   b1 tpot 10ms: e2e 0.2  -> user 55,    gpu 55
    #   b4 tpot 12ms: e2e 0.22 -> user 50,    gpu 200
    #   b8 tpot 20ms: e2e 0.3  -> user 36.7,  gpu 293.3
    #   b16 tpot 40ms: e2e 0.5 -> user 22,    gpu 352
    #   b6 tpot 30ms: e2e 0.4  -> user 27.5,  gpu 165   (dominated by b8: slower and less throughput)
    #   b32 tpot 60ms: e2e 0.7 -> user 15.7,  gpu 502.9 but does not fit (mem 20 > cap 10)
    pts = [_pt(batch=1, tpot=0.010), _pt(batch=4, tpot=0.012), _pt(batch=8, tpot=0.020),
           _pt(batch=16, tpot=0.040), _pt(batch=6, tpot=0.030), _pt(batch=32, tpot=0.060, mem=20.0)]
    assert [p.batch for p in pareto(pts)] == [1, 4, 8, 16]
    assert pick_slo(pts)["a"].batch == 16                          # no SLO: most tok/s/GPU that fits
    assert pick_slo(pts, max_tpot_s=0.025)["a"].batch == 8         # b16 (40 ms) is over the SLO
    assert pick_slo(pts, max_tpot_s=0.011)["a"].batch == 1
    assert pick_slo(pts, max_ttft_s=0.05) == {"a": None}           # every TTFT is 100 ms
    # per device, and the other device's points do not interfere
    both = pts + [_pt(hw="b", batch=2, tpot=0.005)]
    picks = pick_slo(both, max_tpot_s=0.025)
    assert picks["a"].batch == 8 and picks["b"].batch == 2


# -- the sweep equals estimate -------------------------------------------------------------------------------

def test_sweep_equals_estimate_at_every_point_and_shares_traces():
    r = sweep(toy_source(), hw=["a100", "h100"], batch=[1, 4], prompt=[16, 32], gen=[12], weights=[None, "int4"],
              tp=[1, 2], rules=RULES)
    assert len(r.points) == 2 * 2 * 2 * 2 * 2
    # graphs traced (llm/poly.py): prefill at 2 batches x 2 prompts, decode at 2 batches x the ends of all the
    # decode ranges (past 16 and 32 + 10 = 42) -> 4 + 4 = 8, and no more for the second device, dtype or TP
    one = sweep(toy_source(), hw="a100", batch=[1, 4], prompt=[16, 32], gen=[12], rules=RULES)
    assert r.traces == one.traces == 8
    for p in r.points[::3]:
        e = estimate(toy_source(), hw=p.hw, batch=p.batch, prompt=p.prompt, gen=p.gen, weights=p.weights,
                     tp=p.tp, rules=RULES).configs[0]
        assert p.ttft_s == pytest.approx(e.ttft_s, rel=1e-12)
        assert p.tpot_s == pytest.approx(e.tpot_s, rel=1e-12)
        assert p.memory_bytes == pytest.approx(e.memory.total_bytes, rel=1e-12)
        assert p.fits == e.fits
        assert p.decode_bound == e.decode.analysis.totals.bound


def test_sweep_json_csv_markdown():
    r = sweep(toy_source(), hw=["a100", "h100"], batch=[1, 8], prompt=[16], gen=[4], rules=RULES,
              usd_per_hour={"a100": 1.5, "h100": 3.0}, max_tpot_s=1.0)
    d = json.loads(render(r, "json"))
    assert d["kind"] == "llm_sweep" and len(d["points"]) == 4
    assert d["points"][0]["usd_per_million_tokens"] > 0
    assert set(d["best"]) == {"a100-80gb-sxm", "h100-sxm"}
    csv = render(r, "csv").splitlines()
    assert len(csv) == 5 and "frontier" in csv[0] and "tokens_per_s_per_gpu" in csv[0]
    md = render(r, "markdown")
    assert "| tok/s/GPU" in md and "$/Mtok" in md and "cheapest under the SLO" in md
    html = render(r, "html")
    assert "<svg" in html and "b8 tp1 native" in html
    pytest.importorskip("matplotlib")
    assert render(r, "png")[:8] == b"\x89PNG\r\n\x1a\n"


def test_sweep_errors_before_anything_is_built(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("built the model")

    monkeypatch.setattr(importlib.import_module("graphroof.llm.estimate"), "open_source", boom)
    with pytest.raises(InputError, match="not one of the swept devices"):
        sweep("llama-2-7b", hw=["a100"], usd_per_hour={"h100": 2.0})
    with pytest.raises(InputError, match="--tpot|--max-tpot"):
        sweep("llama-2-7b", hw=["a100"], max_tpot_s=0)
    with pytest.raises(InputError, match="--batch"):
        sweep("llama-2-7b", hw=["a100"], batch=[0])


# -- CLI end to end on a tiny traced Llama -------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory):
    p = tmp_path_factory.mktemp("tiny") / "config.json"
    p.write_text(json.dumps(TINY))
    return p


def test_cli_sweep_tiny_llama(tiny_config, tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["sweep", str(tiny_config), "--hw", "a100,h100", "--batch", "1,4", "--prompt", "16",
                 "--gen", "8", "--kv", "bf16,fp8", "--max-tpot", "50ms", "-f", "json", "-o", str(out)]) == 0
    d = json.loads(out.read_text())
    assert len(d["points"]) == 2 * 2 * 2
    assert {p["kv"] for p in d["points"]} == {"bf16", "fp8"}
    assert d["slo"]["max_tpot_s"] == pytest.approx(0.05)
    assert main(["sweep", str(tiny_config), "--hw", "a100", "--batch", "1,2", "--prompt", "16", "--gen", "4"]) == 0
    text = capsys.readouterr().out
    assert "tok/s/user" in text and "best per device" in text


@pytest.mark.parametrize("argv, msg", [
    (["--tp", "3"], "--tp 3"),                                     # 4 heads: 3 does not divide them
    (["--prompt", "600"], "512"),                                  # past max_position_embeddings
    (["-o", "/nonexistent-dir/x.json"], "does not exist"),
    (["--usd-per-hour", "1.5"], "DEVICE=PRICE"),                   # two devices: name each
    (["--max-tpot", "fast"], "--max-tpot"),
    (["-f", "png"], "-o"),
])
def test_cli_sweep_errors_are_one_line(tiny_config, capsys, argv, msg):
    assert main(["sweep", str(tiny_config), "--hw", "a100,h100", "--prompt", "16", "--gen", "4", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("graphroof: error:") and msg in err and len(err.strip().splitlines()) == 1


# -- any model over the batch --------------------------------------------------------------------------------

def test_solve_critical_on_hand_built_lines():
    # compute 1 + 2B us, memory 10 + 0.5B us: equal at B* = (10 - 1) / (2 - 0.5) = 6
    pts = [BatchPoint("a", b, 0, 0, (1 + 2 * b) * 1e-6, (10 + 0.5 * b) * 1e-6, 0.0, "", 0, 0) for b in (1, 2, 8)]
    c = solve_critical(pts)
    assert c["critical_batch_exact"] == pytest.approx(6) and c["critical_batch"] == 6
    bent = pts[:2] + [BatchPoint("a", 8, 0, 0, 99e-6, 14e-6, 0.0, "", 0, 0)]
    assert solve_critical(bent)["critical_batch"] is None and "not affine" in solve_critical(bent)["reason"]
    never = [BatchPoint("a", b, 0, 0, b * 1e-6, (5 + b) * 1e-6, 0.0, "", 0, 0) for b in (1, 2)]
    assert solve_critical(never)["critical_batch"] is None


def test_batch_sweep_onnx_solved_batch_matches_direct_analyses(tmp_path):
    pytest.importorskip("onnx")
    import graphroof
    from graphroof.sweeps import batch_sweep
    from tests.frontends._onnx_build import F32, init, model, node, save, vi

    D = 1024
    m = model([node("MatMul", ["x", "w"], ["y"], name="/fc/MatMul")], [vi("x", F32, ["batch", D])], ["y"],
              [init("w", (D, D))])
    p = save(tmp_path, m)
    r = batch_sweep(str(p), hw=["a100", "h100"], batch=[1, 2, 64])
    assert [q.batch for q in r.points] == [1, 2, 64, 1, 2, 64]
    for hw in ("a100-80gb-sxm", "h100-sxm"):
        c = r.critical_batch[hw]
        b = c["critical_batch"]
        assert b and b > 1
        # independent path: direct analyses at b and b - 1 straddle the crossing
        at = graphroof.analyze(str(p), hw=hw, dims={"batch": b}).totals
        below = graphroof.analyze(str(p), hw=hw, dims={"batch": b - 1}).totals
        assert at.t_compute_s >= at.t_memory_s and below.t_compute_s < below.t_memory_s
    text = render(r, "terminal")
    assert "compute-bound batch" in text and "samples/s" in text
    assert "<svg" in render(r, "html")


def test_cli_analyze_batch_list_is_a_batch_sweep(tmp_path, capsys):
    pytest.importorskip("onnx")
    from tests.frontends._onnx_build import F32, init, model, node, save, vi

    D = 1024
    m = model([node("MatMul", ["x", "w"], ["y"], name="/fc/MatMul")], [vi("x", F32, ["batch", D])], ["y"],
              [init("w", (D, D))])
    p = save(tmp_path, m)
    out = tmp_path / "b.json"
    assert main(["analyze", str(p), "--hw", "h100", "--batch", "1,2,64", "-f", "json", "-o", str(out)]) == 0
    import json

    d = json.loads(out.read_text())
    assert [q["batch"] for q in d["points"]] == [1, 2, 64]
    # the same figures as the sweep API
    from graphroof.sweeps import batch_sweep

    r = batch_sweep(str(p), hw=["h100"], batch=[1, 2, 64])
    assert d["points"][2]["t_s"] == pytest.approx(r.points[2].t_s)
    # one analysis only options are refused with one line
    assert main(["analyze", str(p), "--batch", "1,2", "--ops"]) == 1
    assert "--ops shows one analysis" in capsys.readouterr().err


# -- early errors: from argv and the config alone, nothing built -----------------------------------------------

@pytest.mark.parametrize("argv, msg", [
    (["llm", "llama-2-7b", "--prompt", "9000"], "maximum of 4096 positions"),
    (["llm", "llama-2-7b", "--prompt", "4000", "--gen", "200"], "lower --gen to <= 96"),
    (["llm", "llama-2-7b", "--tp", "3"], "--tp 3 does not divide the model's 32 attention heads"),
    (["llm", "llama-2-7b", "-o", "/nonexistent-dir/r.txt"], "does not exist"),
    (["sweep", "llama-3-8b", "--tp", "1,3"], "--tp 3 does not divide"),
    (["sweep", "llama-3-8b", "--prompt", "512,9000"], "maximum of 8192 positions"),
    (["analyze", "gpt2", "--seq", "2048"], "gpt2's maximum of 1024 positions"),  # llm's message (issue 27)
    (["analyze", "resnet50", "-o", "/nonexistent-dir/r.json"], "does not exist"),
])
def test_errors_known_from_argv_and_config_come_before_building(monkeypatch, capsys, argv, msg):
    def boom(*a, **k):
        raise AssertionError("built the model")

    import graphroof.api

    monkeypatch.setattr(importlib.import_module("graphroof.llm.estimate"), "open_source", boom)
    monkeypatch.setattr(graphroof.api, "analyze", boom)
    monkeypatch.setattr(graphroof.api, "load", boom)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("graphroof: error:") and msg in err and len(err.strip().splitlines()) == 1


def test_streamed_sweep_writes_the_same_rows_and_keeps_the_same_frontier(tiny_config, tmp_path, capsys):
    """--stream: each point's CSV row as it is priced (constant memory), the same rows as the buffered CSV less its
    frontier / slo_pick columns; the running frontier and picks equal the ones computed over all points."""
    import csv

    grid = ["--hw", "a100,h100", "--batch", "1,2,4,8", "--prompt", "16,32", "--gen", "4,8", "--kv", "bf16,fp8",
            "--max-tpot", "1ms"]
    whole, streamed = tmp_path / "whole.csv", tmp_path / "streamed.csv"
    assert main(["sweep", str(tiny_config), *grid, "-f", "csv", "-o", str(whole), "-q"]) == 0
    assert main(["sweep", str(tiny_config), *grid, "-f", "csv", "--stream", "-o", str(streamed)]) == 0
    err = capsys.readouterr().err
    a = list(csv.DictReader(whole.open()))
    b = list(csv.DictReader(streamed.open()))
    assert len(a) == len(b) == 2 * 4 * 2 * 2 * 2
    assert [{k: v for k, v in r.items() if k not in ("frontier", "slo_pick")} for r in a] == b
    assert "64 points streamed" in err
    for hw in ("a100-80gb-sxm", "h100-sxm"):
        front = [f"b{r['batch']} tp{r['tp']} kv={r['kv']}" for r in a if r["hw"] == hw and r["frontier"] == "True"]
        line = next(x for x in err.splitlines() if x.strip().startswith(f"{hw}:"))
        assert all(label in line for label in front)
        picks = [f"pick b{r['batch']} tp{r['tp']} kv={r['kv']}" for r in a if r["hw"] == hw and r["slo_pick"] == "True"]
        assert all(p in line for p in picks) and (picks or "no point meets the SLO" in line)


def test_running_frontier_equals_the_whole_computation():
    from graphroof.sweeps import RunningFrontier, SweepPoint, pareto, pick_slo

    def pt(b, ttft, tpot, mem=1.0):
        return SweepPoint(hw="d", batch=b, prompt=16, gen=8, tp=1, ttft_s=ttft, tpot_s=tpot, prefill_bound="memory",
                          decode_bound="memory", memory_bytes=mem, capacity_bytes=10.0)

    pts = [pt(1, 0.01, 0.001), pt(2, 0.01, 0.001), pt(4, 0.02, 0.0015), pt(8, 0.05, 0.004), pt(16, 0.1, 0.01, 20),
           pt(3, 0.03, 0.003), pt(8, 0.05, 0.004)]  # a duplicate (tie on both: the first is kept), one that does not fit
    run = RunningFrontier(max_tpot_s=0.0035)
    for p in pts:
        run.add(p)
    assert pareto(run.front["d"]) == pareto(pts)
    assert run.best == pick_slo(pts, max_tpot_s=0.0035)


def test_stream_needs_csv(tiny_config, capsys):
    assert main(["sweep", str(tiny_config), "--hw", "a100", "--stream"]) == 1
    assert "--stream writes CSV rows as the points are priced: use it with -f csv" in capsys.readouterr().err
