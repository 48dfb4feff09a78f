"""One model at many batch sizes from a few traces: the graphs the vision / encoder rows price
(:func:`graphs_by_batch`), and the LLM rows' graphs at other batches of a traced context (:class:`BatchDerived`).

A vision or encoder row is ``analyze(model, batch=B, dtype=D[, seq=S])``; the data holds each (model, dtype, seq)
at up to ten batch sizes.  Every number of such a graph that depends on the batch is of degree <= 1 in it (tensor
dims are ``B``, ``B * c`` or constants; a convolution or an encoder layer has no other dependence on the batch),
so the traces at the smallest and the largest batch fix the graph at every batch between them exactly: the
interpolation of :class:`graphroof.llm.poly.GraphGrid` (the LLM engine's virtual traces), a grid of two batches.

That is checked, not assumed: a third batch (the middle of the needed ones) is traced too, and its trace must equal
the graph interpolated there (same ops, tensors, attributes, edges, name and meta; only the meta's
``virtual_trace`` note differs).  Any difference, or a graph the grid cannot interpolate, and every batch is traced
directly.  With at most three batches there is nothing to save: each is traced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from ..frontends.source import LLMSource, SharedTraces
from ..graph import IN_TENSORS, OP, OUT_TENSORS, OpGraph

__all__ = ["graphs_by_batch", "graphs_at", "same_graph", "BatchDerived"]

#: the meta key a virtual trace adds (the points it was interpolated from)
_NOTE = "virtual_trace"


def same_graph(a: OpGraph, b: OpGraph) -> bool:
    """Whether *a* and *b* are the same graph: name, meta (but the virtual-trace note), every op with its tensors
    and node data, in the same order, the same edges with their tensors, and the same producers."""
    if a.name != b.name or len(a) != len(b):
        return False
    if {k: v for k, v in a.meta.items() if k != _NOTE} != {k: v for k, v in b.meta.items() if k != _NOTE}:
        return False
    if list(a.nx.nodes) != list(b.nx.nodes) or a.producers != b.producers:
        return False
    for name, da in a.nx.nodes(data=True):
        db = b.nx.nodes[name]
        if da.keys() != db.keys() or any(da[k] != db[k] for k in (OP, IN_TENSORS, OUT_TENSORS) if k in da):
            return False
        if any(da[k] != db[k] for k in da if k not in (OP, IN_TENSORS, OUT_TENSORS)):
            return False
    return list(a.nx.edges(data=True)) == list(b.nx.edges(data=True))


def graphs_by_batch(trace: Callable[[int], OpGraph], batches: Iterable[int],
                    progress: Callable[[str], None] | None = None) -> tuple[dict[int, OpGraph], list[int]]:
    """The graph at every batch of *batches* (``trace(b)``: the model traced at batch *b*) and the batches that
    were traced: the smallest, the largest and the middle one when more than three are asked for and the middle
    trace equals the graph interpolated there (see the module docstring), else all of them."""
    from ..llm.poly import GraphGrid, GridPlan, NotPolynomial

    bs = sorted(set(batches))
    if len(bs) <= 3:
        return {b: trace(b) for b in bs}, bs
    lo, mid, hi = bs[0], bs[len(bs) // 2], bs[-1]
    got = {b: trace(b) for b in (lo, hi, mid)}
    try:
        grid = GraphGrid(GridPlan((lo, hi), (0,), 0), {(lo, 0): got[lo], (hi, 0): got[hi]})
        ok = same_graph(grid.at(mid, 0), got[mid])
    except NotPolynomial:
        ok = False
    if not ok:
        if progress:
            progress(f"the graph is not linear in the batch between {lo} and {hi}: tracing every batch")
        return {b: got[b] if b in got else trace(b) for b in bs}, bs
    out: dict[int, Any] = {}
    for b in bs:
        out[b] = got[b] if b in got else grid.at(b, 0)
    return out, [lo, mid, hi]


class BatchDerived(SharedTraces):
    """An LLM source's graphs shared by every engine of a validation run (:class:`SharedTraces`), and a graph at
    a batch between or beyond two traced batches at the same context derived from them (the LLM rows of one model
    ask for the same prompts and cached lengths at several batch sizes: one engine per device, TP and dtypes).

    Every number of an LLM step graph is of degree <= 1 in the batch (:mod:`graphroof.llm.poly`), so the traces
    at two batches fix the graph at any batch of that context: the interpolation of :class:`~graphroof.llm.poly.
    GraphGrid` (the engine's virtual traces).  Checked per phase: the first graph of a phase that could be derived
    is traced as well and must equal the derived one (:func:`same_graph`), else that phase is traced at every point.
    ``traces``: graphs traced; ``derived``: graphs derived."""

    def __init__(self, src: LLMSource, progress: Callable[[str], None] | None = None):
        super().__init__(src)
        self._progress = progress or (lambda msg: None)
        self._traced: set[tuple[str, int, int]] = set()
        self._ok: dict[str, bool] = {}       # phase -> whether its derived graph equalled the trace
        self._grids: dict[tuple, Any] = {}   # (phase, x, b1, b2) -> GraphGrid
        self.derived = 0

    @property
    def traces(self) -> int:
        return len(self._traced)

    def _trace(self, phase: str, batch: int, x: int) -> OpGraph:
        what = f"past {x}" if phase == "decode" else f"seq {x}"
        self._progress(f"tracing {self.name}: {phase} graph, batch {batch}, {what}")
        g = super()._get(phase, batch, x)
        self._traced.add((phase, batch, x))
        return g

    def _get(self, phase: str, batch: int, x: int) -> OpGraph:
        key = (phase, batch, x)
        if key in self._graphs:
            return self._graphs[key]
        bs = sorted(b for p, b, c in self._traced if p == phase and c == x)
        if len(bs) < 2 or self._ok.get(phase) is False:
            return self._trace(phase, batch, x)
        g = self._derive(phase, x, bs[0], bs[-1], batch)
        if g is None:
            return self._trace(phase, batch, x)
        if phase not in self._ok:  # the first derivable graph of the phase: traced too, and compared
            real = self._trace(phase, batch, x)
            self._ok[phase] = same_graph(g, real)
            if not self._ok[phase]:
                self._progress(f"{self.name}: the {phase} graph is not linear in the batch: every point traced")
            return real
        self._graphs[key] = g
        self.derived += 1
        return g

    def _derive(self, phase: str, x: int, b1: int, b2: int, batch: int) -> OpGraph | None:
        from ..llm.poly import GraphGrid, GridPlan, NotPolynomial

        gk = (phase, x, b1, b2)
        try:
            if gk not in self._grids:
                self._grids[gk] = GraphGrid(GridPlan((b1, b2), (x,), 0),
                                            {(b1, x): self._graphs[phase, b1, x], (b2, x): self._graphs[phase, b2, x]})
            return self._grids[gk].at(batch, x)
        except NotPolynomial:
            return None


def graphs_at(trace: Callable[[int, int | None], OpGraph], points: Iterable[tuple[int, int | None]],
              progress: Callable[[str], None] | None = None) -> tuple[dict[tuple[int, int | None], OpGraph], int]:
    """The graph at every ``(batch, seq)`` of *points* (``trace(b, s)``: the model traced there; seq None: a model
    without one) and how many traces that took.  An encoder asked for at several sequence lengths: its dims are of
    degree <= 1 in the batch and in the sequence (``B``, ``S``, ``B * S``, constants: attention scores are
    ``[B, H, S, S]``, every dim linear), so the four traces at the corners of (smallest, largest batch) x
    (smallest, largest sequence) fix the graph everywhere (a grid of 2 x 2); checked at one more point as
    :func:`graphs_by_batch` checks, else each sequence length is taken on its own by :func:`graphs_by_batch`."""
    from ..llm.poly import GraphGrid, GridPlan, NotPolynomial

    pts = sorted(set(points), key=lambda p: (p[1] or 0, p[0]))
    memo: dict[tuple[int, int | None], OpGraph] = {}

    def traced(b: int, s: int | None) -> OpGraph:
        if (b, s) not in memo:
            memo[b, s] = trace(b, s)
        return memo[b, s]

    seqs = sorted({s for _, s in pts if s is not None})
    if len(seqs) > 1 and all(s is not None for _, s in pts):
        bs = (min(b for b, _ in pts), max(b for b, _ in pts))
        ss = (seqs[0], seqs[-1])
        corners = [(b, s) for b in bs for s in ss]
        inner = [p for p in pts if p not in corners]
        if bs[0] != bs[1] and len(inner) >= 2:  # else the corners and the check are no fewer traces
            cb, cs = inner[len(inner) // 2]
            assert cs is not None
            try:
                grid = GraphGrid(GridPlan(bs, ss, 1), {p: traced(*p) for p in corners})
                ok = same_graph(grid.at(cb, cs), traced(cb, cs))
            except NotPolynomial:
                ok = False
            if ok:
                return {(b, s): memo[b, s] if (b, s) in memo else grid.at(b, s or 0) for b, s in pts}, len(memo)
            if progress:
                progress("the graph is not linear in the batch and the sequence: each sequence on its own")
    out: dict[tuple[int, int | None], OpGraph] = {}
    for seq in sorted({s for _, s in pts}, key=lambda s: s or 0):
        got, _ = graphs_by_batch(partial(_at_seq, traced, seq), [b for b, s in pts if s == seq], progress)
        out.update({(b, seq): g for b, g in got.items()})
    return out, len(memo)


def _at_seq(traced: Callable[[int, int | None], OpGraph], seq: int | None, batch: int) -> OpGraph:
    return traced(batch, seq)
