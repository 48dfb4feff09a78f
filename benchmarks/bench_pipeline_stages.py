"""Where an LLM estimate spends its time after tracing: wall time per pipeline stage (issue 16).

Scenario (the issue's): ``graphroof llm llama-2-70b --hw h100 --tp 4 --batch 1,8,32,128``, prompt 1024, gen 128.

1. **reference**: ``llm.estimate`` at batch 1 from the zoo name (model build + traces + one configuration);
2. **warm-up**: the four-batch estimate on a source replaying the reference's graphs
   (``llm.whatif.CachedSource``); it traces the grid points the reference lacks (batch 128, the second
   decode context), so it is not the measured run;
3. **measured**: the same four-batch estimate on a source replaying the warm-up's graphs: no tracing at all,
   only what every (phase, batch, context) point costs -- interpolating virtual traces (``llm/poly.py``), the
   per-graph stages of ``Pipeline.counted`` (KV-cache marking, quantization, TP split, copy, count, per-device
   costs, fusion into kernels), the phase series, memory fit and report tables.

Each stage function is wrapped (in every ``graphroof`` module that imported it) with a timer; the table shows
calls, inclusive wall seconds (a stage's time includes the stages it calls: ``map_ops`` inside
``mark_kv_cache``), self seconds (without nested timed stages), self seconds without the garbage collector's
passes that ran inside the stage (the steadiest figure on a loaded machine: a full collection walks every live
object, ~1 s here, and lands in whichever stage happens to allocate), the share of the measured estimate, and the
ratio of the stage's wall time to the reference's wall time measured in the same run (which scales with
the machine's load like the stages do, so ratios compare across runs on a shared machine).  ``gc`` is the
time the cyclic garbage collector ran during the measured estimate (it runs inside whatever stage is
allocating, so it is also part of those stages' times).  Peak RSS is the whole process's so far.

Run: ``python benchmarks/bench_pipeline_stages.py [--repeat 2] [--model llama-2-70b] [--no-stages] [--cli-gc]``.
``--repeat N`` runs the measured estimate N times and keeps the fastest; ``--no-stages`` times the estimate
without the wrappers (their own cost is about a microsecond per call); ``--cli-gc`` runs with the collector
threshold the CLI sets for a command (:data:`graphroof.cli.GC_THRESHOLD`; the API keeps Python's default).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tabulate import tabulate  # noqa: E402


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Stages:
    """Inclusive and self wall time per wrapped function (a stack of running stages gives the self time)."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = defaultdict(int)
        self.wall: dict[str, float] = defaultdict(float)
        self.own: dict[str, float] = defaultdict(float)
        self.gc: dict[str, float] = defaultdict(float)   # collector time inside the stage's own code
        self.stack: list[list] = []   # [name, start, time spent in nested stages]
        self.active = False

    def wrap(self, name: str, fn):
        def timed(*args, **kwargs):
            if not self.active:
                return fn(*args, **kwargs)
            frame = [name, time.perf_counter(), 0.0]
            self.stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                dt = time.perf_counter() - frame[1]
                self.stack.pop()
                self.calls[name] += 1
                if not any(f[0] == name for f in self.stack):  # a recursive call is counted once
                    self.wall[name] += dt
                self.own[name] += dt - frame[2]
                if self.stack:
                    self.stack[-1][2] += dt

        timed.__wrapped__ = fn
        return timed

    def reset(self) -> None:
        self.calls.clear(), self.wall.clear(), self.own.clear(), self.gc.clear()


def install(stages: Stages) -> list[str]:
    """Wrap the pipeline's stage functions wherever a graphroof module holds them; returns the stage names."""
    import graphroof.llm.phases as phases
    from graphroof import roofline
    from graphroof.fuse import group
    from graphroof.graph import OpGraph
    from graphroof.llm import kvcache, poly, quant, tp

    count_mod = importlib.import_module("graphroof.counters.count")  # the package exports a function of that name

    funcs = [
        ("Pipeline.counted", phases.Pipeline, "counted"),
        ("Pipeline.prepare", phases.Pipeline, "prepare"),
        ("mark_kv_cache", kvcache, "mark_kv_cache"),
        ("requantize", quant, "requantize"),
        ("shard", tp, "shard"),
        ("shard: _insert_comms", tp, "_insert_comms"),
        ("OpGraph.map_ops", OpGraph, "map_ops"),
        ("count", count_mod, "count"),
        ("scale_costs", tp, "scale_costs"),
        ("fuse", group, "fuse"),
        ("KernelGraph.as_opgraph", group.KernelGraph, "as_opgraph"),
        ("GraphGrid.at (virtual traces)", poly.GraphGrid, "at"),
        ("roofline.evaluate", roofline, "evaluate"),
    ]
    names = []
    for label, owner, attr in funcs:
        fn = getattr(owner, attr)
        wrapped = stages.wrap(label, fn)
        if isinstance(owner, type):
            setattr(owner, attr, wrapped)
        else:  # a module function: every module that imported it by name gets the wrapper
            for mod in list(sys.modules.values()):
                if getattr(mod, "__name__", "").startswith("graphroof") and getattr(mod, attr, None) is fn:
                    setattr(mod, attr, wrapped)
        names.append(label)
    return names


