"""Wall time and peak RSS of analysing meta-device Llama-2-7B (1024 tokens) vs a bare FlopCounterMode pass.

Each measurement runs in its own subprocess, so peak RSS (``ru_maxrss``) is per measurement; each is repeated
``--repeat`` times and the median is printed.  Measured phases:

* ``reference``: build Llama-2-7B from the zoo's config on the meta device (transformers) and run one forward
  pass over a fake ``input_ids [1, 1024]`` under ``torch.utils.flop_counter.FlopCounterMode``.
* ``reference-eager``: the same on the forward path graphroof traces (transformers' packed-sequence check
  skipped, so SDPA runs with ``is_causal=True`` and no mask), for information.
* ``graphroof``: ``graphroof.analyze("llama-2-7b", hw="a100", seq=1024)``: the same build, the op-by-op
  capture, every rule, the roofline and the Analysis rows (the default path of the CLI).
* ``graphroof export``: the same with ``capture="export"`` (torch.export), for comparison.

"work" is the timed call (build + trace [+ count]); "process" adds interpreter start and imports.  Targets:
graphroof work <= 2x the reference and peak RSS <= 1 GB.

    python benchmarks/bench_torch_llama.py [--repeat 3] [--seq 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
t_start = time.perf_counter()
mode, seq = sys.argv[1], int(sys.argv[2])
import contextlib
import torch, transformers
if mode in ("reference", "reference-eager"):
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode
    from graphroof.frontends import hf, zoo
    from graphroof.frontends.hf.build import build_model, eager_prompt
    data = hf.read_config(zoo.config_path("llama-2-7b"))
    t0 = time.perf_counter()
    model, cfg, _ = build_model(data)
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    with fake:
        ids = torch.zeros(1, seq, dtype=torch.long, device="meta")
    path = eager_prompt() if mode == "reference-eager" else contextlib.nullcontext()
    with path, torch.no_grad(), fake, FlopCounterMode(display=False) as fc:
        model(input_ids=ids, use_cache=False)
    work = time.perf_counter() - t0
    flops = fc.get_total_flops()
else:
    import graphroof
    t0 = time.perf_counter()
    a = graphroof.analyze("llama-2-7b", hw="a100", seq=seq, capture="export" if mode == "export" else "dispatch")
    rows = a.layers
    work = time.perf_counter() - t0
    flops = a.totals.cost.flops
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"work_s": work, "process_s": time.perf_counter() - t_start, "rss_bytes": rss, "flops": flops}))
"""


def run(mode: str, seq: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(seq)], capture_output=True, text=True, env=env,
                         cwd=ROOT, check=False)
    if out.returncode:
        sys.exit(f"{mode} failed:\n{out.stderr[-2000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["wall_s"] = time.perf_counter() - t0
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--no-export", action="store_true", help="skip the torch.export variant")
    args = ap.parse_args()
    modes = ["reference", "reference-eager", "graphroof"] + ([] if args.no_export else ["export"])
    results: dict[str, list[dict]] = {m: [] for m in modes}
    for _ in range(args.repeat):
        for m in modes:  # interleaved, so drift hits every variant alike
            results[m].append(run(m, args.seq))
    med = {m: {k: statistics.median(r[k] for r in rs) for k in ("work_s", "process_s", "rss_bytes", "flops")}
           for m, rs in results.items()}
    ref = med["reference"]
    label = {"reference": "FlopCounterMode pass (reference)", "reference-eager": "FlopCounterMode, graphroof's path",
             "graphroof": "graphroof analyze (dispatch)", "export": "graphroof analyze (torch.export)"}
    print(f"Llama-2-7B on the meta device, input_ids [1, {args.seq}], median of {args.repeat} runs; "
          f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    print(f"{'variant':36s} {'work s':>8s} {'process s':>10s} {'peak RSS MB':>12s} {'TFLOP':>8s} {'work ratio':>11s}")
    for m in modes:
        r = med[m]
        print(f"{label[m]:36s} {r['work_s']:8.2f} {r['process_s']:10.2f} {r['rss_bytes'] / 1e6:12.0f} "
              f"{r['flops'] / 1e12:8.2f} {r['work_s'] / ref['work_s']:10.2f}x")
    g = med["graphroof"]
    print(f"\nratio graphroof / reference: work {g['work_s'] / ref['work_s']:.2f}x (target <= 2x), "
          f"process {g['process_s'] / ref['process_s']:.2f}x; graphroof peak RSS {g['rss_bytes'] / 1e6:.0f} MB "
          f"(target <= 1000 MB)")
    print("FLOP columns: over fake meta tensors SDPA decomposes to bmm, which FlopCounterMode counts as the full "
          "L x L square; graphroof counts the causal half (S(S+1)/2 pairs).  \"graphroof's path\" runs the "
          "reference with transformers' packed-sequence check skipped, as graphroof does (is_causal SDPA, no mask).")


if __name__ == "__main__":
    main()
