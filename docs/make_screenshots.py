"""Render a model's HTML report and screenshot it in headless Chromium (for docs/).

    python docs/make_screenshots.py                       # llama-2-7b on a100 -> docs/llama-2-7b-report.png
    python docs/make_screenshots.py examples/textbook_ops.csv --hw h100 --name textbook
    python docs/make_screenshots.py --html existing.html --name mine
    python docs/make_screenshots.py llama-3-8b --hw h100 --serve       # `graphroof serve` page -> docs/serve_llama_3_8b.png

Writes ``docs/<name>-report.png`` (``docs/serve_<model>.png`` with ``--serve``: the serving simulation of README's
"Serving under traffic" command) (and keeps the HTML with ``--keep-html``); prints the HTML size, the
screenshot size and any console errors (there must be none: the script exits 1 if there are).  Needs
Chromium (``apt-get install chromium``, or ``$CHROMIUM``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graphroof.report import write_output, write_report  # noqa: E402
from tools.headless import Browser  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="llama-2-7b", help="anything `graphroof analyze` takes")
    ap.add_argument("--hw", default="a100")
    ap.add_argument("--html", help="screenshot this HTML file instead of analysing a model")
    ap.add_argument("--name", help="output stem (default: the model's file stem)")
    ap.add_argument("--out-dir", default=str(ROOT / "docs"))
    ap.add_argument("--width", type=int, default=1200)
    ap.add_argument("--max-height", type=int, default=3200, help="crop long pages (CSS px)")
    ap.add_argument("--ops", action="store_true", help="show per-op points in the chart")
    ap.add_argument("--keep-html", action="store_true", help="also write <name>-report.html beside the PNG")
    ap.add_argument("--whatif", type=int, metavar="BATCH", default=None,
                    help="with the what-if panel (as `analyze -f html`), its batch field set to BATCH")
    ap.add_argument("--serve", action="store_true", help="the `graphroof serve` page: rates 1-16 req/s, lognormal "
                    "prompt 1000 +- 500 and output 250 +- 100 tokens, SLO TTFT 2 s and TPOT 50 ms")
    ap.add_argument("--requests", type=int, default=1000, help="with --serve: requests per rate (default 1000)")
    args = ap.parse_args(argv)

    name = args.name or Path(args.html or args.model).stem
    serve_stem = args.name or "serve_" + Path(args.model).stem.replace("-", "_").replace(".", "_")
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(args.html) if args.html else Path(tmp) / f"{name}-report.html"
        if not args.html:
            import graphroof

            if args.serve:
                from graphroof.report import render
                from graphroof.serving import serve

                s = serve(args.model, hw=args.hw, rate=[1, 2, 4, 8, 16], requests=args.requests,
                          prompt_len="lognormal:1000:500", gen_len="lognormal:250:100", slo_ttft_s=2.0,
                          slo_tpot_s=0.05, target_rate=20.0, usd_per_hour=2.5)
                write_output(render(s, "html"), html)
            elif args.whatif:
                from graphroof.sweeps.whatif_costs import analyze_whatif

                a = analyze_whatif(args.model, hw=args.hw)
                write_report(a, "html", html)
            else:
                a = graphroof.analyze(args.model, hw=args.hw)
                write_report(a, "html", html)
        size = html.stat().st_size
        with Browser() as b:
            page = b.open(html, width=args.width)
            if args.ops:
                page.eval("document.querySelector('input[name=level][value=op]').click()")
            if args.whatif:
                page.eval("(function (e) { e.value = '%d'; e.dispatchEvent(new Event('change')); })"
                          "(document.getElementById('wi-batch'))" % args.whatif)
            png = page.screenshot(width=args.width, max_height=args.max_height)
            errors = page.errors
        shot = out_dir / (f"{serve_stem}.png" if args.serve else f"{name}-report.png")
        write_output(png, shot)
        if args.keep_html and not args.html:
            write_output(html.read_bytes(), out_dir / f"{name}-report.html")
    print(f"{name}: HTML {size / 1e3:.0f} kB; screenshot {shot} ({len(png) / 1e3:.0f} kB)")
    for e in errors:
        print(f"console error: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
