"""Issue 24: the serve result's renderers (terminal, markdown, JSON, CSV of the records, the HTML page with its
charts), on a hand-made result with every field of ``graphroof.serving.ServeResult`` and on a real simulation of the
toy model; the page is checked in headless Chromium (skipped without Chromium)."""

from __future__ import annotations

import ast
import csv
import io
import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from graphroof.errors import ReportError
from graphroof.report import FORMATS_BY_KIND, render
from tools.headless import Browser, find_chromium

REPORT = Path(__file__).resolve().parents[2] / "graphroof" / "report"

# -- a hand-made result ---------------------------------------------------------------------------------------
@dataclass
class FakePoint:
    rate_rps: float
    requests: int
    duration_s: float
    throughput_rps: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    ttft_s: dict
    tpot_s: dict
    itl_s: dict
    e2e_s: dict
    queue_s: dict
    preemptions: int
    kv_used_mean: float
    kv_used_max: float
    goodput_rps: float | None
    slo_attainment: float | None
    littles_law: dict


@dataclass
class FakeServe:
    model: str
    hw: str
    hw_label: str
    settings: dict
    points: list
    max_rate: dict | None
    replicas: dict | None
    timeline: dict
    records: list
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = {"kind": "serve", **asdict(self)}
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def _stats(base: float) -> dict:
    return {"mean": base * 1.1, "p50": base, "p90": base * 1.8, "p99": base * 3.0}


