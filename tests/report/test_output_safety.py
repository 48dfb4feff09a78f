"""Issue 26, writing output: ``-o`` writes through symlinks, hard links, FIFOs and device nodes instead of renaming
a temp file over them; a full disk (``-o`` or stdout) is one line; the markdown image link is valid for any file
name; the chart beside a markdown report replaces only a PNG that graphroof wrote.

Device nodes are private copies made with ``os.mknod`` inside ``tmp_path`` (root only); the real ``/dev`` is never
touched.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import struct
import subprocess
import sys
import threading
import zlib
from pathlib import Path
from urllib.parse import unquote

import pytest

from graphroof.cli import main
from graphroof.errors import ReportError
from graphroof.report import chart_image_path, write_output, write_outputs, write_report
from graphroof.report.pngmark import PNG_SIGNATURE, is_marked, mark_png, owned_by_graphroof
from tests._report_models import analyse, tiny_graph

ROOT = Path(__file__).resolve().parents[2]
TEXTBOOK = str(ROOT / "tests" / "gold" / "ops_table.csv")
ROOT_ONLY = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                               reason="os.mknod of a character device needs root")


def _no_temp_files(monkeypatch):
    """Make any temp file in the output module fail: a write that must not rename proves it does not try."""
    def refuse(*_a, **_k):
        raise AssertionError("no temp file may be made for this target")

    monkeypatch.setattr("graphroof.report.output.tempfile.mkstemp", refuse)


def _mknod_char(path: Path, major: int, minor: int) -> Path:
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    except PermissionError as e:  # a container without CAP_MKNOD
        pytest.skip(f"cannot make a device node here: {e}")
    return path


def _assert_char_device(path: Path, major: int, minor: int) -> None:
    st = os.lstat(path)
    assert stat.S_ISCHR(st.st_mode), f"{path} was turned into a regular file"
    assert (os.major(st.st_rdev), os.minor(st.st_rdev)) == (major, minor)


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("graphroof: error: ") and "Traceback" not in err, err
    return lines[0]


# -- symlinks, hard links, FIFOs -------------------------------------------------------------------------------------


def test_symlink_is_written_through_and_kept(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target.name)
    write_output("new", link)
    assert link.is_symlink() and os.readlink(link) == "real.json"
    assert target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]  # no temp file left


def test_dangling_symlink_creates_its_target_and_a_failed_batch_removes_only_that(tmp_path):
    link = tmp_path / "a.md"
    link.symlink_to("made.md")
    write_output("x", link)
    assert link.is_symlink() and (tmp_path / "made.md").read_text() == "x"

    link2 = tmp_path / "b.md"
    link2.symlink_to("made2.md")
    with pytest.raises(ReportError, match="does not exist"):
        write_outputs([("x", link2), ("y", tmp_path / "no_such_dir" / "c.png")])
    assert link2.is_symlink() and not (tmp_path / "made2.md").exists()  # all-or-nothing: the new target went


def test_hard_link_is_rewritten_in_place(tmp_path, monkeypatch):
    a = tmp_path / "a.json"
    a.write_text("old")
    b = tmp_path / "b.json"
    os.link(a, b)
    _no_temp_files(monkeypatch)
    write_output("new report", a)
    assert a.read_text() == b.read_text() == "new report"
    assert os.stat(a).st_ino == os.stat(b).st_ino and os.stat(a).st_nlink == 2


def test_a_single_link_file_is_replaced_atomically_and_keeps_its_mode(tmp_path):
    f = tmp_path / "r.json"
    f.write_text("old")
    f.chmod(0o640)
    ino = os.stat(f).st_ino
    write_output("new", f)
    assert f.read_text() == "new" and f.stat().st_mode & 0o777 == 0o640
    assert os.stat(f).st_ino != ino  # a rename, so a reader never sees half a report


def test_fifo_is_written_into_not_replaced(tmp_path, monkeypatch):
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the reader is there first, so the writer's open returns
    _no_temp_files(monkeypatch)
    errors: list[BaseException] = []

    def write() -> None:
        try:
            write_output('{"ok": 1}\n', fifo)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    t.join(timeout=20)
    try:
        assert not t.is_alive(), "write_output hung on a FIFO"
        assert not errors, errors
        try:
            got = os.read(rfd, 1 << 16)
        except BlockingIOError:  # nothing was written into the FIFO
            got = b""
        assert got == b'{"ok": 1}\n'
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    finally:
        os.close(rfd)


def test_cli_writes_into_a_fifo_its_reader_gets_the_report(tmp_path):
    """End to end in a subprocess with a time and memory cap: before the fix the FIFO was replaced by a regular
    file and a reader waited forever."""
    fifo = tmp_path / "r.json"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30)); "
            "from graphroof.cli import main; sys.exit(main(sys.argv[1:]))")
    try:
        r = subprocess.run([sys.executable, "-c", code, "-q", "analyze", TEXTBOOK, "-f", "json", "-o", str(fifo)],
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
    finally:
        if reader.is_alive():  # the writer never opened the FIFO: let the reader's open return
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)) if stat.S_ISFIFO(os.lstat(fifo).st_mode) else None
        reader.join(timeout=20)
    assert r.returncode == 0, r.stderr
    assert got and got[0].startswith(b"{") and b'"schema_version"' in got[0]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_descriptor_path_is_written_through_the_descriptor(tmp_path):
    """``-o /dev/stdout`` and friends: a path naming one of our own descriptors (here a symlink in tmp_path to
    ``/proc/self/fd/N`` of a pipe) is written through that descriptor, not renamed over."""
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc/self/fd on this system")
    r, w = os.pipe()
    try:
        link = tmp_path / "out"
        link.symlink_to(f"/proc/self/fd/{w}")
        write_output("through the pipe\n", link)
        os.set_blocking(r, False)  # nothing in the pipe must fail the test, not hang it
        try:
            got = os.read(r, 1024)
        except BlockingIOError:
            got = b""
        assert got == b"through the pipe\n"
        assert link.is_symlink()
    finally:
        os.close(r)
        os.close(w)


# -- device nodes (private copies) ------------------------------------------------------------------------------------


@ROOT_ONLY
def test_null_device_copy_stays_a_device(tmp_path, monkeypatch, capsys):
    dev = _mknod_char(tmp_path / "null", 1, 3)
    _no_temp_files(monkeypatch)
    write_output("x" * 10_000, dev)
    _assert_char_device(dev, 1, 3)
    # a markdown report to a device: no chart image beside it (that would be a new file next to the node)
    assert main(["-q", "analyze", TEXTBOOK, "-f", "markdown", "-o", str(dev)]) == 0
    _assert_char_device(dev, 1, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]
    assert capsys.readouterr().err == ""


@ROOT_ONLY
def test_full_device_copy_is_a_one_line_error_and_stays_a_device(tmp_path, monkeypatch, capsys):
    dev = _mknod_char(tmp_path / "full", 1, 7)
    _no_temp_files(monkeypatch)
    with pytest.raises(ReportError, match="No space left on device"):
        write_output("report", dev)
    _assert_char_device(dev, 1, 7)
    assert main(["-q", "analyze", TEXTBOOK, "-f", "json", "-o", str(dev)]) == 1
    line = _one_line_error(capsys)
    assert "No space left on device" in line and "-o" in line
    _assert_char_device(dev, 1, 7)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]


@ROOT_ONLY
def test_block_device_is_refused_unopened(tmp_path):
    node = tmp_path / "disk"
    try:  # major 240: "local/experimental use", no driver behind it; it is refused before any open anyway
        os.mknod(node, 0o600 | stat.S_IFBLK, os.makedev(240, 0))
    except PermissionError as e:
        pytest.skip(f"cannot make a device node here: {e}")
    with pytest.raises(ReportError, match="block device"):
        write_output("report", node)
    assert stat.S_ISBLK(os.lstat(node).st_mode)


# -- standard output ---------------------------------------------------------------------------------------------


class _Stdout:
    """A stdout whose writes fail with *exc*."""

    def __init__(self, exc: OSError):
        self.exc = exc

    def write(self, _s):
        raise self.exc

    def flush(self):
        raise self.exc

    def isatty(self):
        return False


@pytest.mark.parametrize("argv", [["analyze", TEXTBOOK], ["analyze", TEXTBOOK, "-f", "json"], ["hw", "list"]])
def test_full_disk_under_stdout_is_one_line(monkeypatch, capsys, argv):
    monkeypatch.setattr(sys, "stdout", _Stdout(OSError(errno.ENOSPC, "No space left on device")))
    assert main(["-q", *argv]) == 1
    line = _one_line_error(capsys)
    assert "cannot write to standard output: No space left on device" in line


def test_closed_pipe_under_stdout_stays_a_quiet_exit_0(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", _Stdout(BrokenPipeError(errno.EPIPE, "Broken pipe")))
    assert main(["-q", "analyze", TEXTBOOK]) == 0
    assert capsys.readouterr().err == ""


def test_main_restores_stdout(capsys):
    before = sys.stdout
    assert main(["-q", "analyze", TEXTBOOK, "-f", "json"]) == 0
    assert sys.stdout is before and capsys.readouterr().out.startswith("{")


# -- markdown image link --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["my report (v2).md", "a [b] c.md", "x#y%z.md", "<x> & 'y'.md", "résumé ü.md"])
def test_image_link_is_valid_markdown_for_any_file_name(round_hw, tmp_path, name):
    out = tmp_path / name
    write_report(analyse(tiny_graph(), round_hw), "markdown", out)
    md = out.read_text(encoding="utf-8")
    m = re.search(r"!\[[^\]]*\]\(([^)\s]*)\)", md)
    assert m, "no image link"
    dest = m.group(1)
    assert not re.search(r"[\s()<>\[\]#]", dest)  # nothing that ends or breaks a CommonMark link destination
    assert unquote(dest) == chart_image_path(out).name and (tmp_path / unquote(dest)).is_file()


def test_plain_image_name_stays_readable(round_hw, tmp_path):
    write_report(analyse(tiny_graph(), round_hw), "markdown", tmp_path / "report.md")
    assert "](report_roofline.png)" in (tmp_path / "report.md").read_text(encoding="utf-8")


# -- the chart beside a markdown report -----------------------------------------------------------------------------


def _foreign_png() -> bytes:
    """A valid 1x1 PNG that graphroof did not write."""
    def chunk(t: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + t + body + struct.pack(">I", zlib.crc32(t + body))

    return (PNG_SIGNATURE + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\0\0")) + chunk(b"IEND", b""))


@pytest.mark.parametrize("foreign", [b"holiday photo", None])
def test_chart_never_replaces_a_file_graphroof_did_not_write(round_hw, tmp_path, capsys, foreign):
    img = tmp_path / "x_roofline.png"
    old = foreign if foreign is not None else _foreign_png()
    img.write_bytes(old)
    with pytest.raises(ReportError, match=r"x_roofline.png exists and graphroof did not write it.*remove"):
        write_report(analyse(tiny_graph(), round_hw), "markdown", tmp_path / "x.md")
    assert img.read_bytes() == old and not (tmp_path / "x.md").exists()  # nothing written
    assert main(["-q", "analyze", TEXTBOOK, "-f", "markdown", "-o", str(tmp_path / "x.md")]) == 1
    assert "x_roofline.png exists and graphroof did not write it" in _one_line_error(capsys)
    assert img.read_bytes() == old and sorted(p.name for p in tmp_path.iterdir()) == ["x_roofline.png"]


def test_chart_replaces_graphroofs_own_png(round_hw, tmp_path):
    out = tmp_path / "x.md"
    write_report(analyse(tiny_graph(), round_hw), "markdown", out)
    img = chart_image_path(out)
    assert owned_by_graphroof(img)
    img.write_bytes(mark_png(_foreign_png()))  # e.g. from `graphroof plot -o x_roofline.png`
    write_report(analyse(tiny_graph(), round_hw), "markdown", out)
    assert owned_by_graphroof(img) and img.stat().st_size > 1000


def test_chart_refuses_a_fifo_without_opening_it(round_hw, tmp_path):
    os.mkfifo(tmp_path / "x_roofline.png")  # opening it to look inside would wait for a writer forever
    t = threading.Thread(target=lambda: pytest.raises(ReportError, write_report, analyse(tiny_graph(), round_hw),
                                                      "markdown", tmp_path / "x.md"), daemon=True)
    t.start()
    t.join(timeout=20)
    assert not t.is_alive(), "checking the chart target hung on a FIFO"
    assert not (tmp_path / "x.md").exists()


def test_png_mark():
    png = _foreign_png()
    marked = mark_png(png)
    assert not is_marked(png) and is_marked(marked) and mark_png(marked) == marked
    # still a well-formed PNG: every chunk's CRC holds, IHDR first, IEND last
    pos, types = 8, []
    while pos < len(marked):
        length, t = struct.unpack(">I4s", marked[pos:pos + 8])
        body = marked[pos + 8:pos + 8 + length]
        assert struct.unpack(">I", marked[pos + 8 + length:pos + 12 + length])[0] == zlib.crc32(t + body)
        types.append(t)
        pos += 12 + length
    assert types == [b"IHDR", b"tEXt", b"IDAT", b"IEND"]
    # matplotlib's own Software chunk is replaced, not duplicated
    body = b"Software\0Matplotlib version3.x"
    mpl = png[:33] + struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", zlib.crc32(b"tEXt" + body)) \
        + png[33:]
    assert mark_png(mpl) == marked
    assert mark_png(b"not a png") == b"not a png" and mark_png(png[:-3]) == png[:-3]


def test_written_pngs_carry_the_mark(tmp_path):
    write_output(_foreign_png(), tmp_path / "plot.png")
    assert owned_by_graphroof(tmp_path / "plot.png")


def test_cli_refuses_a_foreign_chart_before_any_work(tmp_path, monkeypatch, capsys):
    import graphroof.api

    def boom(*_a, **_k):
        raise AssertionError("analysed the model before checking -o")

    monkeypatch.setattr(graphroof.api, "analyze", boom)
    (tmp_path / "r_roofline.png").write_bytes(b"not ours")
    assert main(["-q", "analyze", TEXTBOOK, "-f", "markdown", "-o", str(tmp_path / "r.md")]) == 1
    assert "r_roofline.png exists and graphroof did not write it" in _one_line_error(capsys)
