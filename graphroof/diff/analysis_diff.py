"""Two analysis JSON files -> an :class:`AnalysisDiff`: totals, layers and kernels before and after, with the change
in time and bytes (absolute and %), and the rows added or removed.

Layers are matched by name (their scope path).  Kernels are matched by scope and kind of kernel: a kernel's name is
its first op's name and how many more ops it holds (``addmm_3+8``), numbered through the whole graph, so an op
added in one layer renumbers every later one; the key is ``(scope, first op's name without its number, k-th such
kernel of the scope)``.  Percentages are of the
before value (``None`` where it is 0).  Rows whose time and bytes did not change are ``same``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..safe_read import clean_name, parse_json, read_text, shown, shown_path
from ..units import json_safe

__all__ = ["AnalysisDiff", "diff_analyses", "diff_files", "load_analysis_json", "ROW_FIGURES", "TOTAL_FIGURES"]

#: figures compared per layer / kernel row (raw numbers of the analysis JSON)
ROW_FIGURES = ("time_s", "time_realistic_s", "bytes", "flops")
#: (key in ``totals``, label) of the figures compared in total
TOTAL_FIGURES = (("time_s", "time (roofline)"), ("time_realistic_s", "time (realistic)"),
                 ("time_floor_s", "time floor"), ("flops", "FLOPs"), ("bytes", "bytes moved"),
                 ("weight_bytes", "weights read"), ("act_read_bytes", "activations read"),
                 ("act_write_bytes", "activations written"), ("kv_read_bytes", "KV cache read"),
                 ("kv_write_bytes", "KV cache written"), ("n_kernels", "kernels"))
#: header fields shown side by side
HEADER = ("model", "hardware", "hardware_name", "runtime", "capture", "dims", "n_ops", "n_kernels")

_HINT = "diff takes two files written by `graphroof analyze MODEL -f json -o FILE`"


def load_analysis_json(path: str | Path) -> dict[str, Any]:
    """The analysis JSON at *path*, checked: an object with ``schema_version`` 1, ``totals``, ``layers`` and
    ``kernels`` whose rows have a name and numeric figures.  Anything else is a one-line :class:`InputError`."""
    name = shown_path(path)
    text = read_text(path, "analysis JSON")
    try:
        data = parse_json(text, name)
    except InputError as e:
        raise InputError(f"{e}; {_HINT}") from None
    if not isinstance(data, dict):
        raise InputError(f"{name}: not a graphroof analysis JSON (a JSON {type(data).__name__}, not an object); "
                         f"{_HINT}")
    if "kind" in data:
        raise InputError(f"{name}: a graphroof {clean_name(data['kind'])} JSON, not an analysis; {_HINT}")
    missing = [k for k in ("schema_version", "totals", "layers", "kernels") if k not in data]
    if missing:
        raise InputError(f"{name}: not a graphroof analysis JSON (no {missing[0]!r} field); {_HINT}")
    if data["schema_version"] != 1 or isinstance(data["schema_version"], bool):
        raise InputError(f"{name}: analysis JSON schema_version {shown(data['schema_version'])}; this graphroof "
                         "reads version 1: write the file again with this graphroof's `analyze -f json`")
    if not isinstance(data["totals"], dict):
        raise InputError(f"{name}: totals is {shown(data['totals'])}, not an object; {_HINT}")
    for key, _label in TOTAL_FIGURES:
        _num(data["totals"].get(key), f"totals.{key}", name)
    for table in ("layers", "kernels"):
        rows = data[table]
        if not isinstance(rows, list):
            raise InputError(f"{name}: {table} is {shown(rows)}, not a list; {_HINT}")
        for i, r in enumerate(rows):
            if not isinstance(r, dict) or not isinstance(r.get("name"), str):
                raise InputError(f"{name}: {table}[{i}] has no name; {_HINT}")
            for fig in ROW_FIGURES:
                _num(r.get(fig), f"{table}[{i}].{fig}", name)
    return data


def _num(v: Any, where: str, name: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(f"{name}: {where} is {shown(v)}, not a number; {_HINT}")
    return float(v)


def _pct(before: float | None, after: float | None) -> float | None:
    if not before or after is None:
        return None
    return 100.0 * (after - before) / before


def _figures(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None, figures: Sequence[str]) -> dict:
    out: dict[str, Any] = {}
    for f in figures:
        b = before.get(f) if before is not None else None
        a = after.get(f) if after is not None else None
        out[f"before_{f}"], out[f"after_{f}"] = b, a
        out[f"delta_{f}"] = (a or 0) - (b or 0) if (a is not None or b is not None) else None
        out[f"pct_{f}"] = _pct(b, a) if before is not None and after is not None else None
    return out


_NUMBERED = re.compile(r"(_\d+)?(\+\d+)?$")  # "addmm_2+8": the first op addmm_2 and 8 more ops


def _kernel_keys(rows: Sequence[Mapping[str, Any]]) -> list[tuple[tuple[str, str, int], Mapping[str, Any]]]:
    seen: Counter = Counter()
    out = []
    for r in rows:
        base = (str(r.get("scope") or ""), _NUMBERED.sub("", r["name"]))
        out.append(((*base, seen[base]), r))
        seen[base] += 1
    return out


def _pair(before: list, after: list) -> list[tuple[Any, Any]]:
    """``[(before row or None, after row or None)]`` matched by key, in the after file's order; a removed row
    follows the row it followed before."""
    bmap, amap = dict(before), dict(after)
    removed: dict[Any, list] = {}  # key of the last matched row before it (None: the start) -> removed rows
    last = None
    for k, r in before:
        if k in amap:
            last = k
        else:
            removed.setdefault(last, []).append(r)
    out: list[tuple[Any, Any]] = [(r, None) for r in removed.get(None, [])]
    for k, r in after:
        out.append((bmap.get(k), r))
        out.extend((g, None) for g in removed.get(k, []))
    return out


def _rows(pairs: list[tuple[Any, Any]], extra: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for b, a in pairs:
        ref = a if a is not None else b
        row: dict[str, Any] = {"name": clean_name(ref["name"])}
        for k in extra:
            row[k] = clean_name(ref.get(k)) if isinstance(ref.get(k), str) else ref.get(k)
        row.update(_figures(b, a, ROW_FIGURES))
        if b is None:
            row["status"] = "added"
        elif a is None:
            row["status"] = "removed"
        else:
            same = all(row[f"before_{f}"] == row[f"after_{f}"] for f in ("time_s", "bytes"))
            row["status"] = "same" if same else "changed"
        row["before_bound"] = b.get("bound") if b is not None else None
        row["after_bound"] = a.get("bound") if a is not None else None
        rows.append(row)
    rows.sort(key=lambda r: -abs(r["delta_time_s"] or 0.0))  # stable: equal changes keep the graph order
    return rows


@dataclass
class AnalysisDiff:
    """Before vs after: header fields side by side, totals, layer and kernel rows (raw numbers), notes."""

    before_file: str
    after_file: str
    header: list[dict[str, Any]]
    totals: list[dict[str, Any]]
    layers: list[dict[str, Any]]
    kernels: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    def counts(self, table: str) -> Counter:
        """Rows of *table* (``layers`` / ``kernels``) by status."""
        return Counter(r["status"] for r in getattr(self, table))

    def to_dict(self) -> dict[str, Any]:
        return json_safe({"schema_version": 1, "kind": "diff", "before_file": self.before_file,
                          "after_file": self.after_file, "header": self.header, "totals": self.totals,
                          "layers": self.layers, "kernels": self.kernels, "notes": self.notes,
                          "counts": {t: dict(self.counts(t)) for t in ("layers", "kernels")}})

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


def diff_analyses(before: Mapping[str, Any], after: Mapping[str, Any], before_file: str = "before",
                  after_file: str = "after") -> AnalysisDiff:
    """The :class:`AnalysisDiff` of two analysis dicts (``Analysis.to_dict()`` or a loaded JSON file)."""
    def text(v: Any) -> Any:
        return clean_name(v) if isinstance(v, str) else v

    header = [{"field": k, "before": text(before.get(k)), "after": text(after.get(k))} for k in HEADER
              if before.get(k) is not None or after.get(k) is not None]
    totals = []
    tb, ta = before["totals"], after["totals"]
    for key, label in TOTAL_FIGURES:
        b, a = tb.get(key), ta.get(key)
        totals.append({"figure": key, "label": label, "before": b, "after": a,
                       "delta": (a or 0) - (b or 0) if a is not None or b is not None else None, "pct": _pct(b, a)})
    totals.append({"figure": "bound", "label": "bound", "before": tb.get("bound"), "after": ta.get("bound"),
                   "delta": None, "pct": None})
    layers = _rows(_pair([(r["name"], r) for r in before["layers"]], [(r["name"], r) for r in after["layers"]]),
                   ())
    kernels = _rows(_pair(_kernel_keys(before["kernels"]), _kernel_keys(after["kernels"])), ("scope", "kind"))
    notes = []
    for k, what in (("hardware_name", "hardware profiles"), ("runtime", "runtime presets"), ("model", "models")):
        if before.get(k) != after.get(k):
            notes.append(f"the two analyses have different {what}: {clean_name(before.get(k))} -> "
                         f"{clean_name(after.get(k))}")
    if before.get("depth") != after.get("depth"):
        notes.append(f"layer depth differs ({before.get('depth')} -> {after.get('depth')}): layers match only where "
                     "their names agree; analyze both with the same --depth")
    return AnalysisDiff(before_file, after_file, header, totals, layers, kernels, notes)


def diff_files(before: str | Path, after: str | Path) -> AnalysisDiff:
    """:func:`diff_analyses` of two analysis JSON files (each checked by :func:`load_analysis_json`)."""
    return diff_analyses(load_analysis_json(before), load_analysis_json(after), shown_path(before), shown_path(after))
