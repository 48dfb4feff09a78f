"""Hostile input files (op tables, hardware profiles, transformers configs): each gives a result or a one-line
graphroof error, never a traceback, a hang or gigabytes of memory; names never carry control characters into
a report (issue 26).

The inputs that blew up before (YAML alias bombs, ``count=1e6``, a symlink to ``/dev/zero``, a FIFO) run in a
subprocess with an address-space limit and a timeout, so a regression fails instead of eating the machine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from graphroof import safe_read
from graphroof.cli import main
from graphroof.errors import HardwareProfileError, InputError
from graphroof.frontends.optable import load_table
from graphroof.hardware import load_hardware
from graphroof.report.markdown import md_escape
from graphroof.safe_read import parse_yaml, read_bytes, shown

ROOT = Path(__file__).resolve().parent.parent
DEV = str(ROOT / "examples" / "textbook_device.toml")
CSV = str(ROOT / "examples" / "textbook_ops.csv")
#: control characters that must never reach a report: C0 but newline / tab, DEL, C1, zero-width and bidi marks
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
HOSTILE = "a\x1b]0;pwn\x07b\x1b[31mc\u202ed\x00e"
PROFILE = {"name": "p", "matrix_peak_flops_per_s": {"fp16": 1e12}, "memory": {"bw_bytes_per_s": 1e12}}
BOMB = "".join(f"  {n}: &{n} [{', '.join([f'*{p}' if p else 'x'] * 10)}]\n"
               for p, n in zip(["", *"abcdefgh"], "abcdefghi"))  # 10**9 leaves through 9 aliases


def _bounded(args: list[str], limit_gb: float = 2.0, timeout_s: float = 60, **env_over: str) -> tuple[int, str]:
    """``graphroof ARGS`` in a child with an address-space cap and a timeout: (exit code, stderr)."""
    code = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, ({int(limit_gb * 2**30)}, {int(limit_gb * 2**30)}))
        from graphroof.cli import main
        sys.exit(main({args!r}))
    """)
    env = {**os.environ, "GRAPHROOF_CACHE": "off", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", **env_over}
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s, env=env,
                           cwd=ROOT, errors="backslashreplace")
    except subprocess.TimeoutExpired:
        pytest.fail(f"graphroof {' '.join(args)} ran past {timeout_s} s")
    return p.returncode, p.stderr


def _one_line(err: str, msg: str) -> str:
    assert err.count("\n") == 1 and err.startswith("graphroof: error: "), err[-2000:]
    assert "Traceback" not in err and msg in err, err
    assert len(err) < 400 and not RAW_CONTROL.search(err), err
    return err


def _cli_error(capsys, *args: str) -> str:
    assert main(["analyze", *args]) == 1
    return capsys.readouterr().err


# -- inputs that ate memory or hung: bounded subprocesses ---------------------------------------------------

def _bomb_table(tmp_path: Path) -> Path:
    p = tmp_path / "bomb.yaml"
    p.write_text("defs:\n" + BOMB + "ops:\n  - {name: *i, flops: 1, bytes: 1}\n")
    return p


def _bomb_profile(tmp_path: Path) -> Path:
    p = tmp_path / "bomb.yaml"
    p.write_text("name: bomb\nmatrix_peak_flops_per_s: {fp16: 1e12}\nmemory: {bw_bytes_per_s: 1e12}\n"
                 "sources:\n" + BOMB + "notes: *i\n")
    return p


def _zero(tmp_path: Path, name: str) -> Path:
    p = tmp_path / name
    p.parent.mkdir(exist_ok=True)
    p.symlink_to("/dev/zero")  # the point is that nothing is read from it
    return p


def _fifo(tmp_path: Path, name: str) -> Path:
    p = tmp_path / name
    p.parent.mkdir(exist_ok=True)
    os.mkfifo(p)
    return p


