"""Writing a report to ``-o PATH`` or standard output without harming what is already there.

``-o PATH`` behaves like the shell's ``>``, except that a failed write leaves no half-written report behind:

- a new name or a regular file is written to a temp file in the same folder and renamed over it, so a reader sees
  the old report or the new one; a symlink is followed and its target replaced, the link itself stays;
- a regular file with several hard links is rewritten in place (truncate + write): a rename would split the links;
- a character device (``/dev/null``, a terminal), a FIFO and this process's own descriptors (``/dev/stdout``,
  ``/dev/fd/N``) are written straight through: a rename would turn a device node into a plain file and leave a
  FIFO's reader waiting forever;
- ``-`` is standard output; a folder, a block device (a disk) or a socket is refused.

Every failure (a full disk included) is a one-line :class:`~graphroof.errors.ReportError`; a closed pipe stays a
:class:`BrokenPipeError` (the CLI exits quietly on it).  PNG data gets graphroof's mark
(:mod:`graphroof.report.pngmark`), so that a later markdown report knows which chart image it may replace.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
import tempfile
from pathlib import Path

from ..errors import ReportError
from .pngmark import mark_png

__all__ = ["write_output", "write_outputs", "write_stdout", "writes_beside", "owned_report", "check_default_target"]

_FD_PATH = re.compile(r"^/(?:dev|proc/self|proc/(\d+))/fd/(\d+)$")
_STD_PATHS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def write_stdout(data: str | bytes) -> None:
    """Write *data* to ``sys.stdout`` and flush; an OSError other than a closed pipe becomes a ReportError."""
    try:
        if isinstance(data, bytes):
            buf = getattr(sys.stdout, "buffer", None)
            if buf is None:
                raise ReportError("standard output takes no binary data here; give a file name with -o")
            sys.stdout.flush()
            buf.write(data)
            buf.flush()
        else:
            sys.stdout.write(data)
            sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        raise ReportError(f"cannot write to standard output: {e.strerror or e}; free space where it goes or write "
                          f"to a file with -o") from None


def _fd_alias(name: str) -> int | None:
    """The descriptor number when *name* is one of this process's open files (``/dev/stdout``, ``/dev/fd/3``,
    ``/proc/self/fd/1``, or a symlink to one): those are written through the descriptor, where the shell put it."""
    p = os.path.abspath(name)
    for _ in range(40):
        if p in _STD_PATHS:
            return _STD_PATHS[p]
        m = _FD_PATH.match(p)
        if m and (m.group(1) is None or int(m.group(1)) == os.getpid()):
            return int(m.group(2))
        try:
            link = os.readlink(p)
        except OSError:
            return None
        p = os.path.normpath(os.path.join(os.path.dirname(p), link))
    return None


def _error(name: str, e: OSError) -> ReportError:
    fix = "free some space or choose another -o path" if e.errno in (errno.ENOSPC, errno.EDQUOT) \
        else "choose a writable -o path"
    return ReportError(f"cannot write {name}: {e.strerror or e}; {fix}")


def _write_all(fd: int, raw: bytes) -> None:
    view = memoryview(raw)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, "short write")
        view = view[n:]


def _write_into(path: str | os.PathLike, raw: bytes, flags: int) -> None:
    """Open an existing *path* for writing (no create, no rename) and write *raw* into it."""
    fd = os.open(path, os.O_WRONLY | flags | getattr(os, "O_NOCTTY", 0))
    try:
        _write_all(fd, raw)
    finally:
        os.close(fd)


def _file_mode(st: os.stat_result | None) -> int:
    """The mode an ordinary ``open(path, "w")`` would give: the old file's, else 0666 minus the umask."""
    if st is not None:
        return st.st_mode & 0o777
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _replace(path: Path, raw: bytes, st: os.stat_result | None) -> None:
    """Temp file beside *path* + rename over it; a folder that takes no new file makes an existing file be
    rewritten in place instead (a writable file in a read-only folder)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except PermissionError:
        if st is None:
            raise
        _write_into(path, raw, os.O_TRUNC)
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.chmod(tmp, _file_mode(st))  # mkstemp makes 0600; a report is meant to be shared
        if st is not None and (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
            try:
                os.chown(tmp, st.st_uid, st.st_gid)  # root rewriting a user's report leaves it theirs
            except OSError:
                pass
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_path(raw: bytes, name: str) -> Path | None:
    """Write *raw* to the file system path *name*; returns the file this call created (None: it was there)."""
    path = Path(os.path.realpath(name))  # a symlink's target is written; the link stays
    try:
        st: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is None:
        if not path.parent.is_dir():
            shown = path.parent if os.path.lexists(name) else Path(name).parent  # a dangling link: its target's
            raise ReportError(f"cannot write {name}: directory {shown} does not exist; create it or choose "
                              f"another -o path")
        _replace(path, raw, None)
        return path
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise ReportError(f"cannot write {name}: it is a directory; give a file name with -o")
    if stat.S_ISREG(mode):
        if st.st_nlink > 1:
            _write_into(path, raw, os.O_TRUNC)  # hard links share the inode: a rename would split them
        else:
            _replace(path, raw, st)
        return None
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        _write_into(path, raw, 0)  # a FIFO waits for its reader, as the shell's `>` does
        return None
    kind = "a block device (a disk)" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) \
        else "not a regular file"
    raise ReportError(f"cannot write {name}: it is {kind}; give a file name with -o")


def _write(data: str | bytes, out: str | os.PathLike) -> Path | None:
    name = str(out)
    fd = None if name == "-" else _fd_alias(name)
    if isinstance(data, bytes):
        data = mark_png(data)
    if name == "-" or fd == 1:
        write_stdout(data)
        return None
    raw = data if isinstance(data, bytes) else data.encode("utf-8")
    try:
        if fd is not None:
            if fd == 2:
                sys.stderr.flush()
            _write_all(fd, raw)
            return None
        return _write_path(raw, name)
    except OSError as e:
        raise _error(name, e) from None


def write_output(data: str | bytes, out: str | os.PathLike = "-") -> None:
    """Write *data* to *out* (``-`` = stdout): see the module docstring for what each kind of path gets."""
    _write(data, out)


def writes_beside(out: str | os.PathLike) -> bool:
    """Whether *out* is a file a report may put companion files beside (a chart image): a path, not ``-``, a
    device, a FIFO or a descriptor."""
    name = str(out)
    if name == "-" or _fd_alias(name) is not None:
        return False
    try:
        return stat.S_ISREG(os.stat(name).st_mode)
    except FileNotFoundError:
        return True
    except OSError:
        return True  # let the write itself report what is wrong with the path


def write_outputs(files: list[tuple[str | bytes, str | os.PathLike]]) -> None:
    """Write several files all-or-nothing: if one fails, the ones this call created are removed again."""
    created: list[Path] = []
    try:
        for data, out in files:
            new = _write(data, out)
            if new is not None:
                created.append(new)
    except ReportError:
        for p in created:
            try:
                p.unlink()
            except OSError:
                pass
        raise


#: The start of every HTML page graphroof writes (``<meta name="generator" content="graphroof 0.1.0, ...">``).
_HTML_MARK = b'<meta name="generator" content="graphroof '


def owned_report(path: str | os.PathLike) -> bool:
    """Whether *path* is a regular file graphroof wrote: a marked PNG, or an HTML page with graphroof's generator
    tag in its head."""
    from .pngmark import owned_by_graphroof

    if owned_by_graphroof(path):
        return True
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as f:
            return _HTML_MARK in f.read(4096)
    except OSError:
        return False


def check_default_target(path: str | os.PathLike, fmt: str) -> None:
    """Raise :class:`ReportError` unless a report with no ``-o`` may be written to its default *path*: nothing is
    there yet, or a file graphroof wrote (an earlier run's report)."""
    if not os.path.lexists(path) or owned_report(path):
        return
    raise ReportError(f"{path} exists and graphroof did not write it; an {fmt.upper()} report goes to a file: give "
                      f"its name with -o FILE (or -o - for standard output)")
