"""Op-table frontend: a CSV / YAML / JSON list of ops with their FLOPs and bytes (the textbook workflow).

CSV header: ``name,flops,bytes`` plus optional columns ``kind`` (``matrix`` | ``vector``, default matrix),
``dtype`` (compute dtype, default fp16), ``layer`` (scope), ``count`` (repeat the row n times), and split byte
columns (``weight_bytes``, ``act_read_bytes``, ``act_write_bytes``, ``kv_read_bytes``, ``kv_write_bytes``) in
place of ``bytes``.  Values take SI suffixes: ``57.8M``, ``25MB``, ``1.2 GFLOP``.  YAML / JSON: a list of such
mappings, or a mapping with an ``ops`` list (and optional ``name``).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from ..dtypes import canonical_dtype
from ..errors import GraphroofError, InputError
from ..graph import OpGraph, OpNode
from ..units import parse_quantity

__all__ = ["load_table", "table_from_rows"]

_BYTE_COLS = ("bytes", "weight_bytes", "act_read_bytes", "act_write_bytes", "kv_read_bytes", "kv_write_bytes")
_KNOWN = {"name", "flops", "kind", "dtype", "layer", "scope", "count", "estimated", *_BYTE_COLS}


def _rows_from_file(path: Path) -> tuple[list[dict[str, Any]], str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read op table ({getattr(e, 'strerror', None) or e})") from None
    if not text.strip():
        raise InputError(f"{path}: op table is empty; expected a header 'name,flops,bytes' and one row per op")
    name = path.stem
    suffix = path.suffix.lower()
    if suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        fields = [f.strip().lower() for f in (reader.fieldnames or [])]
        missing = [c for c in ("name", "flops") if c not in fields]
        if missing or not any(c in fields for c in _BYTE_COLS):
            raise InputError(f"{path}: CSV header must include name,flops,bytes (got {','.join(fields) or 'nothing'})")
        rows = [{(k or "").strip().lower(): (v.strip() if isinstance(v, str) else v) for k, v in r.items()}
                for r in reader]
        return rows, name
    try:
        import yaml

        data = json.loads(text) if suffix == ".json" else yaml.safe_load(text)
    except Exception as e:  # json.JSONDecodeError / yaml.YAMLError
        raise InputError(f"{path}: not valid {suffix[1:].upper()}: {str(e).splitlines()[0]}") from None
    if isinstance(data, dict):
        name = str(data.get("name", name))
        data = data.get("ops")
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise InputError(f"{path}: expected a list of ops (mappings with name, flops, bytes) or {{ops: [...]}}")
    return [{str(k).lower(): v for k, v in r.items()} for r in data], name


def table_from_rows(rows: list[dict[str, Any]], name: str = "op-table", source: str = "<rows>") -> OpGraph:
    """Build an OpGraph of ``table.op`` nodes; every row is validated with its line number."""
    if not rows:
        raise InputError(f"{source}: op table has no rows")
    g = OpGraph(name, meta={"capture": "op table", "model": name})
    prev = None
    for i, row in enumerate(rows, start=2 if source.endswith(".csv") else 1):
        where = f"{source}: row {i}"
        unknown = sorted(set(row) - _KNOWN)
        if unknown:
            raise InputError(f"{where}: unknown column {unknown[0]!r}; known: {', '.join(sorted(_KNOWN))}")
        op_name = str(row.get("name") or "").strip()
        if not op_name:
            raise InputError(f"{where}: 'name' is empty")
        attrs: dict[str, Any] = {}
        try:
            attrs["flops"] = parse_quantity(row.get("flops") or 0, f"{where} flops")
            for c in _BYTE_COLS:
                if row.get(c) not in (None, ""):
                    attrs[c] = parse_quantity(row[c], f"{where} {c}")
            count = int(parse_quantity(row.get("count") or 1, f"{where} count"))
        except GraphroofError:
            raise
        for k in ("flops", *_BYTE_COLS):
            if attrs.get(k, 0) < 0:
                raise InputError(f"{where}: {k} is negative ({attrs[k]:g}); FLOPs and bytes must be >= 0")
        if not any(c in attrs for c in _BYTE_COLS):
            raise InputError(f"{where}: no bytes given; add a 'bytes' value (0 if the op moves nothing)")
        if count < 1:
            raise InputError(f"{where}: count must be >= 1")
        kind = str(row.get("kind") or "matrix").strip().lower()
        if kind not in ("matrix", "vector"):
            raise InputError(f"{where}: kind must be 'matrix' or 'vector', got {kind!r}")
        attrs["kind"] = kind
        attrs["compute_dtype"] = canonical_dtype(row.get("dtype") or "fp16")
        attrs["estimated"] = str(row.get("estimated", "")).lower() in ("1", "true", "yes")
        scope = str(row.get("layer") or row.get("scope") or "").strip()
        for j in range(count):
            nm = op_name if count == 1 else f"{op_name}#{j}"
            if nm in g:
                raise InputError(f"{where}: duplicate op name {nm!r}")
            g.add_op(OpNode(nm, "table.op", attrs=attrs, scope=scope), inputs=[prev] if prev else [], outputs=[nm])
            prev = nm
    return g


def load_table(path: str | Path, name: str | None = None) -> OpGraph:
    """Read an op table file into an OpGraph."""
    p = Path(path)
    rows, default_name = _rows_from_file(p)
    return table_from_rows(rows, name or default_name, str(p))
