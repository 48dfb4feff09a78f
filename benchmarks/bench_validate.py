"""``graphroof validate`` cost: wall time, CPU time and peak RSS of the whole run with nothing stored (a fresh
trace store) and again with the traces stored, each a ``graphroof`` process as users run it.

Reference in the same run: ``graphroof llm llama-3-8b --hw h100 --no-cache`` (one model traced and priced from
nothing), so the ratios compare across machines and loads.  The issue's target: under 2 minutes on the project's
2-core machine with every dataset.

Run: ``python benchmarks/bench_validate.py [--jobs N] [--dataset NAME[,NAME]] [--repeat N]`` (``--repeat``: the
cold and warm runs N times each, every row printed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]


def run(args: list[str], env: dict[str, str]) -> tuple[float, float, float, int]:
    """(wall s, CPU s of the process and its workers, peak RSS MB of the largest, exit code) of ``graphroof ARGS``."""
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "graphroof", *args], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, p.returncode


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", "-j", type=int, default=None)
    ap.add_argument("--dataset", default=None)
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("GRAPHROOF_CACHE", None)
    extra = ([f"--jobs={a.jobs}"] if a.jobs else []) + ([f"--dataset={a.dataset}"] if a.dataset else [])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        ref = run(["llm", "llama-3-8b", "--hw", "h100", "--no-cache", "-q", "-f", "json", "-o",
                   str(Path(tmp) / "ref.json")], env)
        rows.append(["reference: llm llama-3-8b --no-cache", *ref[:3], 1.0])
        for i in range(a.repeat):
            store = Path(tmp) / f"store{i}"
            e = dict(env, GRAPHROOF_CACHE_DIR=str(store))
            out = str(Path(tmp) / f"v{i}.json")
            for label in ("nothing stored", "traces stored"):
                got = run(["validate", "-q", "-f", "json", "-o", out, *extra], e)
                if got[3]:
                    print(f"graphroof validate exited {got[3]}", file=sys.stderr)
                    return 1
                rows.append([f"validate {' '.join(extra)}: {label}".replace("  ", " "), *got[:3], got[0] / ref[0]])
    print(tabulate(rows, headers=["run", "wall s", "CPU s", "peak RSS MB", "wall / reference"], floatfmt=".1f"))
    print(f"{os.cpu_count()} CPUs; the store in a fresh temporary folder per repeat")
    return 0


if __name__ == "__main__":
    sys.exit(main())
