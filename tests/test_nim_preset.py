"""The TensorRT-engine flow of TensorRT-LLM (``tensorrt-llm-engine``: decode without CUDA graphs), NIM's preset on
top of it (``nim``: a preset ``based_on`` another, plus its server's time per request), the serving simulator's
per-request time, and the NIM rows of ``graphroof validate``."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from graphroof.errors import InputError
from graphroof.fuse import get_runtime
from graphroof.fuse.preset_file import read_preset_fields
from graphroof.serving.sim import EngineModel, simulate
from graphroof.serving.workload import Workload


def _fields(name: str) -> dict:
    rt = get_runtime(name)
    return {f.name: getattr(rt, f.name) for f in dataclasses.fields(rt)
            if f.name not in ("name", "aliases", "engine", "description", "sources", "path")}


def test_engine_flow_differs_from_the_pytorch_backend_only_in_its_decode_launches_and_host():
    # ExtendedRuntimePerfKnobConfig.cuda_graph_mode defaults to False (TensorRT engines); the 1.0+ PyTorch backend's
    # cuda_graph_config defaults to a CudaGraphConfig: the same kernels, launched one by one or replayed as a graph;
    # and the PyTorch backend's Python executor: a fitted floor per running sequence (the C++ executor: none)
    a, b = _fields("tensorrt-llm-engine"), _fields("tensorrt-llm")
    assert {k for k in a if a[k] != b[k]} == {"decode_launch", "cuda_graphs", "host_per_sequence_s"}
    assert (a["host_per_sequence_s"], b["host_per_sequence_s"]) == (0.0, pytest.approx(35e-6))
    assert (a["decode_launch"], a["cuda_graphs"]) == ("kernel", False)
    assert (b["decode_launch"], b["cuda_graphs"]) == ("step", True)
    assert get_runtime("trtllm-engine").name == "tensorrt-llm-engine"


def test_nim_is_the_engine_flow_plus_its_fitted_host_times():
    a, b = _fields("nim"), _fields("tensorrt-llm-engine")
    assert {k for k in a if a[k] != b[k]} == {"request_overhead_s", "host_per_sequence_s"}
    assert a["request_overhead_s"] == pytest.approx(0.0044) and a["host_per_sequence_s"] == pytest.approx(64.6e-6)
    nim = get_runtime("nim")
    assert nim.sources["request_overhead_s"].startswith("fitted on graphroof/validate/data/nim_llm_h100.csv")
    assert nim.sources["decode"] == get_runtime("tensorrt-llm-engine").sources["decode"]  # inherited [sources]
    assert get_runtime("nvidia-nim") is nim


def test_based_on_overlays_a_builtin_preset(tmp_path):
    p = tmp_path / "mine.toml"
    p.write_text('name = "mine"\nbased_on = "vllm"\n[launch]\ndecode = "kernel"\n[kernels]\nallreduce = "nccl"\n')
    kw = read_preset_fields(p)
    vllm = get_runtime("vllm")
    assert kw["name"] == "mine" and kw["aliases"] == ()
    assert kw["decode_launch"] == "kernel" and kw["allreduce"] == "nccl"
    assert kw["fuse_horizontal_gemms"] == vllm.fuse_horizontal_gemms and kw["gemm_schedule"] == vllm.gemm_schedule
    assert kw["sources"]["vector_chains"] == vllm.sources["vector_chains"]


@pytest.mark.parametrize("body, match", [
    ('based_on = "no-such-engine"', "based_on = 'no-such-engine' is not a built-in preset; use one of"),
    ('based_on = "nim"', "is itself based on another preset; name 'tensorrt-llm-engine' instead"),
    ('based_on = 3', "is not a built-in preset"),
])
def test_bad_base_is_one_line_error(tmp_path, body, match):
    p = tmp_path / "x.toml"
    p.write_text(f'name = "x"\n{body}\n')
    with pytest.raises(InputError, match=match) as e:
        get_runtime(str(p))
    assert "\n" not in str(e.value)


def test_decode_launches_and_request_time_by_hand(capsys):
    """gpt2, 32-token prompt, 8 generated: one decode step runs 90 kernels.  Launched one by one (the engine flow)
    each pays h100-sxm's launch_overhead_s 4 us; replayed as one CUDA graph (tensorrt-llm) the step pays
    graph_launch_overhead_s 20 us once: TPOT differs by 90 x 4 - 20 = 340 us.  nim adds 4.4 ms to TTFT only."""
    from graphroof.cli import main

    out = {}
    for rt in ("tensorrt-llm", "tensorrt-llm-engine", "nim"):
        capsys.readouterr()
        assert main(["llm", "gpt2", "--hw", "h100-sxm", "--prompt", "32", "--gen", "8", "--runtime", rt,
                     "-f", "json"]) == 0
        out[rt] = json.loads(capsys.readouterr().out)["configs"][0]
    kernels = sum(layer["n_kernels"] for layer in out["tensorrt-llm-engine"]["decode"]["layers"])
    assert kernels == 90
    assert out["tensorrt-llm-engine"]["tpot_s"] - out["tensorrt-llm"]["tpot_s"] == pytest.approx(90 * 4e-6 - 20e-6)
    assert out["nim"]["ttft_s"] - out["tensorrt-llm-engine"]["ttft_s"] == pytest.approx(0.0044)
    assert out["nim"]["tpot_s"] == pytest.approx(out["tensorrt-llm-engine"]["tpot_s"])


def _step(n, o, m, s, **kw):
    """Every step 1 ms, whatever it holds."""
    return np.full(np.broadcast(np.asarray(n), np.asarray(o), np.asarray(m), np.asarray(s)).shape, 1e-3)


def test_serve_charges_the_request_time_before_the_scheduler_sees_it():
    """Two requests of 16 + 3 tokens sent at t = 0, a 5 ms request time, 1 ms steps: the scheduler sees both at
    5 ms, one prefill step emits both first tokens at 6 ms (TTFT 6 ms from the send), two decode steps end them at
    8 ms.  Without the request time: TTFT 1 ms, finish 3 ms."""
    wl = Workload(np.zeros(2), np.full(2, 16), np.full(2, 3), np.zeros(2, dtype=np.int64))
    for req, ttft, end in ((0.005, 0.006, 0.008), (0.0, 0.001, 0.003)):
        out = simulate(EngineModel(_step, 10**6, 16, 256, 8, request_s=req, attention_arg=False), wl)
        assert np.allclose(out.arrival, 0.0)
        assert np.allclose(out.first_token - out.arrival, ttft) and np.allclose(out.finish, end)


def test_closed_loop_user_sends_again_at_the_finish():
    """One user, two requests of 16 + 3 tokens, 5 ms request time, 1 ms steps: the first is sent at 0, seen at
    5 ms, first token 6 ms, done 8 ms; the second is sent at 8 ms, seen at 13 ms, first token 14 ms, done 16 ms."""
    wl = Workload(np.array([0.0, np.nan]), np.full(2, 16), np.full(2, 3), np.zeros(2, dtype=np.int64), users=1)
    out = simulate(EngineModel(_step, 10**6, 16, 256, 8, request_s=0.005, attention_arg=False), wl)
    assert np.allclose(out.arrival, [0.0, 0.008])
    assert np.allclose(out.first_token, [0.006, 0.014]) and np.allclose(out.finish, [0.008, 0.016])


def test_nim_rows_stay_within_their_guard():
    """Regression guard, not the target: 2026-11-27 the 30 concurrency-1 rows (TTFT, ITL, tok/s of Llama-3.1-8B
    on one H100 and Llama-3.3-70B TP2) scored median 4.6%, worst 8.7%; the rows at concurrency > 1 are not
    covered (tools/nim_serve.py scores them)."""
    from graphroof.validate import validate

    r = validate("nim")
    scored = [x for x in r.rows if x.scored]
    assert len(scored) == 30 and all(x.inputs["concurrency"] == 1 for x in scored)
    errs = sorted(abs(x.error) for x in scored)
    assert errs[len(errs) // 2] <= 0.07 and errs[-1] <= 0.12
    assert {x.figure for x in scored} == {"ttft", "tpot", "throughput"}
    assert all(x.not_covered.startswith("concurrency > 1") for x in r.rows if not x.scored)


def test_closed_loop_users_start_spread_over_one_request():
    """Four users, requests of 16 + 3 tokens, 1 ms steps: one request takes its prefill (one 16-token chunk, 1 ms)
    and 2 decode steps (2 ms) = 3 ms, so the users' first requests go at 0, 0.75, 1.5 and 2.25 ms."""
    n = 8
    arrival = np.full(n, np.nan)
    arrival[:4] = 0.0
    wl = Workload(arrival, np.full(n, 16), np.full(n, 3), np.zeros(n, dtype=np.int64), users=4)
    out = simulate(EngineModel(_step, 10**6, 16, 256, 8, attention_arg=False), wl)
    assert np.allclose(out.arrival[:4], [0.0, 0.00075, 0.0015, 0.00225])
    assert np.all(np.isfinite(out.finish)) and np.all(out.arrival[4:] >= out.arrival[:4].min())


