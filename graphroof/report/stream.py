"""Text written piece by piece to ``-o PATH`` or standard output, under the rules of :func:`write_output`.

A long table (``graphroof sweep --stream -f csv``: one row per point, produced while the points are priced) is
written as it is made instead of being held whole.  The target is handled as :mod:`graphroof.report.output`
handles it: a new name or a regular file gets a temp file beside it, renamed over it only when the writing
finished (a failure or an error in the producer leaves the old file, or nothing); a file with several hard links
is truncated and written in place; a character device, a FIFO and this process's own descriptors are written
straight through; ``-`` is standard output; a folder, a block device or a socket is refused.  Writes are
buffered (64 kB), so a row costs no system call of its own.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from types import TracebackType

from ..errors import ReportError
from .output import _error, _fd_alias, _file_mode, _write_all, write_stdout

__all__ = ["OutputStream"]

#: bytes gathered before one write
BUFFER = 64 * 1024


class OutputStream:
    """``with OutputStream(out) as s: s.write(text) ...``: see the module docstring."""

    def __init__(self, out: str | os.PathLike = "-"):
        self.name = str(out)
        self._stdout = False
        self._fd: int | None = None
        self._own = False
        self._tmp: str | None = None
        self._target: Path | None = None
        self._st: os.stat_result | None = None
        self._buf: list[bytes] = []
        self._size = 0

    def __enter__(self) -> OutputStream:
        name = self.name
        alias = None if name == "-" else _fd_alias(name)
        if name == "-" or alias == 1:
            self._stdout = True
            return self
        if alias is not None:
            self._fd = alias
            return self
        path = Path(os.path.realpath(name))  # a symlink's target is written; the link stays
        try:
            st: os.stat_result | None = os.stat(path)
        except FileNotFoundError:
            st = None
        try:
            if st is None or (stat.S_ISREG(st.st_mode) and st.st_nlink == 1):
                if not path.parent.is_dir():
                    raise ReportError(f"cannot write {name}: directory {Path(name).parent} does not exist; create it "
                                      "or choose another -o path")
                self._fd, self._tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
                self._own, self._target, self._st = True, path, st
            elif stat.S_ISREG(st.st_mode):  # hard links share the inode: rewritten in place
                self._fd, self._own = os.open(path, os.O_WRONLY | os.O_TRUNC), True
            elif stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
                self._fd, self._own = os.open(path, os.O_WRONLY | getattr(os, "O_NOCTTY", 0)), True
            else:
                kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a block device (a disk)" \
                    if stat.S_ISBLK(st.st_mode) else "not a regular file"
                raise ReportError(f"cannot write {name}: it is {kind}; give a file name with -o")
        except OSError as e:
            raise _error(name, e) from None
        return self

    def write(self, text: str) -> None:
        self._buf.append(text.encode("utf-8"))
        self._size += len(self._buf[-1])
        if self._size >= BUFFER:
            self._flush()

    def _flush(self) -> None:
        if not self._buf:
            return
        data = b"".join(self._buf)
        self._buf, self._size = [], 0
        if self._stdout:
            write_stdout(data.decode("utf-8"))
            return
        assert self._fd is not None
        try:
            _write_all(self._fd, data)
        except OSError as e:
            raise _error(self.name, e) from None

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if et is None:
                self._flush()
        finally:
            self._close(ok=et is None)

    def _close(self, ok: bool) -> None:
        if self._own and self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._tmp is None:
            return
        tmp, self._tmp = self._tmp, None
        try:
            if not ok:
                raise OSError("not finished")
            os.chmod(tmp, _file_mode(self._st))  # mkstemp makes 0600; a table is meant to be shared
            st = self._st
            if st is not None and (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
                try:
                    os.chown(tmp, st.st_uid, st.st_gid)
                except OSError:
                    pass
            assert self._target is not None
            os.replace(tmp, self._target)
        except OSError as err:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            if ok:
                raise _error(self.name, err) from None
