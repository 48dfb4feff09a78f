"""Walking the trace store's files (:mod:`.store_files`): counting, pruning and clearing them.

A walk opens every folder with ``O_NOFOLLOW`` (a link is never entered), skips folders that are not this user's
own and private, and sees only names of the store's own shape: level-1 folders of 2 hex digits, entry folders of
40 hex digits starting with them, and in those ``PART.json.z`` entries, ``PART.pkl.z`` files of the pickle
format (never read) and ``.tmp-*`` unfinished writes.  Removing an item unlinks its name, never a link's target.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import time
from typing import NamedTuple

from .store_files import _CURRENT, _L1, _L2, _NOFOLLOW, _NONBLOCK, _OLD, _TMP, USAGE_FILE, Refused, _open_level

__all__ = ["Item", "scan", "remove_items", "read_usage", "write_usage", "stale_temp"]


class Item(NamedTuple):
    """One file of the store's shape: where, its kind (``entry``, ``old`` format, ``temp``), size and mtime."""

    l1: str
    l2: str
    name: str
    kind: str
    size: int
    mtime_ns: int


def _kind(name: str) -> str | None:
    if _CURRENT.fullmatch(name):
        return "entry"
    if _OLD.fullmatch(name):
        return "old"
    if _TMP.fullmatch(name):
        return "temp"
    return None


def scan(root: int) -> tuple[list[Item], list[tuple[str, str]]]:
    """Every file of the store's shape (regular files and links, never followed) and every entry folder
    ``(l1, l2)``; folders that are links, not ours or not private are skipped."""
    items: list[Item] = []
    folders: list[tuple[str, str]] = []
    names1 = []
    with os.scandir(root) as top:
        for e in top:
            if _L1.fullmatch(e.name) and e.is_dir(follow_symlinks=False):
                names1.append(e.name)
            elif _TMP.fullmatch(e.name):  # a key or usage file being written (or left by a killed write)
                st = e.stat(follow_symlinks=False)
                items.append(Item("", "", e.name, "temp", st.st_size if stat.S_ISREG(st.st_mode) else 0,
                                  st.st_mtime_ns))
    names1.sort()
    for l1 in names1:
        try:
            fd1 = _open_level(root, l1, False, l1)
        except (Refused, OSError):
            continue
        if fd1 is None:
            continue
        try:
            with os.scandir(fd1) as level:
                names2 = sorted(e.name for e in level if _L2.fullmatch(e.name) and e.name[:2] == l1
                                and e.is_dir(follow_symlinks=False))
            for l2 in names2:
                try:
                    fd2 = _open_level(fd1, l2, False, l2)
                except (Refused, OSError):
                    continue
                if fd2 is None:
                    continue
                folders.append((l1, l2))
                try:
                    with os.scandir(fd2) as entry:
                        for e in entry:
                            kind = _kind(e.name)
                            if kind is None:
                                continue
                            st = e.stat(follow_symlinks=False)
                            if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                                size = st.st_size if stat.S_ISREG(st.st_mode) else 0
                                items.append(Item(l1, l2, e.name, kind, size, st.st_mtime_ns))
                finally:
                    os.close(fd2)
        finally:
            os.close(fd1)
    return items, folders


def remove_items(root: int, items: list[Item], folders: list[tuple[str, str]] | None = None) -> list[Item]:
    """Unlink *items* (a link is removed, never its target), then remove *folders* and their level-1 folders
    where emptied; the items removed."""
    done: list[Item] = []
    fset = set(folders or [])
    by_dir: dict[tuple[str, str], list[Item]] = {}
    for it in items:
        if not it.l1:  # a temporary file at the root
            with contextlib.suppress(OSError):
                os.unlink(it.name, dir_fd=root)
                done.append(it)
            continue
        by_dir.setdefault((it.l1, it.l2), []).append(it)
    for (l1, l2) in sorted(set(by_dir) | fset):
        try:
            fd1 = _open_level(root, l1, False, l1)
        except (Refused, OSError):
            continue
        if fd1 is None:
            continue
        try:
            fd2 = _open_level(fd1, l2, False, l2)
        except (Refused, OSError):
            fd2 = None
        if fd2 is not None:
            try:
                for it in by_dir.get((l1, l2), []):
                    with contextlib.suppress(OSError):
                        os.unlink(it.name, dir_fd=fd2)
                        done.append(it)
            finally:
                os.close(fd2)
        if (l1, l2) in fset:
            with contextlib.suppress(OSError):
                os.rmdir(l2, dir_fd=fd1)
        os.close(fd1)
        if (l1, l2) in fset:
            with contextlib.suppress(OSError):
                os.rmdir(l1, dir_fd=root)
    return done


def read_usage(root: int) -> tuple[int, int] | None:
    """The running estimate ``(bytes, writes since the last scan)``, or None when absent or unreadable."""
    try:
        fd = os.open(USAGE_FILE, os.O_RDONLY | os.O_CLOEXEC | _NOFOLLOW | _NONBLOCK, dir_fd=root)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return None
        text = os.read(fd, 100).decode("ascii", "replace").split()
    finally:
        os.close(fd)
    if len(text) == 2 and text[0].isdigit() and text[1].isdigit():
        return int(text[0]), int(text[1])
    return None


def write_usage(root: int, size: int, writes: int) -> None:
    """Record the running estimate (atomically; a failure is ignored: the next write scans)."""
    tmp = f".tmp-usage{secrets.token_hex(6)}"
    with contextlib.suppress(OSError):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | _NOFOLLOW, 0o600, dir_fd=root)
        try:
            os.write(fd, f"{max(0, size)} {writes}\n".encode())
        finally:
            os.close(fd)
        os.replace(tmp, USAGE_FILE, src_dir_fd=root, dst_dir_fd=root)
    with contextlib.suppress(OSError):
        os.unlink(tmp, dir_fd=root)


def stale_temp(it: Item, now_ns: int | None = None, age_s: float = 3600) -> bool:
    """Whether *it* is a temporary file older than *age_s* (left by a killed write)."""
    return it.kind == "temp" and ((now_ns or time.time_ns()) - it.mtime_ns) > age_s * 1e9
