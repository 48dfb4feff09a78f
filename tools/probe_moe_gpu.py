"""Probe PyTorch's CUTLASS grouped GEMM and an eager MoE prefill on the local NVIDIA GPU.

Two questions the bundled rows left open (``graphroof validate --dataset torch_gpu``):

* ``grouped``: the H200's ``torch._grouped_mm`` rows at a few rows per expert run at the H100's speed (Mixtral
  gate+up, 8 experts x 2 rows: 715 us on the H200, 670 us on the H100), not 1.4x faster as the bandwidth would
  give.  PyTorch's sm90 kernel (aten/src/ATen/native/cuda/GroupMM.cu) takes a 64 x 128 tile in a 2 x 1 cluster
  when the mean rows per group are <= 128.  This sweeps the rows per expert across the tile and cluster edges
  (64 / 65, 128 / 129 rows) and the experts that receive rows, and records the kernels' names (tile, schedule);
* ``moe``: an eager transformers MoE prefill (Qwen3-30B-A3B, DeepSeek-V2-Lite shapes from the zoo's configs,
  random bf16 weights) is 38-54% slower than ``graphroof llm --runtime pytorch-eager`` predicts on the H100.  This
  profiles a 4-layer copy of each (torch.profiler: every kernel's name, count and device time, and the host time of
  each aten op) so the missing time can be placed, and times the whole models when there is time left.

Method as tools/measure_gpu.py (its Timer: CUDA-graph replay medians for kernels, the eager Python call for the
models).  Run on a GPU machine: ``python3 tools/probe_moe_gpu.py --out DIR [--parts grouped,moe,full]``.
"""

from __future__ import annotations

import argparse
import gzip
import inspect
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools.measure_gpu import (  # noqa: E402
    Timer,
    bf16_model,
    eager_prefill,
    gpu_run_dir,
    kernels_of,
    reps_for,
    write,
)

#: name -> (experts, K, N) of ``y = x @ w[e]``, w stored [E, N, K] and passed transposed (as the bundled rows)
SHAPES = {"mixtral.gate_up": (8, 4096, 28672), "mixtral.down": (8, 14336, 4096),
          "qwen3-30b-a3b.gate_up": (128, 2048, 1536), "qwen3-30b-a3b.down": (128, 768, 2048)}
ZOO = Path(__file__).resolve().parents[1] / "graphroof" / "frontends" / "zoo_configs"


def _cases() -> list[tuple[str, int, int]]:
    """(shape, experts receiving rows, rows each)."""
    out: list[tuple[str, int, int]] = []
    for name, (e, _, _) in SHAPES.items():
        pers = (1, 2, 8, 32, 64, 65, 96, 128, 129, 192, 256) if name.startswith("mixtral") else (1, 8, 64, 65, 128,
                                                                                                   129, 256)
        out += [(name, e, p) for p in pers]
    out += [("mixtral.gate_up", t, p) for t, p in ((1, 1), (2, 1), (4, 1), (1, 64), (4, 64), (1, 65), (4, 65))]
    return out


def grouped(t: Timer, out: Path) -> None:
    rows: list[dict] = []
    names: list[str] = []
    weights: dict[str, torch.Tensor] = {}
    for shape, touched, per in _cases():
        e, k, n = SHAPES[shape]
        if shape not in weights:
            weights = {shape: torch.randn(e, n, k, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)}
        w = weights[shape]
        counts = [per if i < touched else 0 for i in range(e)]
        offs = torch.tensor(list(itertools.accumulate(counts)), device="cuda", dtype=torch.int32)
        total = touched * per
        x = torch.randn(total, k, device="cuda", dtype=torch.bfloat16)
        flops = 2.0 * total * n * k
        def fn(x: torch.Tensor = x, w: torch.Tensor = w, offs: torch.Tensor = offs) -> Any:
            return torch._grouped_mm(x, w, offs=offs)
        try:
            ts = t.graph(fn, reps_for(flops))
        except Exception as exc:  # noqa: BLE001
            print(f"grouped {shape} touched={touched} per={per}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
            continue
        wbytes = touched * k * n * 2
        rows.append({"shape": shape, "experts": e, "experts_touched": touched, "rows_per_expert": per,
                     "rows": total, "K": k, "N": n, "time_s": ts, "weight_bytes_touched": wbytes,
                     "weight_bytes_per_s": wbytes / ts, "tflops": flops / ts / 1e12})
        print(f"grouped {shape} touched={touched} per={per}: {ts * 1e6:.1f} us, {wbytes / ts / 1e12:.2f} TB/s",
              flush=True)
        if touched == e and per in (1, 64, 65, 128, 129, 256):
            for key, calls, us in kernels_of(fn):
                names.append(f"{shape} per={per}: {calls} x {us / calls:.1f} us  {key[:600]}")
        write(out / "grouped_sweep.csv", rows)
    (out / "grouped_kernels.txt").write_text("\n".join(names) + "\n")


def _config(name: str, layers: int | None) -> Any:
    from transformers import AutoConfig

    raw = json.loads((ZOO / f"{name}.json").read_text())
    kind = raw.pop("model_type")
    raw.pop("architectures", None)
    if layers is not None:
        raw["num_hidden_layers"] = layers
    cfg = AutoConfig.for_model(kind, **raw)
    cfg._attn_implementation = "sdpa"
    return cfg


def _build(name: str, layers: int | None) -> Any:
    from transformers import AutoModelForCausalLM

    cfg = _config(name, layers)
    return bf16_model("cuda", lambda: AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16))


