"""What changed between two analyses (``graphroof diff before.json after.json``): the JSON files written by
``graphroof analyze MODEL -f json`` (or ``Analysis.to_json()``), compared per layer, per kernel and in total.

For checking a model change, a quantization or another runtime / device: :func:`load_analysis_json` reads and
checks one file, :func:`diff_analyses` gives the :class:`AnalysisDiff` (rows of raw numbers, rendered by
:mod:`graphroof.report.diff`).
"""

from .analysis_diff import AnalysisDiff, diff_analyses, diff_files, load_analysis_json

__all__ = ["AnalysisDiff", "diff_analyses", "diff_files", "load_analysis_json"]
