"""Run untrusted native work (ONNX / onnxruntime shape inference) in a forked child under a time and memory budget.

ONNX's C++ shape inference can hang (a malformed ``Einsum`` equation), crash the interpreter (a
``LayerNormalization`` axis of 10^18) or allocate gigabytes from a 300-byte file (huge ``Slice`` bounds).  In
the parent none of that can be caught, so :func:`run_guarded` forks: the child inherits the loaded model
(copy-on-write, nothing serialised), caps its address space with ``RLIMIT_AS`` at its current size plus the
memory budget, runs the function and pickles the result back through a pipe; the parent waits at most the
time budget, then kills it.  A hang, a crash (any signal), a ``MemoryError`` or a budget overrun becomes one
:class:`~graphroof.errors.FrontendError` line naming the step and the budget.

Where ``os.fork`` is missing (Windows) or ``GRAPHROOF_ONNX_GUARD=0`` is set, the function runs in process.
Budgets: ``GRAPHROOF_INFER_TIME_S`` (default 300 s) and ``GRAPHROOF_INFER_MEM_GB`` (default: half the memory
available when the step starts, ``MemAvailable`` in ``/proc/meminfo``, at most 16 GB; a 137-byte ``Range(0, 2^40)``
or 30 levels of nested local functions would otherwise take all of it; an explicit value is capped at the
machine's physical memory).  The child's stderr goes to ``/dev/null`` (a native abort prints its own lines) and
an address-space limit the process already has is kept when it is lower than the budget.  Measured overhead (fork + pickled type table) on a shared, loaded 2-core
VM: ~43 ms per load for a 1-op model (1.6 ms -> 45 ms) and ~40-90 ms for ResNet-50 (190-220 ms -> 225-310 ms);
a bare fork of the process costs ~12 ms there.  Always paid: hostile files are small, so no size threshold.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from ... import errors
from ...errors import FrontendError, GraphroofError
from ...options import env

__all__ = ["Budget", "run_guarded", "default_budget", "available_bytes"]

T = TypeVar("T")


#: The most memory the default budget gives a step, whatever the machine has.
MAX_DEFAULT_MEM = 16 * 10**9
#: The share of the available memory the default budget gives a step.
AVAILABLE_SHARE = 0.5


class Budget:
    """Time (s) and extra memory (bytes) one guarded step may use; *origin* says where the memory figure comes
    from (shown when it is exceeded)."""

    def __init__(self, time_s: float, mem_bytes: int, origin: str = ""):
        self.time_s = float(time_s)
        self.mem_bytes = int(mem_bytes)
        self.origin = origin

    def describe(self) -> str:
        return f"{self.time_s:g} s / {self.mem_bytes / 1e9:.3g} GB"

    def mem_hint(self) -> str:
        """``(<origin>; set GRAPHROOF_INFER_MEM_GB to allow more)``: what a memory error appends."""
        if self.origin == "GRAPHROOF_INFER_MEM_GB":
            return "(raise GRAPHROOF_INFER_MEM_GB to allow more)"
        why = f"{self.origin}; " if self.origin else ""
        return f"({why}set GRAPHROOF_INFER_MEM_GB to allow more)"


def _physical_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 * 10**9


def available_bytes(meminfo: str = "/proc/meminfo") -> int | None:
    """``MemAvailable`` of *meminfo* in bytes (memory the kernel can hand out without swapping); None when unknown."""
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    parts = line.split()
                    return int(parts[1]) * (1024 if len(parts) < 3 or parts[2].lower() == "kb" else 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def default_budget() -> Budget:
    """The budget from the environment (``GRAPHROOF_INFER_TIME_S``, ``GRAPHROOF_INFER_MEM_GB``) or the defaults:
    300 s and half the available memory, at most :data:`MAX_DEFAULT_MEM`."""
    try:
        t = float(env("GRAPHROOF_INFER_TIME_S", "300") or "300")
        env_gb = env("GRAPHROOF_INFER_MEM_GB")
        gb = None if env_gb is None or not env_gb.strip() else float(env_gb)
    except ValueError:
        raise errors.InputError("GRAPHROOF_INFER_TIME_S / GRAPHROOF_INFER_MEM_GB must be numbers") from None
    if gb is not None:
        return Budget(max(t, 0.1), min(int(gb * 1e9), _physical_bytes()), "GRAPHROOF_INFER_MEM_GB")
    avail = available_bytes()
    if avail is None:
        mem = min(MAX_DEFAULT_MEM, _physical_bytes() // 2)
        origin = "the default: half the physical memory, at most 16 GB"
    else:
        mem = min(MAX_DEFAULT_MEM, int(avail * AVAILABLE_SHARE))
        origin = f"the default: half of the {avail / 1e9:.3g} GB available memory, at most 16 GB"
    return Budget(max(t, 0.1), max(mem, 1), origin)


def _enabled() -> bool:
    return hasattr(os, "fork") and sys.platform.startswith("linux") and env("GRAPHROOF_ONNX_GUARD") != "0"


def _vm_bytes() -> int:
    """This process's current virtual size (the address-space limit is set relative to it)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _effective(budget: Budget) -> Budget:
    """*budget*, its memory lowered to what an address-space limit this process already has leaves (``ulimit -v``:
    the child keeps it), so that an error states the limit that applied."""
    try:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, ValueError, OSError):
        return budget
    if hard == resource.RLIM_INFINITY or hard < 0:
        return budget
    room = max(hard - _vm_bytes(), 1)
    if room >= budget.mem_bytes:
        return budget
    return Budget(budget.time_s, room, "what this process's address-space limit (ulimit -v) leaves")


