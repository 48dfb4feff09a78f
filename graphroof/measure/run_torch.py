"""Measure an ``nn.Module`` with ``torch.profiler`` (CPU) and map the ATen op times onto its OpGraph.

Module scopes: a forward pre-hook / hook pair on every submodule opens and closes a
``record_function("graphroof.scope::<dotted path>")`` range, so every ATen op event knows the innermost module
it ran in (the same dotted path the torch frontend writes into ``OpNode.scope``).  Each profiled forward pass
is wrapped in ``record_function("graphroof.iter::k")``.  Per pass, every *top-level* ATen op (one with no ATen
op above it) becomes an :class:`~graphroof.measure.match.Event` with its inclusive CPU time and the names of
all ATen ops below it; :func:`graphroof.measure.match.match` maps them to nodes.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..errors import GraphroofError
from .match import Event, match, norm_name
from .run import Measured, auto_runs, work_nodes

__all__ = ["run_torch", "scope_map", "call_module"]

_SCOPE = "graphroof.scope::"
_ITER = "graphroof.iter::"


def call_module(module, inputs: Any):
    """``module(*inputs)`` for a tuple/list, ``module(**inputs)`` for a dict, ``module(inputs)`` otherwise."""
    if isinstance(inputs, Mapping):
        return module(**inputs)
    if isinstance(inputs, (tuple, list)):
        return module(*inputs)
    return module(inputs)


def scope_map(graph_scopes, module_paths) -> dict[str, str]:
    """Graph scope -> module path where they differ: drop leading parts (a root prefix), else the nearest
    ancestor that is a module path."""
    paths = set(module_paths)
    out: dict[str, str] = {}
    for s in graph_scopes:
        if s in paths:
            continue
        parts = s.split(".")
        cand = next((".".join(parts[i:]) for i in range(1, len(parts)) if ".".join(parts[i:]) in paths), None)
        if cand is None:
            cand = next((".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1) if ".".join(parts[:i]) in paths),
                        "" if "" in paths else s)
        out[s] = cand
    return out


class _ScopeHooks:
    """Pre/post forward hooks that bracket every submodule call with a named profiler range."""

    def __init__(self, module):
        import torch

        self._rf = torch.autograd.profiler.record_function
        self.stack: list[Any] = []
        self.handles = []
        self.paths = []
        for name, mod in module.named_modules():
            self.paths.append(name)
            self.handles.append(mod.register_forward_pre_hook(self._pre(name)))
            self.handles.append(mod.register_forward_hook(self._post, always_call=True))

    def _pre(self, name: str):
        def hook(_mod, _args):
            rf = self._rf(_SCOPE + name)
            rf.__enter__()
            self.stack.append(rf)
        return hook

    def _post(self, _mod, _args, _out):
        if self.stack:
            self.stack.pop().__exit__(None, None, None)

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _walk(ev, scope: str, out: list[Event]) -> None:
    name = ev.name
    if name.startswith(_SCOPE):
        scope = name[len(_SCOPE):]
    elif "::" in name and name.split("::", 1)[0] == "aten":
        names: Counter = Counter()
        stack = [ev]
        while stack:
            e = stack.pop()
            if e.name.startswith("aten::"):
                names[norm_name(e.name)] += 1
            stack.extend(e.cpu_children)
        out.append(Event(name.split("::", 1)[1], scope, ev.cpu_time_total * 1e-6, names, len(out)))
        return
    for c in ev.cpu_children:
        _walk(c, scope, out)


def events_by_iteration(prof_events) -> list[tuple[float, list[Event]]]:
    """(duration s, events) of each ``graphroof.iter::k`` range, in order."""
    iters = [e for e in prof_events if e.name.startswith(_ITER) and e.cpu_parent is None]
    iters.sort(key=lambda e: int(e.name[len(_ITER):]))
    out = []
    for it in iters:
        evs: list[Event] = []
        for c in sorted(it.cpu_children, key=lambda e: e.time_range.start):
            _walk(c, "", evs)
        out.append((it.cpu_time_total * 1e-6, evs))
    return out


def run_torch(module, inputs: Any, graph, *, runs: int | None = None, warmup: int = 2, device: str = "cpu",
              threads: int | None = None, window: int = 8) -> Measured:
    """Time *module* on *inputs* (already on *device*, real weights) and map the ops onto *graph* (counted and
    evaluated): *runs* plain timed passes, then *runs* profiled passes (``None``: about 2 s of each, 5 to 50)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if device != "cpu":
        raise GraphroofError(f"profile measures on the CPU only for now; --device {device} is not supported")
    if (runs is not None and runs < 1) or warmup < 0:
        raise GraphroofError("profile: --runs must be >= 1 and --warmup >= 0")
    if threads:
        torch.set_num_threads(threads)
    module.eval()
    wall: list[float] = []
    with torch.no_grad():
        for _ in range(warmup):
            call_module(module, inputs)
        t0 = time.perf_counter()
        call_module(module, inputs)
        runs = runs or auto_runs(time.perf_counter() - t0)
        for _ in range(runs):
            t0 = time.perf_counter()
            call_module(module, inputs)
            wall.append(time.perf_counter() - t0)
        hooks = _ScopeHooks(module)
        try:
            call_module(module, inputs)  # one pass with hooks installed, untimed
            from .quiet import filtered_native_stderr

            with filtered_native_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
                for k in range(runs):
                    with torch.autograd.profiler.record_function(f"{_ITER}{k}"):
                        call_module(module, inputs)
        finally:
            hooks.remove()
    nodes = work_nodes(graph)
    smap = scope_map({n[2] for n in nodes}, hooks.paths)
    results, profiled = [], []
    for dur, evs in events_by_iteration(prof.events()):
        profiled.append(dur)
        results.append(match(nodes, evs, window=window, scope_map=smap))
    rt = (f"torch {torch.__version__} eager, {device}, {torch.get_num_threads()} threads; {runs} profiled passes "
          f"(torch.profiler, inclusive CPU time of top-level ATen ops), {len(wall)} timed passes")
    notes = [f"forward pass wall time without the profiler: median {statistics.median(wall) * 1e3:.3g} ms over "
             f"{len(wall)} runs after {warmup} warm-up"]
    if smap:
        notes.append(f"{len(smap)} graph scope(s) not among the module paths were mapped (e.g. "
                     f"{next(iter(smap.items()))[0]!r} -> {next(iter(smap.items()))[1]!r})")
    return Measured(rt, results, wall, profiled, notes, threads=torch.get_num_threads())
