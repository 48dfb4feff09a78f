"""Step graphs as polynomials of the shapes: a few exact traces, exact interpolation, any (batch, context).

Every number of an LLM step graph is a polynomial in the batch ``b`` and the context ``x`` (prompt tokens at
prefill, cached tokens at a decode step) of degree <= 1 in ``b``: tensor dims are ``b``, ``x``, ``b * x``,
``x + 1``, constants; GEMM shapes and MoE token counts likewise; FLOPs and bytes add at most one more factor of
``x`` (attention: ``b * x^2`` at prefill, ``b * x`` at decode).  A polynomial of degree <= 1 in ``b`` and <= d in
``x`` is fixed by its values on a grid of 2 batches x (d + 1) contexts, so a few exact traces on such a grid give
every other point exactly by Lagrange interpolation over the grid (the weights of the grid points at ``(b, x)``
are ``Lb_i(b) * Lx_j(x)``; at a grid point they are exactly 1 and 0).

:class:`GraphGrid` holds the traced graphs of one phase on a grid and builds the graph at any ``(b, x)`` (a
*virtual trace*): every tensor dim and numeric attribute that differs between the traces is interpolated.  The
traces must have the same op structure (same op names and keys in the same order, same edges); an interpolated
dim must come out a whole number -- otherwise :class:`NotPolynomial` is raised and the caller traces the point
directly.  A virtual trace is then counted by the ordinary rules, so quantization, the TP split and the MoE
experts-visited expectation ``E (1 - (1 - k/E)^T)`` (nonlinear in the tokens ``T``; ``moe_tokens`` is an
interpolated attribute) apply exactly as for a real trace.

Degrees: prefill (``seq``) 2, decode with a KV cache (``past``) 1.  Models whose cost is piecewise in the context
(sliding-window layers keep ``min(past, W - 1)`` tokens) are not interpolated (:func:`poly_ok`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..graph import OpGraph, OpNode

__all__ = ["NotPolynomial", "GraphGrid", "GridPlan", "lagrange", "grid_points", "interp", "poly_ok", "DEGREE"]

_NUM = re.compile(r"(\d+)")

#: degree in the context of each graph phase (prefill graphs recompute attention over the whole sequence)
DEGREE = {"prefill": 2, "decode": 1}


class NotPolynomial(Exception):
    """The traces cannot be interpolated (structure differs, or a dim is not a whole number in between)."""


def lagrange(nodes: Sequence[float], t: float) -> list[float]:
    """Weights ``L_i(t)`` of the Lagrange basis on *nodes*: ``p(t) = sum_i L_i(t) p(nodes[i])``."""
    out = []
    for i, xi in enumerate(nodes):
        w = 1.0
        for j, xj in enumerate(nodes):
            if j != i:
                w *= (t - xj) / (xi - xj)
        out.append(w)
    return out


def grid_points(needed: Iterable[int], degree: int) -> tuple[int, ...]:
    """Sample points of one variable: the needed values themselves when there are at most ``degree + 1`` of them,
    else ``degree + 1`` points spread over their range (the ends, and the middle for degree 2)."""
    vals = sorted(set(needed))
    if len(vals) <= degree + 1:
        return tuple(vals)
    lo, hi = vals[0], vals[-1]
    if degree == 1:
        return (lo, hi)
    mid = min(vals[1:-1], key=lambda v: abs(v - (lo + hi) / 2))
    return (lo, mid, hi)


def _dot(w: Sequence[float], vals: Sequence[float]) -> float:
    return sum(a * b for a, b in zip(w, vals))


def interp(vals: Sequence[Any], w: Sequence[float], memo: dict | None = None) -> Any:
    """The value at the weights *w* of an object sampled on the grid (*vals*, one per grid point): equal samples
    are kept, numbers interpolated (ints must come out whole), tuples / lists / dicts / dataclasses (tensor specs,
    op nodes) interpolated field by field.  Raises :class:`NotPolynomial` for anything else that differs.

    *memo* (one per *w*) keeps the results of hashable samples (tensor specs recur in every decoder block)."""
    if memo is not None:
        if type(vals[0]) in _UNHASHABLE:
            return _interp(vals, w, memo)
        try:
            key = (type(vals[0]), tuple(vals))
            hit = memo.get(key)
        except TypeError:  # unhashable (dict attrs): not remembered
            return _interp(vals, w, memo)
        if hit is None:
            hit = memo[key] = _interp(vals, w, memo)
        return hit
    return _interp(vals, w, None)


#: sample types never hashable (an op node holds its attrs dict): not looked up in the memo
_UNHASHABLE = (dict, list, OpNode)
#: dataclass type -> names of its init fields
_INIT_FIELDS: dict[type, tuple[str, ...]] = {}


def _interp(vals: Sequence[Any], w: Sequence[float], memo: dict | None) -> Any:
    v0 = vals[0]
    if all(v == v0 for v in vals[1:]):
        return v0
    t = type(v0)
    if any(type(v) is not t for v in vals[1:]):
        raise NotPolynomial(f"values of different types across the traces: {vals!r:.200}")
    if t is int:
        y = _dot(w, vals)
        r = round(y)
        if abs(y - r) > 1e-6 * max(1.0, abs(y)):
            raise NotPolynomial(f"a dim interpolates to {y:.6g}, not a whole number (samples {vals})")
        return int(r)
    if t is float:
        return _dot(w, vals)
    if t is str:  # a label with numbers in it ("int64[1,8]"): the numbers interpolated, the rest kept
        parts = [_NUM.split(v) for v in vals]
        if any(len(p) != len(parts[0]) or p[0::2] != parts[0][0::2] for p in parts[1:]):
            raise NotPolynomial(f"a label differs across the traces: {vals!r:.200}")
        return "".join(str(interp([int(p[i]) for p in parts], w, memo)) if i % 2 else parts[0][i]
                       for i in range(len(parts[0])))
    if t in (tuple, list):
        n = len(v0)
        if any(len(v) != n for v in vals):
            raise NotPolynomial("a tuple changes length across the traces")
        return t(interp([v[i] for v in vals], w, memo) for i in range(n))
    if isinstance(v0, dict):
        keys = list(v0)
        if any(list(v) != keys for v in vals):
            raise NotPolynomial("an attribute dict changes keys across the traces")
        return {k: interp([v[k] for v in vals], w, memo) for k in keys}
    if dataclasses.is_dataclass(v0) and not isinstance(v0, type):
        names = _INIT_FIELDS.get(t)
        if names is None:
            names = _INIT_FIELDS[t] = tuple(f.name for f in dataclasses.fields(v0) if f.init)
        # every init field given: what dataclasses.replace(v0, **kw) builds, without its per-call field scan
        return t(**{f: interp([getattr(v, f) for v in vals], w, memo) for f in names})
    raise NotPolynomial(f"a {t.__name__} value differs across the traces: {vals!r:.200}")


def poly_ok(src: Any) -> bool:
    """Whether the source's step costs are polynomial in the context (no sliding-window layers)."""
    spec = getattr(src, "spec", None)
    return not (spec is not None and spec.windows and any(spec.windows))


