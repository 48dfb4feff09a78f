"""graphroof's mark on the PNG images it writes, and the check that a chart image may be replaced.

A markdown report written with ``-o report.md`` puts its chart in ``report_roofline.png`` beside it; that name is
not one the user typed, so graphroof replaces a file there only when it wrote that file itself.  Every PNG that
:func:`graphroof.report.write_output` writes carries a ``tEXt`` chunk ``Software=graphroof`` right after the
``IHDR`` header (where the PNG standard puts text chunks that image viewers show as "software"); the check reads
only the first few kilobytes of the file, and never opens anything but a regular file.
"""

from __future__ import annotations

import os
import stat
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

from ..errors import ReportError

__all__ = ["PNG_SIGNATURE", "mark_png", "is_marked", "owned_by_graphroof", "check_chart_target"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_KEY = b"Software"
_VALUE = b"graphroof"
#: bytes read to find the mark: it sits right after the 25-byte IHDR chunk, so a few KiB are plenty
HEAD_BYTES = 64 * 1024


def _chunks(data: bytes) -> Iterator[tuple[int, bytes, bytes, int]]:
    """``(offset, type, body, end)`` of each complete chunk after the signature; stops at a truncated one."""
    pos = len(PNG_SIGNATURE)
    while pos + 12 <= len(data):
        length, ctype = struct.unpack(">I4s", data[pos:pos + 8])
        end = pos + 12 + length
        if end > len(data):
            return
        yield pos, ctype, data[pos + 8:pos + 8 + length], end
        pos = end


def _chunk(ctype: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + ctype + body + struct.pack(">I", zlib.crc32(ctype + body) & 0xFFFFFFFF)


def _is_software(ctype: bytes, body: bytes) -> bool:
    return ctype == b"tEXt" and body.split(b"\0", 1)[0] == _KEY


def mark_png(data: bytes) -> bytes:
    """*data* with the ``Software=graphroof`` text chunk after its header (any other ``Software`` text chunk, such
    as matplotlib's, is dropped); anything that is not a well-formed PNG comes back unchanged."""
    if not data.startswith(PNG_SIGNATURE):
        return data
    parts = [PNG_SIGNATURE]
    end = len(PNG_SIGNATURE)
    for i, (off, ctype, body, end) in enumerate(_chunks(data)):
        if i == 0 and ctype != b"IHDR":
            return data
        if not _is_software(ctype, body):
            parts.append(data[off:end])
        if i == 0:
            parts.append(_chunk(b"tEXt", _KEY + b"\0" + _VALUE))
    if end != len(data) or len(parts) < 2:
        return data  # truncated or trailing bytes: not ours to rewrite
    return b"".join(parts)


def is_marked(head: bytes) -> bool:
    """Whether *head* (the start of a file) is a PNG carrying graphroof's mark before its image data."""
    if not head.startswith(PNG_SIGNATURE):
        return False
    for _off, ctype, body, _end in _chunks(head):
        if ctype == b"IDAT":
            return False
        if _is_software(ctype, body) and body == _KEY + b"\0" + _VALUE:
            return True
    return False


def owned_by_graphroof(path: str | os.PathLike) -> bool:
    """Whether *path* (following symlinks) is a regular file holding a PNG that graphroof wrote."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False  # a FIFO, device or folder: never opened (a FIFO's open would wait for a writer)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return False
    try:
        with os.fdopen(fd, "rb") as f:
            return is_marked(f.read(HEAD_BYTES))
    except OSError:
        return False


def check_chart_target(path: str | os.PathLike) -> None:
    """Raise :class:`ReportError` unless the chart image may be written at *path*: nothing is there yet, or a
    PNG that graphroof wrote (an earlier run's chart)."""
    p = Path(path)
    if not os.path.lexists(p) or owned_by_graphroof(p):
        return
    raise ReportError(f"{p} exists and graphroof did not write it; the markdown report's chart image would replace "
                      f"it: move or remove that file, or choose another -o name")
