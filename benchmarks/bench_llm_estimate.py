"""``graphroof llm``'s estimate-level cost: the estimate and its advice beyond the traces, for one model.

Stages (one process, in order):

1. ``open_source`` + a first ``estimate`` at batch 1 (this traces the graphs the estimate needs);
2. a second ``estimate`` over ``--batch`` (default 1,8,32,128) on the first one's traced graphs
   (``llm.whatif.CachedSource``: replays traces, so this stage is counting, fusing and pricing only);
3. ``llm_advice`` of the second estimate (its what-ifs: int4 weights, the critical batch, ...).

Columns: wall s, of which traces s (the source's graph builds during the stage: stage 2 traces the batches the
first estimate did not need), peak RSS MB (whole process, so far) and the ratio of the stage's wall to the trace
time of stage 1.  Run:
``python benchmarks/bench_llm_estimate.py [--model llama-2-70b --hw h100 --tp 4 --batch 1,8,32,128]``.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tabulate import tabulate  # noqa: E402


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed_source(src):
    """Wrap the source's graph builders to add their wall time to ``src.bench_trace_s``."""
    src.bench_trace_s = 0.0
    for name in ("prefill_graph", "decode_graph"):
        fn = getattr(src, name)

        def timed(*a, _fn=fn, **kw):
            t0 = time.perf_counter()
            try:
                return _fn(*a, **kw)
            finally:
                src.bench_trace_s += time.perf_counter() - t0

        setattr(src, name, timed)
    return src


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama-2-70b")
    ap.add_argument("--hw", default="h100")
    ap.add_argument("--tp", type=int, default=4)
    ap.add_argument("--batch", default="1,8,32,128")
    args = ap.parse_args()
    batches = [int(b) for b in args.batch.split(",")]
    warnings.simplefilter("ignore")
    from graphroof.llm.advice import llm_advice
    from graphroof.llm.engine import Engine, Pricing
    from graphroof.llm.estimate import open_source

    rows = []

    def stage(label, fn):
        t0, tr0 = time.perf_counter(), getattr(stage, "src", None) and stage.src.bench_trace_s
        out = fn()
        rows.append([label, time.perf_counter() - t0, stage.src.bench_trace_s - (tr0 or 0.0), rss_mb()])
        return out

    engine = {}

    def first_estimate():
        stage.src = _timed_source(open_source(args.model))
        engine["e"] = Engine(stage.src, hw=args.hw, pricing=Pricing(tp=args.tp))
        return engine["e"].estimate(batch=batches[0])

    stage.src = None
    stage(f"open_source + estimate (batch {batches[0]})", first_estimate)
    trace_s = rows[0][2]
    est = stage(f"estimate (batch {args.batch}) on the same engine (its traces kept)",
                lambda: engine["e"].estimate(batch=batches))
    items = stage("llm_advice", lambda: llm_advice(est, engine["e"].pipeline))
    rows[-1][0] += f" ({', '.join(i['kind'] for i in items)})"
    print(f"{args.model} on {args.hw}, --tp {args.tp}; traces in stage 1: {trace_s:.3g} s")
    print(tabulate([[r[0], r[1], r[2], r[3], r[1] / trace_s if trace_s else None] for r in rows],
                   headers=["stage", "wall s", "of which traces s", "peak RSS MB", "wall / stage-1 trace s"],
                   floatfmt=".3g", missingval="-"))

if __name__ == "__main__":
    main()