def _sources(llm: Any, out: Path) -> None:
    """The source of the MoE block and of the experts' forward the model runs (which ops an eager layer issues)."""
    seen, parts = set(), []
    for mod in llm.modules():
        cls = type(mod)
        if cls in seen or not any(s in cls.__name__ for s in ("Moe", "MoE", "Experts", "Sparse")):
            continue
        seen.add(cls)
        try:
            parts.append(f"# {cls.__module__}.{cls.__name__}\n{inspect.getsource(cls)}")
        except (OSError, TypeError):
            continue
    try:
        import transformers.integrations.moe as tmoe  # noqa: PLC0415

        parts.append(f"# transformers.integrations.moe\n{inspect.getsource(tmoe)}")
    except Exception as exc:  # noqa: BLE001
        parts.append(f"# transformers.integrations.moe: {exc}")
    with (out / "moe_sources.txt").open("a") as f:
        f.write("\n\n".join(parts) + "\n")


def profile_prefill(llm: Any, name: str, batch: int, seq: int, out: Path, trace: bool) -> dict:
    from torch.profiler import ProfilerActivity, profile

    ids = torch.randint(0, 30000, (batch, seq), device="cuda")
    with torch.inference_mode():
        for _ in range(3):
            llm(input_ids=ids, use_cache=False, logits_to_keep=1)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        llm(input_ids=ids, use_cache=False, logits_to_keep=1)
        torch.cuda.synchronize()
        plain = time.perf_counter() - t0
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            t0 = time.perf_counter()
            llm(input_ids=ids, use_cache=False, logits_to_keep=1)
            torch.cuda.synchronize()
            wall = time.perf_counter() - t0
    tag = f"{name}_b{batch}_s{seq}"
    avg = prof.key_averages()
    kern = [(e.key, e.count, e.device_time_total) for e in avg
            if e.device_time_total > 0 and e.device_type.name == "CUDA"]
    kern.sort(key=lambda r: -r[2])
    with (out / "moe_kernels.csv").open("a") as f:
        for key, calls, us in kern:
            f.write(json.dumps({"case": tag, "kernel": key[:300], "calls": calls, "device_us": us}) + "\n")
    (out / f"ops_{tag}.txt").write_text(avg.table(sort_by="device_time_total", row_limit=60, max_name_column_width=90))
    if trace:
        p = out / f"trace_{tag}.json"
        prof.export_chrome_trace(str(p))
        with p.open("rb") as src, gzip.open(str(p) + ".gz", "wb") as dst:
            dst.write(src.read())
        p.unlink()
    total = sum(us for _, _, us in kern)
    print(f"profile {tag}: wall {plain * 1e3:.2f} ms (profiled {wall * 1e3:.2f}), kernels {total / 1e3:.2f} ms",
          flush=True)
    return {"case": tag, "wall_s": plain, "profiled_wall_s": wall, "kernel_sum_s": total / 1e6}


def moe(t: Timer, out: Path) -> None:
    summary = []
    for name in ("qwen3-30b-a3b", "deepseek-v2-lite"):
        try:
            llm = _build(name, 4)
            _sources(llm, out)
            for b, s in ((1, 2048), (4, 2048), (1, 512)):
                summary.append(profile_prefill(llm, name, b, s, out, trace=(b, s) == (1, 2048)))
            llm = None
            torch.cuda.empty_cache()
        except Exception as exc:  # noqa: BLE001
            print(f"moe {name}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
    write(out / "moe_profile_summary.csv", summary)


def full(t: Timer, out: Path, budget_s: float, t_start: float) -> None:
    rows: list[dict] = []
    for name in ("deepseek-v2-lite", "qwen3-30b-a3b"):
        if time.perf_counter() - t_start > budget_s:
            print(f"full {name}: skipped (time)", flush=True)
            continue
        try:
            t0 = time.perf_counter()
            llm = _build(name, None)
            print(f"full {name}: built in {time.perf_counter() - t0:.1f} s", flush=True)
            impl = getattr(llm.config, "_experts_implementation", "?")
            eager_prefill(t, "cuda", llm, f"{name}-shaped", ((1, 512), (1, 2048), (4, 2048)), rows,
                          out / "moe_models.csv", experts_impl=impl)
            llm = None
            torch.cuda.empty_cache()
        except Exception as exc:  # noqa: BLE001
            print(f"full {name}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--parts", default="grouped,moe,full")
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument("--full-budget-s", type=float, default=240.0,
                    help="start a whole model only while the run is younger than this")
    a = ap.parse_args()
    t_start = time.perf_counter()
    out = gpu_run_dir(a.out)
    t = Timer("cuda", a.trials)
    parts = set(a.parts.split(","))
    if "grouped" in parts:
        grouped(t, out)
        print(f"grouped part {time.perf_counter() - t_start:.1f} s", flush=True)
    if "moe" in parts:
        moe(t, out)
        print(f"moe part {time.perf_counter() - t_start:.1f} s", flush=True)
    if "full" in parts:
        full(t, out, a.full_budget_s, t_start)
        print(f"full part {time.perf_counter() - t_start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
