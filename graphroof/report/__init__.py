"""Reports: every renderer.  Results (:class:`~graphroof.analysis.Analysis`, the device comparison, the LLM
estimate, the measured comparison) hold data and ``to_dict()``; this package turns them into text.

``render(result, fmt)`` is the one entry point for any result; ``render_text(analysis, fmt)`` returns the
analysis report as a string; ``write_report(phases, fmt, out)`` renders and
writes it (with the chart image next to a markdown file); ``write_output(data, out)`` writes one file to a
path or ``-`` (stdout) atomically: a failed write leaves no partial file behind.

Formats: ``terminal`` (plain tables), ``markdown`` (GitHub-flavoured), ``json`` and ``csv`` (for scripts),
``html`` (one self-contained file with an interactive roofline chart).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..errors import ReportError
from ..errors import warn as warn_user

__all__ = ["FORMATS", "FORMATS_BY_KIND", "render", "render_text", "render_report", "write_report", "write_output",
           "write_outputs",
           "chart_image_path"]

FORMATS = ("terminal", "markdown", "json", "csv", "html")


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ReportError(f"unknown format {fmt!r}; use one of: {', '.join(FORMATS)}")


#: The formats each kind of result renders to.
FORMATS_BY_KIND = {
    "analysis": FORMATS,
    "compare": ("terminal", "markdown", "json", "csv", "html"),
    "llm": ("terminal", "markdown", "json", "html"),
    "measured": ("terminal", "markdown", "json", "html"),
    "sweep": ("terminal", "markdown", "json", "csv", "html", "png"),
}


def _kind(result: Any) -> str:
    from ..analysis import DeviceComparison
    from ..llm.result import LLMEstimate
    from ..measure.run import MeasuredComparison

    if isinstance(result, DeviceComparison):
        return "compare"
    if isinstance(result, LLMEstimate):
        return "llm"
    if isinstance(result, MeasuredComparison):
        return "measured"
    if hasattr(result, "frontier") and hasattr(result, "points"):  # a sweep (LLM or batch): see report/sweep.py
        return "sweep"
    return "analysis"  # an Analysis, or phases: {name: Analysis} / [(name, Analysis), ...]


def render(result: Any, fmt: str = "terminal", **opts: Any) -> str:
    """Any graphroof result as one string in *fmt* (``terminal`` | ``markdown`` | ``json`` | ``csv`` | ``html``,
    as the kind of result allows: see :data:`FORMATS_BY_KIND`).  *opts*: ``ops`` / ``top`` for the op tables."""
    kind = _kind(result)
    allowed = FORMATS_BY_KIND[kind]
    if fmt not in allowed:
        raise ReportError(f"unknown format {fmt!r}; use one of: {', '.join(allowed)}")
    if kind == "analysis":
        return render_text(result, fmt, **opts)
    if fmt == "json" and kind == "llm":
        import json

        from ..units import json_safe
        from .advice import llm_advice

        return json.dumps({**result.to_dict(), "next_steps": json_safe(llm_advice(result))}, indent=2) + "\n"
    if fmt == "json":
        return result.to_json() + "\n"
    if kind == "sweep":
        from .sweep import render_sweep

        return render_sweep(result, fmt)
    if kind == "compare":
        from .compare import render_compare

        return render_compare(result, fmt)
    if kind == "llm" and fmt == "html":
        from .llm_html import render_llm_html

        return render_llm_html(result)
    if kind == "llm":
        from .llm import render_llm

        return render_llm(result, markdown=fmt == "markdown")
    if fmt == "html":
        from .measured_html import render_measured_html

        return render_measured_html(result)
    from .measured import render_measured

    return render_measured(result, markdown=fmt == "markdown", ops=bool(opts.get("ops")), top=opts.get("top"))


def render_text(analysis, fmt: str = "terminal", **opts) -> str:
    """The report in *fmt* as one string (markdown without the chart image; see :func:`render_report`)."""
    _check_format(fmt)
    if fmt == "json":
        from .tables import render_json

        return render_json(analysis)
    if fmt == "csv":
        from .tables import render_csv

        return render_csv(analysis, ops=bool(opts.get("ops")))
    if fmt == "html":
        from .html import render_html

        return render_html(analysis, fold=opts.get("fold", True))
    if fmt == "markdown":
        from .markdown import render_markdown

        return render_markdown(analysis, **opts)
    from .text import render

    return render(analysis, markdown=False, **opts)


def chart_image_path(out: str | os.PathLike) -> Path:
    """Where a markdown report's chart goes: ``report.md`` -> ``report_roofline.png`` beside it."""
    p = Path(out)
    return p.with_name(f"{p.stem}_roofline.png")


def render_report(phases: Any, fmt: str = "terminal", out: str | os.PathLike = "-", *, ops: bool = False,
                  top: int | None = None, kernels: bool = False, fold: bool = True) -> list[tuple[str | bytes, str]]:
    """Render *phases* (an Analysis or ``[(name, Analysis), ...]``) as ``[(data, path), ...]`` to write.

    A markdown report written to a path gets the roofline PNG beside it (when matplotlib is installed).
    """
    _check_format(fmt)
    if fmt == "markdown":
        from .chart import chart_data, render_static
        from .content import as_phases
        from .markdown import render_markdown

        ph = as_phases(phases)
        cd = chart_data(ph)
        files: list[tuple[str | bytes, str]] = []
        image = None
        if str(out) != "-":
            img = chart_image_path(out)
            try:
                files.append((render_static(cd, "png", title=f"{ph[0].analysis.model_name} on {cd.hw_label}"), str(img)))
                image = img.name
            except ReportError as e:  # no matplotlib: the report still works without its picture
                warn_user(f"{e}; the markdown report has no chart image")
        text = render_markdown(ph, ops=ops, top=top, image=image, chart_notes=cd.skipped_notes("layer"),
                               fold=fold)
        return [(text, str(out)), *files]
    opts: dict[str, Any] = {}
    if fmt == "terminal":
        opts = {"ops": ops, "top": top, "kernels": kernels, "fold": fold}
    elif fmt == "csv":
        opts = {"ops": ops}
    elif fmt == "html":
        opts = {"fold": fold}
    return [(render_text(phases, fmt, **opts), str(out))]


def write_report(phases: Any, fmt: str = "terminal", out: str | os.PathLike = "-", *, ops: bool = False,
                 top: int | None = None, kernels: bool = False, fold: bool = True) -> list[str]:
    """Render and write; returns the paths written (``-`` for stdout)."""
    files = render_report(phases, fmt, out, ops=ops, top=top, kernels=kernels, fold=fold)
    write_outputs(files)
    return [p for _, p in files]


def _file_mode(path: Path) -> int:
    """The mode an ordinary ``open(path, "w")`` would give: the old file's, else 0666 minus the umask."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


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
        os.chmod(tmp, _file_mode(path))  # mkstemp makes 0600; a report is meant to be shared
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise ReportError(f"cannot write {path}: {e.strerror or e}; choose a writable -o path") from None
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)


def write_outputs(files: list[tuple[str | bytes, str | os.PathLike]]) -> None:
    """Write several files all-or-nothing: if one fails, the ones this call created are removed again."""
    created: list[Path] = []
    try:
        for data, out in files:
            existed = str(out) != "-" and Path(out).exists()
            write_output(data, out)
            if str(out) != "-" and not existed:
                created.append(Path(out))
    except ReportError:
        for p in created:
            try:
                p.unlink()
            except OSError:
                pass
        raise
