"""Where a report goes when ``-o`` is not given, and the one stderr line saying what was written.

A page (``-f html``) is thousands of lines a terminal cannot show: without ``-o`` it is written to
``<model>-report.html`` in the current folder, never over a file graphroof did not write
(:func:`graphroof.report.output.check_default_target`).  Text formats go to standard output as before.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from ..errors import InputError, ReportError
from ..units import fmt_bytes

__all__ = ["FILE_FORMATS", "default_name", "resolve_output", "say_written"]

#: Formats written only to a file unless ``-o -`` asks for standard output.
FILE_FORMATS = {"html": "html"}

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def default_name(model: str, ext: str) -> str:
    """``resnet-50`` -> ``resnet-50-report.html``; ``path/model.onnx`` -> ``model-report.html``;
    ``path/llama/config.json`` -> ``llama-report.html``; ``pkg.mod:build`` -> ``pkg.mod-build-report.html``."""
    p = Path(model)
    stem = p.stem if p.suffix.lower() in (".onnx", ".csv", ".yaml", ".yml", ".json", ".py") else p.name
    if stem == "config" and p.parent.name:
        stem = p.parent.name
    stem = _UNSAFE.sub("-", stem).strip("-.") or "model"
    return f"{stem}-report.{ext}"


def resolve_output(output: str | None, fmt: str, model: str) -> str:
    """The path to write: *output* when given, else the default file of a page format, else ``-``."""
    if output is not None:
        return output
    ext = FILE_FORMATS.get(fmt)
    if ext is None:
        return "-"
    from ..report.output import check_default_target

    name = default_name(model, ext)
    try:
        check_default_target(name, fmt)
    except ReportError as e:
        raise InputError(str(e)) from None
    return name


def say_written(paths: list[str], quiet: bool) -> None:
    """``wrote r50.md (12 kB) and r50_roofline.png (102 kB)`` on stderr, unless *quiet* or nothing went to a file."""
    files = [p for p in paths if p != "-"]
    if quiet or not files:
        return
    parts = []
    for p in files:
        try:
            st = os.stat(p)
            parts.append(f"{p} ({fmt_bytes(st.st_size)})" if os.path.isfile(p) else p)
        except OSError:
            parts.append(p)
    text = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    print(f"wrote {text}", file=sys.stderr, flush=True)