@pytest.mark.parametrize("case,msg", [
    ("bomb-table", "YAML aliases (*name) are not accepted"),
    ("bomb-profile", "YAML aliases (*name) are not accepted"),
    ("zero-table", "op table is a character device, not a regular file"),
    ("zero-json", "op table is a character device, not a regular file"),
    ("zero-config-dir", "transformers config is a character device, not a regular file"),
    ("zero-profile", "hardware profile is a character device, not a regular file"),
    ("fifo-table", "op table is a FIFO (named pipe), not a regular file"),
    ("fifo-config-dir", "transformers config is a FIFO (named pipe), not a regular file"),
    ("fifo-profile", "hardware profile is a FIFO (named pipe), not a regular file"),
])
def test_bombs_devices_and_fifos_fail_fast_in_one_line(tmp_path, case, msg):
    args = {
        "bomb-table": lambda: [str(_bomb_table(tmp_path)), "--hw", DEV],
        "bomb-profile": lambda: [CSV, "--hw", str(_bomb_profile(tmp_path))],
        "zero-table": lambda: [str(_zero(tmp_path, "t.csv")), "--hw", DEV],
        "zero-json": lambda: [str(_zero(tmp_path, "t.json")), "--hw", DEV],
        "zero-config-dir": lambda: [str(_zero(tmp_path, "m/config.json").parent), "--hw", DEV],
        "zero-profile": lambda: [CSV, "--hw", str(_zero(tmp_path, "hw.toml"))],
        "fifo-table": lambda: [str(_fifo(tmp_path, "t.csv")), "--hw", DEV],
        "fifo-config-dir": lambda: [str(_fifo(tmp_path, "m/config.json").parent), "--hw", DEV],
        "fifo-profile": lambda: [CSV, "--hw", str(_fifo(tmp_path, "hw.yaml"))],
    }[case]()
    rc, err = _bounded(["analyze", *args])
    assert rc == 1
    _one_line(err, msg)


@pytest.mark.parametrize("make", [_zero, _fifo])
def test_config_device_or_fifo_with_the_trace_store_on(tmp_path, make):
    """The trace store keys a config by its content: that read is capped too."""
    d = make(tmp_path, "m/config.json").parent
    rc, err = _bounded(["analyze", str(d), "--hw", DEV], GRAPHROOF_CACHE="on",
                       GRAPHROOF_CACHE_DIR=str(tmp_path / "store"))
    assert rc == 1
    _one_line(err, "transformers config is a")


def test_sweep_of_a_config_folder_on_a_device(tmp_path):
    rc, err = _bounded(["sweep", str(_zero(tmp_path, "m/config.json").parent), "--hw", DEV])
    assert rc == 1
    _one_line(err, "transformers config is a character device")


def _write(p: Path, text: str) -> Path:
    p.write_text(text, encoding="utf-8")
    return p


def test_size_cap_named_in_the_message(tmp_path, monkeypatch):
    big = tmp_path / "big.csv"
    with open(big, "wb") as f:  # sparse: no disk used
        f.truncate(safe_read.MAX_FILE_BYTES + 1)
    with pytest.raises(InputError, match=r"is 64,000,001 bytes, over the 64 MB cap for op tables"):
        load_table(big)
    monkeypatch.setattr(safe_read, "MAX_FILE_BYTES", 100)
    p = _write(tmp_path / "t.csv", "name,flops,bytes\n" + "x,1,1\n" * 40)
    with pytest.raises(InputError, match=r"over the 0.0001 MB cap"):
        load_table(p)
    with pytest.raises(InputError, match="over the 1e-05 MB cap"):
        read_bytes(p, "file", limit=10)


def test_regular_files_through_symlinks_are_fine_folders_are_not(tmp_path, capsys):
    link = tmp_path / "ops.csv"
    link.symlink_to(CSV)
    assert main(["analyze", str(link), "--hw", DEV, "-f", "json"]) == 0
    capsys.readouterr()
    (tmp_path / "d.toml").mkdir()
    _one_line(_cli_error(capsys, CSV, "--hw", str(tmp_path / "d.toml")), "hardware profile is a directory")


# -- yaml ----------------------------------------------------------------------------------------------------

def test_yaml_anchors_alone_are_fine_and_nodes_are_capped(monkeypatch):
    assert parse_yaml("a: &x 1\nb: 2\n", "f") == {"a": 1, "b": 2}
    with pytest.raises(InputError, match="YAML aliases"):
        parse_yaml("a: &x 1\nb: *x\n", "f")
    with pytest.raises(InputError, match="nested deeper than 64 levels"):
        parse_yaml("[" * 100 + "]" * 100, "f")
    monkeypatch.setattr(safe_read, "MAX_YAML_NODES", 10)
    with pytest.raises(InputError, match="more than 10 YAML values"):
        parse_yaml(str(list(range(20))), "f")


# -- one-line errors where tracebacks were ---------------------------------------------------------------------

