"""Reports: every renderer.  Results (:class:`~graphroof.analysis.Analysis`, the device comparison, the LLM
estimate, the measured comparison) hold data and ``to_dict()``; this package turns them into text.

``render(result, fmt)`` is the one entry point for any result; ``render_text(analysis, fmt)`` returns the
analysis report as a string; ``write_report(phases, fmt, out)`` renders and
writes it (with the chart image next to a markdown file); ``write_output(data, out)`` writes one file to a
path or ``-`` (stdout) without harming what is there: see :mod:`graphroof.report.output`.

Formats: ``terminal`` (plain tables), ``markdown`` (GitHub-flavoured), ``json`` and ``csv`` (for scripts),
``html`` (one self-contained file with an interactive roofline chart).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import ReportError
from ..errors import warn as warn_user
from .output import write_output, write_outputs

__all__ = ["FORMATS", "FORMATS_BY_KIND", "render", "render_text", "render_report", "write_report", "write_output",
           "write_outputs",
           "chart_image_path", "check_chart_beside"]

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
    "serve": ("terminal", "markdown", "json", "csv", "html"),
    "serve_comparison": ("terminal", "markdown", "json", "csv", "html"),
    "plan": ("terminal", "markdown", "json", "csv", "html"),
    "validation": ("terminal", "markdown", "json", "csv"),
}


def _kind(result: Any) -> str:
    """What kind of result *result* is, from what it holds (this package imports no engine)."""
    if hasattr(result, "holdout_notes") and hasattr(result, "rows"):  # graphroof.validate: see report/validate.py
        return "validation"
    if hasattr(result, "cheapest") and hasattr(result, "pruned") and hasattr(result, "counts"):  # planner.PlanResult
        return "plan"
    if hasattr(result, "timeline") and hasattr(result, "records"):  # graphroof.serving.ServeResult: see report/serve.py
        return "serve"
    if hasattr(result, "results") and hasattr(result, "rows"):  # graphroof.serving.compare.ServeComparison
        return "serve_comparison"
    if hasattr(result, "rows") and hasattr(result, "analyses"):  # graphroof.comparison.DeviceComparison
        return "compare"
    if hasattr(result, "configs") and hasattr(result, "quant"):  # graphroof.llm.result.LLMEstimate
        return "llm"
    if hasattr(result, "summary") and hasattr(result, "unmatched"):  # graphroof.measure.run.MeasuredComparison
        return "measured"
    if hasattr(result, "frontier") and hasattr(result, "points"):  # a sweep (LLM or batch): see report/sweep.py
        return "sweep"
    return "analysis"  # an Analysis, or phases: {name: Analysis} / [(name, Analysis), ...]


def render(result: Any, fmt: str = "terminal", **opts: Any) -> str | bytes:
    """Any graphroof result as one string in *fmt* (``terminal`` | ``markdown`` | ``json`` | ``csv`` | ``html``,
    as the kind of result allows: see :data:`FORMATS_BY_KIND`).  *opts*: ``ops`` / ``top`` for the op tables;
    ``fragment=True`` with ``html``: the page's body for a notebook cell (:func:`graphroof.notebook_html`).  A string, except
    a sweep's ``png`` (the chart image's bytes)."""
    if fmt == "html" and opts.pop("fragment", False):  # a notebook cell: the page's body, its CSS kept inside
        from .html import html_fragment

        page = render(result, fmt, **opts)
        return html_fragment(page if isinstance(page, str) else page.decode("utf-8"))
    kind = _kind(result)
    allowed = FORMATS_BY_KIND[kind]
    if fmt not in allowed:
        raise ReportError(f"unknown format {fmt!r}; use one of: {', '.join(allowed)}")
    if kind == "analysis":
        return render_text(result, fmt, **opts)
    if fmt == "json":
        return result.to_json() + "\n"
    if kind == "validation":
        from .validate import render_validation

        return render_validation(result, fmt)
    if kind == "plan" and fmt == "html":
        from .plan_html import render_plan_html

        return render_plan_html(result)
    if kind == "plan":
        from .plan import render_plan

        return render_plan(result, fmt)
    if kind == "serve_comparison":
        from .serve_compare import render_serve_comparison

        return render_serve_comparison(result, fmt)
    if kind == "serve" and fmt == "html":
        from .serve_html import render_serve_html

        return render_serve_html(result)
    if kind == "serve":
        from .serve import render_serve

        return render_serve(result, fmt, rate=opts.get("rate"))
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


def check_chart_beside(out: str | os.PathLike) -> None:
    """Raise :class:`ReportError` now if a markdown report to *out* would have to replace a file beside it that
    graphroof did not write (its chart image); the CLI calls this before any work."""
    from .output import writes_beside
    from .pngmark import check_chart_target

    if writes_beside(out):
        check_chart_target(chart_image_path(out))


def render_report(phases: Any, fmt: str = "terminal", out: str | os.PathLike = "-", *, ops: bool = False,
                  top: int | None = None, kernels: bool = False, fold: bool = True) -> list[tuple[str | bytes, str]]:
    """Render *phases* (an Analysis or ``[(name, Analysis), ...]``) as ``[(data, path), ...]`` to write.

    A markdown report written to a file gets the roofline PNG beside it (when matplotlib is installed; not beside
    ``-``, a device or a FIFO).  That PNG may only replace an earlier chart that graphroof wrote: any other file
    of its name is a :class:`ReportError`, raised before anything is written.
    """
    _check_format(fmt)
    if fmt == "markdown":
        from .chart import chart_data, render_static
        from .content import as_phases
        from .markdown import render_markdown
        from .output import writes_beside

        ph = as_phases(phases)
        cd = chart_data(ph)
        files: list[tuple[str | bytes, str]] = []
        image = None
        if writes_beside(out):
            check_chart_beside(out)
            img = chart_image_path(out)
            try:
                files.append((render_static(cd, "png", title=f"{ph[0].analysis.model_name} on {cd.hw_label}"), str(img)))
                image = img.name
            except ReportError as e:  # no matplotlib: the report still works without its picture
                warn_user(f"{e}; the markdown report has no chart image")
        text = render_markdown(ph, ops=ops, top=top, image=image, chart_notes=cd.skipped_notes("layer"),
                               fold=fold, kernels=kernels)
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
    write_outputs(list(files))
    return [p for _, p in files]