def fake_result(rates=(1.0, 2.0, 4.0, 8.0, 16.0), slo=True, n=20) -> FakeServe:
    points, records = [], []
    for r in rates:
        sat = min(r, 9.0)
        ttft = 0.08 * (1 + (r / 8) ** 4)
        points.append(FakePoint(r, n, n / sat, sat, sat * 250, sat * 1250, sat * 250, _stats(ttft),
                                _stats(0.012 + 0.002 * math.log2(r)), _stats(0.012), _stats(3 + ttft),
                                _stats(ttft / 2), int(r > 8) * 3, min(0.95, r / 12), min(1.0, r / 9),
                                sat * (1.0 if r < 8 else 0.4) if slo else None, (1.0 if r < 8 else 0.4) if slo else None,
                                {"mean_in_system": sat * 3.2, "arrival_rate": sat, "mean_time_in_system": 3.2,
                                 "ratio": 1.0}))
        arr = [i / r for i in range(n)]
        records.append({"arrival_s": arr, "first_token_s": [a + ttft for a in arr],
                        "finish_s": [a + 3 + ttft for a in arr], "input_tokens": [1024] * n,
                        "output_tokens": [256] * n, "queue_s": [ttft / 2] * n, "ttft_s": [ttft] * n,
                        "tpot_s": [0.012] * n, "e2e_s": [3 + ttft] * n, "preemptions": [0] * n})
    t = [0.1 * i for i in range(3000)]
    timeline = {"time_s": t, "running": [min(200, i // 10) for i in range(3000)],
                "waiting": [max(0, i // 10 - 200) for i in range(3000)],
                "batch_tokens": [min(8192, 40 * i) for i in range(3000)],
                "kv_used_fraction": [min(1.0, i / 2500) for i in range(3000)]}
    settings = {"rate": list(rates), "requests": n, "arrival": "poisson", "prompt_len": "fixed:1024",
                "gen_len": "fixed:256", "seed": 0, "mode": "continuous", "max_batched_tokens": 8192,
                "max_num_seqs": 256, "policy": "decode-first", "slo_ttft_s": 2.0 if slo else None,
                "slo_tpot_s": 0.05 if slo else None, "slo_percentile": 99.0, "tp": 1, "usd_per_hour": 2.0}
    return FakeServe("llama-3-8b", "h100", "NVIDIA H100 SXM5 <80GB>", settings, points,
                     {"rate_rps": 7.25, "upper_rps": 7.4, "binding_slo": "ttft", "percentile": 99.0, "iterations": 9,
                      "converged": True} if slo else None,
                     {"replicas_needed": 3, "gpus": 3, "usd_per_million_tokens": 0.61, "target_rate_rps": 20.0,
                      "capacity_rps_per_replica": 7.25, "basis": "max rate under the SLO", "usd_per_hour": 2.0}
                     if slo else None, timeline, records, ["a note & <escaped>"])


@pytest.fixture(scope="module")
def fake():
    return fake_result()


# -- terminal / markdown --------------------------------------------------------------------------------------

def test_terminal_table_one_row_per_rate(fake):
    text = render(fake, "terminal")
    head = next(ln for ln in text.splitlines() if ln.startswith("rate"))
    for h in ("req/s", "out tok/s", "tok/s/GPU", "TTFT p50", "TTFT p90", "TTFT p99", "TPOT p50", "TPOT p99",
              "e2e p99", "queue p99", "preempt", "KV mean/max", "goodput", "SLO met"):
        assert h in head
    rows = [ln for ln in text.splitlines() if re.match(r"^(1|2|4|8|16)\s", ln)]
    assert len(rows) == 5
    assert "240 ms" in rows[0] and "36 ms" in rows[0]     # TTFT p99 = 3 x 80 ms, TPOT p99 = 3 x 12 ms
    assert "95% / 100%" in rows[-1]                         # KV mean / max of the last rate
    assert "maximum sustainable rate: 7.25 req/s under TTFT <= 2 s and TPOT <= 50 ms at p99" in text
    assert "(7.4 req/s misses it: TTFT binds; 9 simulations)" in text
    assert ("replicas: 3 (3 GPUs) for 20 req/s at 7.25 req/s each (max rate under the SLO); $0.61 per million "
            "output tokens") in text
    assert "conventions:" in text and "settings: requests 20; arrival poisson" in text
    assert "note: a note & <escaped>" in text


def test_markdown_report(fake):
    text = render(fake, "markdown")
    assert text.startswith("# serve: llama-3-8b on NVIDIA H100 SXM5 <80GB>")
    assert "| rate " in text and "|--------|" in text
    assert "**maximum sustainable rate: 7.25 req/s" in text and "- SLO: TTFT <= 2 s" in text


def test_without_slo_no_goodput_columns_nor_lines():
    r = fake_result(slo=False)
    text = render(r, "terminal")
    head = next(ln for ln in text.splitlines() if ln.startswith("rate"))
    assert "goodput" not in head and "SLO met" not in head and "no latency SLO" in text
    assert "maximum sustainable rate" not in text and "replicas:" not in text
    page = render(r, "html")
    assert 'class="slo"' not in page.split('id="chart-ttft"')[1].split("</svg>")[0]


def test_no_rate_meets_the_slo():
    r = fake_result()
    r.max_rate = {"rate_rps": None, "upper_rps": 0.125, "binding_slo": "tpot", "percentile": 99.0, "iterations": 4,
                  "converged": False}
    r.replicas = {"replicas_needed": None, "gpus": None, "target_rate_rps": 20.0, "capacity_rps_per_replica": None,
                  "basis": "max rate under the SLO", "usd_per_million_tokens": None}
    text = render(r, "terminal")
    assert ("maximum sustainable rate: none found under TTFT <= 2 s and TPOT <= 50 ms at p99: even 0.125 req/s "
            "misses it (TPOT binds)") in text
    assert "replicas for 20 req/s: n/a, no capacity per replica known (max rate under the SLO)" in text


# -- JSON / CSV -----------------------------------------------------------------------------------------------

def test_json_is_to_dict(fake):
    assert FORMATS_BY_KIND["serve"] == ("terminal", "markdown", "json", "csv", "html")
    assert json.loads(render(fake, "json")) == json.loads(json.dumps(fake.to_dict()))


def _csv(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_csv_records_every_rate_or_one(fake):
    rows = _csv(render(fake, "csv"))
    assert len(rows) == 5 * 20
    assert list(rows[0])[:2] == ["rate_rps", "request"] and "ttft_s" in rows[0] and "preemptions" in rows[0]
    assert {float(r["rate_rps"]) for r in rows} == {1, 2, 4, 8, 16}
    one = _csv(render(fake, "csv", rate=2))
    assert len(one) == 20 and {float(r["rate_rps"]) for r in one} == {4.0}
    assert float(one[1]["arrival_s"]) == pytest.approx(0.25)
    with pytest.raises(ReportError, match="rate index 9 is out of range: the result has 5 rates"):
        render(fake, "csv", rate=9)


def test_csv_of_numpy_records(fake):
    np = pytest.importorskip("numpy")
    r = fake_result(rates=(2.0,), n=3)
    r.records = [{k: np.asarray(v) for k, v in r.records[0].items()}]
    rows = _csv(render(r, "csv"))
    assert rows[2]["input_tokens"] == "1024" and rows[2]["arrival_s"] == "1.0"


# -- the page -------------------------------------------------------------------------------------------------

def test_page_markup(fake):
    page = render(fake, "html")
    for chart in ("chart-ttft", "chart-tpot", "chart-throughput", "timeline-batch", "timeline-kv"):
        assert f'id="{chart}"' in page
    ttft = page.split('id="chart-ttft"')[1].split("</svg>")[0]
    tpot = page.split('id="chart-tpot"')[1].split("</svg>")[0]
    assert 'class="slo"' in ttft and "SLO 2 s" in ttft and "SLO 50 ms" in tpot
    assert ttft.count('class="series"') == 3                  # p50, p90, p99
    assert "max 7.25 req/s" in ttft                           # the maximum rate drawn on the latency charts
    assert '<table class="sweep">' in page and page.count("<tr") == 1 + 5
    assert page.count('<tr class="miss">') == 2               # 8 and 16 req/s: 40% attainment
    assert "&lt;80GB&gt;" in page and "<80GB>" not in page    # every text escaped
    assert "a note &amp; &lt;escaped&gt;" in page
    assert "http" not in page.split("<script>")[1]            # inline, nothing fetched
    ticks = re.findall(r'class="[xy]tick"[^>]*>([^<]*)<', page)
    assert ticks and not any("e+" in t or "e-" in t for t in ticks)


def test_long_timeline_is_thinned_without_losing_its_peak():
    from graphroof.report.serve_html import MAX_TIMELINE_POINTS

    r = fake_result()
    n = 20_000
    r.timeline = {"time_s": [i * 0.01 for i in range(n)], "running": [7 if i != 12_345 else 250 for i in range(n)],
                  "waiting": [0] * n, "batch_tokens": [0] * n, "kv_used_fraction": [0.5] * n}
    svg = render(r, "html").split('id="timeline-batch"')[1].split("</svg>")[0]
    pts = re.search(r'<polyline class="series" points="([^"]*)"', svg).group(1).split()
    assert len(pts) <= MAX_TIMELINE_POINTS + 2
    assert ">200<" in svg  # the y axis reaches the one spike (250 sequences)


def test_report_imports_no_simulator():
    for path in sorted(REPORT.glob("serve*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                mod = ("." * node.level) + (node.module or "")
                assert not re.match(r"^(\.\.|graphroof\.)(serve|llm|fuse|roofline|layers)\b", mod), (path, mod)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("graphroof.serving") for a in node.names), path


def _check_page(path: Path, n_rates: int, with_slo: bool, tmp_png: Path | None = None) -> None:
    with Browser() as b:
        page = b.open(path)
        assert page.errors == []
        assert page.requests == [path.resolve().as_uri()]
        assert page.eval("document.documentElement.scrollWidth") <= 1280
        assert page.eval("document.querySelectorAll('table.sweep tbody tr').length") == n_rates
        assert page.eval("document.querySelectorAll('svg').length") == 5
        assert page.eval("document.querySelectorAll('#chart-ttft line.slo').length") == int(with_slo)
        # the two latency charts sit side by side
        tops = page.eval("[document.getElementById('chart-ttft').getBoundingClientRect().top, "
                         "document.getElementById('chart-tpot').getBoundingClientRect().top]")
        assert tops[0] == tops[1]
        col = "Array.from(document.querySelectorAll('table.sweep th')).findIndex(h => h.textContent === 'TTFT p99')"
        idx = page.eval(col)
        values = (f"Array.from(document.querySelectorAll('table.sweep tbody tr'))"
                  f".map(r => parseFloat(r.cells[{idx}].dataset.v))")
        page.eval(f"document.querySelectorAll('table.sweep th')[{idx}].click()")
        down = page.eval(values)
        assert down == sorted(down, reverse=True)
        png = page.screenshot(width=1200)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    if tmp_png is not None:
        tmp_png.write_bytes(png)


@pytest.mark.skipif(find_chromium() is None, reason="Chromium is not installed")
def test_page_in_chromium(fake, tmp_path):
    out = tmp_path / "serve.html"
    out.write_text(render(fake, "html"))
    _check_page(out, 5, True, tmp_path / "serve.png")


# -- a real simulation of the toy model -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def real():
    import warnings

    from graphroof.llm import Pricing
    from graphroof.serving import serve
    from tests.llm.toy import RULES, toy_source

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return serve(toy_source(), hw="a100", pricing=Pricing(rules=RULES), rate=[1, 4], requests=50,
                     prompt_len="fixed:64", gen_len="fixed:16", slo_ttft_s=0.01, slo_tpot_s=0.001, target_rate=10,
                     usd_per_hour=2.0)


def test_real_result_renders_every_format(real):
    assert set(FORMATS_BY_KIND["serve"]) == {"terminal", "markdown", "json", "csv", "html"}
    text = render(real, "terminal")
    rows = [ln for ln in text.splitlines() if re.match(r"^(1|4)\s", ln)]
    # one row per rate in the figures' table, and again in the error-band ranges' table
    assert len(rows) == 4 and sum(" - " in ln for ln in rows) == 2 and "maximum sustainable rate:" in text and "replicas: 1 (1 GPU) for 10 req/s" in text
    assert not re.search(r"\de\+\d", text)                      # rates written out (8,192, not 8.19e+03)
    assert render(real, "markdown").startswith("# serve: toy-llama on ")
    d = json.loads(render(real, "json"))
    assert d == json.loads(real.to_json()) == json.loads(json.dumps(real.to_dict())) and d["kind"] == "serve"


def test_real_csv_matches_the_records(real):
    rows = _csv(render(real, "csv"))
    assert len(rows) == 100 and [float(r["rate_rps"]) for r in rows[::50]] == [1.0, 4.0]
    for i in (0, 1):
        mine = _csv(render(real, "csv", rate=i))
        theirs = _csv(real.records_csv(i))
        assert len(mine) == len(theirs) == 50
        for a, b in zip(mine, theirs):
            for k, v in b.items():
                assert (a[k] == v == "") or float(a[k]) == pytest.approx(float(v), rel=1e-12), k


def test_real_page_markup(real):
    page = render(real, "html")
    assert page.count('class="slo"') >= 2 and "SLO 10 ms" in page and "SLO 1 ms" in page
    assert "Timeline at 4 req/s" in page
    n = len(real.timeline["time_s"])
    assert n > 0 and 'id="timeline-kv"' in page


@pytest.mark.skipif(find_chromium() is None, reason="Chromium is not installed")
def test_real_page_in_chromium(real, tmp_path):
    out = tmp_path / "serve.html"
    out.write_text(render(real, "html"))
    _check_page(out, 2, True)
