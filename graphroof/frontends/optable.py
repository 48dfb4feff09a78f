"""Op-table frontend: a CSV / YAML / JSON list of ops with their FLOPs and bytes (the textbook workflow).

CSV header: ``name,flops,bytes`` plus optional columns ``kind`` (``matrix`` | ``vector``, default matrix),
``dtype`` (compute dtype, default fp16), ``layer`` (scope), ``count`` (the op runs n times), and split byte
columns (``weight_bytes``, ``act_read_bytes``, ``act_write_bytes``, ``kv_read_bytes``, ``kv_write_bytes``) in
place of ``bytes``.  Values take SI suffixes: ``57.8M``, ``25MB``, ``1.2 GFLOP``.  YAML / JSON: a list of such
mappings, or a mapping with an ``ops`` list (and optional ``name``).

The file is read with :mod:`graphroof.safe_read`'s limits (a regular UTF-8 file of at most 64 MB, a byte-order
mark allowed; YAML without aliases; bounded nesting); a table has at most :data:`MAX_TABLE_OPS` rows.  A
``count`` row is one graph node repeated (``graphroof.repeat``): its FLOPs, bytes, launches and layer op counts
are the row's times the count, as ``count`` copies would give, at the cost of one node.  Names and
layers are made printable (control characters escaped) as they are read.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from ..dtypes import canonical_dtype
from ..errors import InputError, sanitize_terminal
from ..graph import REPEAT, OpGraph, OpNode
from ..safe_read import clean_name, number, parse_json, parse_yaml, read_text, shown, shown_path
from ..units import parse_quantity

__all__ = ["load_table", "table_from_rows", "MAX_TABLE_OPS"]

#: The most rows an op table may have: each is a graph node (about 4 kB).
MAX_TABLE_OPS = 100_000
#: The largest ``count`` of one row (a repeat, not copies: any size costs one node).
MAX_COUNT = 1e12
_BYTE_COLS = ("bytes", "weight_bytes", "act_read_bytes", "act_write_bytes", "kv_read_bytes", "kv_write_bytes")
_KNOWN = {"name", "flops", "kind", "dtype", "layer", "scope", "count", "estimated", *_BYTE_COLS}


def _csv_rows(text: str, where: str) -> list[dict[str, Any]]:
    reader = csv.reader(io.StringIO(text))
    try:
        header = [f.strip().lower() for f in next(reader, [])]
        missing = [c for c in ("name", "flops") if c not in header]
        if missing or not any(c in header for c in _BYTE_COLS):
            got = shown(",".join(header)) if header else "nothing"
            raise InputError(f"{where}: CSV header must include name,flops,bytes (got {got})")
        dup = next((c for i, c in enumerate(header) if c in header[:i]), None)
        if dup is not None:
            raise InputError(f"{where}: column {shown(dup)} appears twice in the header; keep one")
        rows: list[dict[str, Any]] = []
        for i, cells in enumerate(reader, start=2):
            if not cells:
                continue  # a blank line
            if len(cells) > len(header):
                raise InputError(f"{where}: row {i} has {len(cells)} fields, the header {len(header)}; quote "
                                 "values that hold a comma")
            if len(rows) >= MAX_TABLE_OPS:
                raise _too_many(where)
            rows.append({k: v.strip() for k, v in zip(header, cells)})
    except csv.Error as e:
        raise InputError(f"{where}: not valid CSV: {shown(str(e))}") from None
    return rows


def _rows_from_file(path: Path) -> tuple[list[dict[str, Any]], str]:
    where = shown_path(path)
    text = read_text(path, "op table")
    if not text.strip():
        raise InputError(f"{where}: op table is empty; expected a header 'name,flops,bytes' and one row per op")
    name = clean_name(path.stem)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return _csv_rows(text, where), name
    data = parse_json(text, where) if suffix == ".json" else parse_yaml(text, where)
    if isinstance(data, dict):
        if data.get("name") is not None:
            if not isinstance(data["name"], (str, int, float)):
                raise InputError(f"{where}: 'name' must be text, got {shown(data['name'])}")
            name = clean_name(data["name"])
        data = data.get("ops")
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise InputError(f"{where}: expected a list of ops (mappings with name, flops, bytes) or {{ops: [...]}}")
    return [{str(k).lower(): v for k, v in r.items()} for r in data], name


def _too_many(where: str) -> InputError:
    return InputError(f"{where}: the op table has more than {MAX_TABLE_OPS:,} rows; an op table is one graph node "
                      "per row: give repeated ops one row with a count, or analyse a smaller part")


def _quantity(v: Any, what: str) -> float:
    """A FLOP / byte / count value: a number, or text with an SI suffix (``57.8M``, ``25MB``)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return number(v, what)
    if not isinstance(v, str):
        raise InputError(f"{what} must be a number or a quantity such as 57.8M or 25MB, got {shown(v)}")
    if v.strip().lower().lstrip("+-") == "nan":
        raise InputError(f"{what} is not a number (NaN); give a finite value such as 4.6T, 25MB or 57.8M")
    if len(v) > 64:
        raise InputError(f"{what}: {shown(v)} is too long for a number; use e.g. 4.6T, 25MB, 57.8M or 4608e9")
    return parse_quantity(v, what)