@dataclasses.dataclass(frozen=True)
class GridPlan:
    """Where one phase is sampled: batches ``bs`` x contexts ``xs`` (``degree``: of the context)."""

    bs: tuple[int, ...]
    xs: tuple[int, ...]
    degree: int

    @property
    def points(self) -> list[tuple[int, int]]:
        return [(b, x) for b in self.bs for x in self.xs]

    def covers(self, b: int, x: int) -> bool:
        """Whether the grid determines the graph at ``(b, x)`` (enough points in each variable, or a sample)."""
        return (len(self.bs) >= 2 or b in self.bs) and (len(self.xs) >= self.degree + 1 or x in self.xs)

    def weights(self, b: int, x: int) -> list[float]:
        wb = lagrange(self.bs, b)
        wx = lagrange(self.xs, x)
        return [p * q for p in wb for q in wx]

    def weights_many(self, b: Any, x: Any) -> Any:
        """:meth:`weights` at many points: ``[points, grid points]`` (numpy arrays *b*, *x*)."""
        import numpy as np

        def basis(nodes: tuple[int, ...], t: Any) -> Any:
            t = np.asarray(t, dtype=float)
            out = np.ones((len(t), len(nodes)))
            for i, xi in enumerate(nodes):
                for j, xj in enumerate(nodes):
                    if j != i:
                        out[:, i] *= (t - xj) / (xi - xj)
            return out

        wb, wx = basis(self.bs, b), basis(self.xs, x)
        return (wb[:, :, None] * wx[:, None, :]).reshape(len(wb), -1)


def _same_structure(a: OpGraph, b: OpGraph) -> bool:
    na, nb = list(a.nx.nodes), list(b.nx.nodes)
    if na != nb or a.nx.number_of_edges() != b.nx.number_of_edges():
        return False
    if any(a.node(n).op != b.node(n).op for n in na):
        return False
    return all(b.nx.has_edge(u, v) for u, v in a.nx.edges())


class GraphGrid:
    """Traced graphs of one phase on a :class:`GridPlan`, and the graph at any covered ``(b, x)``."""

    def __init__(self, plan: GridPlan, graphs: Mapping[tuple[int, int], OpGraph]):
        self.plan = plan
        self.graphs = [graphs[p] for p in plan.points]
        base = self.graphs[0]
        for g in self.graphs[1:]:
            if not _same_structure(base, g):
                raise NotPolynomial("the traces differ in op structure (op names, keys or edges) between batch / "
                                    "context sizes")
        names = list(base.nx.nodes)
        self._varying: dict[str, list] = {}
        for n in names:
            nodes = [g.node(n) for g in self.graphs]
            if any(v != nodes[0] for v in nodes[1:]):
                self._varying[n] = nodes
        self._metas = [g.meta for g in self.graphs]

    def at(self, b: int, x: int) -> OpGraph:
        """The graph at ``(b, x)``: a traced one when it is a grid point, else interpolated (a virtual trace)."""
        pts = self.plan.points
        if (b, x) in pts:
            return self.graphs[pts.index((b, x))]
        if not self.plan.covers(b, x):
            raise NotPolynomial(f"batch {b}, context {x} is outside what the grid {self.plan} determines")
        w = self.plan.weights(b, x)
        memo: dict = {}
        new = {n: interp(nodes, w, memo) for n, nodes in self._varying.items()}
        g = self.graphs[0].map_ops(lambda op: new.get(op.name, op))
        meta = {}
        for k, v in self._metas[0].items():
            try:
                meta[k] = interp([m.get(k) for m in self._metas], w, memo)
            except NotPolynomial:
                meta[k] = v
        g.meta = meta
        g.meta["virtual_trace"] = f"interpolated from the traces at (batch, context) {pts}"
        return g
