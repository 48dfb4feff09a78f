"""Op-family tables: one row per family member, registering its ATen and its ONNX keys together.

A family module (``counters/rules/<family>.py``) holds the pure formulas of its ops and one table (schematically)::

    ROWS = (
        #   member   ATen keys                     ONNX keys       rule (adapter + formula)
        Row("elu",   aten("elu", inplace=True),    onnx("Elu"),    per_element(4)),
        Row("clamp", aten("clamp", "clip", ...),   onnx("Clip"),   clamp),
        Row("gemm",  aten("addmm", ...),           onnx("Gemm"),   addmm, onnx_rule=gemm),
    )
    register_family("elementwise", ROWS)

A rule is an adapter: it reads plain shapes / dtypes / attributes from the node and calls the family's pure
formula.  When the two frontends present the same op differently (inputs in another order, another attribute
name), the row gives the ONNX adapter separately (``onnx_rule``); both call the same formula, so the two keys
of a row give the same :class:`Cost` for the same shapes and attributes (tests/counters/rules check every
row that has both).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .registry import REGISTRY, Rule

__all__ = ["FAMILIES", "Row", "aten", "ms", "onnx", "register_family"]


@dataclass(frozen=True)
class Row:
    """One member of an op family: its keys per frontend and the rule they share."""

    member: str
    aten: tuple[str, ...] = ()
    onnx: tuple[str, ...] = ()   # ``onnx.*`` and ``com.microsoft.*`` keys
    rule: Rule | None = None     # ``None``: an aliasing op, registered free
    onnx_rule: Rule | None = None  # the ONNX adapter when it differs from ``rule``

    @property
    def aten_rule(self) -> Rule | None:
        return self.rule

    @property
    def onnx_adapter(self) -> Rule | None:
        return self.onnx_rule or self.rule


def aten(*names: str, inplace: bool = False) -> tuple[str, ...]:
    """``aten.<name>`` keys (with the in-place ``aten.<name>_`` twins when *inplace*)."""
    out: list[str] = []
    for n in names:
        out.append(f"aten.{n}")
        if inplace and not n.startswith("__") and not n.endswith("_"):
            out.append(f"aten.{n}_")
    return tuple(out)


def onnx(*names: str) -> tuple[str, ...]:
    return tuple(f"onnx.{n}" for n in names)


def ms(*names: str) -> tuple[str, ...]:
    """``com.microsoft.<name>`` keys (onnxruntime contrib ops)."""
    return tuple(f"com.microsoft.{n}" for n in names)


#: family name -> its rows, for listings and the cross-frontend tests.
FAMILIES: dict[str, tuple[Row, ...]] = {}


def register_family(family: str, rows: Iterable[Row]) -> tuple[Row, ...]:
    """Register every key of every row (duplicates raise, as with ``register_rule``)."""
    rows = tuple(rows)
    if family in FAMILIES:
        raise ValueError(f"op family {family!r} registered twice")
    seen: set[str] = set()
    for r in rows:
        if r.member in seen:
            raise ValueError(f"op family {family!r}: member {r.member!r} listed twice")
        seen.add(r.member)
        for k in r.aten:
            REGISTRY.add(k, r.aten_rule)
        for k in r.onnx:
            REGISTRY.add(k, r.onnx_adapter)
    FAMILIES[family] = rows
    return rows