def test_closed_loop_figures_are_the_steady_state():
    """Seven requests of two users: the steady ones are requests 3-5 (each user's first and last left out); with
    their e2e 2, 4 and 6 s the throughput is users / mean e2e = 2 / 4 = 0.5 requests/s, 5 output tokens each:
    2.5 tok/s."""
    from graphroof.serving.metrics import rate_point, steady
    from graphroof.serving.sim import SimOut

    e2e = np.array([1.0, 1.0, 2.0, 4.0, 6.0, 1.0, 1.0])
    rec = {"ttft_s": e2e / 10, "tpot_s": e2e / 10, "e2e_s": e2e, "queue_s": np.zeros(7),
           "output_tokens": np.full(7, 5), "input_tokens": np.full(7, 10), "preemptions": np.zeros(7, np.int64)}
    assert steady(rec, 2)["e2e_s"].tolist() == [2.0, 4.0, 6.0]
    assert steady(rec, 3)["e2e_s"].tolist() == e2e.tolist()  # 7 < 3 x 3: every request counted
    steps = {f: np.array([0.0]) for f in ("start_s", "dur_s", "running", "waiting", "batch_tokens",
                                          "decode_tokens", "kv_blocks")}
    sim = SimOut(np.arange(7.0), np.arange(7.0), np.arange(7.0), np.arange(7.0) + e2e, np.zeros(7, np.int64),
                 steps, 10)
    pt = rate_point(float("nan"), sim, rec, 1, None, None, users=2)
    assert pt.requests == 3 and pt.throughput_rps == pytest.approx(0.5)
    assert pt.output_tokens_per_s == pytest.approx(2.5) and pt.e2e_s["mean"] == pytest.approx(4.0)


