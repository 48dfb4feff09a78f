"""`graphroof llm` over every LLM of the zoo: TTFT / TPOT at two batch sizes, wall time and peak RSS per run.

    python benchmarks/zoo_llm_table.py [--hw h100] [--batch 1,64] [--prompt 1024] [--gen 128] [--only NAME,...]

Each model runs in its own ``python -m graphroof llm NAME --hw HW --batch B1,B2 -f json`` process, as a user
would run it (imports, model build on the meta device, traces, report), so the wall time and peak RSS are those
of one command.  Reference in the same run: ``python -m graphroof hw list`` (the cost of starting the CLI).
Prints a markdown table; failures are rows too (the error line is shown).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(args: list[str]) -> tuple[int, float, float, str, str]:
    """(exit code, wall s, peak RSS MB, stdout, stderr) of ``python -m graphroof *args``."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-m", "graphroof", *args], stdout=out, stderr=err, cwd=ROOT)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return p.returncode, wall, usage.ru_maxrss / 1024, out.read().decode(), err.read().decode()


def llm_names() -> list[str]:
    sys.path.insert(0, ROOT)
    from graphroof.frontends.zoo import GENERATIVE_FAMILIES, ZOO

    return [name for name, entry in ZOO.items() if entry.family in GENERATIVE_FAMILIES]


def ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.3g} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default="h100")
    ap.add_argument("--batch", default="1,64")
    ap.add_argument("--prompt", type=int, default=1024)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--only", default="", help="comma-separated zoo names (default: every LLM of the zoo)")
    a = ap.parse_args()
    names = [n for n in a.only.split(",") if n] or llm_names()
    rc, ref_wall, ref_rss, _, _ = run(["hw", "list"])
    print(f"reference: `graphroof hw list` {ref_wall:.2f} s, {ref_rss:.0f} MB (rc {rc})\n")
    b1, b2 = (int(b) for b in a.batch.split(","))
    print(f"| model | TTFT b{b1} | TPOT b{b1} | TTFT b{b2} | TPOT b{b2} | fits b{b2} (max concurrent) | wall | "
          "peak RSS | wall / reference |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in names:
        prompt = a.prompt
        rc, wall, rss, out, err = run(["llm", name, "--hw", a.hw, "--batch", a.batch, "--prompt", str(prompt),
                                       "--gen", str(a.gen), "-f", "json"])
        fit = re.search(r"use --prompt <= (\d+)", err)
        if rc != 0 and fit:  # a model with fewer positions: the longest prompt it takes
            prompt = int(fit.group(1))
            rc, wall, rss, out, err = run(["llm", name, "--hw", a.hw, "--batch", a.batch, "--prompt", str(prompt),
                                           "--gen", str(a.gen), "-f", "json"])
        if prompt != a.prompt:
            name = f"{name} (prompt {prompt})"
        if rc != 0:
            line = (err.strip().splitlines() or ["(no message)"])[-1][:160]
            print(f"| {name} | failed: {line} | | | | | {wall:.1f} s | {rss:.0f} MB | {wall / ref_wall:.0f}x |")
            continue
        d = json.loads(out)
        cfg = {c["batch"]: c for c in d["configs"]}
        c1, c2 = cfg.get(b1, {}), cfg.get(b2, {})
        mem = c2.get("memory") or {}
        fits = f"{'yes' if c2.get('fits') else 'no'} ({mem.get('max_concurrent_sequences', '-')})"
        print(f"| {name} | {ms(c1.get('ttft_s'))} | {ms(c1.get('tpot_s'))} | {ms(c2.get('ttft_s'))} | "
              f"{ms(c2.get('tpot_s'))} | {fits} | {wall:.1f} s | {rss:.0f} MB | {wall / ref_wall:.0f}x |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
