"""OutputStream: text written piece by piece under write_output's rules (sweep --stream)."""

from __future__ import annotations

import os
import threading

import pytest

from graphroof.errors import ReportError
from graphroof.report.stream import BUFFER, OutputStream


def test_regular_file_replaced_only_when_finished(tmp_path):
    p = tmp_path / "rows.csv"
    p.write_text("old\n")
    with OutputStream(p) as s:
        for i in range(3 * BUFFER // 10):  # several buffers' worth
            s.write(f"{i:09d}\n")
        assert p.read_text() == "old\n"  # nothing replaced while rows are still coming
    assert p.read_text().splitlines()[-1] == f"{3 * BUFFER // 10 - 1:09d}"
    assert [f.name for f in tmp_path.iterdir()] == ["rows.csv"]  # no temp file left


def test_a_failure_in_the_producer_leaves_the_old_file_and_no_temp(tmp_path):
    p = tmp_path / "rows.csv"
    p.write_text("old\n")
    with pytest.raises(RuntimeError), OutputStream(p) as s:
        s.write("new\n" * BUFFER)
        raise RuntimeError("the sweep failed half way")
    assert p.read_text() == "old\n" and [f.name for f in tmp_path.iterdir()] == ["rows.csv"]


def test_symlink_written_through_and_hard_link_kept(tmp_path):
    target, link = tmp_path / "t.csv", tmp_path / "l.csv"
    target.write_text("x")
    link.symlink_to(target)
    with OutputStream(link) as s:
        s.write("a\n")
    assert link.is_symlink() and target.read_text() == "a\n"
    other = tmp_path / "h.csv"
    os.link(target, other)
    with OutputStream(target) as s:
        s.write("b\n")
    assert other.read_text() == "b\n" and os.stat(target).st_ino == os.stat(other).st_ino


def test_fifo_is_written_into(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    with OutputStream(fifo) as s:
        s.write("row\n")
    reader.join(10)
    assert got == [b"row\n"] and fifo.is_fifo()


def test_folder_and_missing_parent_are_one_line_errors(tmp_path):
    with pytest.raises(ReportError, match="it is a directory"), OutputStream(tmp_path):
        pass
    with pytest.raises(ReportError, match="does not exist"), OutputStream(tmp_path / "no" / "x.csv"):
        pass


def test_stdout(capsys):
    with OutputStream("-") as s:
        s.write("a,b\n")
        s.write("1,2\n")
    assert capsys.readouterr().out == "a,b\n1,2\n"
