"""A persistent store of captured graphs: trace once, reuse from any later run.

Tracing a transformers model means importing torch and transformers (5-6 s on a 2-core machine) and a
FakeTensor dispatch pass per graph; the captured :class:`~graphroof.graph.OpGraph` depends only on its inputs.
This store keeps each captured graph on disk under a key made of everything the capture depends on:

* the request: the model's config (its JSON content, not its path), the dtype, the input sizes and the capture
  options, and whether identical blocks are folded;
* the code: a hash of every graphroof source file, and the installed versions of Python, torch, transformers
  and onnx (read from package metadata, without importing them).

A change to any of them is a different key, so a stale graph is never read.  A hit skips the imports and the trace;
the result is the same graph (pickled as captured), so every figure is identical to a fresh trace.

Location: ``$GRAPHROOF_CACHE_DIR``, else ``$XDG_CACHE_HOME/graphroof``, else ``~/.cache/graphroof``; off with
``GRAPHROOF_CACHE=off`` (or ``--no-cache`` on the CLI).  Entries are written atomically (a temporary file
renamed into place), an unreadable entry is a miss (and removed), and the store is pruned to
``$GRAPHROOF_CACHE_MB`` (default 2000 MB, oldest first) after each write.  Pickles are read only from this
user's own cache folder.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import pickle
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["enabled", "caching", "key_of", "load", "store", "cache_dir", "Entry", "capture", "usage", "clear",
           "limit_bytes"]

_ON: contextvars.ContextVar[bool] = contextvars.ContextVar("graphroof_trace_store", default=True)
_FINGERPRINT: list[str] = []
#: bumped when the layout of what is stored changes
FORMAT = 1


def enabled() -> bool:
    """Whether captures are read from / written to the store (``GRAPHROOF_CACHE=off`` or ``caching(False)``
    turn it off)."""
    return _ON.get() and os.environ.get("GRAPHROOF_CACHE", "on").strip().lower() not in ("off", "0", "no", "false")


@contextlib.contextmanager
def caching(on: bool) -> Iterator[None]:
    """Captures inside this context use the store (``True``, the default) or always trace (``False``)."""
    token = _ON.set(bool(on))
    try:
        yield
    finally:
        _ON.reset(token)


def cache_dir() -> Path:
    env = os.environ.get("GRAPHROOF_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "graphroof"


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "-"


def fingerprint() -> str:
    """Hash of graphroof's own source files and the versions of the packages a capture runs through."""
    if not _FINGERPRINT:
        h = hashlib.sha256(f"format {FORMAT}; python {sys.version}".encode())
        for dist in ("torch", "transformers", "onnx", "networkx"):
            h.update(f"{dist} {_version(dist)};".encode())
        root = Path(__file__).resolve().parents[1]
        for p in sorted(root.rglob("*.py")):
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
        _FINGERPRINT.append(h.hexdigest())
    return _FINGERPRINT[0]


def key_of(kind: str, request: Any) -> str | None:
    """The store key of a capture request (plain JSON data), or None when the request is not plain data (a
    callable, an object) and so cannot be keyed: such captures are never stored."""
    try:
        text = json.dumps([kind, request], sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(f"{fingerprint()}\n{text}".encode()).hexdigest()[:40]


def _path(key: str, part: str) -> Path:
    return cache_dir() / key[:2] / key / f"{part}.pkl.z"


def load(key: str | None, part: str) -> Any:
    """The stored object, or None on a miss (or when the store is off, or the entry is unreadable)."""
    if key is None or not enabled():
        return None
    p = _path(key, part)
    try:
        raw = p.read_bytes()
    except OSError:
        return None
    import gc

    collecting = gc.isenabled()
    gc.disable()  # a graph is ~1e5 new objects, none garbage: collections while loading only walk them (4x slower)
    try:
        return pickle.loads(zlib.decompress(raw))  # noqa: S301 - this user's own cache folder
    except Exception:  # noqa: BLE001 - a truncated or foreign entry: a miss
        with contextlib.suppress(OSError):
            p.unlink()
        return None
    finally:
        if collecting:
            gc.enable()


def store(key: str | None, part: str, obj: Any) -> None:
    """Write *obj* atomically; any failure (read-only home, full disk) is silent: the store is an optimisation."""
    if key is None or not enabled():
        return
    p = _path(key, part)
    try:
        data = zlib.compress(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), 1)
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, p)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _prune()
    except Exception:  # noqa: BLE001
        return


def limit_bytes() -> float:
    """The store's size limit: ``$GRAPHROOF_CACHE_MB`` (default 2000 MB)."""
    try:
        return max(0.0, float(os.environ.get("GRAPHROOF_CACHE_MB", "2000"))) * 1e6
    except ValueError:
        return 2000e6


def _files() -> list[Path]:
    return list(cache_dir().glob("*/*/*.pkl.z"))


def usage() -> tuple[int, int, int]:
    """(entries, files, bytes) in the store."""
    files = _files()
    sizes = []
    for f in files:
        with contextlib.suppress(OSError):
            sizes.append(f.stat().st_size)
    return len({f.parent for f in files}), len(files), sum(sizes)


def clear() -> int:
    """Remove every stored file (and the emptied folders); the number of files removed."""
    n = 0
    for f in _files():
        with contextlib.suppress(OSError):
            f.unlink()
            n += 1
    for d in sorted(cache_dir().glob("*/*"), reverse=True) + sorted(cache_dir().glob("*")):
        with contextlib.suppress(OSError):
            d.rmdir()
    return n


def _prune() -> None:
    limit = limit_bytes()
    files = [(f.stat().st_mtime_ns, f.stat().st_size, f) for f in _files()]
    total = sum(s for _, s, _ in files)
    for _, size, f in sorted(files, key=lambda t: t[0]):
        if total <= limit:
            break
        with contextlib.suppress(OSError):
            f.unlink()
            total -= size


class Entry:
    """The parts stored under one key (``graph``; an LLM source's ``manifest`` and ``prefill-B-X`` ...).  The
    folding switch (:mod:`.fold_switch`) is part of every request: a capture traces differently with it off."""

    def __init__(self, kind: str, request: Any):
        from .fold_switch import fold_enabled

        self.key = key_of(kind, {"request": request, "fold": fold_enabled()}) if enabled() else None

    def __bool__(self) -> bool:
        return self.key is not None

    def get(self, part: str) -> Any:
        return load(self.key, part)

    def put(self, part: str, obj: Any) -> None:
        store(self.key, part, obj)


def _replay(warned: list[tuple[type[Warning], str]]) -> None:
    from ..errors import warn

    for category, message in warned:
        warn(message, category)


def capture(entry: Entry, part: str, fn: Any) -> Any:
    """``fn()``'s result, read from *entry* when stored, else computed and stored.  graphroof's warnings raised
    while computing it are stored with it and raised again on every hit, so a stored capture warns as a fresh
    one does."""
    if entry:
        hit = entry.get(part)
        if isinstance(hit, tuple) and len(hit) == 2:
            _replay(hit[1])
            return hit[0]
    import warnings

    from ..errors import GraphroofWarning

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        obj = fn()
    ours: list[tuple[type[Warning], str]] = []
    for w in rec:  # raised again outside the recorder: the caller's filters decide, as without the store
        if issubclass(w.category, GraphroofWarning):
            ours.append((w.category, str(w.message)))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    _replay(ours)
    if entry:
        entry.put(part, (obj, ours))
    return obj
