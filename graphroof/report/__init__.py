"""Reports: one row model (``Analysis.ops`` / ``.layers``), several renderers.

``render_text(analysis, fmt)`` returns the report as a string; ``write_output(text, out)`` writes it to a path
or ``-`` (stdout) atomically: a failed write leaves no partial file behind.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from ..errors import ReportError

__all__ = ["FORMATS", "render_text", "write_output"]

FORMATS = ("terminal", "markdown", "json")


def render_text(analysis, fmt: str = "terminal", **opts) -> str:
    if fmt == "json":
        return analysis.to_json() + "\n"
    if fmt in ("terminal", "markdown"):
        from .text import render

        return render(analysis, markdown=(fmt == "markdown"), **opts)
    raise ReportError(f"unknown format {fmt!r}; use one of: {', '.join(FORMATS)}")


def write_output(data: str | bytes, out: str | os.PathLike = "-") -> None:
    """Write *data* to *out* (``-`` = stdout) via a temp file + rename, so failures leave nothing behind."""
    if str(out) == "-":
        if isinstance(data, bytes):
            sys.stdout.buffer.write(data)
        else:
            sys.stdout.write(data)
        sys.stdout.flush()
        return
    path = Path(out)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ReportError(f"cannot write {path}: directory {parent} does not exist; create it or choose another -o path")
    if path.is_dir():
        raise ReportError(f"cannot write {path}: it is a directory; give a file name with -o")
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode("utf-8"))
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise ReportError(f"cannot write {path}: {e.strerror or e}; choose a writable -o path") from None
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
