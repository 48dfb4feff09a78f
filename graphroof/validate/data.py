"""The bundled measured data (``graphroof/validate/data/``: the CSVs and the README that cites their sources) and
the exclusions file (rows left out of the scores, each with the reason its source gives)."""

from __future__ import annotations

import csv
import fnmatch
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError

__all__ = ["DATA_DIR", "read_rows", "Exclusion", "exclusions", "excluded_reason", "profile_or_none"]

DATA_DIR = Path(__file__).resolve().parent / "data"


def read_rows(name: str) -> list[tuple[str, dict[str, str]]]:
    """``(file:line, row)`` of one bundled CSV (line numbers as in the file: the header is line 1)."""
    path = DATA_DIR / name
    if not path.is_file():
        raise InputError(f"measured data file {name} is missing from {DATA_DIR}; reinstall graphroof")
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        return [(f"{name}:{reader.line_num}", {k: (v or "").strip() for k, v in row.items() if k})
                for row in reader]


@dataclass(frozen=True)
class Exclusion:
    dataset: str
    column: str
    pattern: str
    reason: str


def exclusions() -> list[Exclusion]:
    """The exclusions file: each rule names a dataset, a column, a glob on its value and the reason."""
    out = []
    for where, r in read_rows("exclusions.csv"):
        if not r.get("reason"):
            raise InputError(f"{where}: an exclusion needs a reason (the source's own)")
        out.append(Exclusion(r["dataset"], r["column"], r["pattern"], r["reason"]))
    return out


def excluded_reason(dataset: str, row: dict[str, str], rules: list[Exclusion]) -> str:
    """The reason *row* of *dataset* is not scored, or ''."""
    for e in rules:
        if e.dataset == dataset and fnmatch.fnmatchcase(row.get(e.column, ""), e.pattern):
            return e.reason
    return ""


def profile_or_none(name: str):
    """The hardware profile *name* (``''`` / unknown: None)."""
    from ..errors import GraphroofError
    from ..hardware import load_hardware

    if not name:
        return None
    try:
        return load_hardware(name)
    except GraphroofError:
        return None