def test_host_work_per_sequence_floors_a_large_batch_step(capsys):
    """gpt2 at batch 256: its decode step on an H100 is far under NIM's host floor, 256 sequences x 64.6 us =
    16.5376 ms per step, so the TPOT is the floor; at batch 1 the floor (64.6 us) is under the GPU step and the
    TPOT is tensorrt-llm-engine's.  The ideal roofline never carries it."""
    from graphroof.cli import main

    def cfg(rt: str, batch: int) -> dict:
        capsys.readouterr()
        assert main(["llm", "gpt2", "--hw", "h100-sxm", "--prompt", "32", "--gen", "8", "--batch", str(batch),
                     "--runtime", rt, "-f", "json"]) == 0
        return json.loads(capsys.readouterr().out)["configs"][0]

    big, base = cfg("nim", 256), cfg("tensorrt-llm-engine", 256)
    assert base["tpot_s"] < 0.0165376 and big["tpot_s"] == pytest.approx(256 * 64.6e-6)
    assert big["tpot_ideal_s"] == pytest.approx(base["tpot_ideal_s"])
    assert cfg("nim", 1)["tpot_s"] == pytest.approx(cfg("tensorrt-llm-engine", 1)["tpot_s"])


def test_step_cost_carries_the_same_floor():
    """The serving simulator's step cost: a decode step of 200 gpt2 sequences under nim takes at least
    200 x 64.6 us = 12.92 ms; the same step under tensorrt-llm-engine is the GPU's; ideal steps have no floor."""
    from graphroof.llm import Engine, Pricing

    sc = {rt: Engine("gpt2", hw="h100-sxm", pricing=Pricing(runtime=rt)).step_cost(max_batch=256, max_context=64,
                                                                                     max_chunk=64)
          for rt in ("nim", "tensorrt-llm-engine")}
    gpu = float(sc["tensorrt-llm-engine"](0, 0, 200, 200 * 40))
    assert gpu < 0.01292
    assert float(sc["nim"](0, 0, 200, 200 * 40)) == pytest.approx(200 * 64.6e-6)
    assert float(sc["nim"](0, 0, 200, 200 * 40, ideal=True)) == pytest.approx(
        float(sc["tensorrt-llm-engine"](0, 0, 200, 200 * 40, ideal=True)))
    steps = sc["nim"](0, 0, np.array([1, 200]), np.array([40, 200 * 40]))
    assert steps[1] == pytest.approx(200 * 64.6e-6) and steps[0] == pytest.approx(
        float(sc["tensorrt-llm-engine"](0, 0, 1, 40)))


def test_report_names_the_host_floor_not_speculative_decoding(capsys):
    """Where the host floor sets the TPOT the step breakdown says so (the TPOT differs from the priced step for
    that reason, not speculative decoding)."""
    from graphroof.cli import main

    capsys.readouterr()
    assert main(["llm", "gpt2", "--hw", "h100-sxm", "--prompt", "32", "--gen", "8", "--batch", "256",
                 "--runtime", "nim"]) == 0
    text = capsys.readouterr().out
    line = next(ln for ln in text.splitlines() if ln.startswith("batch 256 decode step"))
    assert "the runtime's host work per sequence, 16.5 ms for 256 sequences, bounds it" in line
    assert "speculative" not in text