def test_deep_json_table_config_and_profile(tmp_path, capsys):
    deep = "[" * 100_000 + "]" * 100_000
    _one_line(_cli_error(capsys, str(_write(tmp_path / "t.json", deep)), "--hw", DEV), "nested deeper than 64")
    (tmp_path / "m").mkdir()
    _write(tmp_path / "m" / "config.json", '{"model_type": "llama", "x": ' + deep + "}")
    _one_line(_cli_error(capsys, str(tmp_path / "m"), "--hw", DEV), "config.json: nested deeper than 64")
    err = _one_line(_cli_error(capsys, CSV, "--hw", str(_write(tmp_path / "p.json", '{"a": ' + deep + "}"))),
                    "p.json: nested deeper than 64")
    assert "YAML" not in err
    err = _one_line(_cli_error(capsys, CSV, "--hw", str(_write(tmp_path / "q.json", "{nope"))), "not valid JSON")
    assert "YAML" not in err
    _one_line(_cli_error(capsys, CSV, "--hw", str(_write(tmp_path / "p.toml", "a = " + "[" * 5000 + "]" * 5000))),
              "p.toml: nested deeper than 64")


@pytest.mark.parametrize("name,text,msg", [
    ("t.csv", "name,flops,bytes\ng," + "9" * 400 + ",1\n", "is too long for a number"),
    ("t.json", '[{"name": "g", "flops": ' + "9" * 400 + ', "bytes": 1}]', "an integer of 400 digits is too large"),
    ("t.yaml", "- {name: g, flops: 1, bytes: " + "9" * 400 + "}\n", "an integer of 400 digits is too large"),
    ("t.json", '[{"name": "g", "flops": 1, "bytes": 1, "count": ' + "9" * 400 + "}]", "is too large"),
    ("t.json", '[{"name": "g", "flops": NaN, "bytes": 1}]', "row 1 flops is not a number (NaN)"),
    ("t.yaml", "- {name: g, flops: .nan, bytes: 1}\n", "row 1 flops is not a number (NaN)"),
    ("t.csv", "name,flops,bytes\ng,nan,1\n", "row 2 flops is not a number (NaN)"),
    ("t.json", '[{"name": "g", "flops": Infinity, "bytes": 1}]', "row 1 flops is infinite"),
    ("t.csv", "name,flops,bytes,flops\ng,1G,1MB,2G\n", "column 'flops' appears twice in the header"),
    ("t.csv", "name,flops,bytes\ng,1,1,extra\n", "row 2 has 4 fields, the header 3"),
    ("t.csv", "name,flops,bytes,count\ng,1,1,2.5\n", "count must be a whole number >= 1, got 2.5"),
    ("t.json", '[{"name": ["x"], "flops": 1, "bytes": 1}]', "row 1: name must be text"),
    ("t.json", '[{"name": "g", "flops": {"a": 1}, "bytes": 1}]', "must be a number or a quantity"),
    ("t.json", '{"name": {"a": 1}, "ops": [{"name": "g", "flops": 1, "bytes": 1}]}', "'name' must be text"),
    ("t.csv", "name,flops,bytes,kind\ng,1,1," + "x" * 5000 + "\n", "kind must be 'matrix' or 'vector'"),
    ("t.csv", "name,flops,bytes,dtype\ng,1,1," + "x" * 5000 + "\n", "unknown dtype"),
    ("t.csv", "name,flops,bytes," + "c" * 5000 + "\ng,1,1,1\n", "unknown column"),
])
def test_bad_op_tables_one_line(tmp_path, capsys, name, text, msg):
    _one_line(_cli_error(capsys, str(_write(tmp_path / name, text)), "--hw", DEV), msg)


def _profile(tmp_path: Path, **fields) -> str:
    return str(_write(tmp_path / "hw.json", json.dumps({**PROFILE, **fields})))


@pytest.mark.parametrize("fields,msg", [
    ({"efficiency": [1, 2]}, "hw.json: efficiency must be a table of fields"),
    ({"interconnect": [1, 2]}, "hw.json: interconnect must be a table of fields"),
    ({"aliases": 5}, "hw.json: aliases must be a list of names"),
    ({"aliases": [["a"]]}, "hw.json: aliases must be a list of names"),
    ({"memory": {"bw_bytes_per_s": float("nan")}}, "memory.bw_bytes_per_s is not a number (NaN)"),
    ({"vendor": {"x": 1}}, "hw.json: vendor must be text"),
    ({"kind": ["gpu"]}, "kind must be one of"),
    ({"timing": [1]}, "[timing] must be a table of fields"),
    ({"x" * 5000: 1}, "unknown field 'xxxx"),
])
def test_bad_profiles_one_line(tmp_path, capsys, fields, msg):
    _one_line(_cli_error(capsys, CSV, "--hw", _profile(tmp_path, **fields)), msg)


