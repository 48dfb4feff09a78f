"""A persistent store of captured graphs: trace once, reuse from any later run.

Tracing a transformers model means importing torch and transformers (5-6 s on a 2-core machine) and a
FakeTensor dispatch pass per graph; the captured :class:`~graphroof.graph.OpGraph` depends only on its inputs.
This store keeps each captured graph on disk under a key made of everything the capture depends on:

* the request: the model's config (its JSON content, not its path), the dtype, the input sizes and the capture
  options, and whether identical blocks are folded;
* the code: a hash of every graphroof source file, and the installed versions of Python, torch, transformers
  and onnx (read from package metadata, without importing them).

A change to any of them is a different key, so a stale graph is never read.  A hit skips the imports and the trace;
the result is the same graph (written by the data-only codec of :mod:`.store_codec`, which rebuilds it exactly), so
every figure is identical to a fresh trace.

Location: ``$GRAPHROOF_CACHE_DIR``, else ``$XDG_CACHE_HOME/graphroof``, else ``~/.cache/graphroof``; off with
``GRAPHROOF_CACHE=off`` (or ``--no-cache`` on the CLI).  Nothing stored can run code: entries are tagged JSON,
sealed with an HMAC under a per-user key, in folders that must be this user's own and private, opened without
following links (:mod:`.store_files`); a folder that is not turns the store off with one warning, and a file that
is not sealed by the key is a miss.  A store is per user: it may not be shared.  Entries are written atomically
(a temporary file renamed into place), an unreadable or unexpected entry is a miss (and removed), a hit marks the
entry used, and the store is pruned to ``$GRAPHROOF_CACHE_MB`` (default 2000 MB, least recently used first) when
a running estimate of its size says it may be over.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
import zlib
from pathlib import Path
from typing import Any

from ..options import DEFAULT, Options, env
from . import store_files as _files_mod
from . import store_walk as _walk

__all__ = ["enabled", "key_of", "load", "store", "cache_dir", "Entry", "capture", "usage", "clear",
           "limit_bytes", "refusal", "Usage", "drop"]

_FINGERPRINT: list[str] = []
#: bumped when the layout of what is stored changes (2: tagged JSON sealed by an HMAC; 1 was pickles, never read)
FORMAT = 2
#: what was already warned about in this process (one warning each)
_WARNED: set[str] = set()
#: store roots refused in this process (not this user's own and private): off until the process ends
_OFF: set[str] = set()
#: writes between two full scans even when the running estimate stays under the limit (other processes'
#: writes may be missing from it)
_RESCAN_EVERY = 500


def enabled(options: Options = DEFAULT) -> bool:
    """Whether captures are read from / written to the store: ``options.store`` (``--no-cache`` clears it) and
    ``GRAPHROOF_CACHE`` not ``off``."""
    on = (env("GRAPHROOF_CACHE", "on") or "on").strip().lower() not in ("off", "0", "no", "false")
    return options.store and on


def cache_dir() -> Path:
    where = env("GRAPHROOF_CACHE_DIR")
    if where:
        return Path(where)
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


def _warn_once(tag: str, message: str) -> None:
    if tag not in _WARNED:
        _WARNED.add(tag)
        from ..errors import warn

        warn(message)


def _refused(root: Path, e: _files_mod.Refused) -> None:
    _OFF.add(str(root))
    _warn_once(f"refused {root}", f"the store of traced graphs is off: {e}; a store must be your own private "
               f"folder (chmod 700, owned by you): fix it, or set GRAPHROOF_CACHE_DIR to a folder of your own")


def refusal() -> str | None:
    """Why the store at :func:`cache_dir` is not used (not this user's own private folder, a bad key), or None."""
    try:
        with _files_mod.open_root(cache_dir(), create=False):
            return None
    except _files_mod.Refused as e:
        return str(e)
    except OSError as e:
        return f"{cache_dir()}: {e.strerror}"


def load(key: str | None, part: str) -> Any:
    """The stored object, or None on a miss (or when the store is off, or the entry is unreadable)."""
    if key is None or not enabled() or not _files_mod.PART.fullmatch(part):
        return None
    root = cache_dir()
    if str(root) in _OFF:
        return None
    try:
        with _files_mod.open_root(root, create=False) as opened:
            if opened is None:
                return None
            fd, secret = opened
            raw = _files_mod.read_part(fd, secret, root, key, part, max_bytes=int(max(limit_bytes(), 1)))
            if raw is None:
                return None
            try:
                return _decode(raw)
            except Exception:  # noqa: BLE001 - sealed by us yet not readable (older code): a miss
                _files_mod.remove_part(fd, secret, root, key, part)
                return None
    except _files_mod.Refused as e:
        _refused(root, e)
    except OSError:
        pass
    return None


def _decode(raw: bytes) -> Any:
    import gc

    from .store_codec import loads

    collecting = gc.isenabled()
    gc.disable()  # a graph is ~1e5 new objects, none garbage: collections while loading only walk them (4x slower)
    try:
        return loads(zlib.decompress(raw))
    finally:
        if collecting:
            gc.enable()


def drop(key: str | None, part: str) -> None:
    """Remove a stored part (its reader did not accept what it holds)."""
    if key is None or not _files_mod.PART.fullmatch(part):
        return
    root = cache_dir()
    with contextlib.suppress(_files_mod.Refused, OSError), _files_mod.open_root(root, create=False) as opened:
        if opened is not None:
            _files_mod.remove_part(opened[0], opened[1], root, key, part)


def store(key: str | None, part: str, obj: Any) -> None:
    """Write *obj* atomically; an object the codec does not know is not stored, and any failure (read-only home,
    full disk) is silent: the store is an optimisation.  An entry larger than the store's limit is not written
    (one warning)."""
    if key is None or not enabled() or not _files_mod.PART.fullmatch(part):
        return
    if str(cache_dir()) in _OFF:
        return
    from .store_codec import CodecError, dumps

    try:
        payload = zlib.compress(dumps(obj), 1)
    except CodecError:
        return
    limit = limit_bytes()
    if len(payload) + 64 > limit:
        from ..units import fmt_bytes

        _warn_once(f"large {cache_dir()}", f"a traced graph of {fmt_bytes(len(payload))} is larger than the "
                   f"store's limit ({fmt_bytes(limit)}, GRAPHROOF_CACHE_MB): not stored; raise the limit to keep it")
        return
    root = cache_dir()
    try:
        with _files_mod.open_root(root, create=True) as opened:
            assert opened is not None
            fd, secret = opened
            added = _files_mod.write_part(fd, secret, root, key, part, payload)
            est = _walk.read_usage(fd)
            if est is None or est[0] + added > limit or est[1] + 1 >= _RESCAN_EVERY:
                _prune(fd, limit)
            else:
                _walk.write_usage(fd, est[0] + added, est[1] + 1)
    except _files_mod.Refused as e:
        _refused(root, e)
    except Exception:  # noqa: BLE001
        return


def limit_bytes() -> float:
    """The store's size limit: ``$GRAPHROOF_CACHE_MB`` (default 2000 MB)."""
    try:
        return max(0.0, float(env("GRAPHROOF_CACHE_MB", "2000") or "2000")) * 1e6
    except ValueError:
        return 2000e6


class Usage(tuple):
    """What :func:`usage` counts, ``(entries, files, bytes)``; ``.temp`` of them are unfinished writes and
    ``.old`` are files of an older store format (never read)."""

    temp: int
    old: int

    def __new__(cls, entries: int, files: int, size: int, temp: int = 0, old: int = 0) -> Usage:
        self = super().__new__(cls, (entries, files, size))
        self.temp, self.old = temp, old
        return self


def usage() -> Usage:
    """(entries, files, bytes) in the store: every file of its shape, unfinished writes and old-format files
    included (counted again in ``.temp`` and ``.old``)."""
    root = cache_dir()
    try:
        with _files_mod.open_root(root, create=False, keyless=True) as opened:
            if opened is None:
                return Usage(0, 0, 0)
            items, _ = _walk.scan(opened[0])
    except (_files_mod.Refused, OSError):
        return Usage(0, 0, 0)
    entries = len({(it.l1, it.l2) for it in items if it.kind == "entry"})
    return Usage(entries, len(items), sum(it.size for it in items), sum(it.kind == "temp" for it in items),
                 sum(it.kind == "old" for it in items))


def clear() -> int:
    """Remove every file of the store's shape (entries, old-format files, unfinished writes, its key and size
    record) and the emptied entry folders; never follows a link, never touches other names.  The number of files removed.  Raises
    :class:`~graphroof.errors.InputError` when the store's folder is not this user's own and private."""
    from ..errors import InputError

    root = cache_dir()
    try:
        with _files_mod.open_root(root, create=False, keyless=True) as opened:
            if opened is None:
                return 0
            items, folders = _walk.scan(opened[0])
            done = _walk.remove_items(opened[0], items, folders)
            for name in (_files_mod.USAGE_FILE, _files_mod.KEY_FILE):  # an empty store: a new key on next write
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=opened[0])
            return len(done)
    except _files_mod.Refused as e:
        raise InputError(f"not clearing the store of traced graphs: {e}; a store must be your own private folder "
                         "(chmod 700, owned by you): fix it, or remove the folder yourself") from None
    except OSError as e:
        raise InputError(f"cannot clear the store of traced graphs at {root}: {e.strerror or e}; check "
                         "GRAPHROOF_CACHE_DIR") from None


