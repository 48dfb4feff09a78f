"""The textbook op table end to end: every number of the report checked by hand arithmetic.

Device: examples/textbook_device.toml = matrix fp16 100 TFLOP/s, vector fp16 10 TFLOP/s, 1 TB/s,
efficiencies matrix 0.5 / vector 0.5 / memory 0.8, launch 1 us.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import graphroof
from graphroof.cli import main
from graphroof.frontends.optable import load_table

ROOT = Path(__file__).resolve().parents[2]
CSV = str(ROOT / "examples" / "textbook_ops.csv")
DEV = str(ROOT / "examples" / "textbook_device.toml")


def _json(capsys, *args):
    assert main(["analyze", CSV, "--hw", DEV, "--format", "json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_textbook_ops_by_hand(capsys):
    d = _json(capsys)
    ops = {o["name"]: o for o in d["ops"]}
    ridge, mem, comp = ops["ridge.gemm"], ops["memory.stream"], ops["compute.gemm"]
    # exactly at the ridge: 100e9 FLOP / 100e12 = 1 ms; 1e9 B / 1e12 B/s = 1 ms; AI = 100 = ridge
    assert ridge["intensity"] == 100 and ridge["t_compute_s"] == pytest.approx(1e-3)
    assert ridge["t_memory_s"] == pytest.approx(1e-3) and ridge["bound"] == "compute"
    assert ridge["attainable_flops_per_s"] == pytest.approx(100e12)
    # realistic: max(1 ms / 0.5, 1 ms / 0.8) + 1 us = 2.001 ms
    assert ridge["time_realistic_s"] == pytest.approx(2.001e-3)
    # far memory side: AI = 1e9 / 1e10 = 0.1; Tm = 10 ms; attainable = 0.1 * 1e12 = 100 GFLOP/s
    assert mem["bound"] == "memory" and mem["time_s"] == pytest.approx(0.01)
    assert mem["attainable_flops_per_s"] == pytest.approx(1e11)
    assert mem["time_realistic_s"] == pytest.approx(0.01 / 0.8 + 1e-6)
    # far compute side: AI = 1e13 / 1e8 = 1e5; Tc = 1e13 / 1e14 = 100 ms
    assert comp["bound"] == "compute" and comp["time_s"] == pytest.approx(0.1)
    assert comp["intensity"] == pytest.approx(1e5)
    # vector op on the vector peak: gelu 16.8e6 / 10e12 = 1.68 us < 33.6e6 / 1e12 = 33.6 us -> memory
    gelu = ops["block0.gelu"]
    assert gelu["vector_flops"] == 16.8e6 and gelu["matrix_flops"] == 0
    assert gelu["t_compute_s"] == pytest.approx(1.68e-6) and gelu["time_s"] == pytest.approx(33.6e-6)
    assert gelu["attainable_flops_per_s"] == pytest.approx(0.5e12)  # AI 0.5 * 1 TB/s
    # the textbook layer = the three ops: Σ max = 1 + 10 + 100 = 111 ms; Σ (Tc+Tm) = 2 + 10.01 + 100.1 = 112.11 ms
    layer = {r["name"]: r for r in d["layers"]}["textbook"]
    assert layer["n_ops"] == 3 and layer["flops"] == pytest.approx(100e9 + 1e9 + 10e12)
    assert layer["time_s"] == pytest.approx(0.111) and layer["time_upper_s"] == pytest.approx(0.11211)
    assert layer["bound"] == "compute"  # Σ Tc = 111.01 ms > Σ Tm = 11.1 ms
    # totals: shares add to 1; total time = Σ op times
    assert sum(o["share"] for o in d["ops"]) == pytest.approx(1.0)
    assert d["totals"]["time_s"] == pytest.approx(sum(o["time_s"] for o in d["ops"]))
    assert d["ridge_points_flop_per_byte"] == {"matrix.fp16": 100.0, "vector.fp16": 10.0}
    assert d["coverage"] == {"total": 12, "ruled": 12, "free": 0, "estimated": 0, "unknown": {}}


def test_terminal_table_shows_hand_numbers(capsys):
    assert main(["analyze", CSV, "--hw", DEV, "--ops"]) == 0
    out = capsys.readouterr().out
    assert "ridge point (FLOP/byte): matrix.fp16 100.0, vector.fp16 10.0" in out
    assert "2 FLOPs per multiply-add; dense (not 2:4-sparse) peak FLOP/s; bytes in decimal units" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("ridge.gemm"))
    assert line.split()[4:] == ["100", "GFLOP", "1.00", "GB", "100", "100", "TFLOP/s", "1", "ms", "2", "ms",
                                "compute", "0.9%"]  # 1 ms of Σ 114.2 ms = 0.88%
    line = next(ln for ln in out.splitlines() if ln.startswith("memory.stream"))
    assert "0.1" in line.split() and "10 ms" in line and "memory" in line
    assert "; roofline 114 ms" in out  # 111 ms + 3.164 ms (the transformer rows) = 114.2 ms


def test_markdown_and_adhoc_device(capsys):
    # ad-hoc device from two numbers: 4.6 TFLOP/s and 96 GB/s -> ridge 47.9
    assert main(["analyze", CSV, "--peak-flops", "4.6T", "--mem-bw", "96GB/s", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# graphroof: textbook_ops on ad-hoc device") and "| layer " in out
    assert "matrix.fp16 47.9" in out


def test_what_if_bandwidth_doubled(capsys):
    base = _json(capsys)
    fast = _json(capsys, "--mem-bw", "2TB/s")
    b = {o["name"]: o for o in base["ops"]}["memory.stream"]
    f = {o["name"]: o for o in fast["ops"]}["memory.stream"]
    assert f["time_s"] == pytest.approx(b["time_s"] / 2)  # memory-bound op: twice the bandwidth, half the time


def test_yaml_and_json_tables(tmp_path):
    y = tmp_path / "ops.yaml"
    y.write_text("name: tiny\nops:\n  - {name: a, flops: 2G, bytes: 1GB, kind: vector, dtype: fp32}\n"
                 "  - {name: b, flops: 1.2 GFLOP, weight_bytes: 25MB, act_read_bytes: 1MB, count: 2}\n")
    g = load_table(y)
    # b's count of 2 is one node repeated twice (graphroof.repeat), not two copies
    assert g.name == "tiny" and len(g) == 2 and g.node("b").attrs["weight_bytes"] == 25e6
    assert g.node("b").attrs["graphroof.repeat"] == 2
    j = tmp_path / "ops.json"
    j.write_text(json.dumps([{"name": "a", "flops": "57.8M", "bytes": "25MB"}]))
    a = graphroof.analyze(str(j), hw="a100")
    assert a.totals.cost.matrix_flops == 57.8e6 and a.totals.cost.act_read_bytes == 25e6


@pytest.mark.parametrize("content,msg", [
    ("", "op table is empty"),
    ("name,flops,bytes\nx,-5,10\n", "row 2: flops is negative"),
    ("name,flops,bytes\nx,5,lots\n", "row 2 bytes: cannot parse 'lots'"),
    ("name,flops\nx,5\n", "CSV header must include name,flops,bytes"),
    ("name,flops,bytes,colour\nx,5,1,red\n", "unknown column 'colour'"),
    ("name,flops,bytes,kind\nx,5,1,tensor\n", "kind must be 'matrix' or 'vector'"),
    ("name,flops,bytes,dtype\nx,5,1,fp7\n", "unknown dtype 'fp7'"),
])
def test_bad_tables_one_line_error(tmp_path, capsys, content, msg):
    p = tmp_path / "bad.csv"
    p.write_text(content)
    assert main(["analyze", str(p), "--hw", "a100"]) == 1
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("args,msg", [
    (["analyze", "nope.csv"], "model file 'nope.csv' not found"),
    (["analyze", CSV, "--hw", "a1000"], "unknown hardware 'a1000' (did you mean"),
    (["analyze", CSV, "--hw", "missing.toml"], "hardware profile file 'missing.toml' not found"),
    (["analyze", CSV, "--peak-flops", "0"], "--peak-flops must be > 0"),  # one number alone: a100 + what-if
    (["analyze", CSV, "--mem-bw", "fast"], "--mem-bw: cannot parse 'fast'"),
    (["analyze", CSV, "--format", "pdf"], "unknown format 'pdf'"),
    (["analyze", CSV, "-o", "/nonexistent/dir/r.md"], "directory /nonexistent/dir does not exist"),
    (["hw", "show", "b9000"], "unknown hardware 'b9000'"),
])
def test_cli_errors_one_line_exit_1(capsys, args, msg):
    assert main(args) == 1
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1 and err.startswith("graphroof: error: ")


def test_output_file_written_atomically(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["analyze", CSV, "--hw", DEV, "-f", "json", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["schema_version"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp files left


def test_hw_list_and_show(capsys):
    assert main(["hw", "list"]) == 0
    assert "a100-80gb-sxm" in capsys.readouterr().out
    assert main(["hw", "show", "a100"]) == 0
    out = capsys.readouterr().out
    assert "matrix.bf16" in out and "source [matrix_peak_flops_per_s]" in out


def test_module_entry_point_subprocess():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "graphroof", "analyze", CSV, "--hw", "nope"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.startswith("graphroof: error: unknown hardware 'nope'")
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_malformed_profile_via_cli(tmp_path, capsys):
    bad = tmp_path / "broken.toml"
    bad.write_text('name = "broken"\n[matrix_peak_flops_per_s]\nbf16 = -3\n[memory]\nbw_bytes_per_s = 1e12\n')
    assert main(["analyze", CSV, "--hw", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err == "graphroof: error: broken.toml: matrix_peak_flops_per_s.bf16 must be > 0, got -3\n"