def test_huge_integers_and_non_utf8_profiles(tmp_path, capsys):
    toml = Path(DEV).read_text()
    big = _write(tmp_path / "big.toml", toml.replace("bw_bytes_per_s = 1e12", "bw_bytes_per_s = " + "9" * 400))
    _one_line(_cli_error(capsys, CSV, "--hw", str(big)), "memory.bw_bytes_per_s: an integer of 400 digits")
    (tmp_path / "j.json").write_text(json.dumps(PROFILE).replace("1000000000000.0", "9" * 400))
    _one_line(_cli_error(capsys, CSV, "--hw", str(tmp_path / "j.json")), "an integer of 400 digits is too large")
    t = tmp_path / "timing.toml"
    t.write_text(toml + "\n[timing]\nsm_count = " + "9" * 400 + "\n")
    _one_line(_cli_error(capsys, CSV, "--hw", str(t)), "timing.sm_count: an integer of 400 digits")
    latin = tmp_path / "latin.toml"
    latin.write_bytes(toml.replace("Textbook", "T\xe9xtbook").encode("latin-1"))
    _one_line(_cli_error(capsys, CSV, "--hw", str(latin)), "latin.toml: hardware profile is not UTF-8 text (byte 0xe9")
    with pytest.raises(HardwareProfileError, match="not UTF-8"):
        load_hardware(latin)


# -- accepted: Excel's "CSV UTF-8" -----------------------------------------------------------------------------

