"""Longer fuzz run of the ONNX frontend (the CI test runs ~60 s of the same mutations).

    PYTHONPATH=. python benchmarks/fuzz_onnx.py --seconds 300 [--seed 0]

Prints the count of each outcome (``ok``, each graphroof error class) and every other exception with the
mutated file kept under ``fuzz_failures/``; exit code 1 if there was any.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.frontends._fuzz_onnx import check, mutate, seeds  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    models = seeds()
    counts: Counter = Counter()
    failures = 0
    out = Path("fuzz_failures")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        while time.monotonic() - t0 < args.seconds:
            blob = mutate(models[rng.randrange(len(models))], lambda label, n: rng.randrange(max(n, 1)))
            t = time.monotonic()
            try:
                counts[check(blob, Path(tmp))] += 1
            except Exception:  # noqa: BLE001 - what the fuzzer looks for
                failures += 1
                counts["EXCEPTION"] += 1
                out.mkdir(exist_ok=True)
                (out / f"fail_{failures}.onnx").write_bytes(blob)
                print(f"--- failure {failures}\n{traceback.format_exc()}", file=sys.stderr)
            if time.monotonic() - t > 25:
                counts["slow>25s"] += 1
    total = sum(v for k, v in counts.items() if k != "slow>25s")
    print(f"{total} mutated models in {time.monotonic() - t0:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
