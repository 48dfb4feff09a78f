"""Wall time and peak RSS of the issue-16 targets, each against a bare FlopCounterMode pass in the same run.

Every row is one fresh process (imports included, as a user runs it), timed with ``os.wait4`` (peak RSS of
that process alone):

* ``analyze llama-2-7b --hw a100`` (target <= 5 s);
* ``llm llama-2-70b --hw h100 --tp 4 --batch 1,8,32,128`` (target <= 10 s);
* ``analyze deepseek-v3 --hw h100`` and ``llm deepseek-v3 --hw h100 --tp 8`` (671B MoE + MLA);

all with peak RSS <= 1 GB.  The reference for each model is a process that imports torch and transformers,
builds the same config on the meta device and runs one forward pass over ``input_ids [1, 1024]`` under
``torch.utils.flop_counter.FlopCounterMode`` (fake tensors); "ratio" = graphroof wall / reference wall.
``--no-fold-blocks`` rows (``--unfolded``) trace every block, for the folded-vs-unfolded comparison.
``--root DIR`` runs another source tree's graphroof (e.g. an export of an older commit) for before/after.

Each command runs twice on a fresh, empty store of traced graphs (:mod:`graphroof.frontends.trace_store`):
"first run" traces and fills the store (what a user's first run of a model costs), "stored" is the same command
again, reading its graphs back (no torch / transformers import, no trace).  ``--no-fold-blocks`` rows run with the
store off.

    python benchmarks/bench_capture_speed.py [--repeat 1] [--unfolded] [--only analyze-7b,llm-70b] [--root DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

REFERENCE = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils.flop_counter import FlopCounterMode
from graphroof.frontends import hf, zoo
from graphroof.frontends.hf.build import build_model, eager_prompt
model, cfg, _ = build_model(hf.read_config(zoo.config_path(sys.argv[1])))
fake = FakeTensorMode(allow_non_fake_inputs=True)
with fake:
    ids = torch.zeros(1, 1024, dtype=torch.long, device="meta")
with eager_prompt(), torch.no_grad(), fake, FlopCounterMode(display=False) as fc:
    model(input_ids=ids, use_cache=False)
json.dump({"flops": fc.get_total_flops(), "s": time.perf_counter() - t0}, open(sys.argv[2], "w"))
"""

CASES = {
    "analyze-7b": ("llama-2-7b", ["analyze", "llama-2-7b", "--hw", "a100"], 5.0),
    "llm-70b": ("llama-2-70b", ["llm", "llama-2-70b", "--hw", "h100", "--tp", "4", "--batch", "1,8,32,128"], 10.0),
    "analyze-ds3": ("deepseek-v3", ["analyze", "deepseek-v3", "--hw", "h100"], None),
    "llm-ds3": ("deepseek-v3", ["llm", "deepseek-v3", "--hw", "h100", "--tp", "8"], None),
}


def _run(argv: list[str], root: Path, store: str | None = None) -> tuple[float, float, int]:
    """(wall s, peak RSS bytes, exit code) of ``python argv`` with *root* first on the path; *store*: the folder
    of the store of traced graphs (None: the store off)."""
    env = dict(os.environ, PYTHONPATH=str(root), GRAPHROOF_CACHE="on" if store else "off")
    if store:
        env["GRAPHROOF_CACHE_DIR"] = store
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, *argv], stdout=out, stderr=subprocess.DEVNULL, env=env, cwd=root)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss * 1024.0, p.returncode


def reference(model: str, root: Path) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as d:
        res = Path(d) / "r.json"
        wall, rss, code = _run(["-c", REFERENCE, model, str(res)], root)
        if code:
            sys.exit(f"reference pass on {model} failed (exit {code})")
    return wall, rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--unfolded", action="store_true", help="also run each command with --no-fold-blocks")
    ap.add_argument("--only", default=",".join(CASES), help=f"cases, comma-separated ({', '.join(CASES)})")
    ap.add_argument("--root", default=str(ROOT), help="source tree whose graphroof runs (default: this one)")
    args = ap.parse_args()
    root = Path(args.root).resolve()
    cases = [c.strip() for c in args.only.split(",") if c.strip()]
    refs: dict[str, list[tuple[float, float]]] = {}
    rows = []
    for case in cases:
        model, argv, target = CASES[case]
        variants = [(" (first run)", [], "cold"), (" (stored)", [], "warm")]
        if args.unfolded:
            variants.append((" --no-fold-blocks", ["--no-fold-blocks"], None))
        results: dict[str, list[tuple[float, float]]] = {label: [] for label, _, _ in variants}
        for _ in range(args.repeat):  # reference and command interleaved: load drift hits both
            if len(refs.get(model, ())) < args.repeat:
                refs.setdefault(model, []).append(reference(model, root))
            with tempfile.TemporaryDirectory() as store:
                for label, extra, mode in variants:
                    wall, rss, code = _run(["-m", "graphroof", *argv, *extra], root, store if mode else None)
                    if code:
                        sys.exit(f"graphroof {' '.join(argv + extra)} failed (exit {code})")
                    results[label].append((wall, rss))
        ref_wall = statistics.median(r[0] for r in refs[model])
        for label, runs in results.items():
            wall = statistics.median(r[0] for r in runs)
            rss = max(r[1] for r in runs)
            rows.append((f"graphroof {' '.join(argv)}{label}", wall, rss, ref_wall, target))
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end, Python {sys.version.split()[0]}, "
          f"graphroof from {root}, median of {args.repeat}")
    print(f"{'command':92s} {'wall s':>7s} {'peak RSS MB':>11s} {'ref s':>6s} {'ratio':>6s} {'target':>7s}")
    for name, wall, rss, ref_wall, target in rows:
        tgt = f"<={target:g} s" if target else ""
        print(f"{name:92s} {wall:7.1f} {rss / 1e6:11.0f} {ref_wall:6.1f} {wall / ref_wall:5.2f}x {tgt:>7s}")
    for model, rs in refs.items():
        print(f"reference {model}: FlopCounterMode prefill [1, 1024] on the meta model, imports included: "
              f"{statistics.median(r[0] for r in rs):.1f} s, peak RSS {max(r[1] for r in rs) / 1e6:.0f} MB")
    print("json:", json.dumps([{"command": r[0], "wall_s": round(r[1], 2), "peak_rss_bytes": int(r[2]),
                                "reference_s": round(r[3], 2)} for r in rows]))


if __name__ == "__main__":
    main()