def test_utf8_bom_csv_is_read_like_the_plain_file(tmp_path, capsys):
    bom = tmp_path / "ops.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + Path(CSV).read_bytes())
    assert main(["analyze", str(bom), "--hw", DEV, "-f", "json"]) == 0
    with_bom = json.loads(capsys.readouterr().out)
    assert main(["analyze", CSV, "--hw", DEV, "-f", "json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert with_bom["totals"] == plain["totals"] and len(with_bom["ops"]) == len(plain["ops"]) == 12


def _approx(a: dict, b: dict) -> bool:
    """Equal dicts, floats to 1e-12 relative."""
    return a.keys() == b.keys() and all(
        a[k] == pytest.approx(b[k], rel=1e-12) if isinstance(a[k], float) else a[k] == b[k] for k in a)


def test_count_is_a_repeat_equal_to_copies(tmp_path, capsys):
    """A row with count=3 is one node run 3 times: under the eager runtime (one kernel per op) every figure equals
    three written-out rows (FLOPs, bytes, roofline and realistic time with 3 launches each, layer op and kernel
    counts); under a fusing runtime the counted row stays a kernel of its own (the copies would fuse the last
    GEMM with the first vector op), so FLOPs and bytes agree and the times by at most one launch per row."""
    rows = ("name,flops,bytes,kind,layer\n" + "".join(f"g#{i},10G,20MB,matrix,blk\n" for i in range(3))
            + "".join(f"v#{i},1M,8MB,vector,blk\n" for i in range(3)))  # the order count=3 stands for
    counted = load_table(_write(tmp_path / "b.csv", "name,flops,bytes,kind,layer,count\n"
                                "g,10G,20MB,matrix,blk,3\nv,1M,8MB,vector,blk,3\n"))
    assert sorted(counted.nx.nodes) == ["g", "v"]  # two nodes, not six
    _write(tmp_path / "a.csv", rows)
    out = []
    for p in ("a.csv", "b.csv"):
        assert main(["analyze", str(tmp_path / p), "--hw", DEV, "-f", "json"]) == 0
        out.append(json.loads(capsys.readouterr().out))
    a, b = out
    assert _approx(a["totals"], b["totals"])  # 3 x one run vs a sum of 3: equal to float rounding
    assert a["n_kernels"] == 6 and a["layers"][0]["n_ops"] == b["layers"][0]["n_ops"] == 6
    assert a["layers"][0]["n_kernels"] == b["layers"][0]["n_kernels"] == 6
    drop = ("ops", "n_kernels")
    for ra, rb in zip(a["layers"], b["layers"]):
        assert _approx({k: v for k, v in ra.items() if k not in drop}, {k: v for k, v in rb.items() if k not in drop})
    out = []
    for p in ("a.csv", "b.csv"):
        assert main(["analyze", str(tmp_path / p), "--hw", DEV, "-f", "json", "--runtime", "compiled"]) == 0
        out.append(json.loads(capsys.readouterr().out))
    a, b = out
    for k in ("flops", "matrix_flops", "vector_flops"):
        assert a["totals"][k] == b["totals"][k]
    assert abs(a["totals"]["time_realistic_s"] - b["totals"]["time_realistic_s"]) <= 2 * 4e-6 + 1e-9


def test_a_huge_count_costs_one_node(tmp_path, capsys):
    """count=1e6 made a million nodes (4 GB in 42 s); now one node: FLOPs are the row's times 1e6."""
    t0 = time.perf_counter()
    assert main(["analyze", str(_write(tmp_path / "c.csv", "name,flops,bytes,count\ng,1G,1MB,1e6\n")),
                 "--hw", DEV, "-f", "json"]) == 0
    assert time.perf_counter() - t0 < 10
    d = json.loads(capsys.readouterr().out)
    assert d["totals"]["flops"] == 1e9 * 1e6 and d["layers"][0]["n_ops"] == 1_000_000
    _one_line(_cli_error(capsys, str(_write(tmp_path / "d.csv", "name,flops,bytes,count\ng,1,1,1e13\n")),
                         "--hw", DEV), "count 1e+13 is beyond any real model")


# -- control characters never reach a report ------------------------------------------------------------------

def _hostile_table(tmp_path: Path, fmt: str) -> Path:
    name = tmp_path / f"m\x1b[31m\u202e.{fmt}"  # the file name titles the report
    if fmt == "csv":
        name.write_text(f'name,flops,bytes,layer\n"{HOSTILE}",1G,1MB,"L\x1b[31m\u202e\x00x"\n'
                        f'"{HOSTILE}2",1M,1MB,"L\x1b[31m\u202e\x00x"\n', encoding="utf-8")
    else:
        name.write_text(json.dumps([{"name": HOSTILE, "flops": 1e9, "bytes": 1e6, "layer": "L\x1b]0;x\x07"},
                                    {"name": "b\x9b31m", "flops": 1e6, "bytes": 1e6, "scope": "\u2066s"}]))
    return name


@pytest.mark.parametrize("fmt", ["csv", "json"])
@pytest.mark.parametrize("report", ["terminal", "markdown", "csv", "html", "json"])
def test_op_table_names_are_cleaned_in_every_report(tmp_path, capsys, fmt, report):
    path = _hostile_table(tmp_path, fmt)
    assert main(["analyze", str(path), "--hw", DEV, "--ops", "-f", report, "-o", "-"]) == 0  # html: a file by default
    cap = capsys.readouterr()
    assert not RAW_CONTROL.search(cap.out + cap.err), repr(RAW_CONTROL.findall(cap.out + cap.err))
    assert "x1b" in cap.out  # the names are still there, escaped


def test_error_messages_clean_and_short(tmp_path, capsys):
    fifo = _fifo(tmp_path, "p\x1b[31m\u202e.csv")
    _one_line(_cli_error(capsys, str(fifo), "--hw", DEV), "FIFO")
    long = _write(tmp_path / "t.csv", f"name,flops,bytes\ng,{HOSTILE * 40},1\n")
    _one_line(_cli_error(capsys, str(long), "--hw", DEV), "is too long for a number")
    assert shown("\x1b" * 1000).startswith("'\\x1b") and len(shown("y" * 10**6)) <= safe_read.QUOTE_CHARS + 3
    assert shown(10**100_000) == "an integer of over 4000 digits"


def test_md_escape_escapes_control_characters():
    out = md_escape(f"{HOSTILE} \x85\u2029 a\tb\nc")
    assert not RAW_CONTROL.search(out) and "\n" not in out and "\t" not in out
    assert md_escape("x\x1b[31m") == "x\\\\x1b\\[31m"


def test_config_name_or_path_is_cleaned(tmp_path, capsys):
    pytest.importorskip("transformers")
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "_name_or_path": f"org/{HOSTILE}",
           "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
           "num_key_value_heads": 2, "vocab_size": 64, "max_position_embeddings": 64}
    (tmp_path / "m").mkdir()
    _write(tmp_path / "m" / "config.json", json.dumps(cfg))
    for report in ("terminal", "markdown"):
        assert main(["analyze", str(tmp_path / "m"), "--hw", DEV, "--seq", "8", "-f", report]) == 0
        cap = capsys.readouterr()
        assert "org/a" in cap.out and not RAW_CONTROL.search(cap.out + cap.err)