def _child(fn: Callable[..., Any], args: tuple, budget: Budget, w: int) -> None:
    """Runs in the forked child: never returns."""
    code = 0
    try:
        try:
            import faulthandler

            faulthandler.disable()  # a native crash here is reported by the parent, not dumped on the terminal
        except Exception:  # noqa: BLE001
            pass
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 2)  # a native abort's own lines ("cannot allocate memory ...") would precede our one line
            os.close(null)
        except OSError:
            pass
        try:
            import resource

            limit = _vm_bytes() + budget.mem_bytes
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            if hard != resource.RLIM_INFINITY and hard >= 0:
                limit = min(limit, hard)  # a lower limit the process already has stays in force
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ImportError, ValueError, OSError):
            pass
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out: tuple = ("ok", fn(*args))
            except GraphroofError as e:
                out = ("error", type(e).__name__, str(e))
            except MemoryError:
                out = ("memory",)
            except RecursionError:
                out = ("crash", "RecursionError: nesting too deep")
            except BaseException as e:  # noqa: BLE001 - reported to the parent as the step's failure
                out = ("crash", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        shown = [(str(c.message), c.category.__name__) for c in caught]
        try:
            data = pickle.dumps((out, shown), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # noqa: BLE001
            data = pickle.dumps((("crash", f"unpicklable result ({type(e).__name__})"), shown))
        view = memoryview(data)
        while view:
            n = os.write(w, view)
            view = view[n:]
    except BaseException:  # noqa: BLE001 - the parent reads an empty pipe as a crash
        code = 70
    finally:
        os._exit(code)


def run_guarded(fn: Callable[..., T], *args: Any, step: str, budget: Budget | None = None) -> T:
    """``fn(*args)`` in a child process under *budget*; its result, or a :class:`FrontendError` naming *step*."""
    budget = _effective(budget or default_budget())
    if not _enabled():
        return fn(*args)
    sys.stdout.flush()
    sys.stderr.flush()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        os.close(r)
        _child(fn, args, budget, w)
    os.close(w)
    chunks: list[bytes] = []
    deadline = time.monotonic() + budget.time_s
    timed_out = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([r], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(r, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
        if timed_out:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, status = os.waitpid(pid, 0)
    if timed_out:
        raise FrontendError(f"{step} did not finish within its time budget of {budget.time_s:g} s (set "
                            "GRAPHROOF_INFER_TIME_S to allow more); the model may be malformed")
    data = b"".join(chunks)
    if os.WIFSIGNALED(status) or not data:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        what = f"signal {signal.Signals(sig).name}" if sig else f"exit code {os.WEXITSTATUS(status)}"
        raise FrontendError(f"{step} crashed ({what}) within its budget of {budget.describe()}; the model is "
                            f"malformed or too large for it {budget.mem_hint()}")
    try:
        out, shown = pickle.loads(data)
    except Exception:  # noqa: BLE001
        raise FrontendError(f"{step} returned an unreadable result (child process)") from None
    for msg, cat in shown:
        category = getattr(errors, cat, None)
        warnings.warn(msg, category if isinstance(category, type) and issubclass(category, Warning) else UserWarning,
                      stacklevel=3)
    kind = out[0]
    if kind == "ok":
        return out[1]
    if kind == "memory":
        raise FrontendError(f"{step} ran out of its memory budget of {budget.mem_bytes / 1e9:.3g} GB "
                            f"{budget.mem_hint()}; the model may be malformed")
    if kind == "error":
        cls = getattr(errors, out[1], FrontendError)
        if not (isinstance(cls, type) and issubclass(cls, GraphroofError)) or cls is errors.UnboundDimError \
                or cls is errors.UnsupportedOpError:
            cls = FrontendError
        raise cls(out[2])
    raise FrontendError(f"{step} failed: {out[1]}")
