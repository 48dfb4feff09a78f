"""Runtime presets as data files: loading, validation, aliases, the legacy presets' unchanged fields, the host /
device launch pipeline (hand-derived numbers) and the CLI listing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from graphroof.errors import InputError
from graphroof.fuse.runtimes import PRESET_DIR, RUNTIMES, Runtime, get_runtime, runtime_names
from graphroof.timing.stream import host_pipeline

REQUIRED = {"eager", "pytorch-eager", "pytorch-eager-amp", "fastertransformer", "compiled", "serving", "sarathi-serve", "vllm", "sglang", "tensorrt-llm", "tensorrt-llm-v0.5",
            "tensorrt", "onnxruntime", "pytorch-cuda-graph"}


def test_every_preset_file_loads_with_sources():
    files = sorted(PRESET_DIR.glob("*.toml"))
    assert {p.stem for p in files} == set(RUNTIMES)
    assert REQUIRED <= set(RUNTIMES)
    for rt in RUNTIMES.values():
        assert rt.description and rt.sources, rt.name
    names = runtime_names()
    assert len(names) == len(set(names)), "a name or alias used twice"


def test_aliases_resolve_to_their_preset():
    assert get_runtime("torch-compile") is RUNTIMES["compiled"]
    assert get_runtime("vllm").allreduce == "custom" and RUNTIMES["serving"].allreduce == "nccl"
    assert get_runtime("TRT").name == "tensorrt"
    assert get_runtime("tensorrt_llm").name == "tensorrt-llm"
    assert get_runtime(None).name == "eager"


def test_legacy_presets_keep_their_fusion_and_launch():
    # the three presets graphroof had before presets were files: same fields, so the same figures
    want = {
        "eager": (False, False, False, False, False, "kernel"),
        "compiled": (True, True, False, True, False, "kernel"),
        "serving": (True, False, True, True, True, "step"),
    }
    for name, fields in want.items():
        rt = RUNTIMES[name]
        assert (rt.fuse_vector_chains, rt.fuse_epilogues, rt.fuse_horizontal_gemms, rt.fold_batch_norm,
                rt.attention_writes_layout, rt.decode_launch) == fields, name
        assert not rt.overlap_launch and rt.host_per_kernel_s == 0.0, name
        # serving weight-only kernels dequantise once per weight tile (Marlin / TensorRT-LLM), the others per row
        assert rt.gqa_shared_kv and rt.weight_only_gemm == ("tile_dequant" if name == "serving" else "fused_dequant")
    assert RUNTIMES["serving"].cuda_graphs and not RUNTIMES["compiled"].cuda_graphs


def test_sarathi_serve_is_serving_with_the_2024_gemm_schedule():
    # the kernels Vidur profiled: the serving preset's fusion, launches and kernels, only the cuBLAS 12.1 schedule
    from dataclasses import fields

    old, new = RUNTIMES["sarathi-serve"], RUNTIMES["serving"]
    assert get_runtime("vidur-profiling") is old
    assert old.gemm_schedule == "waves" and new.gemm_schedule == "stream_k"
    same = {"name", "aliases", "engine", "description", "sources", "path", "gemm_schedule"}
    for f in fields(Runtime):
        if f.name not in same:
            assert getattr(old, f.name) == getattr(new, f.name), f.name
    assert "torch == 2.2.2" in old.sources["gemm_schedule"] and "sarathi-serve" in new.sources["gemm_schedule"]


def test_engine_capabilities_that_differ():
    v05, new = RUNTIMES["tensorrt-llm-v0.5"], RUNTIMES["tensorrt-llm"]
    assert not v05.gqa_shared_kv and new.gqa_shared_kv      # masked MHA per query head vs XQA
    assert v05.allreduce == "nccl" and new.allreduce == "custom"
    assert not v05.cuda_graphs and new.cuda_graphs
    pe = RUNTIMES["pytorch-eager"]
    assert pe.overlap_launch and 5e-6 <= pe.host_overhead_per_kernel_s <= 100e-6
    assert RUNTIMES["tensorrt"].overlap_launch and RUNTIMES["tensorrt"].host_overhead_per_kernel_s == 0.0


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "mine.toml"
    p.write_text(text)
    return p


def test_user_preset_file_is_read_and_validated(tmp_path):
    p = _write(tmp_path, 'name = "my-engine"\n[fusion]\nvector_chains = true\n[launch]\noverlap = true\n'
               'host_overhead_per_kernel_s = 2e-6\n[kernels]\nallreduce = "nvls"\n[sources]\nfusion = "my docs"\n')
    rt = get_runtime(str(p))
    assert isinstance(rt, Runtime) and rt.name == "my-engine" and rt.fuse_vector_chains
    assert rt.overlap_launch and rt.host_overhead_per_kernel_s == 2e-6 and rt.allreduce == "nvls"
    assert not rt.fuse_epilogues  # absent keys keep the defaults


@pytest.mark.parametrize("text, says", [
    ('name = "x"\nfusoin = {}\n', "unknown key 'fusoin'"),
    ('name = "x"\n[fusion]\nepilogue = true\n', "[fusion].epilogue"),
    ('name = "x"\n[fusion]\nepilogues = "yes"\n', "must be true or false"),
    ('name = "x"\n[kernels]\nallreduce = "mpi"\n', "nccl, custom, nvls"),
    ('name = "x"\n[launch]\nhost_overhead_per_kernel_s = -1\n', "seconds in [0, 1]"),
    ('name = "X Y"\n', "'name' must be"),
    ('name = "x"\n[fusion\n', "not valid TOML"),
])
def test_bad_preset_files_are_one_line_errors(tmp_path, text, says):
    p = _write(tmp_path, text)
    with pytest.raises(InputError) as e:
        get_runtime(str(p))
    assert says in str(e.value) and "\n" not in str(e.value)


def test_unknown_name_lists_the_presets():
    with pytest.raises(InputError) as e:
        get_runtime("tensorflow")
    msg = str(e.value)
    assert "unknown runtime preset 'tensorflow'" in msg and "pytorch-eager" in msg and "tensorrt" in msg
    with pytest.raises(InputError, match="not found"):
        get_runtime("/no/such/preset.toml")


def test_host_pipeline_hand_derived():
    # device-bound start: issued at 2, 4, 6 us; ends max(2, 0) + 10 = 12, max(4, 12) + 1 = 13, max(6, 13) + 1 = 14
    assert host_pipeline([10, 1, 1], [2, 2, 2]) == [12, 1, 1]
    # host-bound: issued at 5, 10, 15; ends 6, 11, 16: each kernel adds its dispatch, the step is 3 x 5 + 1
    assert host_pipeline([1, 1, 1], [5, 5, 5]) == [6, 5, 5]
    # no host cost: the device times, summed as before
    assert host_pipeline([3, 4], [0, 0]) == [3, 4]


def test_host_pipeline_repeats_equal_the_unrolled_launches():
    dev, host = [7.0, 2.0, 0.5, 9.0], [1.0, 3.0, 3.0, 0.25]
    for r in (2, 5):
        rolled = host_pipeline(dev[:1] + [dev[1] * r] + dev[2:], host[:1] + [host[1] * r] + host[2:],
                               [1, r, 1, 1])
        unrolled = host_pipeline(dev[:1] + [dev[1]] * r + dev[2:], host[:1] + [host[1]] * r + host[2:])
        assert sum(rolled) == pytest.approx(sum(unrolled))
        assert rolled[0] == unrolled[0] and sum(rolled[1:2]) == pytest.approx(sum(unrolled[1:1 + r]))


def test_overlapped_launches_price_the_pipeline():
    # three small elementwise kernels (1M fp16 adds each) on a V100: ~6 MB each at ~0.7 TB/s is ~9 us of device
    # time, below the 55 + 5 us host dispatch per kernel, so the step is host-bound: 3 dispatches + the last kernel
    from graphroof.counters import count
    from graphroof.graph import BOUND, OpGraph, OpNode, TensorSpec
    from graphroof.hardware import load_hardware
    from graphroof.roofline import evaluate_graph

    hw = load_hardware("v100-sxm2-32gb")
    g = OpGraph("t")
    t = [TensorSpec((1024, 1024), "fp16") for _ in range(4)]
    for i in range(3):
        g.add_op(OpNode(f"add{i}", "aten.add", (t[i], t[i]), (t[i + 1],)))
    count(g)
    evaluate_graph(g, hw)  # launches added per kernel: device + launch, summed
    serial = [g.get(f"add{i}", BOUND) for i in range(3)]
    dev = [b.t_realistic_s - b.t_launch_s for b in serial]
    rt = get_runtime("pytorch-eager")
    h = hw.timing.launch_overhead_s + rt.host_overhead_per_kernel_s  # 5 + 9 us (an add: no library call)
    assert all(d < h for d in dev)
    evaluate_graph(g, hw, rt)
    piped = [g.get(f"add{i}", BOUND) for i in range(3)]
    # ends: h + d0, max(2h, h + d0) + d1 = 2h + d1, 3h + d2
    assert [b.t_realistic_s for b in piped] == pytest.approx([h + dev[0], h + dev[1] - dev[0], h + dev[2] - dev[1]])
    assert sum(b.t_realistic_s for b in piped) == pytest.approx(3 * h + dev[2])
    # the device waits on the host for the rest of each kernel's added time
    assert [b.t_launch_s for b in piped] == pytest.approx([b.t_realistic_s - d for b, d in zip(piped, dev)])


@pytest.mark.slow
def test_pytorch_eager_small_batch_is_host_bound():
    graphroof = pytest.importorskip("graphroof")
    pytest.importorskip("torch")
    a = graphroof.analyze("resnet-18", hw="v100-sxm2-32gb", batch=1, runtime="pytorch-eager")
    rt, hw = get_runtime("pytorch-eager"), a.hw
    from graphroof.timing.host import host_dispatch_s

    g = a.timed_graph
    working = [g.node(k) for k in g.nx.nodes if g.get(k, "bound").t_realistic_s > 0]
    host = sum(host_dispatch_s(rt, hw.timing.launch_overhead_s, nd, g.get(nd.name, "cost")) for nd in working)
    longest = max(g.get(k, "bound").t_realistic_s for k in g.nx.nodes)
    # a host-bound pipeline: the dispatches (graphroof.timing.host), then (at most) the last kernels' device time
    assert host <= a.totals.t_realistic_s <= host + longest
    eager = graphroof.analyze("resnet-18", hw="v100-sxm2-32gb", batch=1, runtime="eager")
    # ~16 us per plain kernel and ~45 us per cuDNN / cuBLAS call on the host against a few us of device time each
    assert a.totals.t_realistic_s > 1.5 * eager.totals.t_realistic_s


def test_cli_lists_presets_and_rejects_unknown():
    out = subprocess.run([sys.executable, "-m", "graphroof", "runtimes"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and all(name in out.stdout for name in REQUIRED)
    bad = subprocess.run([sys.executable, "-m", "graphroof", "analyze", "examples/textbook_ops.csv", "--runtime",
                          "nope"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "unknown runtime preset 'nope'" in bad.stderr
    assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_llm_phases_under_an_overlapped_preset_are_host_bound_and_add_up():
    # a toy decoder on an A100: every kernel is a few us, below pytorch-eager's dispatch (4 + 9 us, + 24 us
    # for a GEMM: graphroof.timing.host), so a step is its dispatches (+ at most one kernel); the per-kernel rows
    # still add up to the step
    from graphroof.llm import estimate
    from graphroof.timing.profile import timing_of
    from tests.llm.toy import RULES, toy_source

    def est(rt):
        return estimate(toy_source(), hw="a100", prompt=16, gen=8, batch=[1], rules=RULES, runtime=rt).configs[0]

    c, e = est("pytorch-eager"), est("eager")
    dec = c.decode.analysis
    from graphroof.timing.host import host_dispatch_s

    g, rt = dec.timed_graph, get_runtime("pytorch-eager")
    working = [g.node(k) for k in g.nx.nodes if g.get(k, "bound").t_realistic_s > 0]
    host = sum(host_dispatch_s(rt, timing_of(dec.hw).launch_overhead_s, nd, g.get(nd.name, "cost")) for nd in working)
    assert host * (1 - 1e-9) <= c.tpot_s <= host * 1.2
    p = dec.time_parts()
    assert p["time_roofline_s"] + p["time_derating_s"] + p["time_launch_s"] == pytest.approx(c.tpot_s)
    assert c.tpot_s > 3 * e.tpot_s  # same kernels, launches added (eager) vs dispatch-bound (pytorch-eager)


def test_autocast_adds_a_weight_cast_per_gemm():
    # a [64, 1024] x [1024, 4096] fp16 linear under torch.autocast: its fp32 weight (4 M params) is cast first, one
    # more streaming kernel of 4 B read + 2 B written per weight = 3 x the 8.39 MB fp16 weight bytes, and one more
    # launch (two host dispatches under the pipeline)
    from graphroof.counters import count
    from graphroof.graph import BOUND, OpGraph, OpNode, Role, TensorSpec
    from graphroof.hardware import load_hardware
    from graphroof.roofline import evaluate_graph
    from graphroof.timing.stream import stream_time

    hw = load_hardware("v100-sxm2-32gb")
    x, w = TensorSpec((64, 1024), "fp16"), TensorSpec((4096, 1024), "fp16", Role.WEIGHT)
    g = OpGraph("t")
    g.add_op(OpNode("fc", "aten.linear", (x, w, None), (TensorSpec((64, 4096), "fp16"),)))
    count(g)
    wbytes = g.get("fc", "cost").weight_bytes
    assert wbytes == 2 * 4096 * 1024
    amp, plain = RUNTIMES["pytorch-eager-amp"], RUNTIMES["pytorch-eager"]
    evaluate_graph(g, hw, plain)
    b0 = g.get("fc", BOUND)
    evaluate_graph(g, hw, amp)
    b1 = g.get("fc", BOUND)
    cast = stream_time(3 * wbytes, hw, "elementwise").t_s
    h = hw.timing.launch_overhead_s + plain.host_overhead_per_kernel_s
    lib = plain.host_overhead_per_library_call_s  # the GEMM is a cuBLAS call; the cast a plain kernel
    # one kernel alone: the pipeline is its dispatch(es) then its device time
    assert b0.t_realistic_s == pytest.approx(h + lib + (b0.t_realistic_s - b0.t_launch_s))
    assert b1.t_realistic_s - b1.t_launch_s == pytest.approx(b0.t_realistic_s - b0.t_launch_s + cast)
    assert b1.t_launch_s == pytest.approx(2 * h + lib)


def test_cli_takes_a_preset_file(tmp_path):
    p = _write(tmp_path, 'name = "my-engine"\ndescription = "my engine"\n[fusion]\nvector_chains = true\n'
               '[launch]\noverlap = true\n[sources]\nfusion = "my notes"\n')
    out = subprocess.run([sys.executable, "-m", "graphroof", "analyze", "examples/textbook_ops.csv", "--runtime",
                          str(p), "--hw", "a100"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "my-engine" in out.stdout  # the report names the preset it priced under
    bad = _write(tmp_path, 'name = "my-engine"\n[launch]\noverlap = "yes"\n')
    out = subprocess.run([sys.executable, "-m", "graphroof", "analyze", "examples/textbook_ops.csv", "--runtime",
                          str(bad)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "[launch].overlap must be true or false" in out.stderr
    assert "Traceback" not in out.stderr