def table_from_rows(rows: list[dict[str, Any]], name: str = "op-table", source: str = "<rows>") -> OpGraph:
    """Build an OpGraph of ``table.op`` nodes; every row is validated with its line number."""
    src = shown_path(source)
    if not rows:
        raise InputError(f"{src}: op table has no rows")
    g = OpGraph(name, meta={"capture": "op table", "model": name})
    prev = None
    n_ops = 0
    for i, row in enumerate(rows, start=2 if source.endswith(".csv") else 1):
        where = f"{src}: row {i}"
        unknown = sorted(set(row) - _KNOWN)
        if unknown:
            raise InputError(f"{where}: unknown column {shown(unknown[0])}; known: {', '.join(sorted(_KNOWN))}")
        op_name = clean_name(_text(row.get("name") or "", f"{where}: name"))
        if not op_name:
            raise InputError(f"{where}: 'name' is empty")
        attrs: dict[str, Any] = {"flops": _quantity(row.get("flops") or 0, f"{where} flops")}
        for c in _BYTE_COLS:
            if row.get(c) not in (None, ""):
                attrs[c] = _quantity(row[c], f"{where} {c}")
        count = _quantity(row.get("count") or 1, f"{where} count")
        for k in ("flops", *_BYTE_COLS):
            if attrs.get(k, 0) < 0:
                raise InputError(f"{where}: {k} is negative ({attrs[k]:g}); FLOPs and bytes must be >= 0")
        if not any(c in attrs for c in _BYTE_COLS):
            raise InputError(f"{where}: no bytes given; add a 'bytes' value (0 if the op moves nothing)")
        if count < 1 or count != int(count):
            raise InputError(f"{where}: count must be a whole number >= 1, got {count:g}")
        if count > MAX_COUNT:
            raise InputError(f"{where}: count {count:g} is beyond any real model (> {MAX_COUNT:.0e} repeats)")
        n_ops += 1
        if n_ops > MAX_TABLE_OPS:
            raise _too_many(where)
        kind = _text(row.get("kind") or "matrix", f"{where}: kind").lower()
        if kind not in ("matrix", "vector"):
            raise InputError(f"{where}: kind must be 'matrix' or 'vector', got {shown(kind)}")
        attrs["kind"] = kind
        attrs["compute_dtype"] = _dtype(row.get("dtype") or "fp16", where)
        attrs["estimated"] = _text(row.get("estimated", ""), f"{where}: estimated").lower() in ("1", "true", "yes")
        scope = clean_name(_text(row.get("layer") or row.get("scope") or "", f"{where}: layer"))
        if op_name in g:
            raise InputError(f"{where}: duplicate op name {shown(op_name)}")
        if count != 1:  # one node run `count` times: costs, launches and op counts are multiplied, not copied
            attrs[REPEAT] = int(count)
        g.add_op(OpNode(op_name, "table.op", attrs=attrs, scope=scope), inputs=[prev] if prev else [],
                 outputs=[op_name])
        prev = op_name
    return g


def _text(v: Any, what: str) -> str:
    """A name, layer, kind or flag: text (or a number written as text), stripped."""
    if isinstance(v, (str, int, float)):
        return str(v).strip()
    raise InputError(f"{what} must be text, got {shown(v)}")


def _dtype(v: Any, where: str) -> str:
    if not isinstance(v, str) or len(v) > 40:
        raise InputError(f"{where}: unknown dtype {shown(v)}; use a name such as fp16, bf16, fp32, fp8, int8")
    try:
        return canonical_dtype(v)
    except InputError as e:
        raise InputError(f"{where}: {sanitize_terminal(e)}") from None


def load_table(path: str | Path, name: str | None = None) -> OpGraph:
    """Read an op table file into an OpGraph."""
    p = Path(path)
    rows, default_name = _rows_from_file(p)
    return table_from_rows(rows, name or default_name, str(p))
