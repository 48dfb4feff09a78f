"""Independent tasks run serially, over local processes, or over a Ray cluster, the results in task order.

* ``jobs=1``: in this process;
* ``jobs=N`` (default: the CPU count): a :class:`concurrent.futures.ProcessPoolExecutor` of N processes (forked on
  Linux, so a worker starts with the source the parent opened; traced graphs are shared through the trace store);
* ``ray="ADDRESS"`` or ``"local"``: Ray tasks (``pip install 'graphroof[ray]'``); an address joins a running
  cluster, ``local`` starts one on this machine with ``jobs`` CPUs (and stops it at the end).

Each task is one pipeline group's configurations (:mod:`.worker`): a worker builds its engines once and evaluates
every device, batch limit and rate of the group with them.  Results are gathered in submission order, so the three
ways give the same list.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import InputError

__all__ = ["run_tasks", "check_fanout", "default_jobs", "ray_session"]


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def check_fanout(jobs: Any, ray: Any) -> tuple[int, str | None]:
    """(jobs, ray address) checked: jobs an integer >= 1 (None: the CPU count); ray None, ``local`` or an address,
    with ray importable."""
    if jobs is None:
        jobs = default_jobs()
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"jobs must be an integer >= 1 (processes), got {jobs!r}")
    if ray is not None:
        if not isinstance(ray, str) or not ray.strip():
            raise InputError(f"ray must be a cluster address (host:port, ray://host:port, auto) or 'local', got {ray!r}")
        try:
            import ray as _ray  # noqa: F401
        except ImportError:
            raise InputError("ray is not installed: pip install 'graphroof[ray]'") from None
        ray = ray.strip()
    return jobs, ray


def run_tasks(fn: Callable[..., Any], tasks: Sequence[tuple], jobs: int, ray: str | None,
              progress: Callable[[str], None] | None = None, what: str = "tasks") -> list[Any]:
    """``[fn(*t) for t in tasks]``, fanned out; the results in the order of *tasks*."""
    if not tasks:
        return []
    if ray is not None:
        return _ray_run(fn, tasks, jobs, ray, progress, what)
    if jobs == 1 or len(tasks) == 1:
        out = []
        for i, t in enumerate(tasks):
            if progress:
                progress(f"{what}: {i + 1}/{len(tasks)}")
            out.append(fn(*t))
        return out
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks))) as pool:
        futures = [pool.submit(fn, *t) for t in tasks]
        out = []
        for i, f in enumerate(futures):
            out.append(f.result())
            if progress:
                progress(f"{what}: {i + 1}/{len(tasks)} done on {min(jobs, len(tasks))} processes")
        return out


class ray_session:
    """Joins (or with ``local`` starts) a Ray cluster for the plan's rounds; a cluster it started is stopped at the
    end, one the caller had initialised is left running."""

    def __init__(self, address: str | None, jobs: int):
        self.address, self.jobs, self.started = address, jobs, False

    def __enter__(self) -> ray_session:
        if self.address is None:
            return self
        import ray

        if not ray.is_initialized():
            kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if self.address == "local":
                kw["num_cpus"] = self.jobs
            else:
                kw["address"] = self.address
            try:
                ray.init(**kw)
            except (ConnectionError, ValueError, RuntimeError) as e:
                raise InputError(f"ray {self.address!r}: cannot connect ({str(e).splitlines()[0]}); give a running "
                                 "cluster's address or 'local'") from None
            self.started = True
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.started:
            import ray

            ray.shutdown()


def _ray_run(fn: Callable[..., Any], tasks: Sequence[tuple], jobs: int, address: str,
             progress: Callable[[str], None] | None, what: str) -> list[Any]:
    import ray

    with ray_session(address, jobs):
        remote = ray.remote(fn)
        refs = [remote.remote(*t) for t in tasks]
        if progress:
            progress(f"{what}: {len(refs)} Ray tasks submitted")
        return list(ray.get(refs))
