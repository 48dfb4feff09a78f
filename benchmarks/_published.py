"""Shared by the benchmarks that score published measurements (serve_published.py, llamacpp_f16_decode.py,
llamacpp_layer_split.py): the CSV files of ``benchmarks/data/published/``, whose ``#`` header lines cite the source."""

from __future__ import annotations

import csv
from pathlib import Path

PUBLISHED = Path(__file__).resolve().parent / "data" / "published"


def published_rows(name: str) -> list[dict]:
    """The rows of ``data/published/NAME`` (its ``#`` citation lines skipped)."""
    with (PUBLISHED / name).open(encoding="utf-8") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))