class GCTimer:
    """Time spent in the cyclic garbage collector, in total and per generation."""

    def __init__(self, stages: Stages | None = None) -> None:
        self.on = False
        self._t0 = 0.0
        self.stages = stages
        self.reset()

    def reset(self) -> None:
        self.total = 0.0
        self.collections = 0
        self.by_gen = [[0, 0.0], [0, 0.0], [0, 0.0]]

    def __call__(self, phase: str, info: dict) -> None:
        if not self.on:
            return
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            dt = time.perf_counter() - self._t0
            self.total += dt
            self.collections += 1
            g = self.by_gen[min(int(info.get("generation", 0)), 2)]
            g[0] += 1
            g[1] += dt
            if self.stages is not None and self.stages.stack:  # charged to the stage that was allocating
                self.stages.gc[self.stages.stack[-1][0]] += dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-2-70b")
    ap.add_argument("--hw", default="h100")
    ap.add_argument("--tp", type=int, default=4)
    ap.add_argument("--batch", default="1,8,32,128")
    ap.add_argument("--prompt", type=int, default=1024)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--no-stages", action="store_true", help="time the estimate without stage wrappers")
    ap.add_argument("--cli-gc", action="store_true",
                    help="the garbage-collector thresholds the CLI sets while a command runs (graphroof.cli."
                         "GC_THRESHOLD) instead of Python's default")
    a = ap.parse_args()
    if a.cli_gc:
        from graphroof.cli import gc_thresholds

        gc.set_threshold(*gc_thresholds(gc.get_threshold()))

    import graphroof.llm as llm
    from graphroof.llm.estimate import open_source
    from graphroof.llm.whatif import CachedSource

    batches = [int(b) for b in a.batch.split(",")]
    opts = dict(hw=a.hw, tp=a.tp, prompt=a.prompt, gen=a.gen)
    stages = Stages()
    names = [] if a.no_stages else install(stages)
    gct = GCTimer(stages)
    gc.callbacks.append(gct)

    t = time.perf_counter()
    first = llm.Engine(open_source(a.model), hw=a.hw, pricing=llm.Pricing(tp=a.tp))
    first.estimate(batch=[batches[0]], prompt=a.prompt, gen=a.gen)
    t_ref = time.perf_counter() - t
    print(f"reference: estimate of {a.model} at batch {batches[0]} (build + trace + count): {t_ref:.2f} s, "
          f"peak RSS {rss_mb():.0f} MB", flush=True)
    t = time.perf_counter()
    warm = llm.Engine(CachedSource(first.pipeline), hw=a.hw, pricing=llm.Pricing(tp=a.tp))
    warm.estimate(batch=batches, prompt=a.prompt, gen=a.gen)
    print(f"warm-up: batches {a.batch} (traces the missing grid points): {time.perf_counter() - t:.2f} s, "
          f"peak RSS {rss_mb():.0f} MB", flush=True)

    best = None
    for _ in range(max(1, a.repeat)):
        src = CachedSource(warm.pipeline)
        stages.reset()
        gct.reset()
        stages.active = gct.on = True
        t, c0 = time.perf_counter(), time.process_time()
        llm.estimate(src, batch=batches, **opts)
        wall, cpu = time.perf_counter() - t, time.process_time() - c0
        stages.active = gct.on = False
        if best is None or wall < best[0]:
            best = (wall, cpu, dict(stages.calls), dict(stages.wall), dict(stages.own), gct.total, gct.collections,
                    [list(g) for g in gct.by_gen], dict(stages.gc))
    wall, cpu, calls, swall, sown, t_gc, n_gc, by_gen, sgc = best

    rows = [[n, calls.get(n, 0), swall.get(n, 0.0), sown.get(n, 0.0), sown.get(n, 0.0) - sgc.get(n, 0.0),
             100 * swall.get(n, 0.0) / wall, swall.get(n, 0.0) / t_ref] for n in names]
    rows.append(["gc (cyclic collector)", n_gc, t_gc, t_gc, 0.0, 100 * t_gc / wall, t_gc / t_ref])
    for gen, (n, dt) in enumerate(by_gen):
        rows.append([f"gc: generation {gen}", n, dt, dt, 0.0, 100 * dt / wall, dt / t_ref])
    rows.append(["measured estimate (total)", 1, wall, wall, wall - t_gc, 100.0, wall / t_ref])
    print()
    print(f"measured: {a.model} --hw {a.hw} --tp {a.tp} --batch {a.batch} --prompt {a.prompt} --gen {a.gen}, "
          f"replayed graphs (no tracing); fastest of {a.repeat}; CPU {cpu:.2f} s")
    print(tabulate(rows, headers=["stage", "calls", "wall s", "self s", "self s w/o gc", "% of estimate",
                                  "x reference"], floatfmt=(None, None, ".3f", ".3f", ".3f", ".1f", ".3f")))
    print(f"\nreference wall {t_ref:.2f} s; peak RSS {rss_mb():.0f} MB (whole process); gc thresholds "
          f"{gc.get_threshold()}")


if __name__ == "__main__":
    main()
