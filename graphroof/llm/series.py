"""Per-op costs as polynomials of one variable (context length or batch), and exact sums of roofline times.

Every cost field of an op is a polynomial of degree <= 2 in the context length: affine at decode (KV-cache
reads and attention FLOPs grow by one token per step, everything else is constant) and quadratic when a model
without a cache recomputes the whole context.  Fitting the fields through 2 (or 3) counted samples gives them
exactly; each op's roofline terms ``t_compute``, ``t_memory``, ``t_network`` are then polynomials too, and
``sum over steps of max(terms)`` has a closed form: between the points where two terms cross, one term is the
maximum, and sums of ``x`` and ``x**2`` over integer ranges are known.  So a decode phase of ``gen`` steps
is summed exactly, op by op, without evaluating each step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ..counters.cost import Cost
from ..errors import FrontendError
from ..graph import OpNode
from ..hardware import HardwareProfile
from ..roofline import Bound, compute_dtype, evaluate

__all__ = ["FIELDS", "Poly", "fit", "sum_poly", "sum_max_poly", "OpSeries", "StepSums"]

FIELDS = ("matrix_flops", "vector_flops", "weight_bytes", "act_read_bytes", "act_write_bytes", "kv_read_bytes",
          "kv_write_bytes", "net_bytes")

Poly = tuple[float, float, float]  # c0 + c1 x + c2 x^2
#: node attributes that name other nodes (a kernel's ops): not part of what an op's time depends on
_NAME_ATTRS = ("ops", "folded")


def fit(xs: Sequence[float], ys: Sequence[float]) -> Poly:
    """Coefficients of the polynomial of degree ``len(xs) - 1`` (<= 2) through the points (Lagrange)."""
    if len(xs) == 1:
        return (float(ys[0]), 0.0, 0.0)
    if len(xs) == 2:
        (x0, x1), (y0, y1) = xs, ys
        b = (y1 - y0) / (x1 - x0)
        return (y0 - b * x0, b, 0.0)
    if len(xs) == 3:
        c = [0.0, 0.0, 0.0]
        for i in range(3):
            xj, xk = [xs[j] for j in range(3) if j != i]
            d = (xs[i] - xj) * (xs[i] - xk)
            w = ys[i] / d
            c[0] += w * xj * xk
            c[1] -= w * (xj + xk)
            c[2] += w
        return (c[0], c[1], c[2])
    raise ValueError("fit() takes 1 to 3 points")


def peval(p: Poly, x: float) -> float:
    return p[0] + p[1] * x + p[2] * x * x


def _s1(m: int) -> int:
    return m * (m + 1) // 2


def _s2(m: int) -> int:
    return m * (m + 1) * (2 * m + 1) // 6


def sum_poly(p: Poly, lo: int, hi: int) -> float:
    """``sum(p(x) for x in range(lo, hi + 1))`` in closed form (``lo >= 0``)."""
    if hi < lo:
        return 0.0
    n = hi - lo + 1
    return p[0] * n + p[1] * (_s1(hi) - _s1(lo - 1)) + p[2] * (_s2(hi) - _s2(lo - 1))


def _roots(p: Poly) -> list[float]:
    c0, c1, c2 = p
    scale = max(abs(c0), abs(c1), abs(c2), 1e-300)
    if abs(c2) <= 1e-12 * scale:
        return [] if abs(c1) <= 1e-12 * scale else [-c0 / c1]
    disc = c1 * c1 - 4 * c2 * c0
    if disc < 0:
        return []
    r = math.sqrt(disc)
    return [(-c1 - r) / (2 * c2), (-c1 + r) / (2 * c2)]


def sum_max_poly(polys: Sequence[Poly], lo: int, hi: int) -> float:
    """``sum(max(p(x) for p in polys) for x in range(lo, hi + 1))``, exactly.

    Cut the range where two polynomials cross; inside each piece one polynomial is the maximum.
    """
    if hi < lo:
        return 0.0
    cuts = {lo - 1, hi}
    for i in range(len(polys)):
        for j in range(i + 1, len(polys)):
            diff = tuple(a - b for a, b in zip(polys[i], polys[j]))
            for r in _roots(diff):
                if lo <= r < hi:
                    cuts.add(math.floor(r))
    edges = sorted(cuts)
    total = 0.0
    for a, b in zip(edges, edges[1:]):
        s, e = a + 1, b
        mid = (s + e) / 2
        best = max(polys, key=lambda p: peval(p, mid))
        total += sum_poly(best, s, e)
    return total


@dataclass(frozen=True)
class StepSums:
    """Sums over the steps of a phase, for one op: mean cost and summed times."""

    steps: int
    mean_cost: Cost
    bound: Bound  # times are per-step means (t_s and t_realistic_s exact means of the per-step maxima)


class OpSeries:
    """Per-op cost polynomials in one variable, fitted from counted samples ``{x: [(op, cost), ...]}``.

    The samples must hold the same ops (same names and op keys, in the same order); the op structure shown
    in reports is the first sample's.
    """

    def __init__(self, samples: Mapping[int, Sequence[tuple[OpNode, Cost]]]):
        if not samples:
            raise ValueError("OpSeries needs at least one sample")
        self.xs = sorted(samples)
        base = samples[self.xs[0]]
        for x in self.xs[1:]:
            other = samples[x]
            if len(other) != len(base) or any(a.name != b.name or a.op != b.op for (a, _), (b, _) in zip(base, other)):
                raise FrontendError("the model's graph changes structure with the sequence length / batch, so costs "
                                    "cannot be interpolated between traces")
        self.ops: list[OpNode] = [op for op, _ in base]
        # GEMM shapes of kernels that grow with x (q @ K^T over the cache): affine in x, fitted per dim
        self.mnk: dict[int, list[Poly]] = {}
        for i, _pair in enumerate(base):
            shapes = [samples[x][i][0].attrs.get("gemm_mnk") for x in self.xs]
            if shapes[0] and any(sh != shapes[0] for sh in shapes):
                self.mnk[i] = [fit(self.xs, [float(sh[d]) for sh in shapes]) for d in range(3)]
        self.coeffs: list[dict[str, Poly]] = []
        self.estimated: list[bool] = []
        for i in range(len(base)):
            self.coeffs.append({f: fit(self.xs, [getattr(samples[x][i][1], f) for x in self.xs]) for f in FIELDS})
            self.estimated.append(any(samples[x][i][1].estimated for x in self.xs))
        self._sig: list[tuple | None] = [None] * len(base)
        self._sums: dict[tuple, StepSums] = {}
        self._term_memo: dict[tuple[int, int], tuple] = {}
        self._at_memo: dict[tuple, Bound] = {}

    def __len__(self) -> int:
        return len(self.ops)

    def cost_at(self, i: int, x: float) -> Cost:
        c = self.coeffs[i]
        return Cost(**{f: max(0.0, peval(c[f], x)) for f in FIELDS}, estimated=self.estimated[i])

    def node_at(self, i: int, x: float) -> OpNode:
        """Op i as it is at *x* (a growing GEMM's shape interpolated)."""
        op = self.ops[i]
        if i not in self.mnk:
            return op
        mnk = tuple(max(1, round(peval(p, x))) for p in self.mnk[i])
        return replace(op, attrs={**op.attrs, "gemm_mnk": mnk})

    def costs_at(self, x: float) -> list[tuple[OpNode, Cost]]:
        return [(self.node_at(i, x), self.cost_at(i, x)) for i, op in enumerate(self.ops)]

    def bound_at(self, i: int, x: int, hw: HardwareProfile) -> Bound:
        """The roofline of op i at *x* (ops with the same :meth:`signature` evaluated once)."""
        key = (self.signature(i), x, hw.name, id(hw))
        if key not in self._at_memo:
            op = self.node_at(i, x)
            self._at_memo[key] = evaluate(self.cost_at(i, x), hw, compute_dtype(op), node=op)
        return self._at_memo[key]

    def mean_cost(self, i: int, lo: int, hi: int) -> Cost:
        n = hi - lo + 1
        c = self.coeffs[i]
        return Cost(**{f: max(0.0, sum_poly(c[f], lo, hi) / n) for f in FIELDS}, estimated=self.estimated[i])

    def _terms(self, i: int, hw: HardwareProfile) -> tuple[list[Poly], list[Poly], bool]:
        """(ideal terms, realistic terms, does work) for op i, mirroring :func:`graphroof.roofline.evaluate`."""
        c = self.coeffs[i]
        dtype = compute_dtype(self.ops[i])
        pm, _ = hw.peak("matrix", dtype)
        pv, _ = hw.peak("vector", dtype)

        def lin(parts: list[tuple[str, float]]) -> Poly:
            return tuple(sum(c[f][k] * w for f, w in parts) for k in range(3))  # type: ignore[return-value]

        byte_fields = ("weight_bytes", "act_read_bytes", "act_write_bytes", "kv_read_bytes", "kv_write_bytes")
        tc = lin([("matrix_flops", 1 / pm), ("vector_flops", 1 / pv)])
        tm = lin([(f, 1 / hw.mem_bw_bytes_per_s) for f in byte_fields])
        ibw = hw.interconnect_bw_bytes_per_s
        tn = lin([("net_bytes", 1 / ibw)]) if ibw else (0.0, 0.0, 0.0)
        tc_r = lin([("matrix_flops", 1 / (pm * hw.matrix_efficiency)),
                    ("vector_flops", 1 / (pv * hw.vector_efficiency))])
        tm_r = tuple(v / hw.mem_bw_efficiency for v in tm)
        tn_r = tuple(v / hw.interconnect_efficiency for v in tn)
        works = any(any(abs(v) > 0 for v in c[f]) for f in FIELDS)
        return [tc, tm, tn], [tc_r, tm_r, tn_r], works  # type: ignore[list-item]

    def sums(self, i: int, hw: HardwareProfile, lo: int, hi: int, *, cuda_graphs: bool = False) -> StepSums:
        """Mean cost and per-step mean times of op (kernel) i over ``x = lo .. hi``.

        The ideal time is summed exactly (piecewise polynomials).  With a profile that has a kernel-level
        ``[timing]`` model (not polynomial: tiles, waves) the realistic time is the mean of the model at every
        step, or at 64 evenly spaced steps of longer ranges; *cuda_graphs* drops the per-kernel launch (the
        step pays one graph launch instead, see :class:`graphroof.analysis.Analysis`).
        """
        key = (self.signature(i), hw.name, id(hw), lo, hi, cuda_graphs)
        if key not in self._sums:  # ops with the same costs and node (one per decoder block) are summed once
            self._sums[key] = self._sums_of(i, hw, lo, hi, cuda_graphs)
        return self._sums[key]

    def signature(self, i: int) -> tuple:
        """What op i's sums depend on: its cost polynomials, GEMM shapes and node (names aside)."""
        if self._sig[i] is None:
            op = self.ops[i]
            attrs = repr(sorted((k, v) for k, v in op.attrs.items() if k not in _NAME_ATTRS))
            c = self.coeffs[i]
            self._sig[i] = (op.op, op.inputs, op.outputs, attrs, tuple(c[f] for f in FIELDS),
                            tuple(self.mnk.get(i, ())), self.estimated[i])
        return self._sig[i]  # type: ignore[return-value]

    def _sums_of(self, i: int, hw: HardwareProfile, lo: int, hi: int, cuda_graphs: bool) -> StepSums:
        n = hi - lo + 1
        mean = self.mean_cost(i, lo, hi)
        op = self.ops[i]
        dtype = compute_dtype(op)
        b = self.evaluate_mean(mean, hw, dtype, op)  # raises if collectives meet a profile without links
        tkey = (i, id(hw))
        if tkey not in self._term_memo:
            self._term_memo[tkey] = self._terms(i, hw)
        ideal, real, works = self._term_memo[tkey]
        t = sum_max_poly(ideal, lo, hi) / n
        if hw.timing is not None:
            xs = range(lo, hi + 1) if n <= 64 else sorted({round(lo + (hi - lo) * j / 63) for j in range(64)})
            xs = list(xs)
            if self._constant(i):
                xs = xs[:1]
            t_k = self.kernel_mean(i, xs, hw, dtype)
            launch = 0.0 if cuda_graphs else b.t_launch_s
            return StepSums(n, mean, replace(b, t_s=t, t_realistic_s=t_k + launch, t_launch_s=launch))
        launch = 0.0 if (cuda_graphs or not works) else hw.launch_overhead_s
        t_r = sum_max_poly(real, lo, hi) / n + launch
        return StepSums(n, mean, replace(b, t_s=t, t_realistic_s=t_r, t_launch_s=launch))

    def evaluate_mean(self, mean: Cost, hw: HardwareProfile, dtype: str, op: OpNode) -> Bound:
        """The roofline of the mean step's cost (its terms and launch; :meth:`sums` replaces the times)."""
        return evaluate(mean, hw, dtype, node=op)

    def kernel_mean(self, i: int, xs: Sequence[int], hw: HardwareProfile, dtype: str) -> float:
        """Mean kernel-level time of op i over the steps *xs*."""
        return sum(self.kernel_s(i, x, hw, dtype) for x in xs) / len(xs)

    def kernel_s(self, i: int, x: int, hw: HardwareProfile, dtype: str) -> float:
        """Kernel-level time of op i at *x* without its launch (the ``[timing]`` model)."""
        return _kernel_s(evaluate(self.cost_at(i, x), hw, dtype, node=self.node_at(i, x)))

    def _constant(self, i: int) -> bool:
        return all(abs(p[1]) < 1e-12 * (1 + abs(p[0])) and abs(p[2]) < 1e-12 * (1 + abs(p[0]))
                   for p in self.coeffs[i].values())


def _kernel_s(b: Bound) -> float:
    return b.t_realistic_s - b.t_launch_s
