"""The one LLM pricing engine: every figure of every (batch, prompt, gen) point as array arithmetic.

A phase of one pipeline (dtypes, TP) on one device is a :class:`PhasePricer` over the phase's kernel groups
(:class:`~graphroof.llm.grids.KernelGrid`: counted kernels at a few traced grid points, identical kernels grouped,
costs at any covered ``(batch, context)`` interpolated).  For a batch ``b`` it evaluates every group at every
context ``x`` a point needs, in one numpy pass per group:

* ideal step time: ``max(compute, memory, network)`` per kernel, summed;
* realistic step time: the profile's kernel-level ``[timing]`` model (:func:`graphroof.timing.vectorized.
  kernel_times`) or its efficiency factors, plus one launch per working kernel (none under a CUDA-graph step,
  which pays :attr:`step_launch_s` once);
* the compute, memory and network terms of the step (they give the bound).

A phase over ``x = lo .. hi`` (decode: one step per cached length) is the mean of those per-step arrays: exact
prefix sums for the ideal time and the terms; the realistic time of a kernel-level profile is the mean at every
step, or at 64 evenly spaced steps of a longer range.  A single step (prefill: ``lo == hi``) is priced from the
kernels at that exact point.

Token accounting (one place) is :mod:`graphroof.llm.tokens`: the cached lengths of the decode steps, e2e and
tok/s, and the :class:`~graphroof.llm.tokens.PhaseTotals` this engine returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..counters.cost import Cost
from ..errors import HardwareProfileError
from ..fuse.runtimes import Runtime
from ..graph import REPEAT
from ..hardware import HardwareProfile
from ..roofline import compute_dtype, evaluate
from ..timing.aten import eager_attention_device_s
from ..timing.host import extra_kernels_device_s, host_dispatch_s
from ..timing.kernel import extra_launches
from ..timing.profile import timing_of
from ..timing.vectorized import kernel_times
from .grids import FIELDS, KernelGrid
from .tokens import PhaseTotals

__all__ = ["PhasePricer", "SAMPLES"]

#: a kernel-level profile's realistic time of a longer range is its mean at this many evenly spaced steps
SAMPLES = 64
_BYTES = ("weight_bytes", "act_read_bytes", "act_write_bytes", "kv_read_bytes", "kv_write_bytes")
_F = {f: i for i, f in enumerate(FIELDS)}


class PhasePricer:
    """One phase of one pipeline on one device (see the module docstring).

    *cuda_graphs*: steps replay as one CUDA graph (no per-kernel launch; *step_launch_s* once per step).
    *seq_floor_s*: host time per sequence of a step, overlapped with the device (a preset's
    ``host_per_sequence_s``, decode steps): a realistic step takes at least that times its batch.
    """

    def __init__(self, grid: KernelGrid, hw: HardwareProfile, *, cuda_graphs: bool = False,
                 step_launch_s: float = 0.0, runtime: Runtime | None = None, seq_floor_s: float = 0.0):
        self.grid, self.hw, self.cuda_graphs, self.step_launch_s = grid, hw, cuda_graphs, step_launch_s
        self.seq_floor_s = float(seq_floor_s)
        self.runtime = runtime  # the engine preset the kernels run under (kernel capabilities)
        self.mult = np.asarray(grid.mult, dtype=float)
        self.nodes = [nodes[0] for nodes in grid.nodes]
        self.dtypes = [compute_dtype(n) for n in self.nodes]
        self.timing = timing_of(hw) if hw.timing is not None else None
        self.launch_s = (self.timing.launch_overhead_s if self.timing is not None else hw.launch_overhead_s)
        #: the host dispatches kernels ahead of the device (a preset with [launch].overlap): a step is the pipeline
        #: of host dispatches and kernels, at least max(Σ device + one dispatch, Σ dispatches) (see _overlap)
        self.overlap = bool(runtime is not None and runtime.overlap_launch and self.launch_s and not cuda_graphs)
        self._host: dict[int, tuple[float, float]] = {}  # group -> (its launch, extra kernels' device time)
        self._launch0_s = self.launch_s
        if self.overlap:
            self.launch_s += runtime.host_overhead_per_kernel_s  # type: ignore[union-attr]
        self._peaks = [(hw.peak("matrix", d)[0], hw.peak("vector", d)[0]) for d in self.dtypes]
        self._curves: dict[int, tuple[int, np.ndarray]] = {}   # batch -> (first x, per-x sums [6, n])

    # -- per-step sums --------------------------------------------------------------------------------------
    def _steps(self, cost_of: Callable[[int], tuple[np.ndarray, int]], mnk_of: Callable[[int], tuple | None],
               node_of: Callable[[int, int, int], Any], n: int, groups: Sequence[int] | None = None) -> np.ndarray:
        """Per-step sums over the groups, ``[6, n]``: ideal, realistic, compute, memory, network, the working
        kernels' launches.  *cost_of(g)*: group g's costs ``[fields, m]`` (>= 0) and how many consecutive steps
        share each column (``m * rep == n``: a group constant along the context is priced once per batch);
        *mnk_of(g)*: its GEMM shapes (three int arrays of length m) or None; *node_of(g, j, rep)*: its node at
        column j (read only by the scalar model); *groups*: only these groups (default: all)."""
        out = np.zeros((6, n))
        for gi in range(len(self.mult)) if groups is None else groups:
            c, rep = cost_of(gi)
            rows = self._group_rows(gi, c, mnk_of(gi), _bind(node_of, rep))
            out += self.mult[gi] * (np.repeat(rows, rep, axis=1) if rep > 1 else rows)
        if self.overlap and groups is None:
            out[1], out[5] = self._overlap(out[1] - out[5], out[5])
        return out

    def _overlap(self, device: np.ndarray, host: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(step time, the part of it the device waits on the host) of a step whose host dispatches its kernels
        ahead of the device, from the summed kernel times and dispatches: the pipeline's bound without the kernel
        order, max(Σ device + the first dispatch, Σ dispatches) (the ordered pipeline of
        :func:`graphroof.timing.stream.host_pipeline` is at most the last kernel's time above it)."""
        first = np.minimum(self.launch_s, host)
        step = np.maximum(device + first, host)
        return step, step - device

    def _group_rows(self, gi: int, c: np.ndarray, mnk: tuple | None, node_of: Callable[[int, int], Any]) -> np.ndarray:
        """One kernel of group *gi* at each column of its costs *c* ``[fields, m]``: ``[6, m]`` ideal, realistic
        (with its launch), compute, memory, network, launch."""
        hw = self.hw
        pm, pv = self._peaks[gi]
        mf, vf, net = c[_F["matrix_flops"]], c[_F["vector_flops"]], c[_F["net_bytes"]]
        nbytes = c[_F["weight_bytes"]] + c[_F["act_read_bytes"]] + c[_F["act_write_bytes"]] + \
            c[_F["kv_read_bytes"]] + c[_F["kv_write_bytes"]]
        tc = mf / pm + vf / pv
        tm = nbytes / hw.mem_bw_bytes_per_s
        ibw = hw.interconnect_bw_bytes_per_s
        if ibw:
            tn = net / ibw
        elif np.any(net > 0):
            raise HardwareProfileError(f"{hw.name}: no interconnect.bw_bytes_per_s_per_direction; needed for "
                                       "collectives")
        else:
            tn = np.zeros(c.shape[-1])
        works = ((mf + vf) != 0) | (nbytes != 0) | (net != 0)
        if self.timing is None:
            tc_r = mf / (pm * hw.matrix_efficiency) + vf / (pv * hw.vector_efficiency)
            real = np.maximum(np.maximum(tc_r, tm / hw.mem_bw_efficiency), tn / hw.interconnect_efficiency)
        else:
            real = np.where(works, self._kernel_row(gi, c, mnk, node_of) + self._dispatch(gi, c)[1]
                            + self._eager_attention(gi, c, node_of), 0.0)
        launch = np.where(works, 0.0 if self.cuda_graphs else self._dispatch(gi, c)[0], 0.0)
        return np.stack([np.maximum(np.maximum(tc, tm), tn), real + launch, tc, tm, tn, launch])

    def _eager_attention(self, gi: int, c: np.ndarray, node_of: Callable[[int, int], Any]) -> np.ndarray | float:
        """Device time an eager naive attention's other kernels add at each column of group *gi*
        (:func:`graphroof.timing.aten.eager_attention_device_s`, the per-op model's term: layout copies, scaling,
        register softmax), from each column's costs and its node; 0 for every other group and runtime."""
        if self.runtime is None or not self.runtime.aten_ops or self.nodes[gi].attrs.get("kernel_kind") != "attention":
            return 0.0
        out = np.zeros(c.shape[-1])
        cols: dict[int, tuple[Any, list[int]]] = {}
        for j in range(c.shape[-1]):
            nd = node_of(gi, j)
            cols.setdefault(id(nd), (nd, []))[1].append(j)
        for nd, js in cols.values():
            out[js] = eager_attention_device_s(nd, {f: c[_F[f], js] for f in FIELDS}, self.hw, self.runtime)
        return out

    def _dispatch(self, gi: int, c: np.ndarray) -> tuple[float, float]:
        """(one launch of group *gi*'s kernel, the device time of the extra kernels its runtime launches for it):
        with an eager host the launch is its host dispatch (:mod:`graphroof.timing.host`, from the group's costs at
        its largest-FLOP column), else the profile's launch."""
        if gi not in self._host:
            rt = self.runtime
            j = int(np.argmax(c[_F["matrix_flops"]])) if c.shape[-1] else 0
            cost = Cost(**{f: float(c[_F[f], j]) if c.shape[-1] else 0.0 for f in FIELDS})  # type: ignore[arg-type]
            node = self.nodes[gi]
            more = extra_launches(node, node.attrs.get("kernel_kind"), cost, self.hw, self.dtypes[gi], rt) \
                if self.timing is not None else 0  # an fp8 input quantize, a plugin's context-phase kernels
            launch = host_dispatch_s(rt, self._launch0_s, node, cost, extra_launches=more) if self.overlap \
                else self.launch_s * (1 + more)
            extra = extra_kernels_device_s(rt, self.nodes[gi], cost, self.timing.stream_latency_s) \
                if self.timing is not None else 0.0
            self._host[gi] = (launch, extra)
        return self._host[gi]

    def _kernel_row(self, gi: int, c: np.ndarray, mnk: tuple | None,
                    node_of: Callable[[int, int], Any]) -> np.ndarray:
        """Kernel-level time (no launch) of group *gi* at each step: the vectorised model, else the scalar one
        (collectives, GEMMs without a shape, repeated kernels), once per distinct step."""
        head = self.nodes[gi]
        kind = head.attrs.get("kernel_kind")
        repeat = head.attrs.get(REPEAT, 1)
        if kind and not (isinstance(repeat, int) and repeat > 1):
            costs = {f: c[_F[f]] for f in FIELDS}
            v = kernel_times(str(kind), head.attrs.get("op_keys") or (head.op,), self.dtypes[gi], costs, mnk,
                             self.hw, self.runtime, node=head)  # type: ignore[arg-type]
            if v is not None:
                return v
        n = c.shape[-1]
        out = np.empty(n)
        # keyed by the node's identity: each entry keeps its node alive, so no later node can reuse that id
        memo: dict[tuple, tuple[float, Any]] = {}
        cols = np.asarray(c, dtype=float).T.tolist()  # the same doubles as float(c[f, j]), converted in one pass
        shapes = None if mnk is None else list(zip(*(np.asarray(m).tolist() for m in mnk)))
        for j in range(n):
            vals = tuple(cols[j])
            shape = None if shapes is None else tuple(int(v) for v in shapes[j])
            nd = node_of(gi, j)
            key = (vals, shape, id(nd))
            hit = memo.get(key)
            if hit is None:
                at = nd if shape is None else replace(nd, attrs={**nd.attrs, "gemm_mnk": shape})
                cost = Cost(**{f: v for f, v in zip(FIELDS, vals)})  # type: ignore[arg-type]
                b = evaluate(cost, self.hw, self.dtypes[gi], node=at, runtime=self.runtime)
                hit = memo[key] = (b.t_realistic_s - b.t_launch_s, nd)
            out[j] = hit[0]
        return out

    # -- decode-style ranges: per-batch curves over the context ------------------------------------------------
    def _build_curves(self, bs: list[int], lo: int, hi: int) -> None:
        """Per-step sums at every batch of *bs* over ``lo .. hi``, all batches at once: each group's costs are
        polynomials in the context at a fixed batch, fitted through the grid's contexts."""
        grid = self.grid
        xs = np.asarray(grid.plan.xs, dtype=float)
        nb, nx = len(bs), hi - lo + 1
        pb = np.repeat(np.asarray(bs, dtype=np.int64), len(xs))
        px = np.tile(np.asarray(grid.plan.xs, dtype=np.int64), nb)
        cost, mnks = grid.costs_many(pb, px)                               # [groups, fields, nb * len(xs)]
        inv = np.linalg.inv(np.vander(xs, increasing=True))               # samples -> coefficients
        coef = np.einsum("kj,gfbj->gfbk", inv, cost.reshape(cost.shape[0], cost.shape[1], nb, len(xs)))
        xf = np.arange(lo, hi + 1, dtype=float)
        powers = np.vander(xf, len(xs), increasing=True)                  # [nx, degree + 1]

        # a group whose costs and GEMM shape do not change with the context (weights' GEMMs, norms) is priced once
        # per batch: only attention and KV-cache kernels grow along the range
        scale = np.abs(coef[..., :1]).max(axis=(1, 2, 3)) + 1.0
        flat = (np.abs(coef[..., 1:]).max(axis=(1, 2, 3)) <= 1e-12 * scale if len(xs) > 1
                else np.ones(len(scale), dtype=bool))
        for gi, m in enumerate(mnks):
            if m is not None and any(np.any(d.reshape(nb, len(xs)) != d.reshape(nb, len(xs))[:, :1]) for d in m):
                flat[gi] = False

        def cost_of(gi: int) -> tuple[np.ndarray, int]:
            if flat[gi]:
                return np.maximum(0.0, coef[gi, :, :, 0]), nx
            return np.maximum(0.0, np.einsum("fbk,xk->fbx", coef[gi], powers).reshape(cost.shape[1], nb * nx)), 1

        def mnk_of(gi: int) -> tuple | None:
            m = mnks[gi]
            if m is None:
                return None
            if flat[gi]:
                return tuple(d.reshape(nb, len(xs))[:, 0] for d in m)
            out = []
            for d in m:
                d = d.reshape(nb, len(xs)).astype(float)
                fitted = np.einsum("kj,bj->bk", inv, d) @ powers.T          # [nb, nx]
                out.append(np.maximum(1, np.rint(fitted)).astype(np.int64).reshape(-1))
            return tuple(out)

        x0 = int(grid.plan.xs[0])

        def node_of(gi: int, j: int, rep: int) -> Any:
            return grid.node_at(gi, bs[j * rep // nx], x0)

        steps = self._steps(cost_of, mnk_of, node_of, nb * nx).reshape(6, nb, nx)
        for i, b in enumerate(bs):
            self._curves[b] = (lo, steps[:, i, :])

    def _ensure(self, bs: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        need: list[int] = []
        a, z = int(lo.min()), int(hi.max())
        for b in np.unique(bs).tolist():
            sel = bs == b
            lo_b, hi_b = int(lo[sel].min()), int(hi[sel].max())
            have = self._curves.get(b)
            if have is None or not (have[0] <= lo_b and hi_b < have[0] + have[1].shape[1]):
                need.append(b)
                if have is not None:
                    a, z = min(a, have[0]), max(z, have[0] + have[1].shape[1] - 1)
        if need:
            self._build_curves(need, a, z)

    # -- per kernel (the breakdown tables) ------------------------------------------------------------------------
    def group_means(self, b: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Per group, one kernel's mean step over ``lo .. hi`` at batch *b*: (mean costs ``[groups, fields]``,
        ``[groups, 6]`` mean ideal, realistic, compute, memory, network time and launch), summed and sampled as
        :meth:`totals` sums them (``totals == mult @ rows`` to float rounding)."""
        grid = self.grid
        if lo == hi:
            cost, mnks = grid.costs_many(np.array([b]), np.array([lo]))
            rows = np.stack([self._group_rows(gi, cost[gi], mnks[gi], lambda g, j: grid.node_at(g, b, lo))[:, 0]
                             for gi in range(len(self.mult))])
            return cost[:, :, 0], self._overlap_rows(rows)
        xs = np.asarray(grid.plan.xs, dtype=float)
        cost, mnks = grid.costs_many(np.full(len(xs), b), np.asarray(grid.plan.xs))
        inv = np.linalg.inv(np.vander(xs, increasing=True))
        coef = np.einsum("kj,gfj->gfk", inv, cost)                         # [groups, fields, degree + 1]
        xf = np.arange(lo, hi + 1, dtype=float)
        powers = np.vander(xf, len(xs), increasing=True)
        n = hi - lo + 1
        idx = None
        if self.timing is not None and n > SAMPLES:
            idx = np.round(lo + (hi - lo) * np.arange(SAMPLES) / (SAMPLES - 1)).astype(np.int64) - lo
        means, rows = np.empty(cost.shape[:2]), np.empty((len(self.mult), 6))
        x0 = int(grid.plan.xs[0])
        for gi in range(len(self.mult)):
            c = coef[gi] @ powers.T                                        # [fields, n]
            means[gi] = np.maximum(0.0, c.mean(axis=1))
            m, mk = None, mnks[gi]
            if mk is not None:
                m = tuple(np.maximum(1, np.rint((inv @ d.astype(float)) @ powers.T)).astype(np.int64) for d in mk)
            r = self._group_rows(gi, np.maximum(0.0, c), m, lambda g, j: grid.node_at(g, b, x0))
            rows[gi] = r.mean(axis=1)
            if idx is not None:
                rows[gi, 1] = (r[1] - r[5])[idx].mean() + r[5][0]
        return means, self._overlap_rows(rows)

    def kernel_rows_at(self, b: int, xs: Sequence[int], groups: Sequence[int]) -> np.ndarray:
        """One kernel of each of *groups* at the single steps ``(b, x)`` for every x of *xs*, in one pass per
        group: ``[groups, 6, points]`` (ideal, realistic with its launch, compute, memory, network, launch), the
        rows :meth:`group_means` gives a step ``lo == hi`` before the overlapped launches are shared out."""
        grid = self.grid
        x = np.asarray(xs, dtype=np.int64).reshape(-1)
        cost, mnks = grid.costs_many(np.full(len(x), b, dtype=np.int64), x)
        return np.stack([self._group_rows(gi, cost[gi], mnks[gi], lambda g, j: grid.node_at(g, b, int(x[j])))
                         for gi in groups]).reshape(len(groups), 6, len(x))

    def _overlap_rows(self, rows: np.ndarray) -> np.ndarray:
        """Per-group rows of an overlapped step: each group's launch scaled to its share of the exposed host time,
        so the rows still sum (``mult @ rows``) to the step :meth:`_steps` prices."""
        if not self.overlap:
            return rows
        dev = self.mult @ (rows[:, 1] - rows[:, 5])
        host = self.mult @ rows[:, 5]
        if host <= 0:
            return rows
        _, exposed = self._overlap(np.asarray([dev]), np.asarray([host]))
        out = rows.copy()
        out[:, 5] = rows[:, 5] * float(exposed[0]) / host
        out[:, 1] = rows[:, 1] - rows[:, 5] + out[:, 5]
        return out

    # -- phases -----------------------------------------------------------------------------------------------
    def totals(self, b: Sequence[int] | np.ndarray, lo: Sequence[int] | np.ndarray,
               hi: Sequence[int] | np.ndarray) -> PhaseTotals:
        """The mean step over ``lo .. hi`` at batch *b*, per point (arrays of equal length)."""
        b, lo, hi = (np.asarray(v, dtype=np.int64).reshape(-1) for v in (b, lo, hi))
        out = np.zeros((9, len(b)))
        single = lo == hi
        if np.any(single):
            self._single(b[single], lo[single], out, np.flatnonzero(single))
        rng = np.flatnonzero(~single)
        if len(rng):
            self._ensure(b[rng], lo[rng], hi[rng])
            for bv in np.unique(b[rng]).tolist():
                sel = rng[b[rng] == bv]
                self._ranges(bv, lo[sel], hi[sel], out, sel)
        if self.seq_floor_s:  # the server's per-sequence host work, overlapped with the device: each step's floor
            out[[1, 6, 8]] = np.maximum(out[[1, 6, 8]], self.seq_floor_s * b)
        return PhaseTotals(*out)

    def _single(self, b: np.ndarray, x: np.ndarray, out: np.ndarray, where: np.ndarray) -> None:
        """Single steps, each priced from the kernels at its exact point."""
        keys, inv = np.unique(np.stack([b, x]), axis=1, return_inverse=True)
        cost, mnks = self.grid.costs_many(keys[0], keys[1])

        def node_of(gi: int, j: int, rep: int) -> Any:
            return self.grid.node_at(gi, int(keys[0, j]), int(keys[1, j]))

        steps = self._steps(lambda gi: (cost[gi], 1), lambda gi: mnks[gi], node_of, keys.shape[1])
        steps = steps[:, inv.reshape(-1)]
        self._fill(out, where, steps[0], steps[1], steps[2:5], steps[0], steps[1], steps[0], steps[1])

    def _ranges(self, b: int, lo: np.ndarray, hi: np.ndarray, out: np.ndarray, where: np.ndarray) -> None:
        x0, steps = self._curves[b]
        cum = np.concatenate([np.zeros((steps.shape[0], 1)), np.cumsum(steps, axis=1)], axis=1)
        i0, i1 = lo - x0, hi - x0 + 1
        n = (hi - lo + 1).astype(float)
        mean = (cum[:, i1] - cum[:, i0]) / n                                # [6, points]
        real = mean[1]
        if self.timing is not None and np.any(n > SAMPLES):
            long = n > SAMPLES
            j = np.arange(SAMPLES, dtype=float)
            idx = np.round(lo[long, None] + (hi - lo)[long, None] * j / (SAMPLES - 1)).astype(np.int64) - x0
            kern = steps[1] - steps[5]                                     # kernel time without launches
            real = real.copy()
            real[long] = kern[idx].mean(axis=1) + steps[5][i0[long]]
        self._fill(out, where, mean[0], real, mean[2:5], steps[0][i0], steps[1][i0], steps[0][i1 - 1],
                   steps[1][i1 - 1])

    def _fill(self, out, where, ideal, real, terms, f_i, f_r, l_i, l_r) -> None:
        s = self.step_launch_s
        out[0, where], out[1, where] = ideal, real + s
        out[2:5, where] = terms
        out[5, where], out[6, where] = f_i, f_r + s
        out[7, where], out[8, where] = l_i, l_r + s


def _bind(node_of: Callable[[int, int, int], Any], rep: int) -> Callable[[int, int], Any]:
    def at(gi: int, j: int) -> Any:
        return node_of(gi, j, rep)

    return at