def _prune(root: int, limit: float) -> None:
    """Scan the store: remove unfinished writes older than an hour, then the least recently used files (old-format
    ones first) until the store is at 90% of *limit*; record the size found."""
    items, _ = _walk.scan(root)
    now = time.time_ns()
    gone = [it for it in items if _walk.stale_temp(it, now)]
    stale = set(gone)
    kept = [it for it in items if it not in stale]
    total = sum(it.size for it in kept)
    if total > limit:
        target = 0.9 * limit
        for it in sorted((it for it in kept if it.kind != "temp"), key=lambda it: (it.kind != "old", it.mtime_ns)):
            if total <= target:
                break
            gone.append(it)
            total -= it.size
    done = _walk.remove_items(root, gone)
    total = sum(it.size for it in items) - sum(it.size for it in done)
    _walk.write_usage(root, total, 0)


class Entry:
    """The parts stored under one key (``graph``; an LLM source's ``manifest`` and ``prefill-B-X`` ...).  The
    folding switch (``options.fold``) is part of every request: a capture traces differently with it off; with
    ``options.store`` off the entry has no key (nothing is read or written)."""

    def __init__(self, kind: str, request: Any, options: Options = DEFAULT):
        self.key = key_of(kind, {"request": request, "fold": options.fold}) if enabled(options) else None

    def __bool__(self) -> bool:
        return self.key is not None

    def get(self, part: str) -> Any:
        return load(self.key, part)

    def put(self, part: str, obj: Any) -> None:
        store(self.key, part, obj)

    def drop(self, part: str) -> None:
        """Forget *part* (what it holds is not what its reader expects): the next :meth:`get` is a miss."""
        drop(self.key, part)


def _replay(warned: list[tuple[type[Warning], str]]) -> None:
    from ..errors import warn

    for category, message in warned:
        warn(message, category)


def _valid_hit(hit: Any, expect: type | tuple[type, ...]) -> bool:
    """Whether *hit* is what :func:`capture` stores: ``(object of type expect, [(warning class, message)])``."""
    if not (type(hit) is tuple and len(hit) == 2 and isinstance(hit[0], expect) and type(hit[1]) is list):
        return False
    return all(type(w) is tuple and len(w) == 2 and isinstance(w[0], type) and issubclass(w[0], Warning)
               and type(w[1]) is str for w in hit[1])


def capture(entry: Entry, part: str, fn: Any, expect: type | tuple[type, ...] = object) -> Any:
    """``fn()``'s result, read from *entry* when stored, else computed and stored.  graphroof's warnings raised
    while computing it are stored with it and raised again on every hit, so a stored capture warns as a fresh
    one does.  A stored value that is not an *expect* (with its warnings) is dropped: a miss."""
    if entry:
        hit = entry.get(part)
        if _valid_hit(hit, expect):
            _replay(hit[1])
            return hit[0]
        if hit is not None:
            entry.drop(part)
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
