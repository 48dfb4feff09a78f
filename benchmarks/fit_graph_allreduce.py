"""Fit the device-side latency of a small NCCL all-reduce replayed inside a CUDA graph on the gpt-fast TP rows.

    PYTHONPATH=. python benchmarks/fit_graph_allreduce.py            # fit, print the constant and the row errors
    PYTHONPATH=. python benchmarks/fit_graph_allreduce.py --check    # price every row with the profile as it is

Rows: gptfast_decode.csv (../shared/data/measured), batch-1 bf16 Llama TP 1 / 2 / 4 / 8 on A100-80GB SXM: tokens/s =
200 / e2e of ``graphroof llm MODEL --hw a100-80gb-sxm --runtime examples/gpt-fast-runtime.toml --tp N --batch 1
--prompt 5 --gen 200`` (gpt-fast's runtime: torch.compile'd decode replayed as a CUDA graph, the ``compiled`` preset
with ``decode = "step"``), i.e. :class:`graphroof.llm.Engine` end to end.  The TP 1 rows carry no collective: they anchor the rest (their error is
the GEMM / streaming model's, not the collectives').

Two constants are fitted, ``collectives.device_latency_s`` (``d``) and ``collectives.device_hop_latency_s``
(``a_d``): a collective inside a graph costs ``d + 2 (p-1) a_d + 2 (p-1)/p S / intra_bus_bw`` (ring) with the
bandwidth of the Vidur fit (host-launched NCCL, benchmarks/fit_kernel_model.py), by a grid search (0.1 us / 0.05 us
steps) on the mean |log(predicted / measured tok/s)| of the TP > 1 rows.  Each row is priced once through the Engine; the
collectives of its decode step are then re-priced at each candidate ``d`` (a step's collectives add to its time
under CUDA graphs), and ``--check`` prices the rows again end to end with the profile on disk.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measured import data_dir  # noqa: E402

from graphroof.fuse.runtimes import get_runtime  # noqa: E402
from graphroof.graph import BOUND, COST  # noqa: E402
from graphroof.hardware import load_hardware  # noqa: E402
from graphroof.llm import Engine, Pricing  # noqa: E402
from graphroof.timing import collective_time_with  # noqa: E402

HW = "a100-80gb-sxm"
PROMPT, GEN = 5, 200


RUNTIME = Path(__file__).resolve().parents[1] / "examples" / "gpt-fast-runtime.toml"


def gptfast_runtime():
    """gpt-fast's decode: torch.compile (mode="reduce-overhead"): the compiled preset's fusion, replayed as a graph
    (examples/gpt-fast-runtime.toml, what ``graphroof llm --runtime examples/gpt-fast-runtime.toml`` reads)."""
    rt = get_runtime(str(RUNTIME))
    assert rt.cuda_graphs and rt.allreduce == "nccl"
    return rt


def rows():
    """(model, tp, measured tok/s) of the bf16 Llama TP rows, each once."""
    out, seen = [], set()
    with open(data_dir() / "gptfast_decode.csv", newline="") as f:
        for r in csv.DictReader(f):
            if r["metric"] != "decode_tokens_per_s_per_user" or r["weight_dtype"] != "bf16" \
                    or not r["model"].startswith("Llama"):
                continue
            key = (r["graphroof_model"].split()[0], int(r["tp"]))
            if key not in seen:
                seen.add(key)
                out.append((*key, float(r["value"])))
    return out


def price(model, tp, hw):
    """(e2e_s, the decode step's collectives as (op, bytes, p, seconds)) through the Engine."""
    eng = Engine(model, hw=hw, pricing=Pricing(tp=tp, runtime=gptfast_runtime()))
    c = eng.estimate(prompt=PROMPT, gen=GEN, batch=1).configs[0]
    step = eng.step("decode", 1, PROMPT + GEN // 2)
    g, colls = step.timed_graph, []
    for n in g.nx.nodes:
        b = g.get(n, BOUND)
        if b is None or not b.time_model.startswith("collective"):
            continue
        node = g.node(n)
        op = "all_gather" if "gather" in (node.attrs.get("collective") or node.op) else "all_reduce"
        size = float(node.outputs[0].nbytes) if node.outputs else float(g.get(n, COST).act_write_bytes)
        colls.append((op, size, int(node.attrs.get("world_size") or 1), b.t_realistic_s - b.t_launch_s))
    return c.e2e_s, colls


def predicted(e2e_s, colls, params):
    """tok/s with the step's collectives re-priced under *params* (each of the GEN steps pays the difference)."""
    groups: dict = {}
    for op, s, p, t in colls:
        n, tt = groups.get((op, s, p), (0, 0.0))
        groups[(op, s, p)] = (n + 1, tt + t)
    delta = sum(n * collective_time_with(op, s, p, params, cuda_graphs=True).t_s - tt
                for (op, s, p), (n, tt) in groups.items())
    return GEN / (e2e_s + GEN * delta)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="price every row end to end with the profile as it is")
    args = ap.parse_args(argv)
    hw = load_hardware(HW)
    priced = []
    for model, tp, meas in rows():
        e2e, colls = price(model, tp, hw)
        priced.append((model, tp, meas, e2e, colls))
        print(f"{model:12s} TP{tp}: measured {meas:7.2f} tok/s, predicted {GEN / e2e:7.2f} ({GEN / e2e / meas - 1:+.1%})",
              flush=True)
    if args.check:
        return
    base = hw.collectives
    assert base is not None

    def loss(x):
        params = dataclasses.replace(base, device_latency_s=x[0], device_hop_latency_s=x[1])
        return sum(abs(math.log(predicted(e, c, params) / m)) for _, tp, m, e, c in priced if tp > 1)

    grid = [(i * 0.1e-6, j * 0.05e-6) for i in range(0, int(round(base.base_latency_s / 0.1e-6)) + 1)
            for j in range(0, int(round(base.intra_hop_latency_s / 0.05e-6)) + 1)]
    x = min(grid, key=loss)
    params = dataclasses.replace(base, device_latency_s=x[0], device_hop_latency_s=x[1])
    print(f"\n# fitted device_latency_s = {x[0]:.3g}, device_hop_latency_s = {x[1]:.3g} (mean |log err| over the "
          f"TP>1 rows {loss(x) / sum(1 for r in priced if r[1] > 1):.3f})")
    for model, tp, meas, e2e, colls in priced:
        p = predicted(e2e, colls, params)
        print(f"{model:12s} TP{tp}: measured {meas:7.2f}, fitted {p:7.2f} ({p / meas - 1:+.1%})")


if __name__ == "__main__":
    main()
